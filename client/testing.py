"""A scripted LLM for tests and the demo, speaking both wire styles.

:class:`ScriptedLLM` answers ``POST .../chat/completions`` (OpenAI style) and
``POST .../v1/messages`` (Anthropic style) from per-model scripts, as plain JSON or as an SSE
stream when the request says ``"stream": true``. Scripts are written once, in the OpenAI
shape (``text(...)``, ``tool_calls(...)``), and rendered in the style asked for. Use it behind
``httpx.MockTransport`` (``ScriptedLLM.transport()``) in tests, or serve it over real HTTP on
loopback with :class:`ScriptedLLMServer` (the demo does, so LLM traffic always crosses HTTP).

A script entry is either a fixed reply (``text(...)``, ``tool_calls(...)``) or a callable
``(request_json) -> reply``; an ``httpx.Response`` reply is sent as is (for error statuses).
When a model's script runs out, the last entry repeats when ``repeat_last`` is set; otherwise
the server answers 500 with a clear message.

This module holds the reply builders (:func:`usage`, :func:`text`, :func:`tool_calls`),
:class:`ScriptedLLM` and :class:`ScriptedLLMServer`; the wire styles (:func:`style_of`,
:func:`openai_view`, :func:`render`) are in :mod:`~toolnexus_temporal.client.scripted_wire`
and re-exported here.
"""

from __future__ import annotations

import asyncio
import json
import threading
from collections.abc import Callable
from dataclasses import dataclass, field
from http.server import BaseHTTPRequestHandler, ThreadingHTTPServer
from typing import Any

import httpx

from toolnexus_temporal.client.scripted_wire import SlowFrames
from toolnexus_temporal.client.scripted_wire import openai_view as openai_view
from toolnexus_temporal.client.scripted_wire import render as render
from toolnexus_temporal.client.scripted_wire import style_of as style_of

Reply = dict[str, Any] | httpx.Response
ScriptEntry = Reply | Callable[[dict[str, Any]], Reply]


def usage(prompt: int = 3, completion: int = 2, cached: int = 0) -> dict[str, Any]:
    """An OpenAI usage object; ``cached`` of the ``prompt`` tokens came from the provider's
    cache (``prompt_tokens_details.cached_tokens``; rendered as Anthropic's
    ``cache_read_input_tokens`` in that style)."""
    out: dict[str, Any] = {
        "prompt_tokens": prompt,
        "completion_tokens": completion,
        "total_tokens": prompt + completion,
    }
    if cached:
        out["prompt_tokens_details"] = {"cached_tokens": cached}
    return out


def text(
    content: str, *, prompt_tokens: int = 3, completion_tokens: int = 2, cached_tokens: int = 0
) -> dict[str, Any]:
    """A chat completion whose reply is plain text (seed 002's ``final_reply``)."""
    return {
        "id": "chatcmpl-scripted",
        "object": "chat.completion",
        "choices": [
            {
                "index": 0,
                "message": {"role": "assistant", "content": content},
                "finish_reason": "stop",
            }
        ],
        "usage": usage(prompt_tokens, completion_tokens, cached_tokens),
    }


def tool_calls(
    *calls: tuple[str, dict[str, Any]],
    prompt_tokens: int = 5,
    completion_tokens: int = 2,
    cached_tokens: int = 0,
) -> dict[str, Any]:
    """A chat completion that calls tools: ``tool_calls(("lookup", {"q": "x"}), ...)``."""
    return {
        "id": "chatcmpl-scripted",
        "object": "chat.completion",
        "choices": [
            {
                "index": 0,
                "message": {
                    "role": "assistant",
                    "content": None,
                    "tool_calls": [
                        {
                            "id": f"c{i + 1}",
                            "type": "function",
                            "function": {"name": name, "arguments": json.dumps(args)},
                        }
                        for i, (name, args) in enumerate(calls)
                    ],
                },
                "finish_reason": "tool_calls",
            }
        ],
        "usage": usage(prompt_tokens, completion_tokens, cached_tokens),
    }


@dataclass
class ScriptedLLM:
    """Per-model scripts of replies; records every request it answers.

    Args:
        scripts: model name -> list of script entries, consumed in order; a callable entry
            gets the request in the OpenAI shape (see :func:`openai_view`).
        repeat_last: keep answering with a model's last entry once its script is used up.
        chunk_delay_s: seconds before each stream event of a streamed reply (text comes in
            pieces of 8 characters), behind ``httpx.MockTransport`` and over
            :class:`ScriptedLLMServer` alike (there each event is written as it comes).

    Attributes:
        requests: every request, in the OpenAI shape (see :func:`openai_view`), in order.
        raw_requests: every request body as received, with its wire style.
        frames_sent: every frame of a delayed stream (``chunk_delay_s``) with the wall-clock
            time it was handed to the transport or written to the socket.
    """

    scripts: dict[str, list[ScriptEntry]]
    repeat_last: bool = False
    chunk_delay_s: float = 0.0
    requests: list[dict[str, Any]] = field(default_factory=list)
    raw_requests: list[tuple[str, dict[str, Any]]] = field(default_factory=list)
    frames_sent: list[tuple[float, bytes]] = field(default_factory=list)
    _lock: threading.Lock = field(default_factory=threading.Lock, repr=False)

    def __post_init__(self) -> None:
        for model, script in self.scripts.items():
            if not isinstance(script, list):
                raise TypeError(
                    f"ScriptedLLM script for {model!r} must be a list of entries (a reply, or "
                    f"a function of the request returning one), not {type(script).__name__}"
                )

    def calls(self, model: str | None = None) -> int:
        """How many requests were answered (for one model, or all)."""
        return sum(1 for r in self.requests if model is None or r.get("model") == model)

    def respond(self, path: str, body: dict[str, Any]) -> httpx.Response:
        """Answer one request; never raises (bad requests get a 4xx/5xx response)."""
        style = style_of(path)
        if not style:
            return httpx.Response(404, json={"error": f"scripted LLM has no route {path}"})
        view = openai_view(style, body)
        with self._lock:
            self.requests.append(view)
            self.raw_requests.append((style, body))
            model = str(body.get("model"))
            script = self.scripts.get(model)
            if script is None:
                return httpx.Response(
                    404, json={"error": f"scripted LLM has no script for model {model!r}"}
                )
            if not script:
                return httpx.Response(
                    500, json={"error": f"scripted LLM: the script for {model!r} is used up"}
                )
            entry = script[0] if (self.repeat_last and len(script) == 1) else script.pop(0)
        reply = entry(view) if callable(entry) else entry
        if isinstance(reply, httpx.Response):
            return reply
        response = render(
            reply, style, stream=bool(body.get("stream")), chunk_delay_s=self.chunk_delay_s
        )
        if isinstance(response.stream, SlowFrames):
            response.stream.log = self.frames_sent
        return response

    async def handle(self, request: httpx.Request) -> httpx.Response:
        """An ``httpx.MockTransport`` handler."""
        await asyncio.sleep(0)
        return self.respond(request.url.path, json.loads(request.content or b"{}"))

    def transport(self) -> httpx.MockTransport:
        """An ``httpx.MockTransport`` serving this script."""
        return httpx.MockTransport(self.handle)


class ScriptedLLMServer:
    """Serve a :class:`ScriptedLLM` over real HTTP on loopback, in a background thread.

    ``base_url`` is ``http://127.0.0.1:{port}/v1``. Use as a context manager.

    Args:
        llm: the script.
        port: 0 picks a free port.
    """

    def __init__(self, llm: ScriptedLLM, *, host: str = "127.0.0.1", port: int = 0) -> None:
        self.llm = llm
        outer = self

        class _Handler(BaseHTTPRequestHandler):
            protocol_version = "HTTP/1.1"
            # Headers and body go out in two writes: without TCP_NODELAY the body waits for
            # the client's delayed ACK of the headers (~40 ms on Linux loopback).
            disable_nagle_algorithm = True

            def do_POST(self) -> None:
                length = int(self.headers.get("content-length") or 0)
                raw = self.rfile.read(length) if length else b"{}"
                try:
                    body = json.loads(raw)
                except json.JSONDecodeError:
                    response = httpx.Response(400, json={"error": "body is not JSON"})
                else:
                    response = outer.llm.respond(self.path, body)
                try:
                    self._answer(response)
                except (BrokenPipeError, ConnectionResetError):
                    # The caller left (a worker killed or its call cancelled): nobody to
                    # answer, and not an error of the server.
                    self.close_connection = True

            def _answer(self, response: httpx.Response) -> None:
                self.send_response(response.status_code)
                for key, value in response.headers.items():
                    if key.lower() not in ("content-length", "transfer-encoding", "connection"):
                        self.send_header(key, value)
                if isinstance(response.stream, SlowFrames):  # real streaming: chunked
                    self.send_header("transfer-encoding", "chunked")
                    self.end_headers()
                    for frame in response.stream:
                        self.wfile.write(b"%x\r\n%s\r\n" % (len(frame), frame))
                        self.wfile.flush()
                    self.wfile.write(b"0\r\n\r\n")
                    return
                data = response.content
                self.send_header("content-length", str(len(data)))
                self.end_headers()
                self.wfile.write(data)

            def log_message(self, format: str, *args: Any) -> None:
                return None

        self._server = ThreadingHTTPServer((host, port), _Handler)
        self._thread = threading.Thread(target=self._server.serve_forever, daemon=True)

    @property
    def base_url(self) -> str:
        """``http://host:port/v1``."""
        host, port = self._server.server_address[:2]
        return f"http://{host!s}:{port}/v1"

    def __enter__(self) -> ScriptedLLMServer:
        self._thread.start()
        return self

    def __exit__(self, *exc: object) -> None:
        self._server.shutdown()
        self._server.server_close()
        self._thread.join(timeout=5)
