"""``tnx codec-server``: Temporal's codec-server protocol over the AES-256-GCM payload codec, so
the web UI and the ``temporal`` CLI show decrypted payloads to an operator who holds the keys.

The protocol (Temporal's "Codec Server" docs):

* ``POST .../encode`` and ``POST .../decode``: the body is a ``Payloads`` message in protobuf
  JSON (``{"payloads": [{"metadata": {...base64...}, "data": "...base64..."}]}``), the answer
  is the same shape after the codec ran (200). Only the last path segment counts, so the
  endpoints also work under a prefix such as ``/{namespace}/decode``. Invalid JSON or a codec
  error (unknown key id, wrong key) answers 400 with ``{"error": "..."}``.
* The caller sends ``X-Namespace``; with ``--namespace`` given, other namespaces get 403.
* CORS for the web UI: ``OPTIONS`` preflight and every answer carry
  ``Access-Control-Allow-Origin`` for an allowed ``Origin`` (default
  ``http://localhost:8233`` and ``http://127.0.0.1:8233``, the dev server's UI), methods
  ``POST, OPTIONS`` and headers ``Content-Type, X-Namespace, Authorization``.
* Optional ``--auth-token``: requests must carry ``Authorization: Bearer <token>`` (401
  otherwise). Preflights are not checked (browsers send them without credentials).

Served by the standard library's ``ThreadingHTTPServer`` (the codec is synchronous CPU work,
no web framework needed). ``GET /healthz`` answers ``ok`` for health checks.
"""

from __future__ import annotations

import hmac
import json
import logging
import threading
from collections.abc import Sequence
from http.server import BaseHTTPRequestHandler, ThreadingHTTPServer
from pathlib import Path
from typing import Final
from urllib.parse import urlsplit

import typer
from google.protobuf import json_format
from temporalio.api.common.v1 import Payloads

from toolnexus_temporal.cli.options import (
    DEFAULT_CODEC_HOST,
    DEFAULT_CODEC_ORIGINS,
    DEFAULT_CODEC_PORT,
)
from toolnexus_temporal.client.codec import (
    AesGcmCodec,
    CodecError,
    codec_from_keys,
)

DEFAULT_HOST: Final = DEFAULT_CODEC_HOST
"""Address the codec server listens on when none is given (loopback only)."""

DEFAULT_PORT: Final = DEFAULT_CODEC_PORT
"""Port the codec server listens on when none is given."""

DEFAULT_ORIGINS: Final = DEFAULT_CODEC_ORIGINS
"""Web UI origins allowed by CORS when none are given (:mod:`.options`)."""

MAX_BODY_BYTES: Final = 64 * 1024 * 1024
"""Largest request body accepted, bytes (a history page of payloads fits comfortably)."""

ALLOW_HEADERS: Final = "Content-Type, X-Namespace, Authorization"
"""Request headers a browser may send cross-origin."""

log = logging.getLogger(__name__)


class CodecServer:
    """An HTTP codec server over one :class:`AesGcmCodec`.

    Args:
        codec: the codec (its keys decide what decodes).
        host: address to listen on.
        port: TCP port; 0 picks a free one (see :attr:`url`).
        origins: allowed CORS origins; ``"*"`` allows any.
        auth_token: when set, requests need ``Authorization: Bearer <auth_token>``.
        namespaces: when given, only these ``X-Namespace`` values are served.

    Raises:
        OSError: the address cannot be bound.
    """

    def __init__(
        self,
        codec: AesGcmCodec,
        *,
        host: str = DEFAULT_HOST,
        port: int = DEFAULT_PORT,
        origins: Sequence[str] = DEFAULT_ORIGINS,
        auth_token: str | None = None,
        namespaces: Sequence[str] | None = None,
    ) -> None:
        self.codec = codec
        self.origins = tuple(origins)
        self.auth_token = auth_token
        self.namespaces = tuple(namespaces) if namespaces else None
        handler = type("BoundCodecHandler", (_Handler,), {"server_state": self})
        self.httpd = ThreadingHTTPServer((host, port), handler)
        self.httpd.daemon_threads = True
        self._thread: threading.Thread | None = None

    @property
    def url(self) -> str:
        """``http://host:port`` of the listening socket."""
        host, port = self.httpd.server_address[:2]
        return f"http://{host!s}:{port}"

    def serve_forever(self) -> None:
        """Serve until :meth:`close` (or KeyboardInterrupt) in this thread."""
        self.httpd.serve_forever()

    def start(self) -> CodecServer:
        """Serve in a daemon thread (tests, embedding); returns self."""
        self._thread = threading.Thread(target=self.serve_forever, daemon=True)
        self._thread.start()
        return self

    def close(self) -> None:
        """Stop serving and close the socket."""
        if self._thread is not None:
            self.httpd.shutdown()
            self._thread.join()
            self._thread = None
        self.httpd.server_close()

    def allowed_origin(self, origin: str | None) -> str | None:
        """The ``Access-Control-Allow-Origin`` value for a request from ``origin`` (None: no
        CORS headers, the browser will refuse the answer)."""
        if origin is None:
            return None
        if "*" in self.origins:
            return "*"
        return origin if origin in self.origins else None

    def authorized(self, header: str | None) -> bool:
        """Whether an ``Authorization`` header value passes the optional token check."""
        if self.auth_token is None:
            return True
        expected = f"Bearer {self.auth_token}".encode()
        return header is not None and hmac.compare_digest(header.encode(), expected)

    def apply(self, action: str, body: bytes) -> bytes:
        """Run ``encode`` or ``decode`` over a ``Payloads`` protobuf-JSON body.

        Raises:
            ValueError: the body is not ``Payloads`` JSON.
            CodecError: the codec refused a payload (unknown key id, wrong key).
        """
        try:
            payloads = json_format.Parse(body, Payloads())
        except json_format.ParseError as err:
            raise ValueError(f"body is not Payloads JSON: {err}") from err
        step = self.codec.encode_one if action == "encode" else self.codec.decode_one
        out = Payloads(payloads=[step(p) for p in payloads.payloads])
        return json_format.MessageToJson(out).encode()


class _Handler(BaseHTTPRequestHandler):
    server_state: CodecServer
    protocol_version = "HTTP/1.1"

    def log_message(self, format: str, *args: object) -> None:
        log.info("%s %s", self.address_string(), format % args)

    def _cors(self) -> None:
        origin = self.server_state.allowed_origin(self.headers.get("Origin"))
        if origin is not None:
            self.send_header("Access-Control-Allow-Origin", origin)
            self.send_header("Access-Control-Allow-Methods", "POST, OPTIONS")
            self.send_header("Access-Control-Allow-Headers", ALLOW_HEADERS)
            self.send_header("Access-Control-Max-Age", "600")
        self.send_header("Vary", "Origin")

    def _answer(self, status: int, body: bytes, content_type: str = "application/json") -> None:
        self.send_response(status)
        self._cors()
        self.send_header("Content-Type", content_type)
        self.send_header("Content-Length", str(len(body)))
        self.end_headers()
        self.wfile.write(body)

    def _error(self, status: int, message: str) -> None:
        self._answer(status, json.dumps({"error": message}).encode())

    def _action(self) -> str | None:
        last = urlsplit(self.path).path.rstrip("/").rsplit("/", 1)[-1]
        return last if last in ("encode", "decode") else None

    def do_OPTIONS(self) -> None:
        self.send_response(204)
        self._cors()
        self.send_header("Content-Length", "0")
        self.end_headers()

    def do_GET(self) -> None:
        if urlsplit(self.path).path == "/healthz":
            self._answer(200, b"ok\n", "text/plain")
        elif self._action():
            self._error(405, "use POST")
        else:
            self._error(404, "not found: POST .../encode or .../decode")

    def do_POST(self) -> None:
        state = self.server_state
        action = self._action()
        length = int(self.headers.get("Content-Length") or 0)
        if action is None:
            self._drain(length)
            return self._error(404, "not found: POST .../encode or .../decode")
        if not state.authorized(self.headers.get("Authorization")):
            self._drain(length)
            return self._error(401, "missing or wrong Authorization bearer token")
        namespace = self.headers.get("X-Namespace")
        if state.namespaces is not None and namespace not in state.namespaces:
            self._drain(length)
            return self._error(403, f"namespace {namespace!r} is not served here")
        if length > MAX_BODY_BYTES:
            self.close_connection = True
            return self._error(413, f"body over {MAX_BODY_BYTES} bytes")
        body = self.rfile.read(length)
        try:
            out = state.apply(action, body)
        except (ValueError, CodecError) as err:
            return self._error(400, str(err))
        self._answer(200, out)

    def _drain(self, length: int) -> None:
        if 0 < length <= MAX_BODY_BYTES:
            self.rfile.read(length)
        elif length:
            self.close_connection = True


def serve_command(
    host: str,
    port: int,
    keys: str | None,
    key_file: Path | None,
    cors_origin: list[str] | None,
    auth_token: str | None,
    namespace: list[str] | None,
) -> None:
    """`tnx codec-server` (its options: :mod:`~toolnexus_temporal.cli.app`): serve until
    Ctrl-C; exit 2 when the keys are invalid or the port cannot be bound."""
    try:
        codec = codec_from_keys(keys, key_file)
    except CodecError as err:
        typer.echo(f"tnx codec-server: {err}", err=True)
        raise typer.Exit(2) from None
    try:
        server = CodecServer(
            codec,
            host=host,
            port=port,
            origins=cors_origin or DEFAULT_ORIGINS,
            auth_token=auth_token,
            namespaces=namespace,
        )
    except OSError as err:
        typer.echo(f"tnx codec-server: cannot listen on {host}:{port}: {err.strerror}", err=True)
        raise typer.Exit(2) from None
    typer.echo(
        f"codec server on {server.url} (keys: {', '.join(codec.key_ids)}; current "
        f"{codec.current_key_id}; CORS: {', '.join(server.origins)})"
    )
    try:
        server.serve_forever()
    except KeyboardInterrupt:
        pass
    finally:
        server.close()
