"""Background server processes: the one helper behind the dev server and the local model.

Both :class:`~toolnexus_temporal.cli.devserver.DevServer` and
:class:`~toolnexus_temporal.cli.localmodel.LocalModelServer` start a server binary detached
in its own session and process group (a Ctrl-C in the terminal reaches only us), send its
output to a log file, probe its port, and stop it with SIGTERM, then SIGKILL. This module
holds those steps once: port probing, pid files, process-group start and stop, waiting for
exit, and the log tail an error message shows.
"""

from __future__ import annotations

import contextlib
import os
import signal
import socket
import subprocess
import time
from collections.abc import Sequence
from pathlib import Path
from typing import IO, Final

LOG_TAIL_BYTES: Final = 4000
"""How much of the end of a server log an error message shows, bytes."""

KILL_WAIT_S: Final = 5.0
"""How long :func:`terminate` waits after SIGKILL, s."""

_EXIT_POLL_S: Final = 0.05

Process = subprocess.Popen[bytes]
"""A server process this process started."""


def port_open(host: str, port: int, timeout_s: float = 0.5) -> bool:
    """Tell whether ``host:port`` accepts a TCP connection within ``timeout_s`` seconds."""
    try:
        with socket.create_connection((host, port), timeout=timeout_s):
            return True
    except OSError:
        return False


def free_port(host: str) -> int:
    """A TCP port on ``host`` that is free right now (the OS picks it; another process may
    take it before the server binds it)."""
    with socket.socket(socket.AF_INET, socket.SOCK_STREAM) as sock:
        sock.bind((host, 0))
        port: int = sock.getsockname()[1]
        return port


def environ_without(prefix: str) -> dict[str, str]:
    """This process's environment without the variables whose names start with ``prefix``."""
    return {k: v for k, v in os.environ.items() if not k.startswith(prefix)}


def read_pid(pid_file: Path) -> int | None:
    """The process id recorded in ``pid_file``, or None when it is missing or unreadable."""
    try:
        return int(pid_file.read_text().strip())
    except (OSError, ValueError):
        return None


def write_pid(pid_file: Path, pid: int) -> None:
    """Record ``pid`` in ``pid_file`` (one line)."""
    pid_file.write_text(f"{pid}\n")


def pid_alive(pid: int) -> bool:
    """Tell whether process ``pid`` exists and is not a zombie."""
    try:
        os.kill(pid, 0)
    except ProcessLookupError:
        return False
    except PermissionError:
        return True  # exists, owned by someone else
    stat = Path(f"/proc/{pid}/stat")
    with contextlib.suppress(OSError, IndexError):
        # Field 3 is the state; "Z" is a zombie that has exited but is not yet reaped.
        if stat.read_text().rsplit(")", 1)[1].split()[0] == "Z":
            return False
    return True


def pid_runs(pid: int, marker: bytes, proc: Process | None = None) -> bool:
    """Tell whether ``pid`` is alive and is the server we mean.

    Args:
        pid: the process id (from a pid file, say).
        marker: an argument the server's command line contains (guards against a recycled
            pid); checked where ``/proc`` allows it, else the pid is trusted.
        proc: the process, when this process started it (then no guessing is needed).
    """
    if proc is not None and proc.pid == pid:
        return proc.poll() is None
    if not pid_alive(pid):
        return False
    try:
        argv = Path(f"/proc/{pid}/cmdline").read_bytes().split(b"\0")
    except OSError:
        return True  # no /proc (macOS) or no permission: trust the pid
    return marker in argv


def start_detached(
    argv: Sequence[str],
    log: IO[bytes],
    *,
    cwd: Path | None = None,
    env: dict[str, str] | None = None,
) -> Process:
    """Start ``argv`` in its own session and process group, stdout and stderr to ``log``.

    Args:
        argv: the command, binary first.
        log: an open binary file; the process writes to it from where it stands.
        cwd: the working directory (None: ours).
        env: the environment (None: ours).

    Raises:
        OSError: the binary cannot be executed.
    """
    return subprocess.Popen(
        list(argv),
        stdin=subprocess.DEVNULL,
        stdout=log,
        stderr=subprocess.STDOUT,
        cwd=cwd,
        env=env,
        start_new_session=True,
    )


def signal_group(pid: int, sig: signal.Signals) -> None:
    """Send ``sig`` to the process group ``pid`` leads, else to ``pid`` alone; a process that
    is already gone is ignored."""
    with contextlib.suppress(ProcessLookupError):
        try:
            leader = os.getpgid(pid) == pid
        except ProcessLookupError:
            return
        if leader:
            try:
                os.killpg(pid, sig)
                return
            except PermissionError:
                pass  # a member of the group is not ours: signal the leader alone
        os.kill(pid, sig)


def wait_exit(pid: int, timeout_s: float, proc: Process | None = None) -> bool:
    """Wait up to ``timeout_s`` seconds for ``pid`` to exit (``proc``, when we started it, is
    reaped). Returns True when it has exited."""
    deadline = time.monotonic() + timeout_s
    while True:
        if proc is not None and proc.pid == pid:
            if proc.poll() is not None:
                return True
        elif not pid_alive(pid):
            return True
        if time.monotonic() >= deadline:
            return False
        time.sleep(_EXIT_POLL_S)


def terminate(pid: int, *, timeout_s: float, proc: Process | None = None) -> bool:
    """Stop a server's process group: SIGTERM, then SIGKILL after ``timeout_s`` seconds.

    Args:
        pid: the server's pid (the leader of its process group).
        timeout_s: seconds to wait after SIGTERM before SIGKILL.
        proc: the process, when this process started it.

    Returns:
        True when it has exited; False when it survived SIGKILL for :data:`KILL_WAIT_S`.
    """
    signal_group(pid, signal.SIGTERM)
    if wait_exit(pid, timeout_s, proc):
        return True
    signal_group(pid, signal.SIGKILL)
    return wait_exit(pid, KILL_WAIT_S, proc)


def log_tail(path: Path, *, offset: int = 0, max_bytes: int = LOG_TAIL_BYTES) -> str | None:
    """The end of a log file, decoded leniently.

    Args:
        path: the log file.
        offset: where this run's output starts (a log that is appended to); nothing before
            it is returned.
        max_bytes: how much of the end to return at most.

    Returns:
        The tail (possibly empty), or None when the file cannot be read.
    """
    try:
        with path.open("rb") as f:
            size = f.seek(0, os.SEEK_END)
            f.seek(max(offset, size - max_bytes))
            return f.read().decode(errors="replace")
    except OSError:
        return None
