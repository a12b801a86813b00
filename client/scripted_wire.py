"""The wire styles of the scripted LLM (:mod:`~toolnexus_temporal.client.testing`): which
style a request path asks for (:func:`style_of`), a request body in the OpenAI shape whatever
its style (:func:`openai_view`), and an OpenAI-shaped scripted reply rendered in the style
asked for, as JSON or as an SSE stream (:func:`render`).
"""

from __future__ import annotations

import asyncio
import json
import time
from collections.abc import AsyncIterator, Iterator
from typing import Any

import httpx


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

    ``chunk_delay_s`` spaces stream events out (:class:`SlowFrames`)."""
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
    if reply.get("model"):  # the model that answered, on every chunk as OpenAI sends it
        chunks = [{**c, "model": reply["model"]} for c in chunks]
    frames = [f"data: {json.dumps(c)}\n\n" for c in chunks] + ["data: [DONE]\n\n"]
    return _sse(frames, chunk_delay_s)


def _pieces(text: str, size: int = 8) -> list[str]:
    return [text[i : i + size] for i in range(0, len(text), size)]


class SlowFrames(httpx.SyncByteStream, httpx.AsyncByteStream):
    """SSE frames sent ``delay_s`` apart (each after its delay), read either way: through
    ``httpx.MockTransport`` (async) or by :class:`~toolnexus_temporal.client.testing.
    ScriptedLLMServer`'s handler thread (sync), which writes each frame as it comes.

    Attributes:
        frames: the encoded frames, in order.
        delay_s: seconds before each frame.
        log: where each frame is recorded with its wall-clock time (``time.time()``) as it
            is handed over, when set.
    """

    def __init__(self, frames: list[bytes], delay_s: float) -> None:
        self.frames = frames
        self.delay_s = delay_s
        self.log: list[tuple[float, bytes]] | None = None

    def _sent(self, frame: bytes) -> bytes:
        if self.log is not None:
            self.log.append((time.time(), frame))
        return frame

    def __iter__(self) -> Iterator[bytes]:
        for frame in self.frames:
            time.sleep(self.delay_s)
            yield self._sent(frame)

    async def __aiter__(self) -> AsyncIterator[bytes]:
        for frame in self.frames:
            await asyncio.sleep(self.delay_s)
            yield self._sent(frame)


def _sse(frames: list[str], delay_s: float) -> httpx.Response:
    sse_headers = {"content-type": "text/event-stream"}
    if delay_s <= 0:
        return httpx.Response(200, headers=sse_headers, content="".join(frames).encode())
    return httpx.Response(
        200, headers=sse_headers, stream=SlowFrames([f.encode() for f in frames], delay_s)
    )
