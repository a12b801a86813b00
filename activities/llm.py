"""The LLM call as a Temporal activity, over httpx (CONTRACT §4, §8).

One activity execution is one model round trip. It reads the transcript from the
``ConversationStore`` (``store.py``) (the workflow sends only new messages and the
committed length), calls the model in the worker's wire style (``openai`` or ``anthropic``,
overridable per AgentDef; see ``wire.py``), streaming the response (SSE) while it
heartbeats, so a long completion can be cancelled within a second, then stores the assembled
reply and returns it with its usage.

Retries belong to Temporal alone: the httpx client never retries; errors map to
``ApplicationError`` types the workflow's retry policy understands:

* ``LlmUnavailable`` (retryable): network errors, 429, 500, 502, 503, 504; a whole-second
  ``Retry-After`` header becomes the next retry delay.
* ``LlmRequestRejected`` (non-retryable): any other 4xx/5xx, with the status and body.
* ``MalformedLlmResponse`` (non-retryable): a 200 whose body or stream is not a response of
  the wire style.

API keys are read from the environment at call time and never logged or returned.
"""

from __future__ import annotations

import asyncio
import contextlib
import os
from collections.abc import Callable
from datetime import timedelta
from typing import Any

import httpx
from pydantic import BaseModel, ConfigDict, Field
from temporalio import activity
from temporalio.exceptions import ApplicationError

from toolnexus_temporal.activities import wire
from toolnexus_temporal.activities.heartbeat import heartbeating
from toolnexus_temporal.activities.store import ConversationStore, StoreError
from toolnexus_temporal.workflows.messages import LlmCallInput, LlmCallResult
from toolnexus_temporal.workflows.models import Message, Usage, WireStyle
from toolnexus_temporal.workflows.names import LLM_CALL_ACTIVITY

ToolSchemas = Callable[[list[str], list[str]], list[dict[str, Any]]]
"""(tool names, team) -> OpenAI-style tool schemas."""

RETRYABLE_STATUS = frozenset({429, 500, 502, 503, 504})
"""HTTP statuses retried through the activity retry policy (CONTRACT §4)."""

HEARTBEAT_EVERY_S = 1.0
"""Seconds between heartbeats while a request is in flight, so a cancel lands within ~1 s."""


class LlmConfig(BaseModel):
    """Where and how a worker calls its model.

    Attributes:
        base_url: endpoint root: ``{base_url}/chat/completions`` (openai) or
            ``{base_url}/v1/messages`` (anthropic).
        model: the model used when an AgentDef says ``"inherit"``.
        style: the default wire style; an AgentDef's ``style`` overrides it.
        api_key_env: name of the environment variable holding the API key; read at call
            time, never stored or logged. Unset: no key header is sent.
        request_timeout_ms: HTTP timeout of one attempt (connect, and between two bytes of a
            stream), in ms.
        max_tokens: ``max_tokens`` per request (None: not sent for openai, 4096 for
            anthropic).
        stream: stream responses (SSE); a provider that answers plain JSON is accepted too.
    """

    model_config = ConfigDict(extra="forbid")

    base_url: str = Field(min_length=1)
    model: str = Field(min_length=1)
    style: WireStyle = "openai"
    api_key_env: str = "OPENAI_API_KEY"
    request_timeout_ms: int = Field(default=120_000, ge=1)
    max_tokens: int | None = Field(default=None, ge=1)
    stream: bool = True

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
        max_concurrent: HTTP calls in flight at once through this object (the runtime-wide
            LLM cap, CONTRACT §6); None for no cap. Only the HTTP call holds a slot; a call
            waiting for one heartbeats, so an interrupt cancels it.

    Raises:
        ValueError: ``max_concurrent`` below 1.
    """

    def __init__(
        self,
        config: LlmConfig,
        store: ConversationStore,
        *,
        transport: httpx.AsyncBaseTransport | None = None,
        tool_schemas: ToolSchemas | None = None,
        max_concurrent: int | None = None,
    ) -> None:
        if max_concurrent is not None and max_concurrent < 1:
            raise ValueError(f"max_concurrent must be at least 1, got {max_concurrent}")
        self._slots = asyncio.Semaphore(max_concurrent) if max_concurrent else None
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
        style: WireStyle = inp.style or self.config.style
        try:
            stored_len = await self.store.write(
                inp.conv_id, inp.base_len, inp.new_messages, fence=inp.fence
            )
            transcript = await self.store.read(inp.conv_id, stored_len)
        except StoreError as err:
            raise ApplicationError(str(err), type="StoreError", non_retryable=True) from err
        tools = (
            self.tool_schemas(inp.tools, inp.team)
            if (inp.tools or inp.team) and self.tool_schemas is not None
            else []
        )
        body = wire.request_body(
            style,
            model=self.config.model if inp.model == "inherit" else inp.model,
            messages=transcript,
            tools=tools,
            max_tokens=self.config.max_tokens,
            stream=self.config.stream,
        )
        async with heartbeating(HEARTBEAT_EVERY_S):
            async with self._slots or contextlib.nullcontext():
                message, usage = await self._call(style, body)
        try:
            new_len = await self.store.write(inp.conv_id, stored_len, [message], fence=inp.fence)
        except StoreError as err:
            raise ApplicationError(str(err), type="StoreError", non_retryable=True) from err
        return LlmCallResult(message=message, usage=usage, stored_len=new_len)

    async def _call(self, style: WireStyle, body: dict[str, Any]) -> tuple[Message, Usage]:
        """POST the request; read an SSE stream or a plain JSON body."""
        url = wire.endpoint(style, self.config.base_url)
        request = self._http.build_request(
            "POST",
            url,
            json=body,
            headers=wire.headers(style, os.environ.get(self.config.api_key_env)),
        )
        try:
            response = await self._http.send(request, stream=True)
        except httpx.TransportError as err:
            raise ApplicationError(
                f"LLM endpoint unreachable at {url}: {type(err).__name__}: {err}",
                type="LlmUnavailable",
            ) from err
        try:
            await self._check_status(url, response)
            if response.headers.get("content-type", "").startswith("text/event-stream"):
                return await self._read_stream(style, url, response)
            await response.aread()
            try:
                return wire.parse_response(style, response.json())
            except ValueError as err:  # WireError, or JSON that does not parse
                raise _malformed(url, err, response.text) from err
        except httpx.TransportError as err:
            raise ApplicationError(
                f"LLM endpoint {url} broke off: {type(err).__name__}: {err}",
                type="LlmUnavailable",
            ) from err
        finally:
            await response.aclose()

    async def _check_status(self, url: str, response: httpx.Response) -> None:
        if response.status_code < 400:
            return
        await response.aread()
        if response.status_code in RETRYABLE_STATUS:
            delay = retry_after_seconds(response.headers.get("retry-after"))
            raise ApplicationError(
                f"LLM endpoint {url} answered {response.status_code}: {response.text[:500]}",
                type="LlmUnavailable",
                next_retry_delay=timedelta(seconds=delay) if delay is not None else None,
            )
        raise ApplicationError(
            f"LLM endpoint {url} rejected the request with {response.status_code}: "
            f"{response.text[:2000]}",
            type="LlmRequestRejected",
            non_retryable=True,
        )

    async def _read_stream(
        self, style: WireStyle, url: str, response: httpx.Response
    ) -> tuple[Message, Usage]:
        assembler = wire.StreamAssembler(style)
        data: list[str] = []
        try:
            async for line in response.aiter_lines():
                if line.startswith("data:"):
                    data.append(line[5:].removeprefix(" "))
                elif not line and data:
                    assembler.feed("\n".join(data))
                    data = []
            if data:
                assembler.feed("\n".join(data))
            return assembler.result()
        except wire.WireError as err:
            raise _malformed(url, err, "") from err


def _malformed(url: str, err: Exception, body: str) -> ApplicationError:
    detail = f"; body starts: {body[:300]!r}" if body else ""
    return ApplicationError(
        f"malformed LLM response from {url}: {err}{detail}",
        type="MalformedLlmResponse",
        non_retryable=True,
    )
