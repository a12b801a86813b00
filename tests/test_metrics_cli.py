"""``tnx-worker --metrics-port`` on a port already in use stops at start with one line
(exit 1), before it connects anywhere (docs/guide/metrics.md)."""

from __future__ import annotations

import os
import socket
import subprocess
import sys
from pathlib import Path

ROOT = Path(__file__).resolve().parent.parent


def test_a_metrics_port_in_use_is_one_line(tmp_path: Path) -> None:
    env = {k: v for k, v in os.environ.items() if not k.startswith(("TEMPORAL_", "TNX_"))}
    with socket.socket() as held:
        held.bind(("127.0.0.1", 0))
        held.listen()
        port = held.getsockname()[1]
        done = subprocess.run(
            [
                str(Path(sys.executable).parent / "tnx-worker"),
                *("--registry", "tests.registries:METRICS"),
                *("--address", "127.0.0.1:9", "--namespace", "ns-x"),
                *("--llm-base-url", "http://127.0.0.1:9/v1", "--model", "m"),
                *("--store", str(tmp_path / "c.sqlite")),
                *("--metrics-port", str(port), "--metrics-host", "127.0.0.1"),
            ],
            env=env,
            capture_output=True,
            text=True,
            timeout=120,
            cwd=ROOT,
        )
    assert done.returncode == 1, done
    lines = done.stderr.strip().splitlines()
    assert len(lines) == 1, done.stderr
    assert f"cannot serve metrics on 127.0.0.1:{port}" in lines[0], lines
    assert "address already in use" in lines[0].lower(), lines
    assert "Traceback" not in done.stderr and done.stdout == ""


def test_a_fleet_interval_under_a_second_is_refused(tmp_path: Path) -> None:
    """--fleet-metrics-interval-s 0.001 would read visibility back to back: exit 2, one
    usage error, before anything starts (0 still turns the gauges off)."""
    env = {k: v for k, v in os.environ.items() if not k.startswith(("TEMPORAL_", "TNX_"))}
    done = subprocess.run(
        [
            str(Path(sys.executable).parent / "tnx-worker"),
            *("--registry", "tests.registries:METRICS"),
            *("--address", "127.0.0.1:9", "--namespace", "ns-x"),
            *("--llm-base-url", "http://127.0.0.1:9/v1", "--model", "m"),
            *("--store", str(tmp_path / "c.sqlite")),
            *("--metrics-port", "9464", "--fleet-metrics-interval-s", "0.001"),
        ],
        env=env,
        capture_output=True,
        text=True,
        timeout=120,
        cwd=ROOT,
    )
    assert done.returncode == 2, done
    assert "--fleet-metrics-interval-s" in done.stderr and "at least 1 s" in done.stderr, done
    assert "Traceback" not in done.stderr


def test_a_task_queue_no_visibility_query_can_carry_is_refused(tmp_path: Path) -> None:
    """Issue 23 item 7: the fleet gauges and the worker check put the task queue in
    ``TaskQueue="..."``; one holding a quote is a usage error (exit 2) before anything
    starts (it was a traceback from the fleet gauges: "cannot go into a visibility query")."""
    env = {k: v for k, v in os.environ.items() if not k.startswith(("TEMPORAL_", "TNX_"))}
    done = subprocess.run(
        [
            str(Path(sys.executable).parent / "tnx-worker"),
            *("--registry", "tests.registries:METRICS", "--task-queue", 'a"b'),
            *("--address", "127.0.0.1:9", "--namespace", "ns-x"),
            *("--llm-base-url", "http://127.0.0.1:9/v1", "--model", "m"),
            *("--store", str(tmp_path / "c.sqlite")),
        ],
        env=env,
        capture_output=True,
        text=True,
        timeout=120,
        cwd=ROOT,
    )
    assert done.returncode == 2, done
    assert "--task-queue" in done.stderr and "cannot go into a visibility query" in done.stderr
    assert "Traceback" not in done.stderr
