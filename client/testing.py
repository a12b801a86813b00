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
"""

from __future__ import annotations

import asyncio
import json
import threading
from collections.abc import AsyncIterator, Callable
from dataclasses import dataclass, field
from http.server import BaseHTTPRequestHandler, ThreadingHTTPServer
from typing import Any

import httpx

Reply = dict[str, Any] | httpx.Response
ScriptEntry = Reply | Callable[[dict[str, Any]], Reply]


def usage(prompt: int = 3, completion: int = 2) -> dict[str, int]:
    """An OpenAI usage object."""
    return {
        "prompt_tokens": prompt,
        "completion_tokens": completion,
        "total_tokens": prompt + completion,
    }


def text(content: str, *, prompt_tokens: int = 3, completion_tokens: int = 2) -> dict[str, Any]:
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
        "usage": usage(prompt_tokens, completion_tokens),
    }


def tool_calls(
    *calls: tuple[str, dict[str, Any]], prompt_tokens: int = 5, completion_tokens: int = 2
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
        "usage": usage(prompt_tokens, completion_tokens),
    }


def style_of(path: str) -> str:
    """``anthropic`` for ``.../v1/messages``, ``openai`` for ``.../chat/completions``, else
    ``""``."""
    path = path.rstrip("/")
    if path.endswith("/chat/completions"):
        return "openai"
    if path.endswith("/v1/messages"):
        return "anthropic"
    return ""


def openai_view(style: str, body: dict[str, Any]) -> dict[str, Any]:
    """A request body as OpenAI-style ``{"model", "messages", "tools"}``, whatever its style,
    so scripts and tests inspect one shape."""
    if style != "anthropic":
        return body
    messages: list[dict[str, Any]] = []
    if body.get("system"):
        messages.append({"role": "system", "content": body["system"]})
    for m in body.get("messages", []):
        blocks = (
            m["content"]
            if isinstance(m["content"], list)
            else [{"type": "text", "text": m["content"]}]
        )
        if m["role"] == "assistant":
            text_parts = [b["text"] for b in blocks if b.get("type") == "text"]
            calls = [
                {
                    "id": b["id"],
                    "type": "function",
                    "function": {"name": b["name"], "arguments": json.dumps(b.get("input", {}))},
                }
                for b in blocks
                if b.get("type") == "tool_use"
            ]
            msg: dict[str, Any] = {"role": "assistant", "content": "".join(text_parts) or None}
            if calls:
                msg["tool_calls"] = calls
            messages.append(msg)
            continue
        for b in blocks:
            if b.get("type") == "tool_result":
                messages.append(
                    {"role": "tool", "tool_call_id": b["tool_use_id"], "content": b["content"]}
                )
            elif b.get("type") == "text":
                messages.append({"role": "user", "content": b["text"]})
    tools = [
        {
            "type": "function",
            "function": {
                "name": t["name"],
                "description": t.get("description", ""),
                "parameters": t.get("input_schema", {}),
            },
        }
        for t in body.get("tools", [])
    ]
    view: dict[str, Any] = {"model": body.get("model"), "messages": messages}
    if tools:
        view["tools"] = tools
    return view


def render(
    reply: dict[str, Any], style: str, *, stream: bool, chunk_delay_s: float = 0.0
) -> httpx.Response:
    """Render an OpenAI-shaped scripted reply in ``style``, as JSON or as an SSE stream.

    ``chunk_delay_s`` spaces stream events out (behind ``httpx.MockTransport`` only)."""
    message = reply["choices"][0]["message"]
    usage_raw = reply.get("usage") or {}
    content = message.get("content") or ""
    calls = message.get("tool_calls") or []
    if style == "anthropic":
        blocks: list[dict[str, Any]] = [{"type": "text", "text": content}] if content else []
        blocks += [
            {
                "type": "tool_use",
                "id": c["id"],
                "name": c["function"]["name"],
                "input": json.loads(c["function"]["arguments"] or "{}"),
            }
            for c in calls
        ]
        anthropic_usage = {
            "input_tokens": usage_raw.get("prompt_tokens", 0),
            "output_tokens": usage_raw.get("completion_tokens", 0),
        }
        stop = "tool_use" if calls else "end_turn"
        if not stream:
            return httpx.Response(
                200,
                json={
                    "id": "msg_scripted",
                    "type": "message",
                    "role": "assistant",
                    "content": blocks,
                    "stop_reason": stop,
                    "usage": anthropic_usage,
                },
            )
        events: list[tuple[str, dict[str, Any]]] = [
            (
                "message_start",
                {
                    "type": "message_start",
                    "message": {
                        "id": "msg_scripted",
                        "type": "message",
                        "role": "assistant",
                        "content": [],
                        "usage": {
                            "input_tokens": anthropic_usage["input_tokens"],
                            "output_tokens": 0,
                        },
                    },
                },
            )
        ]
        for index, block in enumerate(blocks):
            if block["type"] == "text":
                events.append(
                    (
                        "content_block_start",
                        {
                            "type": "content_block_start",
                            "index": index,
                            "content_block": {"type": "text", "text": ""},
                        },
                    )
                )
                for piece in _pieces(block["text"]):
                    events.append(
                        (
                            "content_block_delta",
                            {
                                "type": "content_block_delta",
                                "index": index,
                                "delta": {"type": "text_delta", "text": piece},
                            },
                        )
                    )
            else:
                events.append(
                    (
                        "content_block_start",
                        {
                            "type": "content_block_start",
                            "index": index,
                            "content_block": {
                                "type": "tool_use",
                                "id": block["id"],
                                "name": block["name"],
                                "input": {},
                            },
                        },
                    )
                )
                for piece in _pieces(json.dumps(block["input"])):
                    events.append(
                        (
                            "content_block_delta",
                            {
                                "type": "content_block_delta",
                                "index": index,
                                "delta": {"type": "input_json_delta", "partial_json": piece},
                            },
                        )
                    )
            events.append(("content_block_stop", {"type": "content_block_stop", "index": index}))
        events.append(
            (
                "message_delta",
                {
                    "type": "message_delta",
                    "delta": {"stop_reason": stop},
                    "usage": {"output_tokens": anthropic_usage["output_tokens"]},
                },
            )
        )
        events.append(("message_stop", {"type": "message_stop"}))
        frames = [f"event: {name}\ndata: {json.dumps(data)}\n\n" for name, data in events]
        return _sse(frames, chunk_delay_s)
    if not stream:
        return httpx.Response(200, json=reply)
    chunks: list[dict[str, Any]] = [{"choices": [{"index": 0, "delta": {"role": "assistant"}}]}]
    for piece in _pieces(content):
        chunks.append({"choices": [{"index": 0, "delta": {"content": piece}}]})
    for i, c in enumerate(calls):
        chunks.append(
            {
                "choices": [
                    {
                        "index": 0,
                        "delta": {
                            "tool_calls": [
                                {
                                    "index": i,
                                    "id": c["id"],
                                    "type": "function",
                                    "function": {"name": c["function"]["name"], "arguments": ""},
                                }
                            ]
                        },
                    }
                ]
            }
        )
        for piece in _pieces(c["function"]["arguments"]):
            chunks.append(
                {
                    "choices": [
                        {
                            "index": 0,
                            "delta": {
                                "tool_calls": [{"index": i, "function": {"arguments": piece}}]
                            },
                        }
                    ]
                }
            )
    chunks.append(
        {"choices": [{"index": 0, "delta": {}, "finish_reason": "tool_calls" if calls else "stop"}]}
    )
    chunks.append({"choices": [], "usage": usage_raw})
    frames = [f"data: {json.dumps(c)}\n\n" for c in chunks] + ["data: [DONE]\n\n"]
    return _sse(frames, chunk_delay_s)


def _pieces(text: str, size: int = 8) -> list[str]:
    return [text[i : i + size] for i in range(0, len(text), size)]


def _sse(frames: list[str], delay_s: float) -> httpx.Response:
    sse_headers = {"content-type": "text/event-stream"}
    if delay_s <= 0:
        return httpx.Response(200, headers=sse_headers, content="".join(frames).encode())

    async def slowly() -> AsyncIterator[bytes]:
        for frame in frames:
            await asyncio.sleep(delay_s)
            yield frame.encode()

    return httpx.Response(200, headers=sse_headers, content=slowly())


@dataclass
class ScriptedLLM:
    """Per-model scripts of replies; records every request it answers.

    Args:
        scripts: model name -> list of script entries, consumed in order; a callable entry
            gets the request in the OpenAI shape (see :func:`openai_view`).
        repeat_last: keep answering with a model's last entry once its script is used up.
        chunk_delay_s: seconds between stream events (``httpx.MockTransport`` only).

    Attributes:
        requests: every request, in the OpenAI shape (see :func:`openai_view`), in order.
        raw_requests: every request body as received, with its wire style.
    """

    scripts: dict[str, list[ScriptEntry]]
    repeat_last: bool = False
    chunk_delay_s: float = 0.0
    requests: list[dict[str, Any]] = field(default_factory=list)
    raw_requests: list[tuple[str, dict[str, Any]]] = field(default_factory=list)
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
        return render(
            reply, style, stream=bool(body.get("stream")), chunk_delay_s=self.chunk_delay_s
        )

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
                data = response.content
                self.send_response(response.status_code)
                for key, value in response.headers.items():
                    if key.lower() not in ("content-length", "transfer-encoding", "connection"):
                        self.send_header(key, value)
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
