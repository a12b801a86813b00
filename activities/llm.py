"""The LLM call as a Temporal activity, over httpx (CONTRACT §4, §8).

One activity execution is one model round trip. Under a context policy
(``LlmCallInput.context``) the model is sent the view ``workflows/contract/context.py`` builds
from the whole stored transcript and the summary the workflow passes; ``tnx.llm_summarize``
(``LlmActivities.llm_summarize``) writes that summary. It reads the transcript from the
``ConversationStore`` (``store.py``) (the workflow sends only new messages and the
committed length), calls the model in the worker's wire style (``openai`` or ``anthropic``,
overridable per AgentDef; see ``wire.py``), streaming the response (SSE) while it
heartbeats, so a long completion can be cancelled within a second, then stores the assembled
reply and returns it with its usage. The text streamed so far rides on the heartbeats
(``live.py``: a bounded tail, never in workflow history) for hosts to follow
(``client/stream.py``).

Retries belong to Temporal alone: the httpx client never retries; errors map to
``ApplicationError`` types the workflow's retry policy understands:

* ``LlmUnavailable`` (retryable): network errors, 429, 500, 502, 503, 504; a whole-second
  ``Retry-After`` header becomes the next retry delay.
* ``LlmRequestRejected`` (non-retryable): any other 4xx/5xx, with the status and body.
* ``MalformedLlmResponse`` (non-retryable): a 200 whose body or stream is not a response of
  the wire style.

* ``LlmWallDeadline`` (non-retryable): the handle's wall deadline (``max_wall_ms``) passed:
  no call starts past it, and a call in flight is aborted at it.
* ``LlmReplyTooLarge`` (non-retryable): a reply whose tool calls alone do not fit a payload.
* ``StoreUnavailable`` (retryable): the conversation store stayed unavailable until shortly
  before the attempt's timeout (below).
* ``StoreError`` (non-retryable): the store refused the operation, or lost committed messages.

Idempotent per handle and call number (issue 12, item 6): the call's new messages, the reply
and the completion (message, usage, stored length) are written to the store in one
transaction, the call's only write (issue 35), before the activity returns, keyed by
``(conv_id, fence)``; nothing is written before the model answers, so an attempt that dies
first leaves nothing behind and its retry sends the same messages again; a retry of the
same call (after a worker crash, a lost completion, a timeout) returns the recorded
completion without calling the model, so the provider answers once and the usage is
counted once. The whole activity heartbeats (store I/O too). A reply too large for a
payload is returned shortened (the full reply stays in the store, which is what the model
sees next).

A store outage (a PostgreSQL restart or failover, issue 23 item 2) costs a delay, not a second
payment: a store operation that finds the store unavailable runs again with backoff, while the
heartbeats go on, until ``ATTEMPT_MARGIN_S`` before the attempt's timeout; then the attempt
fails with ``StoreUnavailable`` and Temporal retries it. A reply received while the store is
down goes first into the heartbeat details (``LiveOutput.reply``, up to
``HEARTBEAT_DETAILS_BYTES``), and a retried attempt of the same call stores and returns it
without asking the model.

API keys are read from the environment at call time and never logged or returned: every
error text leaving the activity is redacted (``redact.py``).
"""

from __future__ import annotations

import asyncio
import contextlib
import os
import time
from collections.abc import Awaitable, Callable, Sequence
from datetime import timedelta
from typing import Any, TypeVar

import httpx
from pydantic import BaseModel, ConfigDict, Field
from temporalio import activity
from temporalio.exceptions import ApplicationError

from toolnexus_temporal.activities import wire
from toolnexus_temporal.activities.heartbeat import heartbeating
from toolnexus_temporal.activities.live import LiveFeed
from toolnexus_temporal.activities.redact import redacted_error
from toolnexus_temporal.activities.store import (
    ConversationStore,
    StoreError,
    StoreUnavailableError,
    check_committed,
)
from toolnexus_temporal.observability import metrics, spans
from toolnexus_temporal.workflows.contract import context
from toolnexus_temporal.workflows.contract.messages import (
    LiveOutput,
    LlmCallInput,
    LlmCallResult,
    SummarizeInput,
    SummarizeResult,
)
from toolnexus_temporal.workflows.contract.models import ContextSummary, Message, Usage, WireStyle
from toolnexus_temporal.workflows.contract.names import LLM_CALL_ACTIVITY, LLM_SUMMARIZE_ACTIVITY
from toolnexus_temporal.workflows.contract.pricing import ModelPrice, priced

T = TypeVar("T")

ToolSchemas = Callable[[list[str], list[str]], list[dict[str, Any]]]
"""(tool names, team) -> OpenAI-style tool schemas."""

RETRYABLE_STATUS = frozenset({429, 500, 502, 503, 504})
"""HTTP statuses retried through the activity retry policy (CONTRACT §4)."""

HEARTBEAT_EVERY_S = 1.0
"""Seconds between heartbeats while a request is in flight, so a cancel lands within ~1 s."""

YIELD_EVERY_EVENTS = 200
"""Stream events parsed between two yields to the event loop (heartbeats must go out while a
long, already-buffered stream is parsed; issue 12, item 14)."""

STORE_RETRY_FIRST_S = 0.5
"""Seconds before a store operation that found the store unavailable runs again (doubling)."""

STORE_RETRY_MAX_S = 4.0
"""Most seconds between two tries of a store operation while the store is unavailable."""

ATTEMPT_MARGIN_S = 2.0
"""An attempt stops waiting for the store this many seconds before its own timeout, and fails
retryably (Temporal's retry starts the next attempt)."""

HOLD_AFTER_S = 1.0
"""Seconds the store write of a received reply may take before the reply is put in the
heartbeat details (``LiveOutput.reply``), in case the attempt ends before the write does."""

HOLD_FLUSH_S = 1.0
"""Seconds an attempt goes on after it put a reply in its heartbeat details (the worker sends
at most one heartbeat per 0.5 s), so a retry finds it there."""

MIN_TRY_S = 1.0
"""Seconds one try of a store operation is given even when the attempt's time is up (an
attempt the server already timed out finishes what it can)."""

STORE_OUTAGE_FALLBACK_S = 60.0
"""How long an attempt without a timeout (a test calling the activity directly) waits."""

REPLY_MAX_BYTES = 256 * 1024
"""Largest serialized result returned to the workflow; a longer reply's text is shortened in
the result (the store keeps it whole). Well under Temporal's 2 MB payload limit, since the
text also travels on as the turn's result."""


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
        secret_envs: more environment variables whose values are secrets: redacted, like the
            API key, from every error text that leaves the activity.
        prices: the price of each model, by the model name sent to the provider
            (:class:`~toolnexus_temporal.workflows.contract.pricing.ModelPrice`, USD per million
            tokens): each call's ``Usage.cost``. A model missing here is unpriced: its cost
            is unknown (never 0), and under a ``max_cost_usd`` budget its call fails
            (``LlmUnpriced``). ``tnx-worker --prices FILE`` reads them from a file.
    """

    model_config = ConfigDict(extra="forbid")

    base_url: str = Field(min_length=1)
    model: str = Field(min_length=1)
    style: WireStyle = "openai"
    api_key_env: str = "OPENAI_API_KEY"
    request_timeout_ms: int = Field(default=120_000, ge=1)
    max_tokens: int | None = Field(default=None, ge=1)
    stream: bool = True
    secret_envs: list[str] = Field(default_factory=list)
    prices: dict[str, ModelPrice] = Field(default_factory=dict)

    def secrets(self) -> list[str]:
        """The configured secret values (API key and ``secret_envs``) set right now."""
        names = [self.api_key_env, *self.secret_envs]
        return [v for v in (os.environ.get(n) for n in names) if v]

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
        mcp_schemas: the schemas of MCP servers' tools by server names (the worker's
            ``McpPool.schemas``), offered after ``tool_schemas``'.
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
        mcp_schemas: Callable[[list[str]], Awaitable[list[dict[str, Any]]]] | None = None,
    ) -> None:
        if max_concurrent is not None and max_concurrent < 1:
            raise ValueError(f"max_concurrent must be at least 1, got {max_concurrent}")
        self._slots = asyncio.Semaphore(max_concurrent) if max_concurrent else None
        self.config = config
        self.store = store
        self.tool_schemas = tool_schemas
        self.mcp_schemas = mcp_schemas
        self._http = httpx.AsyncClient(
            transport=transport or httpx.AsyncHTTPTransport(retries=0),
            timeout=httpx.Timeout(config.request_timeout_ms / 1000),
        )

    async def aclose(self) -> None:
        """Close the HTTP client."""
        await self._http.aclose()

    @activity.defn(name=LLM_CALL_ACTIVITY)
    async def llm_call(self, inp: LlmCallInput) -> LlmCallResult:
        """One LLM round trip over the stored transcript plus ``inp.new_messages``; a retry of
        a call already answered returns the recorded completion (module docstring).

        Raises:
            ApplicationError: typed as described in the module docstring, its text redacted.
        """
        info = activity.info()
        timeout = info.heartbeat_timeout.total_seconds() if info.heartbeat_timeout else None
        every = min(HEARTBEAT_EVERY_S, timeout / 4) if timeout else HEARTBEAT_EVERY_S
        store = _StoreCalls(_attempt_ends_at(info), repr(self.store))
        try:
            async with heartbeating(every) as beat:
                live = LiveFeed(beat, info.attempt)
                held = _held_reply(info.heartbeat_details, inp.fence)
                if held is not None:
                    return await self._store_held(inp, *held, live, store)
                return await self._llm_call(inp, live, store)
        except Exception as err:
            raise redacted_error(err, self.config.secrets()) from None

    @activity.defn(name=LLM_SUMMARIZE_ACTIVITY)
    async def llm_summarize(self, inp: SummarizeInput) -> SummarizeResult:
        """Fold the older turns of a transcript into its summary with one model call (context
        policy ``older="summarize"``): the turns ``context.summary_span`` picks, each message
        clipped, sent as one text with the current summary; the reply, cut to
        ``summary_tokens`` (4 characters per token), is the new summary. A retry asks the
        model again (nothing is stored).

        Returns:
            The new summary and the call's usage (tokens); no summary when nothing is old
            enough to fold.

        Raises:
            ApplicationError: typed as ``tnx.llm_call``'s (module docstring), redacted.
        """
        info = activity.info()
        timeout = info.heartbeat_timeout.total_seconds() if info.heartbeat_timeout else None
        every = min(HEARTBEAT_EVERY_S, timeout / 4) if timeout else HEARTBEAT_EVERY_S
        store = _StoreCalls(_attempt_ends_at(info), repr(self.store))
        try:
            async with heartbeating(every) as beat:
                return await self._summarize(inp, LiveFeed(beat, info.attempt), store)
        except Exception as err:
            raise redacted_error(err, self.config.secrets()) from None

    async def _summarize(
        self, inp: SummarizeInput, live: LiveFeed, store: _StoreCalls
    ) -> SummarizeResult:
        _check_deadline(inp.deadline_ms)
        transcript = await store.call(
            lambda: self.store.read(inp.conv_id, inp.length), deadline_ms=inp.deadline_ms
        )
        span = context.summary_span(transcript, inp.policy, inp.summary, inp.pending_turns)
        start, end = span.start, span.end
        if end <= start:
            return SummarizeResult(
                view_tokens=context.context_tokens(transcript, inp.policy, inp.summary)
            )
        model, style = self.target(inp)
        body = wire.request_body(
            style,
            model=model,
            messages=context.summary_request(transcript[start:end], inp.policy, inp.summary),
            tools=[],
            max_tokens=inp.policy.summary_tokens,
            stream=False,
        )
        async with self._slots or contextlib.nullcontext():
            message, usage = await self._call(style, body, live, need_price=inp.need_price)
        limit = inp.policy.summary_tokens * context.CHARS_PER_TOKEN
        text = (message.content or "").strip()[:limit] or "(no summary)"
        summary = ContextSummary(text=text, upto=end)
        return SummarizeResult(
            summary=summary,
            usage=usage,
            folded=end - start,
            view_tokens=context.context_tokens(transcript, inp.policy, summary),
            older_left=span.older_left,
        )

    async def _store_held(
        self,
        inp: LlmCallInput,
        held: LiveOutput,
        result: LlmCallResult,
        live: LiveFeed,
        store: _StoreCalls,
    ) -> LlmCallResult:
        """Store ``result``, the reply an earlier attempt received but could not store (the
        store was down; ``held`` its heartbeat details), and return it: the model is not asked
        again."""
        live.carry(held)  # keep the reply on the server until it is stored
        spans.current_llm().recorded()
        activity.logger.info(
            "LLM call %s/%s: storing the reply an earlier attempt received (not asking again)",
            inp.conv_id,
            inp.fence,
        )
        # From base_len, the new messages again: the earlier attempt's first write may be
        # lost (a failover to a standby that had not received it); a write is idempotent.
        await store.call(
            lambda: self.store.write(
                inp.conv_id,
                inp.base_len,
                [*inp.new_messages, result.message],
                fence=inp.fence,
                completion=result.model_dump_json(),
            )
        )
        return _fit(result)

    def target(self, inp: LlmCallInput | SummarizeInput) -> tuple[str, WireStyle]:
        """The model (``inherit``: the configured one) and the wire style ``inp`` is sent
        with: the ``chat {model}`` span's model and ``gen_ai.provider.name``
        (``observability/activity.py`` opens it around the activity)."""
        style: WireStyle = inp.style or self.config.style
        return (self.config.model if inp.model == "inherit" else inp.model), style

    async def _llm_call(
        self, inp: LlmCallInput, live: LiveFeed, store: _StoreCalls
    ) -> LlmCallResult:
        model, style = self.target(inp)
        span = spans.current_llm()
        recorded, committed = await self._begin(inp, store)
        if recorded is not None:
            activity.logger.info("LLM call %s/%s already answered", inp.conv_id, inp.fence)
            span.recorded()
            return _fit(LlmCallResult.model_validate_json(recorded), recorded)
        _check_deadline(inp.deadline_ms)
        transcript = [*committed, *inp.new_messages]
        stored_len = inp.base_len + len(inp.new_messages)
        view = context.model_view(transcript, inp.context, inp.summary) if inp.context else None
        tools = (
            self.tool_schemas(inp.tools, inp.team)
            if (inp.tools or inp.team) and self.tool_schemas is not None
            else []
        )
        if inp.mcp and self.mcp_schemas is not None:
            tools = [*tools, *await self.mcp_schemas(inp.mcp)]
        sent = view.messages if view is not None else transcript
        span.request(sent)
        body = wire.request_body(
            style,
            model=model,
            messages=sent,
            tools=tools,
            max_tokens=self.config.max_tokens,
            stream=self.config.stream,
        )
        left_s = None if inp.deadline_ms is None else inp.deadline_ms / 1000 - time.time()
        try:
            async with asyncio.timeout(left_s):
                async with self._slots or contextlib.nullcontext():
                    _check_deadline(inp.deadline_ms)
                    message, usage = await self._call(style, body, live, need_price=inp.need_price)
        except TimeoutError:
            _check_deadline(inp.deadline_ms, aborted=True)
            raise
        result = LlmCallResult(
            message=message,
            usage=usage,
            stored_len=stored_len + 1,
            dropped=view.dropped if view is not None else 0,
            sent_estimate=view.estimate_tokens if view is not None else 0,
            view_tokens=(
                context.context_tokens([*transcript, message], inp.context, inp.summary)
                if inp.context is not None
                else 0
            ),
        )

        def hold() -> None:  # the model was paid: a retried attempt must not ask it again
            if not live.hold(result, inp.fence):
                activity.logger.warning(
                    "LLM call %s/%s: the reply is too large to keep in heartbeat details; if "
                    "this attempt ends before the store is back, a retry asks the model again",
                    inp.conv_id,
                    inp.fence,
                )

        completion = result.model_dump_json()  # serialized once: stored, then measured
        await store.call(  # the call's one write: its new messages, the reply, the completion
            lambda: self.store.write(
                inp.conv_id,
                inp.base_len,
                [*inp.new_messages, message],
                fence=inp.fence,
                completion=completion,
            ),
            hold=hold,
        )
        return _fit(result, completion)

    async def _begin(
        self, inp: LlmCallInput, store: _StoreCalls
    ) -> tuple[str | None, list[Message]]:
        """The recorded completion of this call (then nothing else), else the ``base_len``
        committed messages: ``(completion, transcript)``. Nothing is written before the model
        answers (issue 35: one write per call). A store with ``begin_call`` (both built-in
        ones) reads in one round trip, refuses an abandoned call's fence here, and under a
        context policy with a summary skips the messages the summary covers
        (``store.windowed``); any other store reads whole, in two reads.

        Raises:
            StoreError: (through ``store``) the store holds fewer than ``base_len`` messages,
                or (``begin_call``) a newer fence.
        """
        deadline = inp.deadline_ms
        begin_call = getattr(self.store, "begin_call", None)
        if begin_call is not None:
            # under a context policy the model is sent the head and what follows the summary:
            # the messages the summary covers are not read (store.windowed; issue 38)
            summary = inp.summary
            since = summary.upto if inp.context is not None and summary and summary.text else 0
            started: tuple[str | None, list[Message]] = await store.call(
                lambda: begin_call(inp.conv_id, inp.base_len, fence=inp.fence, since=since),
                deadline_ms=deadline,
            )
            return started
        recorded = await store.call(
            lambda: self.store.completion(inp.conv_id, inp.fence), deadline_ms=deadline
        )
        if recorded is not None:
            return recorded, []

        async def committed() -> list[Message]:
            transcript = await self.store.read(inp.conv_id, inp.base_len)
            check_committed(inp.conv_id, inp.base_len, len(transcript), repr(self.store))
            return transcript

        return None, await store.call(committed, deadline_ms=deadline)

    async def _call(
        self, style: WireStyle, body: dict[str, Any], live: LiveFeed, *, need_price: bool
    ) -> tuple[Message, Usage]:
        """One LLM HTTP round trip, counted and timed (``tnx_llm_calls_total``,
        ``tnx_llm_call_latency_milliseconds``: :func:`~toolnexus_temporal.observability.metrics
        .llm_call`): POST the request; read an SSE stream (published live through ``live``) or
        a plain JSON body; the answer is recorded on the ``chat`` span
        (:func:`~toolnexus_temporal.observability.spans.current_llm`). The usage comes back
        priced (``pricing.py``).

        Raises:
            ApplicationError: ``LlmUnpriced`` (non-retryable, before anything is sent) when
                ``need_price`` and the model has no price.
        """
        model = str(body.get("model"))
        if need_price and model not in self.config.prices:
            raise ApplicationError(
                f"model {model!r} has no price, and a max_cost_usd budget holds this agent: "
                "give the worker one (LlmConfig(prices=...), tnx-worker --prices FILE)",
                type="LlmUnpriced",
                non_retryable=True,
            )
        with metrics.llm_call(model):
            message, usage = await self._round_trip(style, body, live)
        return message, priced(usage, model, self.config.prices)

    async def _round_trip(
        self, style: WireStyle, body: dict[str, Any], live: LiveFeed
    ) -> tuple[Message, Usage]:
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
                return await self._read_stream(style, url, response, live)
            await response.aread()
            try:
                raw = response.json()
                message, usage = wire.parse_response(style, raw)
            except ValueError as err:  # WireError, or JSON that does not parse
                raise _malformed(url, err, response.text) from err
            spans.current_llm().response(message, usage, *wire.response_meta(style, raw))
            return message, usage
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
        self,
        style: WireStyle,
        url: str,
        response: httpx.Response,
        live: LiveFeed,
    ) -> tuple[Message, Usage]:
        assembler = wire.StreamAssembler(style)
        data: list[str] = []
        events = 0
        try:
            async for line in response.aiter_lines():
                if line.startswith("data:"):
                    data.append(line[5:].removeprefix(" "))
                elif not line and data:
                    assembler.feed("\n".join(data))
                    live.update(assembler)
                    data = []
                    events += 1
                    if events % YIELD_EVERY_EVENTS == 0:
                        # A stream already buffered never awaits I/O: let the heartbeats out.
                        await asyncio.sleep(0)
            if data:
                assembler.feed("\n".join(data))
            message, usage = assembler.result()
        except wire.WireError as err:
            raise _malformed(url, err, "") from err
        spans.current_llm().response(message, usage, assembler.model, assembler.finish_reasons)
        return message, usage


class _StoreCalls:
    """Store operations of one attempt that wait out a store outage (issue 23 item 2).

    An operation that raises :class:`StoreUnavailableError` runs again after
    ``STORE_RETRY_FIRST_S``, doubling up to ``STORE_RETRY_MAX_S``, while the heartbeats go on,
    until ``ATTEMPT_MARGIN_S`` before the attempt's own timeout (``ends_at``); then the attempt
    fails with the retryable ``StoreUnavailable`` and Temporal retries it (a reply already
    received rides to the retry on the heartbeat details: ``hold``). A :class:`StoreError` is
    the non-retryable ``StoreError``.
    """

    def __init__(self, ends_at: float, name: str) -> None:
        self._ends_at = ends_at
        self._name = name

    async def call(
        self,
        op: Callable[[], Awaitable[T]],
        *,
        deadline_ms: int | None = None,
        hold: Callable[[], None] | None = None,
    ) -> T:
        """``await op()``, run again while the store is unavailable (class docstring).

        Args:
            op: the store operation (idempotent).
            deadline_ms: the handle's wall deadline (epoch ms): no waiting past it.
            hold: called once, before this attempt can end, when ``op`` is slow
                (``HOLD_AFTER_S``) or finds the store unavailable: it puts the received
                reply in the heartbeat details; the attempt then ends no sooner than
                ``HOLD_FLUSH_S`` later, so that heartbeat leaves the worker's throttle.

        Raises:
            ApplicationError: ``StoreUnavailable`` (retryable) when the attempt's time is up,
                ``StoreError`` (non-retryable), ``LlmWallDeadline`` past ``deadline_ms``.
        """
        delay = STORE_RETRY_FIRST_S
        started = time.monotonic()
        since: float | None = None
        held_at: float | None = None

        def hold_once() -> None:
            nonlocal held_at
            if hold is not None and held_at is None:
                hold()
                held_at = time.monotonic()

        while True:
            out_of_time = False
            try:
                # The store's own wait for a connection must not outlast the attempt.
                bound = max(self._ends_at - time.monotonic(), MIN_TRY_S)
                async with asyncio.timeout(bound) as limit:
                    value = await _slow_hook(op, hold_once if held_at is None else None)
            except TimeoutError:
                if not limit.expired():
                    raise
                failure, out_of_time = f"{self._name} did not answer in time", True
            except StoreUnavailableError as err:
                failure = str(err)
            except StoreError as err:
                raise ApplicationError(str(err), type="StoreError", non_retryable=True) from None
            else:
                if since is not None:
                    activity.logger.info(
                        "conversation store back after %.1f s", time.monotonic() - since
                    )
                return value
            if since is None:
                since = time.monotonic()
                activity.logger.warning("conversation store unavailable, waiting: %s", failure)
            hold_once()
            _check_deadline(deadline_ms)
            now = time.monotonic()
            if out_of_time or now >= self._ends_at:
                if held_at is not None and now < held_at + HOLD_FLUSH_S:
                    await asyncio.sleep(held_at + HOLD_FLUSH_S - now)
                raise ApplicationError(
                    f"{failure} (this attempt waited {now - started:.0f} s for the store)",
                    type="StoreUnavailable",
                )
            await asyncio.sleep(min(delay, self._ends_at - now))
            delay = min(delay * 2, STORE_RETRY_MAX_S)


async def _slow_hook(op: Callable[[], Awaitable[T]], on_slow: Callable[[], None] | None) -> T:
    """``await op()``; ``on_slow()`` once it has run ``HOLD_AFTER_S`` without an answer."""
    if on_slow is None:
        return await op()
    task = asyncio.ensure_future(op())
    try:
        done, _ = await asyncio.wait({task}, timeout=HOLD_AFTER_S)
    except BaseException:
        task.cancel()
        raise
    if not done:
        on_slow()
    return await task


def _attempt_ends_at(info: activity.Info) -> float:
    """When this attempt should stop waiting for the store (``time.monotonic()``):
    ``ATTEMPT_MARGIN_S`` (at most a quarter of it) before its start-to-close timeout, counted
    from now (the worker's clock: the server's ``started_time`` may be skewed). The workflow
    sets no schedule-to-close timeout."""
    span = info.start_to_close_timeout
    left = span.total_seconds() if span else STORE_OUTAGE_FALLBACK_S
    return time.monotonic() + left - min(ATTEMPT_MARGIN_S, left / 4)


def _held_reply(details: Sequence[Any], fence: int) -> tuple[LiveOutput, LlmCallResult] | None:
    """The heartbeat details an earlier attempt of call ``fence`` left with the reply it
    received (``LiveOutput.reply``), and that reply; None when there is none."""
    if not details:
        return None
    try:
        out = LiveOutput.model_validate(details[0])
    except ValueError:
        return None
    if out.reply is None or out.fence != fence:
        return None
    return out, out.reply


def _check_deadline(deadline_ms: int | None, *, aborted: bool = False) -> None:
    """Raise ``LlmWallDeadline`` (non-retryable) once ``deadline_ms`` (epoch ms) has passed."""
    if deadline_ms is None:
        return
    late_ms = int(time.time() * 1000) - deadline_ms
    if late_ms >= 0 or aborted:
        what = "aborted the call in flight" if aborted else "no LLM call starts"
        raise ApplicationError(
            f"the handle's wall deadline passed {max(late_ms, 0)} ms ago: {what}",
            type="LlmWallDeadline",
            non_retryable=True,
        )


def _fit(result: LlmCallResult, serialized: str | None = None) -> LlmCallResult:
    """``result`` shortened to ``REPLY_MAX_BYTES`` serialized (the text is cut and says where
    the whole reply is); tool calls are never cut. ``serialized``: ``result``'s JSON when the
    caller has it (the completion it stored), so it is not serialized again.

    Raises:
        ApplicationError: ``LlmReplyTooLarge`` (non-retryable, usage in its details) when
            the tool calls alone do not fit.
    """
    size = len((result.model_dump_json() if serialized is None else serialized).encode())
    if size <= REPLY_MAX_BYTES:
        return result
    content = result.message.content or ""
    excess = size - REPLY_MAX_BYTES + 200
    keep = len(content.encode()) - excess
    if keep <= 0:
        raise ApplicationError(
            f"the model's reply is {size} bytes serialized, its tool calls alone over the "
            f"{REPLY_MAX_BYTES}-byte limit of a result; it is kept whole in the conversation "
            "store",
            result.usage.model_dump(),
            type="LlmReplyTooLarge",
            non_retryable=True,
        )
    head = content.encode()[:keep].decode(errors="ignore")
    note = (
        f"\n[reply shortened: {len(content)} characters in all; the whole reply is in the "
        "conversation store]"
    )
    message = result.message.model_copy(update={"content": head + note})
    return result.model_copy(update={"message": message})


def _malformed(url: str, err: Exception, body: str) -> ApplicationError:
    detail = f"; body starts: {body[:300]!r}" if body else ""
    return ApplicationError(
        f"malformed LLM response from {url}: {err}{detail}",
        type="MalformedLlmResponse",
        non_retryable=True,
    )
