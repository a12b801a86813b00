"""The background-process helper behind ``tnx server`` and the local model server (no Temporal
server needed): detached start, pid files, SIGTERM then SIGKILL, log tails, port probes."""

from __future__ import annotations

import socket
import sys
import time
from pathlib import Path

from toolnexus_temporal.cli import procs

STUBBORN = (
    "import signal, time; signal.signal(signal.SIGTERM, signal.SIG_IGN); "
    "print('ready', flush=True); time.sleep(60)"
)
"""A server that ignores SIGTERM."""


def _start(tmp_path: Path, code: str) -> tuple[procs.Process, Path]:
    log_path = tmp_path / "server.log"
    with log_path.open("ab") as log:
        proc = procs.start_detached([sys.executable, "-c", code], log, cwd=tmp_path)
    for _ in range(200):
        if "ready" in (procs.log_tail(log_path) or ""):
            break
        time.sleep(0.05)
    return proc, log_path


def test_terminate_escalates_to_sigkill_and_reaps(tmp_path: Path) -> None:
    proc, log_path = _start(tmp_path, STUBBORN)
    assert procs.pid_runs(proc.pid, b"-c", proc)
    assert procs.terminate(proc.pid, timeout_s=0.3, proc=proc)
    assert proc.returncode is not None and not procs.pid_runs(proc.pid, b"-c", proc)
    assert procs.log_tail(log_path) == "ready\n"
    assert procs.log_tail(log_path, offset=len("ready\n")) == ""
    assert procs.log_tail(tmp_path / "missing.log") is None


def test_pid_files_and_a_stale_pid(tmp_path: Path) -> None:
    pid_file = tmp_path / "server.pid"
    assert procs.read_pid(pid_file) is None
    proc, _ = _start(tmp_path, "print('ready', flush=True)")
    proc.wait()
    procs.write_pid(pid_file, proc.pid)
    assert procs.read_pid(pid_file) == proc.pid
    assert not procs.pid_alive(proc.pid)  # exited and reaped: the pid file is stale
    assert procs.terminate(proc.pid, timeout_s=0.1)  # a process that is gone is no error


def test_port_probe_and_free_port() -> None:
    with socket.socket() as listener:
        listener.bind(("127.0.0.1", 0))
        listener.listen()
        port = listener.getsockname()[1]
        assert procs.port_open("127.0.0.1", port)
    assert not procs.port_open("127.0.0.1", port)
    assert 0 < procs.free_port("127.0.0.1") < 65536


def test_a_dev_server_is_found_on_the_ports_it_was_started_with(tmp_path) -> None:
    """``tnx server status`` / ``start`` without ports report the recorded ones, not 7233."""
    from toolnexus_temporal.cli.devserver import DevServer

    assert (DevServer.at(tmp_path).port, DevServer.at(tmp_path).ui_port) == (7233, 8233)
    (tmp_path / "server.ports").write_text('{"ip": "127.0.0.1", "port": 7391, "ui_port": 8391}')
    server = DevServer.at(tmp_path)
    assert (server.address, server.ui_url) == ("127.0.0.1:7391", "http://127.0.0.1:8391")
    assert DevServer.at(tmp_path, port=7400).address == "127.0.0.1:7400"
    (tmp_path / "server.ports").write_text("not json")
    assert DevServer.at(tmp_path).address == "127.0.0.1:7233"
