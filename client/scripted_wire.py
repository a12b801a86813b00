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
    if style == "anthropic":
        message = _anthropic_message(reply)
        if not stream:
            return httpx.Response(200, json=message)
        frames = [
            f"event: {name}\ndata: {json.dumps(data)}\n\n"
            for name, data in _anthropic_events(message)
        ]
        return _sse(frames, chunk_delay_s)
    if not stream:
        return httpx.Response(200, json=reply)
    chunks = _openai_chunks(reply)
    frames = [f"data: {json.dumps(c)}\n\n" for c in chunks] + ["data: [DONE]\n\n"]
    return _sse(frames, chunk_delay_s)


def _anthropic_message(reply: dict[str, Any]) -> dict[str, Any]:
    """An OpenAI-shaped reply as an Anthropic Messages API response (not streamed)."""
    message = reply["choices"][0]["message"]
    usage_raw = reply.get("usage") or {}
    content = message.get("content") or ""
    calls = message.get("tool_calls") or []
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
    return {
        "id": "msg_scripted",
        "type": "message",
        "role": "assistant",
        "content": blocks,
        "stop_reason": "tool_use" if calls else "end_turn",
        "usage": _anthropic_usage(usage_raw),
    }


def _anthropic_usage(raw: dict[str, Any]) -> dict[str, int]:
    """OpenAI usage in Anthropic's shape: its cached tokens (``prompt_tokens_details
    .cached_tokens``, part of ``prompt_tokens``) become ``cache_read_input_tokens``, apart
    from ``input_tokens`` as Anthropic reports them."""
    cached = (raw.get("prompt_tokens_details") or {}).get("cached_tokens", 0)
    usage = {
        "input_tokens": raw.get("prompt_tokens", 0) - cached,
        "output_tokens": raw.get("completion_tokens", 0),
    }
    if cached:
        usage["cache_read_input_tokens"] = cached
    return usage


def _anthropic_events(message: dict[str, Any]) -> list[tuple[str, dict[str, Any]]]:
    """The SSE events (name, data) that stream an Anthropic ``message``: its start, each
    content block's start, deltas and stop, the stop reason and the usage."""
    usage = message["usage"]
    start = {
        "id": message["id"],
        "type": "message",
        "role": "assistant",
        "content": [],
        "usage": {**usage, "output_tokens": 0},
    }
    events: list[tuple[str, dict[str, Any]]] = [
        ("message_start", {"type": "message_start", "message": start})
    ]
    for index, block in enumerate(message["content"]):
        events += _anthropic_block_events(index, block)
    delta = {
        "type": "message_delta",
        "delta": {"stop_reason": message["stop_reason"]},
        "usage": {"output_tokens": usage["output_tokens"]},
    }
    events.append(("message_delta", delta))
    events.append(("message_stop", {"type": "message_stop"}))
    return events


def _anthropic_block_events(index: int, block: dict[str, Any]) -> list[tuple[str, dict[str, Any]]]:
    """The SSE events of one content block: start, its text or tool input in pieces, stop."""
    if block["type"] == "text":
        opening: dict[str, Any] = {"type": "text", "text": ""}
        deltas = [{"type": "text_delta", "text": piece} for piece in _pieces(block["text"])]
    else:
        opening = {"type": "tool_use", "id": block["id"], "name": block["name"], "input": {}}
        deltas = [
            {"type": "input_json_delta", "partial_json": piece}
            for piece in _pieces(json.dumps(block["input"]))
        ]
    start = {"type": "content_block_start", "index": index, "content_block": opening}
    events: list[tuple[str, dict[str, Any]]] = [("content_block_start", start)]
    events += [
        ("content_block_delta", {"type": "content_block_delta", "index": index, "delta": d})
        for d in deltas
    ]
    events.append(("content_block_stop", {"type": "content_block_stop", "index": index}))
    return events


def _openai_chunks(reply: dict[str, Any]) -> list[dict[str, Any]]:
    """The chat-completion chunks that stream an OpenAI ``reply``: the role, the text and
    each tool call in pieces, the finish reason, the usage (the model on every chunk)."""
    message = reply["choices"][0]["message"]
    content = message.get("content") or ""
    calls = message.get("tool_calls") or []

    def chunk(delta: dict[str, Any], **extra: Any) -> dict[str, Any]:
        return {"choices": [{"index": 0, "delta": delta, **extra}]}

    chunks = [chunk({"role": "assistant"})]
    chunks += [chunk({"content": piece}) for piece in _pieces(content)]
    for i, c in enumerate(calls):
        name = c["function"]["name"]
        call = {"index": i, "id": c["id"], "type": "function"}
        chunks.append(
            chunk({"tool_calls": [{**call, "function": {"name": name, "arguments": ""}}]})
        )
        chunks += [
            chunk({"tool_calls": [{"index": i, "function": {"arguments": piece}}]})
            for piece in _pieces(c["function"]["arguments"])
        ]
    chunks.append(chunk({}, finish_reason="tool_calls" if calls else "stop"))
    chunks.append({"choices": [], "usage": reply.get("usage") or {}})
    if reply.get("model"):  # the model that answered, on every chunk as OpenAI sends it
        chunks = [{**c, "model": reply["model"]} for c in chunks]
    return chunks


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
