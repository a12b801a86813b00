"""The two LLM wire styles (CONTRACT §4): request building, streamed (SSE) and plain
response parsing, usage mapping. Pure functions over JSON; no I/O.

* ``openai``: ``POST {base}/chat/completions``, ``Authorization: Bearer``, tool results as
  ``tool`` messages, usage ``prompt_tokens`` / ``completion_tokens`` / ``total_tokens``.
* ``anthropic``: ``POST {base}/v1/messages``, ``x-api-key``, ``anthropic-version:
  2023-06-01``, ``max_tokens`` 4096 by default, system prompt top-level, tool results as
  ``tool_result`` blocks in one user message, usage ``input_tokens`` / ``output_tokens``.
"""

from __future__ import annotations

import json
from collections.abc import Iterable
from dataclasses import dataclass, field
from typing import Any

from toolnexus_temporal.workflows.contract.models import Message, ToolCall, Usage, WireStyle

ANTHROPIC_VERSION = "2023-06-01"
"""The ``anthropic-version`` header value (CONTRACT §4)."""

ANTHROPIC_DEFAULT_MAX_TOKENS = 4096
"""``max_tokens`` sent in the Anthropic style when none is configured (CONTRACT §4)."""


class WireError(ValueError):
    """A provider response that does not fit its wire style."""


def endpoint(style: WireStyle, base_url: str) -> str:
    """The request URL for a style."""
    base = base_url.rstrip("/")
    return f"{base}/chat/completions" if style == "openai" else f"{base}/v1/messages"


def headers(style: WireStyle, api_key: str | None) -> dict[str, str]:
    """Request headers; the key is only ever placed here, never logged or returned."""
    out = {"content-type": "application/json", "accept": "text/event-stream"}
    if style == "openai":
        if api_key:
            out["authorization"] = f"Bearer {api_key}"
    else:
        out["anthropic-version"] = ANTHROPIC_VERSION
        if api_key:
            out["x-api-key"] = api_key
    return out


# ------------------------------------------------------------------ requests


def request_body(
    style: WireStyle,
    *,
    model: str,
    messages: list[Message],
    tools: list[dict[str, Any]],
    max_tokens: int | None,
    stream: bool,
) -> dict[str, Any]:
    """The JSON body for one call. ``tools`` are OpenAI-style function schemas."""
    if style == "openai":
        body: dict[str, Any] = {"model": model, "messages": [_openai_message(m) for m in messages]}
        if tools:
            body["tools"] = tools
        if max_tokens is not None:
            body["max_tokens"] = max_tokens
        if stream:
            body["stream"] = True
            body["stream_options"] = {"include_usage": True}
        return body
    system = "\n\n".join(m.content or "" for m in messages if m.role == "system")
    body = {
        "model": model,
        "max_tokens": max_tokens or ANTHROPIC_DEFAULT_MAX_TOKENS,
        "messages": anthropic_messages(messages),
    }
    if system:
        body["system"] = system
    if tools:
        body["tools"] = [
            {
                "name": t["function"]["name"],
                "description": t["function"].get("description", ""),
                "input_schema": t["function"].get("parameters", {"type": "object"}),
            }
            for t in tools
        ]
    if stream:
        body["stream"] = True
    return body


def _openai_message(m: Message) -> dict[str, Any]:
    out: dict[str, Any] = {"role": m.role, "content": m.content}
    if m.tool_calls:
        out["tool_calls"] = [
            {"id": c.id, "type": "function", "function": {"name": c.name, "arguments": c.arguments}}
            for c in m.tool_calls
        ]
    if m.tool_call_id is not None:
        out["tool_call_id"] = m.tool_call_id
    return out


def anthropic_messages(messages: Iterable[Message]) -> list[dict[str, Any]]:
    """Our transcript as Anthropic messages: system messages dropped (sent top-level),
    tool results as ``tool_result`` blocks, consecutive same-role messages merged so roles
    alternate."""
    out: list[dict[str, Any]] = []
    for m in messages:
        if m.role == "system":
            continue
        if m.role == "tool":
            role = "user"
            blocks: list[dict[str, Any]] = [
                {"type": "tool_result", "tool_use_id": m.tool_call_id, "content": m.content or ""}
            ]
        elif m.role == "assistant":
            role = "assistant"
            blocks = [{"type": "text", "text": m.content}] if m.content else []
            for call in m.tool_calls or []:
                blocks.append(
                    {
                        "type": "tool_use",
                        "id": call.id,
                        "name": call.name,
                        "input": _json_object(call.arguments),
                    }
                )
        else:
            role = "user"
            blocks = [{"type": "text", "text": m.content or ""}]
        if out and out[-1]["role"] == role:
            out[-1]["content"].extend(blocks)
        else:
            out.append({"role": role, "content": blocks})
    return out


def _json_object(text: str) -> dict[str, Any]:
    try:
        value = json.loads(text or "{}")
    except ValueError:
        return {"_raw": text}
    return value if isinstance(value, dict) else {"_value": value}


# ------------------------------------------------------------------ plain responses


def parse_response(style: WireStyle, body: Any) -> tuple[Message, Usage]:
    """Parse a complete (non-streamed) response.

    Raises:
        WireError: the body is not a response of that style.
    """
    if not isinstance(body, dict):
        raise WireError("body is not a JSON object")
    return _parse_openai(body) if style == "openai" else _parse_anthropic(body)


def response_meta(style: WireStyle, body: Any) -> tuple[str | None, list[str]]:
    """The model that answered and the finish reasons of a complete response (OpenAI:
    ``model``, ``choices[].finish_reason``; Anthropic: ``model``, ``stop_reason``), for
    tracing; absent values are None / empty, never an error."""
    if not isinstance(body, dict):
        return None, []
    model = body.get("model") if isinstance(body.get("model"), str) else None
    if style == "openai":
        choices: list[Any] = body.get("choices") or []
        choices = choices if isinstance(choices, list) else []
        reasons = [
            str(c["finish_reason"])
            for c in choices
            if isinstance(c, dict) and c.get("finish_reason")
        ]
    else:
        reasons = [str(body["stop_reason"])] if body.get("stop_reason") else []
    return model, reasons


def _parse_openai(body: dict[str, Any]) -> tuple[Message, Usage]:
    choices = body.get("choices")
    if not isinstance(choices, list) or not choices or not isinstance(choices[0], dict):
        raise WireError("no choices[0]")
    msg = choices[0].get("message")
    if not isinstance(msg, dict):
        raise WireError("no choices[0].message")
    content = msg.get("content")
    if content is not None and not isinstance(content, str):
        raise WireError("choices[0].message.content is not a string")
    calls: list[ToolCall] = []
    for raw in msg.get("tool_calls") or []:
        fn = raw.get("function") if isinstance(raw, dict) else None
        if not isinstance(fn, dict) or not isinstance(fn.get("name"), str):
            raise WireError("a tool call has no function.name")
        args = fn.get("arguments")
        calls.append(
            ToolCall(
                id=str(raw.get("id") or f"call_{len(calls)}"),
                name=fn["name"],
                arguments=args if isinstance(args, str) else json.dumps(args or {}),
            )
        )
    return (
        Message(role="assistant", content=content, tool_calls=calls or None),
        openai_usage(body.get("usage")),
    )


def openai_usage(raw: Any) -> Usage:
    """OpenAI usage → Usage (total defaults to prompt + completion). ``prompt_tokens``
    already holds the cached tokens (``prompt_tokens_details.cached_tokens``): they are kept
    as the part ``cached_tokens`` of it, never added again."""
    if raw is None:
        return Usage()
    if not isinstance(raw, dict):
        raise WireError("usage is not an object")
    prompt = int(raw.get("prompt_tokens") or 0)
    completion = int(raw.get("completion_tokens") or 0)
    total = int(raw.get("total_tokens") or prompt + completion)
    details = raw.get("prompt_tokens_details")
    cached = int(details.get("cached_tokens") or 0) if isinstance(details, dict) else 0
    return Usage(
        prompt_tokens=prompt,
        completion_tokens=completion,
        total_tokens=total,
        cached_tokens=min(cached, prompt),
    )


def anthropic_usage(raw: Any, base: Usage | None = None) -> Usage:
    """Anthropic usage → Usage; fields absent from ``raw`` keep ``base``'s values (streams
    report them in two events). Anthropic's ``input_tokens`` leaves out the cache's:
    ``cache_read_input_tokens`` and ``cache_creation_input_tokens`` are separate, so the
    prompt is the three added once, and the two cache parts are kept as ``cached_tokens``
    and ``cache_write_tokens`` of it."""
    base = base or Usage()
    if not isinstance(raw, dict):
        return base
    base_input = base.prompt_tokens - base.cached_tokens - base.cache_write_tokens
    fresh = int(raw.get("input_tokens", base_input) or 0)
    read = int(raw.get("cache_read_input_tokens", base.cached_tokens) or 0)
    written = int(raw.get("cache_creation_input_tokens", base.cache_write_tokens) or 0)
    prompt = fresh + read + written
    completion = int(raw.get("output_tokens", base.completion_tokens) or 0)
    return Usage(
        prompt_tokens=prompt,
        completion_tokens=completion,
        total_tokens=prompt + completion,
        cached_tokens=read,
        cache_write_tokens=written,
    )


def _parse_anthropic(body: dict[str, Any]) -> tuple[Message, Usage]:
    content = body.get("content")
    if body.get("type") == "error" or not isinstance(content, list):
        raise WireError("no content list")
    texts: list[str] = []
    calls: list[ToolCall] = []
    for block in content:
        if not isinstance(block, dict):
            raise WireError("a content block is not an object")
        if block.get("type") == "text":
            texts.append(str(block.get("text") or ""))
        elif block.get("type") == "tool_use":
            if not isinstance(block.get("name"), str):
                raise WireError("a tool_use block has no name")
            calls.append(
                ToolCall(
                    id=str(block.get("id") or f"toolu_{len(calls)}"),
                    name=block["name"],
                    arguments=json.dumps(block.get("input") or {}),
                )
            )
    text = "".join(texts)
    return (
        Message(role="assistant", content=text or None, tool_calls=calls or None),
        anthropic_usage(body.get("usage")),
    )


# ------------------------------------------------------------------ streams


@dataclass
class StreamAssembler:
    """Assemble a streamed (SSE) response into one message, event by event.

    Feed each SSE ``data:`` payload (and, for Anthropic, the event name) to :meth:`feed`;
    :meth:`result` gives the assembled message and usage.
    """

    style: WireStyle
    text: list[str] = field(default_factory=list)
    calls: dict[int, dict[str, Any]] = field(default_factory=dict)
    usage: Usage = field(default_factory=Usage)
    done: bool = False
    events: int = 0
    model: str | None = None
    finish_reasons: list[str] = field(default_factory=list)

    def feed(self, data: str) -> None:
        """One SSE data payload.

        Raises:
            WireError: the payload is not JSON of the style, or an error event.
        """
        if data.strip() == "[DONE]":
            self.done = True
            return
        try:
            event = json.loads(data)
        except ValueError as err:
            raise WireError(f"SSE data is not JSON: {data[:200]!r}") from err
        if not isinstance(event, dict):
            raise WireError("SSE data is not a JSON object")
        self.events += 1
        if self.style == "openai":
            self._feed_openai(event)
        else:
            self._feed_anthropic(event)

    def _feed_openai(self, event: dict[str, Any]) -> None:
        if "error" in event:
            raise WireError(f"provider error in stream: {event['error']}")
        if event.get("usage"):
            self.usage = openai_usage(event["usage"])
        self.model = event.get("model") or self.model
        for choice in event.get("choices") or []:
            if choice.get("finish_reason"):
                self.finish_reasons.append(str(choice["finish_reason"]))
            delta = choice.get("delta") or {}
            if isinstance(delta.get("content"), str):
                self.text.append(delta["content"])
            for part in delta.get("tool_calls") or []:
                slot = self.calls.setdefault(
                    int(part.get("index", len(self.calls))), {"id": "", "name": "", "args": ""}
                )
                slot["id"] = part.get("id") or slot["id"]
                fn = part.get("function") or {}
                slot["name"] = fn.get("name") or slot["name"]
                slot["args"] += fn.get("arguments") or ""

    def _feed_anthropic(self, event: dict[str, Any]) -> None:
        kind = event.get("type")
        if kind == "error":
            raise WireError(f"provider error in stream: {event.get('error')}")
        if kind == "message_start":
            self.usage = anthropic_usage((event.get("message") or {}).get("usage"))
            self.model = (event.get("message") or {}).get("model") or self.model
        elif kind == "content_block_start":
            block = event.get("content_block") or {}
            index = int(event.get("index", len(self.calls)))
            if block.get("type") == "tool_use":
                self.calls[index] = {
                    "id": block.get("id", ""),
                    "name": block.get("name", ""),
                    "args": "",
                }
            elif block.get("type") == "text" and block.get("text"):
                self.text.append(block["text"])
        elif kind == "content_block_delta":
            delta = event.get("delta") or {}
            if delta.get("type") == "text_delta":
                self.text.append(str(delta.get("text") or ""))
            elif delta.get("type") == "input_json_delta":
                index = int(event.get("index", 0))
                slot = self.calls.setdefault(index, {"id": "", "name": "", "args": ""})
                slot["args"] += str(delta.get("partial_json") or "")
        elif kind == "message_delta":
            self.usage = anthropic_usage(event.get("usage"), self.usage)
            if (event.get("delta") or {}).get("stop_reason"):
                self.finish_reasons.append(str(event["delta"]["stop_reason"]))
        elif kind == "message_stop":
            self.done = True

    def result(self) -> tuple[Message, Usage]:
        """The assembled assistant message and usage.

        Raises:
            WireError: the stream carried nothing at all.
        """
        if not self.events:
            raise WireError("the stream carried no events")
        calls = [
            ToolCall(
                id=slot["id"] or f"call_{index}",
                name=slot["name"],
                arguments=slot["args"] or "{}",
            )
            for index, slot in sorted(self.calls.items())
        ]
        if any(not c.name for c in calls):
            raise WireError("a streamed tool call has no name")
        text = "".join(self.text)
        return Message(role="assistant", content=text or None, tool_calls=calls or None), self.usage
