"""``tnx`` finds the server it started (issue 24 item 5): after ``tnx server start --port P``
in a directory, every later ``tnx`` and ``tnx-worker`` there defaults to that server until it
is stopped (before: ``tnx ls`` went to 7233 and suggested ``tnx server start``)."""

from __future__ import annotations

import os
import subprocess
import sys
from pathlib import Path

from tests.workers import free_port

TNX = str(Path(sys.executable).parent / "tnx")


def tnx(cwd: Path, *args: str) -> subprocess.CompletedProcess[str]:
    environ = {k: v for k, v in os.environ.items() if not k.startswith(("TEMPORAL_", "TNX_"))}
    environ |= {"HOME": str(cwd), "COLUMNS": "200"}  # no profile of the user's
    return subprocess.run(
        [TNX, *args], cwd=cwd, env=environ, capture_output=True, text=True, timeout=120
    )


def test_tnx_defaults_to_the_server_it_started_here(tmp_path: Path) -> None:
    port, ui = free_port(), free_port()
    started = tnx(tmp_path, "server", "start", "--port", str(port), "--ui-port", str(ui))
    assert started.returncode == 0, started.stdout + started.stderr
    try:
        # walk 7: asked again with other ports, it names the ports it runs on
        again = tnx(tmp_path, "server", "start", "--ui-port", str(port))
        assert again.returncode == 0 and "on its own ports" in again.stdout, again.stdout
        assert f"web UI:  http://127.0.0.1:{ui}" in again.stdout, again.stdout
        listed = tnx(tmp_path, "ls")
        out = listed.stdout + listed.stderr
        assert f"127.0.0.1:{port}" in out, out  # it reached this server: no root there yet
        assert "7233" not in out, out
        elsewhere = tmp_path / "elsewhere"
        elsewhere.mkdir()
        other = tnx(elsewhere, "ls")
        assert f":{port}" not in other.stdout + other.stderr  # only in that directory
    finally:
        stopped = tnx(tmp_path, "server", "stop")
        assert stopped.returncode == 0, stopped.stdout + stopped.stderr
    after = tnx(tmp_path, "ls")
    assert f":{port}" not in after.stdout + after.stderr  # stopped: the default again


def test_tnx_demo_reuses_the_server_started_here(tmp_path: Path) -> None:
    """``tnx demo`` is a ``tnx`` command too: with the server ``tnx server start --port P``
    runs in this directory, it tours on that server (it tried to start one on 7233 and
    failed: "a dev server from .tnx/temporal is already running (pid N, 127.0.0.1:7233)")."""
    port, ui = free_port(), free_port()
    started = tnx(tmp_path, "server", "start", "--port", str(port), "--ui-port", str(ui))
    assert started.returncode == 0, started.stdout + started.stderr
    try:
        demo = tnx(tmp_path, "demo")
        out = demo.stdout + demo.stderr
        assert demo.returncode == 0, out
        assert f"reusing the embedded dev server at 127.0.0.1:{port}" in out, out
        assert f"http://127.0.0.1:{ui}/namespaces/default/workflows/demo%2Froot" in out, out
    finally:
        stopped = tnx(tmp_path, "server", "stop")
        assert stopped.returncode == 0, stopped.stdout + stopped.stderr
