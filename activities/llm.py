"""The LLM call as a Temporal activity, over httpx (CONTRACT §4, §8).

One activity execution is one model round trip. It reads the transcript from the
:class:`~activities.store.ConversationStore` (the workflow sends only new messages and the
committed length), calls ``POST {base_url}/chat/completions`` (OpenAI wire style), stores the
reply and returns it with its usage.

Retries belong to Temporal alone: the httpx client never retries; errors map to
``ApplicationError`` types the workflow's retry policy understands:

* ``LlmUnavailable`` (retryable): network errors, 429, 500, 502, 503, 504; a whole-second
  ``Retry-After`` header becomes the next retry delay.
* ``LlmRequestRejected`` (non-retryable): any other 4xx/5xx, with the status and body.
* ``MalformedLlmResponse`` (non-retryable): a 200 whose body is not a chat completion.

API keys are read from the environment at call time and never logged or returned.
"""

from __future__ import annotations

import json
import os
from collections.abc import Callable
from datetime import timedelta
from typing import Any

import httpx
from pydantic import BaseModel, ConfigDict, Field
from temporalio import activity
from temporalio.exceptions import ApplicationError

from activities.heartbeat import heartbeating
from activities.store import ConversationStore, StoreError
from workflows.models import LlmCallInput, LlmCallResult, Message, ToolCall, Usage, WireStyle
from workflows.turn import LLM_CALL_ACTIVITY

ToolSchemas = Callable[[list[str], list[str]], list[dict[str, Any]]]
"""(tool names, team) -> OpenAI-style tool schemas."""

RETRYABLE_STATUS = frozenset({429, 500, 502, 503, 504})
"""HTTP statuses retried through the activity retry policy (CONTRACT §4)."""

HEARTBEAT_EVERY_S = 1.0
"""Seconds between heartbeats while a request is in flight, so a cancel lands within ~1 s."""


class LlmConfig(BaseModel):
    """Where and how a worker calls its model.

    Attributes:
        base_url: endpoint root; the call goes to ``{base_url}/chat/completions``.
        model: the model used when an AgentDef says ``"inherit"``.
        style: wire style (only ``openai`` is implemented so far).
        api_key_env: name of the environment variable holding the API key; read at call
            time, never stored. A missing variable sends no ``Authorization`` header.
        request_timeout_ms: HTTP timeout of one attempt, in ms.
        max_tokens: ``max_tokens`` sent with each request (None: not sent).
    """

    model_config = ConfigDict(extra="forbid")

    base_url: str = Field(min_length=1)
    model: str = Field(min_length=1)
    style: WireStyle = "openai"
    api_key_env: str = "OPENAI_API_KEY"
    request_timeout_ms: int = Field(default=120_000, ge=1)
    max_tokens: int | None = Field(default=None, ge=1)

    @classmethod
    def from_env(cls, **overrides: Any) -> LlmConfig | None:
        """Build from ``OPENAI_BASE_URL`` and ``TNX_MODEL`` (or ``OPENAI_MODEL``).

        Returns:
            The config, or None when ``OPENAI_BASE_URL`` is not set and no ``base_url``
            override is given.
        """
        base_url = overrides.pop("base_url", None) or os.environ.get("OPENAI_BASE_URL")
        if not base_url:
            return None
        model = (
            overrides.pop("model", None)
            or os.environ.get("TNX_MODEL")
            or os.environ.get("OPENAI_MODEL")
            or "gpt-4o-mini"
        )
        return cls(base_url=base_url, model=model, **overrides)


def to_openai_message(m: Message) -> dict[str, Any]:
    """Our wire-neutral message as an OpenAI chat message."""
    out: dict[str, Any] = {"role": m.role, "content": m.content}
    if m.tool_calls:
        out["tool_calls"] = [
            {"id": c.id, "type": "function", "function": {"name": c.name, "arguments": c.arguments}}
            for c in m.tool_calls
        ]
    if m.tool_call_id is not None:
        out["tool_call_id"] = m.tool_call_id
    return out


def parse_openai_completion(body: Any) -> tuple[Message, Usage]:
    """Parse an OpenAI chat completion body.

    Raises:
        ValueError: the body is not a chat completion (no ``choices[0].message``, or ill-typed
            fields).
    """
    if not isinstance(body, dict):
        raise ValueError("body is not a JSON object")
    choices = body.get("choices")
    if not isinstance(choices, list) or not choices or not isinstance(choices[0], dict):
        raise ValueError("no choices[0]")
    msg = choices[0].get("message")
    if not isinstance(msg, dict):
        raise ValueError("no choices[0].message")
    content = msg.get("content")
    if content is not None and not isinstance(content, str):
        raise ValueError("choices[0].message.content is not a string")
    calls: list[ToolCall] = []
    for raw in msg.get("tool_calls") or []:
        fn = raw.get("function") if isinstance(raw, dict) else None
        if not isinstance(fn, dict) or not isinstance(fn.get("name"), str):
            raise ValueError("a tool call has no function.name")
        args = fn.get("arguments")
        calls.append(
            ToolCall(
                id=str(raw.get("id") or f"call_{len(calls)}"),
                name=fn["name"],
                arguments=args if isinstance(args, str) else json.dumps(args or {}),
            )
        )
    usage_raw = body.get("usage") or {}
    if not isinstance(usage_raw, dict):
        raise ValueError("usage is not an object")
    usage = Usage(
        prompt_tokens=int(usage_raw.get("prompt_tokens") or 0),
        completion_tokens=int(usage_raw.get("completion_tokens") or 0),
        total_tokens=int(
            usage_raw.get("total_tokens")
            or (usage_raw.get("prompt_tokens") or 0) + (usage_raw.get("completion_tokens") or 0)
        ),
    )
    message = Message(role="assistant", content=content, tool_calls=calls or None)
    return message, usage


def retry_after_seconds(value: str | None) -> int | None:
    """``Retry-After`` as whole seconds (0 included); any other form is ignored (CONTRACT §4)."""
    if value is None:
        return None
    value = value.strip()
    return int(value) if value.isdigit() else None


class LlmActivities:
    """Owns the HTTP client and the store; registers ``tnx.llm_call`` on a worker.

    Args:
        config: the endpoint and model.
        store: where transcripts live.
        transport: an ``httpx.AsyncBaseTransport`` to use instead of the network (tests pass
            ``httpx.MockTransport``). httpx's own retries stay off either way.
        tool_schemas: builds the ``tools`` payload from tool names and a team (the
            registry's ``RegistryActivities.tool_schemas``).
    """

    def __init__(
        self,
        config: LlmConfig,
        store: ConversationStore,
        *,
        transport: httpx.AsyncBaseTransport | None = None,
        tool_schemas: ToolSchemas | None = None,
    ) -> None:
        if config.style != "openai":
            raise ValueError(f"wire style {config.style!r} is not implemented yet (only 'openai')")
        self.config = config
        self.store = store
        self.tool_schemas = tool_schemas
        self._http = httpx.AsyncClient(
            transport=transport or httpx.AsyncHTTPTransport(retries=0),
            timeout=httpx.Timeout(config.request_timeout_ms / 1000),
        )

    async def aclose(self) -> None:
        """Close the HTTP client."""
        await self._http.aclose()

    @activity.defn(name=LLM_CALL_ACTIVITY)
    async def llm_call(self, inp: LlmCallInput) -> LlmCallResult:
        """One LLM round trip over the stored transcript plus ``inp.new_messages``.

        Raises:
            ApplicationError: typed as described in the module docstring.
        """
        if inp.style not in (None, "openai"):
            raise ApplicationError(
                f"wire style {inp.style!r} is not implemented yet",
                type="LlmRequestRejected",
                non_retryable=True,
            )
        try:
            stored_len = await self.store.write(
                inp.conv_id, inp.base_len, inp.new_messages, fence=inp.fence
            )
            transcript = await self.store.read(inp.conv_id, stored_len)
        except StoreError as err:
            raise ApplicationError(str(err), type="StoreError", non_retryable=True) from err
        model = self.config.model if inp.model == "inherit" else inp.model
        payload: dict[str, Any] = {
            "model": model,
            "messages": [to_openai_message(m) for m in transcript],
        }
        if self.config.max_tokens is not None:
            payload["max_tokens"] = self.config.max_tokens
        if (inp.tools or inp.team) and self.tool_schemas is not None:
            payload["tools"] = self.tool_schemas(inp.tools, inp.team)
        async with heartbeating():
            response = await self._post("/chat/completions", payload)
        try:
            message, usage = parse_openai_completion(response.json())
        except ValueError as err:  # json.JSONDecodeError is a ValueError too
            raise ApplicationError(
                f"malformed LLM response from {response.request.url}: {err}; "
                f"body starts: {response.text[:300]!r}",
                type="MalformedLlmResponse",
                non_retryable=True,
            ) from err
        try:
            new_len = await self.store.write(inp.conv_id, stored_len, [message], fence=inp.fence)
        except StoreError as err:
            raise ApplicationError(str(err), type="StoreError", non_retryable=True) from err
        return LlmCallResult(message=message, usage=usage, stored_len=new_len)

    async def _post(self, path: str, payload: dict[str, Any]) -> httpx.Response:
        url = self.config.base_url.rstrip("/") + path
        headers = {"content-type": "application/json"}
        key = os.environ.get(self.config.api_key_env)
        if key:
            headers["authorization"] = f"Bearer {key}"
        try:
            response = await self._http.post(url, json=payload, headers=headers)
        except httpx.TransportError as err:
            raise ApplicationError(
                f"LLM endpoint unreachable at {url}: {type(err).__name__}: {err}",
                type="LlmUnavailable",
            ) from err
        if response.status_code in RETRYABLE_STATUS:
            delay = retry_after_seconds(response.headers.get("retry-after"))
            raise ApplicationError(
                f"LLM endpoint {url} answered {response.status_code}: {response.text[:500]}",
                type="LlmUnavailable",
                next_retry_delay=timedelta(seconds=delay) if delay is not None else None,
            )
        if response.status_code >= 400:
            raise ApplicationError(
                f"LLM endpoint {url} rejected the request with {response.status_code}: "
                f"{response.text[:2000]}",
                type="LlmRequestRejected",
                non_retryable=True,
            )
        return response
