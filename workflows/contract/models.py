"""Plain, serializable data for the toolnexus agent contract (CONTRACT.md §1, §2).

Everything that crosses a Temporal boundary (workflow input, signal, update, query, activity
argument or result) is one of these pydantic models, so fields can be added later without
breaking running workflows. All durations are in milliseconds, all usage in tokens.

This module is deterministic and I/O free: the workflow sandbox imports it.
"""

from __future__ import annotations

import json
from decimal import Decimal
from typing import Annotated, Any, Final, Literal

from pydantic import (
    AfterValidator,
    BaseModel,
    ConfigDict,
    Field,
    PlainSerializer,
    SerializationInfo,
    SerializerFunctionWrapHandler,
    StrictBool,
    model_serializer,
    model_validator,
)

from toolnexus_temporal.workflows.contract.cron import cron_error
from toolnexus_temporal.workflows.contract.limits import search_attribute_error
from toolnexus_temporal.workflows.contract.names import AGENT_ESCALATED_TO
from toolnexus_temporal.workflows.contract.policy import DEFAULT_POLICY, check_policy

Policy = Annotated[str, AfterValidator(check_policy)]
"""A double-texting policy (``enqueue``, ``interrupt``, ``reject``, ``debounce:MS``;
``contract/policy.py``); anything else is refused with one line."""

HandleStateName = Literal["idle", "running", "suspended", "closed"]
"""The four Handle states (CONTRACT §2)."""

DurableStateName = Literal["idle", "suspended", "closed"]
"""The values of the ``AgentState`` search attribute: the Handle state that lasts past a
turn. A running handle shows ``idle`` there (``running`` is not a visibility value: a turn
writes no search attribute unless it parks or closes); the live state is the ``state``/``view``
query, the workflow's current details and the worker's ``tnx_turns_in_flight`` gauge
(``workflows/visibility/operator.py`` ``durable_state``)."""

ResultStatus = Literal["done", "pending", "incomplete", "interrupted", "closed", "timeout", "error"]
"""The closed TaskResult status vocabulary (CONTRACT §1). Only ``done`` and ``pending`` are not
errors."""

LimitName = Literal["maxTurns", "tokens", "toolCalls", "wallMs", "costUsd"]
"""Which budget limit stopped an ``incomplete`` turn (CONTRACT §1)."""

WireStyle = Literal["openai", "anthropic"]
"""LLM wire styles (CONTRACT §4)."""


MAX_TEXT = 64_000
"""Characters at most in one inbox item, answer reason or tool output kept in history:
Temporal payloads are capped at 2 MB, and a turn carries the whole drained inbox. Larger
content belongs in a store, referenced by id or URL."""

MAX_PROMPT = 200_000
"""Characters at most in a wake prompt."""

AGENT_NAME_MAX = 100
"""The longest agent name, in characters (ASCII): a name is a segment of every child's
workflow id, which Temporal caps at 1,000 bytes (``limits.py``; deeper trees are refused at
spawn)."""

MAX_WAIT_MS = 366 * 24 * 3600 * 1000
"""The longest ``wait`` timeout and ``max_wall_ms``: a year, in ms."""


ALL_FIELDS = "all_fields"
"""Serialization context key: ``model_dump(context={ALL_FIELDS: True})`` keeps every field,
defaults included (for output meant for people and scripts, such as ``tnx --json``)."""


class WireModel(BaseModel):
    """Base: accept field names and aliases, forbid unknown keys so bad input is loud.

    On the wire a field whose value equals a *zero* default is left out (decoding restores it
    exactly): None, False, 0 or "" where that is the default, an empty list or dict from a
    ``default_factory``, a nested model from a ``default_factory`` whose fields are all left
    out. So unset fields cost no history bytes. A value that differs from its default
    (``live_usage_ms=None``) is always kept, and so is a field whose default is not a zero
    value (``max_turns=6``): such a default may change in a later version, and a value
    recorded in a history or carried by continue-as-new must keep its meaning. Pass the
    context ``{ALL_FIELDS: True}`` to keep every field."""

    model_config = ConfigDict(populate_by_name=True, extra="forbid")

    @model_serializer(mode="wrap")
    def _drop_defaults(
        self, handler: SerializerFunctionWrapHandler, info: SerializationInfo
    ) -> Any:
        data = handler(self)
        if not isinstance(data, dict) or (info.context or {}).get(ALL_FIELDS):
            return data
        for name, field in type(self).model_fields.items():
            value = getattr(self, name)
            key = field.alias if field.alias is not None else name
            factory = field.default_factory
            if factory is not None:
                dropped = (factory in (list, dict) and value in ([], {})) or (
                    isinstance(factory, type)
                    and issubclass(factory, WireModel)
                    and data.get(key) == {}
                )
            elif field.is_required():
                dropped = False
            else:
                default = field.default
                dropped = (
                    value is default
                    if default is None or isinstance(default, bool)
                    else (default in (0, "") and type(value) is type(default) and value == default)
                )
            if dropped:
                data.pop(key, None)
        return data


def usd_text(value: Decimal) -> str:
    """``value`` (USD) as a fixed-point decimal string without trailing zeros, never in
    exponent form: ``Decimal("1.5E-7")`` → ``"0.00000015"``, ``Decimal("0.250")`` →
    ``"0.25"``."""
    return format(value.normalize(), "f")


def _unsigned_zero(value: Decimal) -> Decimal:
    """``-0`` (which passes ``ge=0``) as ``0``: no amount shows as ``-0``."""
    return abs(value) if value.is_zero() else value


Usd = Annotated[Decimal, AfterValidator(_unsigned_zero), PlainSerializer(usd_text, return_type=str)]
"""An amount of money in USD: an exact ``Decimal``, serialized as a fixed-point decimal
string (:func:`usd_text`), never a float."""


class Budget(WireModel):
    """Limits for one handle (CONTRACT §1). ``None`` means unlimited.

    Attributes:
        max_turns: LLM round trips per wake (default 6).
        max_tokens: tokens (prompt + completion) over the handle's lifetime, shared with its
            subtree.
        max_tool_calls: tool calls over the handle's lifetime, shared with its subtree.
        max_wall_ms: wall-clock deadline in ms from spawn.
        max_children: children this handle may spawn (closed ones count).
        max_concurrent: running children at once (default 8).
        max_depth: deepest descendant depth allowed below this handle (default 3).
        max_cost_usd: money (USD, an exact decimal of at most 12 places) over the handle's
            lifetime, shared with its subtree like ``max_tokens``: the LLM and summarizer
            calls' cost as the worker's price table says (:class:`Cost`). A call of a model
            without a price fails under a finite money pool (``LlmUnpriced``).
    """

    max_turns: int | None = Field(default=6, ge=1)
    max_tokens: int | None = Field(default=None, ge=0)
    max_tool_calls: int | None = Field(default=None, ge=0)
    max_wall_ms: int | None = Field(default=None, ge=1, le=MAX_WAIT_MS)
    max_children: int | None = Field(default=None, ge=0)
    max_concurrent: int | None = Field(default=8, ge=1)
    max_depth: int | None = Field(default=3, ge=0)
    max_cost_usd: Usd | None = Field(default=None, ge=0, decimal_places=12)


class Cost(WireModel):
    """Money spent by LLM calls (one call, a turn, a handle, a subtree), in USD, exact.

    Attributes:
        priced_usd: the cost of the priced calls, an exact decimal (at most 12 places: the
            price table's at most 6 places per million tokens); serialized as a decimal
            string (``"0.000150075"``), so no float ever rounds it.
        unpriced: calls of a model the worker has no price for: their cost is unknown,
            never counted as 0 (:attr:`usd` is then None).
    """

    priced_usd: Usd = Field(default=Decimal(0), ge=0)
    unpriced: int = Field(default=0, ge=0)

    @property
    def usd(self) -> Decimal | None:
        """The cost in USD, or None when some call was unpriced ("cost unknown")."""
        return None if self.unpriced else self.priced_usd

    def __add__(self, other: Cost) -> Cost:
        return Cost(
            priced_usd=self.priced_usd + other.priced_usd, unpriced=self.unpriced + other.unpriced
        )

    def text(self) -> str:
        """For people: ``$0.000150``, ``cost unknown`` (no call priced) or ``cost unknown
        ($0.0012 priced, 2 calls unpriced)``."""
        if not self.unpriced:
            return f"${usd_text(self.priced_usd)}"
        if not self.priced_usd:
            return "cost unknown"
        calls = "call" if self.unpriced == 1 else "calls"
        return (
            f"cost unknown (${usd_text(self.priced_usd)} priced, {self.unpriced} {calls} unpriced)"
        )


TICK_MIN_MS = 1_000
"""The shortest tick interval, in ms: Temporal's durable timers fire at about 1 s
granularity."""

CRON_MAX = 200
"""The longest cron expression, in characters."""


class TickSpec(WireModel):
    """A tick schedule: a durable timer in the handle's own workflow (``workflows/ticks.py``).

    Exactly one of ``every_ms`` and ``cron`` is set.

    Attributes:
        every_ms: fire every this many ms (at least :data:`TICK_MIN_MS`), counted from the
            moment the schedule was set.
        cron: a five-field cron expression (``"0 * * * *"``), read by croniter in UTC.
        prompt: the prompt of the wake a tick starts (None: the turn input is the inbox
            block alone, with its tick line).
        wake: a tick that finds the handle idle wakes it (True, the default); False: ticks
            only land in the inbox, as one coalesced line, for the next wake.
    """

    every_ms: int | None = Field(default=None, ge=TICK_MIN_MS, le=MAX_WAIT_MS)
    cron: str | None = Field(default=None, min_length=1, max_length=CRON_MAX)
    prompt: str | None = Field(default=None, max_length=MAX_TEXT)
    wake: StrictBool = True

    @model_validator(mode="after")
    def _one_rule(self) -> TickSpec:
        if (self.every_ms is None) == (self.cron is None):
            raise ValueError("a tick needs exactly one of every_ms and cron")
        if self.cron is not None:
            error = cron_error(self.cron)
            if error is not None:
                raise ValueError(error)
        return self


class ContextPolicy(WireModel):
    """How much of the stored transcript the model is sent per call (the
    view is built by ``workflows/contract/context.py``). The stored transcript always stays
    complete; only the model's view is bounded.

    The rules it enforces (each refused with a ``ValueError`` naming the values):

    * ``64 <= max_tokens <= 10,000,000``; ``1 <= keep_turns <= 1,000``;
    * ``message_max_tokens``, when set, is at least 16 and at most ``max_tokens``;
    * ``summary_max_tokens``, when set, is 16 to 4,096, and under ``older="summarize"`` at
      most half of ``max_tokens`` (the summarizer's own request must fit the bound too);
    * ``low_water_tokens``, when set, is at least 32 and below ``max_tokens``.

    Attributes:
        max_tokens: the most the model is sent per call, in tokens (estimated: characters/4
            plus 4 per message, see ``context.estimate_tokens``). The system prompt, the
            summary and the ``keep_turns`` recent turns are always sent; older turns fill
            what is left, newest first. Under ``summarize`` the summarizer runs before the
            first call whose request would pass it.
        keep_turns: recent turns always kept whole (a turn: a user message and everything
            after it up to the next one).
        older: what happens to older turns that do not fit: ``summarize`` (a model call,
            activity ``tnx.llm_summarize``, whose tokens count in usage and budgets) or
            ``drop`` (replaced by one marker message).
        message_max_tokens: a single message over this many tokens is clipped in what the
            model sees (None: half of ``max_tokens``).
        summary_max_tokens: the longest summary kept, in tokens (its text is cut at 4
            characters per token; None: 512, or a quarter of ``max_tokens`` when that is
            less; see :attr:`summary_tokens`).
        low_water_tokens: under ``summarize``, the most the context may stay at once the
            summarizer ran (None: half of ``max_tokens``; see :attr:`low_water`): it folds
            every older turn one request holds, and is called again while older turns are
            left and the context is over this mark, so it runs once per many turns, not
            before every one. The ``keep_turns`` recent turns are never folded: when they
            alone pass this mark, everything older is folded.
    """

    max_tokens: int = Field(ge=64, le=10_000_000)
    keep_turns: int = Field(default=4, ge=1, le=1_000)
    older: Literal["summarize", "drop"] = "drop"
    message_max_tokens: int | None = Field(default=None, ge=16)
    summary_max_tokens: int | None = Field(default=None, ge=16, le=4_096)
    low_water_tokens: int | None = Field(default=None, ge=32)

    @model_validator(mode="after")
    def _fits(self) -> ContextPolicy:
        if self.message_max_tokens is not None and self.message_max_tokens > self.max_tokens:
            raise ValueError(
                f"message_max_tokens ({self.message_max_tokens}) is over max_tokens "
                f"({self.max_tokens})"
            )
        if self.older == "summarize" and self.summary_tokens * 2 > self.max_tokens:
            raise ValueError(
                f"summary_max_tokens ({self.summary_tokens}) must be at most half of "
                f"max_tokens ({self.max_tokens})"
            )
        if self.low_water_tokens is not None and self.low_water_tokens >= self.max_tokens:
            raise ValueError(
                f"low_water_tokens ({self.low_water_tokens}) must be below max_tokens "
                f"({self.max_tokens})"
            )
        return self

    @property
    def clip_tokens(self) -> int:
        """The per-message bound of the model's view, in tokens."""
        return self.message_max_tokens or self.max_tokens // 2

    @property
    def summary_tokens(self) -> int:
        """The longest summary kept, in tokens: ``summary_max_tokens``, else 512 or a quarter
        of ``max_tokens``, whichever is less."""
        return self.summary_max_tokens or min(512, self.max_tokens // 4)

    @property
    def low_water(self) -> int:
        """The most the context may stay at once the summarizer ran, in tokens:
        ``low_water_tokens``, else half of ``max_tokens``."""
        return self.low_water_tokens or self.max_tokens // 2


Unbounded = Literal["unbounded"]
"""The explicit opt-out of a bounded context (``AgentDef(context="unbounded")``,
``RuntimeOptions(context="unbounded")``): every call is sent the whole transcript."""

DEFAULT_CONTEXT_TOKENS: Final = 100_000
"""The default bound, in estimated tokens: a fixed count, not read from the model (the
runtime does not know every model's window). It fits a 128,000-token window, common among
current hosted models, with room left for the tool schemas, the reply and an estimate that
runs low on dense text; set your own ``ContextPolicy`` for a smaller window."""

DEFAULT_CONTEXT: Final = ContextPolicy(
    max_tokens=DEFAULT_CONTEXT_TOKENS, keep_turns=4, older="summarize"
)
"""The context policy of an agent whose AgentDef and runtime set none (issue 36 item 5):
:data:`DEFAULT_CONTEXT_TOKENS`, the 4 recent turns kept whole, older turns summarized (a
summary of at most 512 tokens; down to half the bound once the summarizer runs; a single
message clipped at half the bound)."""


def context_policy(
    agent: ContextPolicy | Unbounded | None, runtime: ContextPolicy | Unbounded | None
) -> ContextPolicy | None:
    """The context policy in force: the agent's, else the runtime's, else
    :data:`DEFAULT_CONTEXT`; None when the one that applies is ``"unbounded"``."""
    chosen = agent if agent is not None else runtime
    if chosen is None:
        return DEFAULT_CONTEXT
    return None if isinstance(chosen, str) else chosen


class ContextSummary(WireModel):
    """The summary of a transcript's older messages (kept in ``TurnState.summary``, carried by
    continue-as-new; bounded by ``ContextPolicy.summary_max_tokens``).

    Attributes:
        text: the summary the model wrote.
        upto: the transcript messages it stands for: the first ``upto`` (after the system
            prompt), always a turn boundary.
    """

    text: str = ""
    upto: int = 0


AnswerPath = Literal["signal", "update", "interpreter", "expiry", "escalation"]
"""How an Answer reached the Request's owner (the audit, ``workflows/approvals/audit.py``)."""


APPROVAL_WAIT_MAX_MS: Final = 10 * 365 * 24 * 3600 * 1000
"""The longest timeout or escalation delay of a Request (ms; 10 years): a longer one would put
its deadline past what a workflow can name as a time (year 9999), failing the workflow task
on every retry, so ``pending`` and :class:`ApprovalPolicy` refuse it where it is given."""


class Escalation(WireModel):
    """Escalate an unanswered Request instead of declining it.

    Exactly one of ``interpreter`` and ``queue`` is set.

    Attributes:
        after_ms: how long the Request waits unanswered before it escalates (ms); None:
            at its expiry deadline (``expiresAt``, the tool's or the agent's timeout).
        interpreter: a registered interpreter that answers on behalf of the handle's parent
            (the next ancestor); its Answer is audited as ``escalation``.
        queue: a named operator queue: the handle keeps waiting, with the search attribute
            ``AgentEscalatedTo`` set to this name (``AgentEscalatedTo="ops"`` in the web UI);
            at most 200 characters and 1,900 bytes as JSON (``limits.search_attribute_error``).

    Raises:
        ValueError: not exactly one target, or a queue the server would refuse as a search
            attribute value.
    """

    after_ms: int | None = Field(default=None, ge=1, le=APPROVAL_WAIT_MAX_MS)
    interpreter: str | None = Field(default=None, min_length=1, max_length=200)
    queue: str | None = Field(default=None, min_length=1, max_length=200)

    @model_validator(mode="after")
    def _one_target(self) -> Escalation:
        if (self.interpreter is None) == (self.queue is None):
            raise ValueError("an escalation names exactly one of interpreter and queue")
        # The queue is a search attribute value (issue 23 item 3): refused here, never by
        # the server (it terminated the parked workflow).
        error = (
            None
            if self.queue is None
            else search_attribute_error(AGENT_ESCALATED_TO.name, self.queue)
        )
        if error is not None:
            raise ValueError(f"escalation queue: {error}")
        return self


class ApprovalPolicy(WireModel):
    """How an agent's Requests expire, escalate and who may answer them.

    Attributes:
        timeout_ms: a Request with no ``expiresAt`` of its own expires this long after it
            was raised (ms); None: never (unless the tool set one).
        escalate: escalate instead of declining (:class:`Escalation`).
        approvers: who may answer, by Request kind or tool name (either key matches: the
            union of both lists): the answerer's identity must be one of them. Checked
            against the ``by`` the sender states (recorded ``verified: false``: the
            workflow sees no server principal).
            At most 100 keys of 100 names each, every key and name 1 to 200 characters (as
            ``Answer.by``), and no empty list (nobody could answer).
    """

    timeout_ms: int | None = Field(default=None, ge=1, le=APPROVAL_WAIT_MAX_MS)
    escalate: Escalation | None = None
    approvers: dict[
        Annotated[str, Field(min_length=1, max_length=200)],
        Annotated[
            list[Annotated[str, Field(min_length=1, max_length=200)]],
            Field(min_length=1, max_length=100),
        ],
    ] = Field(default_factory=dict, max_length=100)


class AgentDef(WireModel):
    """An agent definition; a registry maps names to these (CONTRACT §1).

    Attributes:
        name: the registry key; also the id segment of spawned handles (letters, digits,
            ``_`` and ``-``; at most :data:`AGENT_NAME_MAX`).
        description: what it does (shown to a parent's model by the ``task`` tool).
        system_prompt: the first message of every transcript; may be empty.
        model: provider model name, or ``"inherit"`` for the worker's configured model.
        tools: names of registered tools.
        team: names of agents it may delegate to.
        budget: this agent's limits.
        wait_for: name of a registered interpreter for suspensions (CONTRACT §5).
        on_spawn: name of a registered hook run after spawn.
        on_close: name of a registered hook run at close.
        style: wire style override for this agent; ``None`` uses the worker's.
        tick: a tick schedule every handle of this agent starts with (``rt.schedule``
            changes it at run time; ``workflows/ticks.py``).
        context: this agent's context policy; ``"unbounded"``: the whole transcript is
            sent on every call (an explicit opt-out); None: the runtime's
            ``RuntimeOptions.context``, and with none either, :data:`DEFAULT_CONTEXT`.
        approval: expiry, escalation and approvers of its Requests (:class:`ApprovalPolicy`).
        mcp: MCP servers whose tools it is offered beside ``tools`` (:class:`McpServer`;
            docs/guide/mcp.md); names unique within the def.
        double_texting: what a wake that finds a handle of this agent busy does, unless the
            wake names its own policy: ``enqueue`` (default), ``interrupt``, ``reject`` or
            ``debounce:MS`` (``contract/policy.py``; docs/guide/live-agent.md).
    """

    name: str = Field(min_length=1, max_length=AGENT_NAME_MAX, pattern=r"^[A-Za-z0-9_-]+$")
    description: str = ""
    system_prompt: str = ""
    model: str = "inherit"
    tools: list[str] = Field(default_factory=list)
    team: list[str] = Field(default_factory=list)
    budget: Budget = Field(default_factory=Budget)
    wait_for: str | None = None
    on_spawn: str | None = None
    on_close: str | None = None
    style: WireStyle | None = None
    tick: TickSpec | None = None
    context: ContextPolicy | Unbounded | None = None
    approval: ApprovalPolicy = Field(default_factory=ApprovalPolicy)
    mcp: list[McpServer] = Field(default_factory=list)
    double_texting: Policy = DEFAULT_POLICY

    @model_validator(mode="after")
    def _unique_mcp_names(self) -> AgentDef:
        names = [server.name for server in self.mcp]
        if len(set(names)) != len(names):
            raise ValueError(f"agent {self.name!r} lists an MCP server name twice: {names}")
        return self


class InboxItem(WireModel):
    """One unsolicited message waiting for the next wake (CONTRACT §1).

    The sender field is ``from`` on the wire (``from_`` in Python).

    Attributes:
        count: how many ticks a ``timer`` item stands for (None: one). Ticks coalesce into
            one ``from=clock channel=timer`` item whose count grows (``workflows/ticks.py``),
            so they never fill the bounded inbox.
    """

    from_: str = Field(default="external", alias="from", min_length=1, max_length=200)
    channel: str = Field(default="external", min_length=1, max_length=64)
    text: str = Field(max_length=MAX_TEXT)
    count: int | None = Field(default=None, ge=1)


class Request(WireModel):
    """A suspension's question (CONTRACT §1; wire keys fixed: ``expiresAt``)."""

    id: str
    kind: str
    prompt: str
    url: str | None = None
    data: dict[str, Any] | None = None
    expires_at: str | None = Field(default=None, alias="expiresAt")


ANSWER_MESSAGE_CHARS: Final = 4_000
"""The longest ``Answer.message``, characters."""

EDITED_ARGS_BYTES: Final = 64 * 1024
"""The most JSON (UTF-8 bytes, compact) ``Answer.edited_args`` may hold: it becomes the
arguments of one tool call, a history payload."""


class Answer(WireModel):
    """The answer to a Request (CONTRACT §1). ``reason`` only when not ok.

    ``by`` (optional, ours): who answers, as the sender states it (``tnx answer`` and the
    Python client fill in ``user@host``); checked against the agent's approvers and recorded
    in the audit as unverified.

    ``edited_args`` (optional, ours): approve with other arguments. A JSON
    object that replaces the whole arguments of the tool call that suspended (not merged);
    only with ``ok=true``; at most :data:`EDITED_ARGS_BYTES` of JSON. It is checked against
    the tool's parameters schema before it is taken (a bad edit is refused, the Request stays
    pending), the tool runs once with it, and the tool's result the model reads starts with
    a note naming the edit (``docs/guide/approvals.md``).

    ``message`` (optional, ours): the reviewer's words for the model, at most
    :data:`ANSWER_MESSAGE_CHARS` characters. With ``ok=false`` they are the tool's result
    (``declined by the reviewer: <message>``); with ``ok=true`` they are noted before the
    tool's result. The turn goes on either way.

    ``routed_via`` (optional, ours, set by the runtime): a parent that routes the Answer down
    to the child parked on it (by signal) names the path the first handle took it by
    (``update`` or ``signal``), so the child's page says it as the audit does (walk 8). It
    is a label for display: the audit reads the history for the events themselves.

    Raises:
        pydantic.ValidationError: ``edited_args`` with ``ok=false``, or over the bound.
    """

    id: str = Field(min_length=1, max_length=1_100)  # a Request id: a handle id (<= 1,000 B) + "#n"
    ok: StrictBool
    data: dict[str, Any] | None = None
    reason: Literal["declined", "cancelled", "expired"] | None = None
    by: str | None = Field(default=None, min_length=1, max_length=200)
    edited_args: dict[str, Any] | None = None
    message: str | None = Field(default=None, min_length=1, max_length=ANSWER_MESSAGE_CHARS)
    routed_via: Literal["signal", "update"] | None = None

    @model_validator(mode="after")
    def _edit_only_approves(self) -> Answer:
        if self.edited_args is not None:
            if not self.ok:
                raise ValueError(
                    "edited_args approves a call with other arguments: only with ok=true"
                )
            size = len(json.dumps(self.edited_args, separators=(",", ":"), default=str).encode())
            if size > EDITED_ARGS_BYTES:
                raise ValueError(
                    f"edited_args is {size} bytes of JSON; at most {EDITED_ARGS_BYTES}"
                )
        return self


class TaskResult(WireModel):
    """The outcome of one wake (CONTRACT §1).

    Attributes:
        text: the final reply, or the error text.
        is_error: True for every status except ``done`` and ``pending``.
        status: one of :data:`ResultStatus`.
        pending: the Request, when status is ``pending``.
        turns: LLM round trips this wake used.
        total_tokens: tokens this wake used.
        limit: which limit stopped the turn, only when status is ``incomplete``.
        cost: the money this wake's LLM and summarizer calls cost (:class:`Cost`).
    """

    text: str = ""
    is_error: bool = False
    status: ResultStatus
    pending: Request | None = None
    turns: int = 0
    total_tokens: int = 0
    limit: LimitName | None = None
    cost: Cost = Field(default_factory=Cost)

    @property
    def cost_usd(self) -> Decimal | None:
        """This wake's cost in USD; None when some call was unpriced (cost unknown)."""
        return self.cost.usd


class Usage(WireModel):
    """Usage of one LLM call, in tokens, and its cost.

    Attributes:
        prompt_tokens: every input token, cached ones included (both wire styles:
            Anthropic's ``input_tokens`` + ``cache_read_input_tokens`` +
            ``cache_creation_input_tokens``; OpenAI's ``prompt_tokens``).
        completion_tokens: output tokens.
        total_tokens: the provider's total (prompt + completion when it gives none).
        cached_tokens: the part of ``prompt_tokens`` read from the provider's cache (OpenAI
            ``prompt_tokens_details.cached_tokens``, Anthropic ``cache_read_input_tokens``),
            priced at the cached-input rate; never counted twice.
        cache_write_tokens: the part of ``prompt_tokens`` written to the cache (Anthropic
            ``cache_creation_input_tokens``).
        cost: the call's cost as the worker's price table says (``unpriced`` 1: the model
            has none).
    """

    prompt_tokens: int = 0
    completion_tokens: int = 0
    total_tokens: int = 0
    cached_tokens: int = 0
    cache_write_tokens: int = 0
    cost: Cost = Field(default_factory=Cost)

    @property
    def cost_usd(self) -> Decimal | None:
        """The call's cost in USD; None when its model has no price (cost unknown)."""
        return self.cost.usd


class ToolCall(WireModel):
    """One tool call requested by the model; ``arguments`` is the raw JSON text."""

    id: str
    name: str
    arguments: str = "{}"


class Message(WireModel):
    """One transcript message, in a wire-neutral shape.

    Attributes:
        role: ``system``, ``user``, ``assistant`` or ``tool``.
        content: the text (None for an assistant message that only calls tools).
        tool_calls: tool calls of an assistant message.
        tool_call_id: the call a ``tool`` message answers.
    """

    role: Literal["system", "user", "assistant", "tool"]
    content: str | None = None
    tool_calls: list[ToolCall] | None = None
    tool_call_id: str | None = None


class ToolResult(WireModel):
    """What a tool returns (CONTRACT §1): ``output`` text, ``is_error``, ``metadata``.

    ``metadata["pending"]`` holding a Request (without ``id``: the workflow assigns a
    deterministic one) is a suspension, never an error; build it with ``pending(...)``.
    """

    output: str = ""
    is_error: bool = False
    metadata: dict[str, Any] = Field(default_factory=dict)


class ToolOptions(WireModel):
    """How the workflow schedules one tool's activity (set by the tool, resolved at spawn).

    Attributes:
        timeout_ms: start-to-close timeout of one attempt, in ms.
        max_attempts: attempts before the error becomes an ``is_error`` result (default 1:
            tools may have side effects; a tool opts in to retries).
        initial_retry_ms: first retry delay, in ms.
        workspace: the tool needs a place (a working directory, a shell, a checkout): its
            calls run on the worker holding the handle's workspace
            (``docs/guide/workspaces.md``).
    """

    timeout_ms: int = Field(default=60_000, ge=1)
    max_attempts: int = Field(default=1, ge=1)
    initial_retry_ms: int = Field(default=1_000, ge=1)
    workspace: bool = False


MCP_SERVER_NAME = r"^[A-Za-z0-9]+(?:[-_][A-Za-z0-9]+)*$"
"""An MCP server's name: letters and digits, single ``-`` or ``_`` between them, so the
``__`` of an offered tool name (``<server>__<tool>``, ``workflows/contract/mcp.py``) splits at
the server's end."""


class McpServer(WireModel):
    """An MCP server an agent's tools come from (docs/guide/mcp.md): a stdio
    command the worker starts, or a streamable-HTTP URL. Its process or session belongs to the
    worker (``activities/mcp.py``), never to workflow code; the worker resolves a call's server
    by ``name`` in its own registry, so a command in a workflow's input is never run.

    This def is workflow state (it is part of the AgentDef): put no secret in ``headers`` or
    ``env``; name worker environment variables in ``header_env`` / ``pass_env`` instead.

    Attributes:
        name: the prefix of its offered tool names (:data:`MCP_SERVER_NAME`, at most 20).
        command: the stdio server's executable (exactly one of ``command`` and ``url``).
        args: its arguments.
        env: environment variables set for it, over the MCP SDK's default safe set
            (``HOME``, ``PATH``, ...).
        pass_env: names of the worker's environment variables passed to it as they are.
        cwd: its working directory (None: the worker's).
        url: the streamable-HTTP endpoint (``http://`` or ``https://``).
        headers: HTTP headers sent with every request.
        header_env: HTTP header -> the worker's environment variable holding its value.
        tools: the MCP tool names offered (None: all the server lists).
        approval: MCP tool names that need an approval before each call (``"*"``: all); such
            a call suspends like ``pending(kind="approval")``, and runs once it is answered.
        options: each call's activity timeout and retries (:class:`ToolOptions`).
        list_ttl_ms: how long a worker reuses the server's tool listing, in ms (a
            ``notifications/tools/list_changed`` from the server drops it at once).
        connect_timeout_ms: how long starting the server, or connecting and initializing the
            session, may take, in ms.
    """

    name: str = Field(min_length=1, max_length=20, pattern=MCP_SERVER_NAME)
    command: str | None = Field(default=None, min_length=1)
    args: list[str] = Field(default_factory=list)
    env: dict[str, str] = Field(default_factory=dict)
    pass_env: list[str] = Field(default_factory=list)
    cwd: str | None = None
    url: str | None = Field(default=None, pattern=r"^https?://")
    headers: dict[str, str] = Field(default_factory=dict)
    header_env: dict[str, str] = Field(default_factory=dict)
    tools: list[str] | None = None
    approval: list[str] = Field(default_factory=list)
    options: ToolOptions = Field(default_factory=ToolOptions)
    list_ttl_ms: int = Field(default=300_000, ge=0)
    connect_timeout_ms: int = Field(default=30_000, ge=1)

    @model_validator(mode="after")
    def _one_transport(self) -> McpServer:
        if (self.command is None) == (self.url is None):
            raise ValueError(f"MCP server {self.name!r} needs exactly one of command and url")
        if self.url is None and (self.headers or self.header_env):
            raise ValueError(f"MCP server {self.name!r}: headers need a url")
        if self.command is None and (self.args or self.env or self.pass_env or self.cwd):
            raise ValueError(f"MCP server {self.name!r}: args, env, pass_env, cwd need a command")
        if self.tools is not None:
            # A name here that is not offered is a typo that would let the tool it meant run
            # with no approval: refused (the worker checks the server's own listing too).
            stray = sorted(set(self.approval) - set(self.tools) - {"*"})
            if stray:
                raise ValueError(
                    f"MCP server {self.name!r}: approval names tools not in its tools: "
                    + ", ".join(map(repr, stray))
                )
        return self

    def needs_approval(self, tool: str) -> bool:
        """Whether a call of MCP tool ``tool`` (its server-side name) needs an approval."""
        return "*" in self.approval or tool in self.approval


class RuntimeOptions(WireModel):
    """Runtime-wide options, fixed when the root workflow starts and inherited by every handle.

    Attributes:
        inbox_cap: inbox bound per handle (CONTRACT §3, default 8).
        shutdown_ms: grace for a running turn at close, in ms (default 200).
        llm_timeout_ms: start-to-close timeout of one LLM call attempt, in ms.
        llm_heartbeat_ms: heartbeat timeout of an LLM call, in ms.
        llm_max_attempts: attempts of one LLM call before the turn fails (Temporal retry
            policy; the HTTP client never retries).
        llm_initial_retry_ms: first retry delay, in ms (doubles each attempt).
        trace_cap: trace lines kept per handle; older lines are dropped and counted.
        interpreter_timeout_ms: how long an interpreter (``wait_for``) may take, in ms.
        continue_as_new_updates: updates after which an idle handle continues as new
            (1 to 1,900, default 1,000; Temporal allows 2,000 per run).
        continue_as_new_events: history events after which an idle handle continues as new
            (100 to 40,000, default 20,000; Temporal terminates a run at 51,200); it also
            does when Temporal suggests it.
        continue_as_new_signals: signals received in one run (rejected ones included) after
            which a handle continues as new (10 to 8,000, default 2,000; Temporal refuses
            signals past 10,000 per run).
        continue_as_new_bytes: history bytes of one run after which a handle continues as
            new (64 KiB to 20 MiB, default 4 MiB; Temporal terminates a run at 50 MiB).
            Large signals arrive faster than one per workflow task, so the margin is wide.
        continue_as_new_min_run_ms: the shortest run that continues as new, in ms (0 to
            60,000, default 1,200: Temporal delays the first workflow task of a run that
            follows one shorter than ``history.workflowIdReuseMinimalInterval``, 1 s by
            default). 0 only on a
            server whose interval is 0: then a flooded run continues as new as soon as it is
            long (``docs/guide/production.md``, "Server limits and floods").
        live_usage_ms: usage rolls up to the parent at most once per this many ms of
            workflow time (CONTRACT §4 "live"), as one coalesced report: within a turn after
            an LLM call, and after a turn settles, flushed by a durable timer,
            so a burst of turns costs one report. Under a finite pool above, every call and
            settle reports at once (the pool is enforced live). None: report every settle
            at once.
        prompt_in_visibility: whether the ``AgentRequestPrompt`` search attribute holds a
            pending Request's prompt (its first 160 characters). Search attributes are never
            encrypted (Temporal indexes them): they are in clear in visibility, in describe
            and in the history's upsert events. :class:`~toolnexus_temporal.AgentRuntime` sets
            it False when its client has a payload codec unless it is given explicitly; the
            queue then shows each Request's id, kind and waiting time, and the prompt is read
            through the ``view`` query (encrypted like every payload).
        context: the context policy of agents whose AgentDef sets none (``"unbounded"``:
            the whole transcript is sent, an explicit opt-out; None:
            :data:`DEFAULT_CONTEXT`).
        workspace_lost_ms: how long a workspace tool call waits for the worker holding the
            handle's workspace to start it (Temporal's schedule-to-start timeout) before
            that worker counts as gone and a new workspace is claimed, in ms (None:
            ``WORKSPACE_LOST_MS``, 10 s; ``docs/guide/workspaces.md``).
    """

    inbox_cap: int = Field(default=8, ge=1)
    shutdown_ms: int = Field(default=200, ge=0)
    llm_timeout_ms: int = Field(default=120_000, ge=1)
    llm_heartbeat_ms: int = Field(default=10_000, ge=1_000)
    llm_max_attempts: int = Field(default=4, ge=1)
    llm_initial_retry_ms: int = Field(default=1_000, ge=1)
    trace_cap: int = Field(default=2_000, ge=10)
    interpreter_timeout_ms: int = Field(default=7 * 24 * 3600 * 1000, ge=1_000)
    continue_as_new_updates: int = Field(default=1_000, ge=1, le=1_900)
    continue_as_new_events: int = Field(default=20_000, ge=100, le=40_000)
    continue_as_new_signals: int = Field(default=2_000, ge=10, le=8_000)
    continue_as_new_bytes: int = Field(default=4 * 2**20, ge=2**16, le=20 * 2**20)
    continue_as_new_min_run_ms: int = Field(default=1_200, ge=0, le=60_000)
    live_usage_ms: int | None = Field(default=1_000, ge=0)
    prompt_in_visibility: bool = True
    context: ContextPolicy | Unbounded | None = None
    workspace_lost_ms: int | None = Field(default=None, ge=100)


class TraceLine(WireModel):
    """One trace line (CONTRACT §7): ``"{id}: {from}→{to} ({why})"`` or an event line.

    Attributes:
        seq: per-handle sequence number, from 1.
        at_ms: workflow time of the event, ms since the Unix epoch.
        line: the text.
    """

    seq: int
    at_ms: int
    line: str


class TraceEntry(TraceLine):
    """A :class:`TraceLine` as the ``trace`` query returns it: with its time readable, for the
    web UI and the ``temporal`` CLI, which show query results as JSON.

    Attributes:
        at: ``at_ms`` as ISO 8601 in UTC with milliseconds (``2026-12-01T21:12:03.123Z``).
    """

    at: str

    @classmethod
    def of(cls, line: TraceLine) -> TraceEntry:
        """``line`` with its readable time."""
        return cls(seq=line.seq, at_ms=line.at_ms, at=iso_utc(line.at_ms), line=line.line)


def iso_utc(at_ms: int) -> str:
    """``at_ms`` (ms since the Unix epoch) as ISO 8601 in UTC: ``2026-12-01T21:12:03.123Z``.
    Integer arithmetic only (no clock, no ``datetime`` in workflow code): the proleptic
    Gregorian calendar of days since 1970-01-01 (H. Hinnant's ``civil_from_days``)."""
    seconds, ms = divmod(at_ms, 1000)
    days, second_of_day = divmod(seconds, 86_400)
    hour, rest = divmod(second_of_day, 3600)
    minute, second = divmod(rest, 60)
    z = days + 719_468
    era = z // 146_097
    doe = z - era * 146_097
    yoe = (doe - doe // 1460 + doe // 36_524 - doe // 146_096) // 365
    doy = doe - (365 * yoe + yoe // 4 - yoe // 100)
    mp = (5 * doy + 2) // 153
    day = doy - (153 * mp + 2) // 5 + 1
    month = mp + 3 if mp < 10 else mp - 9
    year = yoe + era * 400 + (1 if month <= 2 else 0)
    return f"{year:04d}-{month:02d}-{day:02d}T{hour:02d}:{minute:02d}:{second:02d}.{ms:03d}Z"


class HandleView(WireModel):
    """The read model of a handle returned by queries and by every verb (CONTRACT §2)."""

    id: str
    name: str
    parent: str | None
    depth: int
    state: HandleStateName
    inbox_count: int
    children: list[str]
    usage_total: int
    turns_total: int
    tool_calls_total: int
    pool_tokens: int | None
    pool_tool_calls: int | None
    wall_deadline_ms: int | None
    pending_req: Request | None
    last_result: TaskResult | None
    result_seq: int
    conv_id: str
    transcript_len: int
    last_error: str | None
    defn: AgentDef | None
    store_key: str | None = None
    slot_parent: bool | None = None
    queued: bool = False
    """A wake waits for one of the parent's ``max_concurrent`` slots."""
    subtree_tool_calls: int = 0
    """Tool calls of this handle and all its descendants."""
    report_seq: int = 0
    """Reports sent to the parent (a ``task`` child's last one is its workflow result)."""
    pending_since_ms: int | None = None
    """When ``pending_req`` was made, ms since the epoch (workflow time); None without one
    (and for a Request made before the field existed)."""
    escalated_to: str | None = None
    """Where ``pending_req`` escalated (``queue:NAME`` or ``interpreter:NAME``); None: it has
    not, or the handle waits for nothing."""
    paused: bool = False
    """The handle is paused: it takes posts and ticks but starts no turn (``pause.py``)."""
    tick: TickSpec | None = None
    """The tick schedule in force (``ticks.py``); None: none."""
    next_tick_ms: int | None = None
    """When the next tick fires, ms since the epoch (workflow time); None without a
    schedule."""
    cost: Cost = Field(default_factory=Cost)
    """Money spent by this handle and all its descendants (:class:`Cost`)."""
    pool_cost_usd: Usd | None = None
    """Remaining money pool, USD (None = unlimited)."""
    messages_waiting: int = 0
    """Messages (wakes from hosts, a tick's while paused) waiting for a turn to hold them
    (``inbox.py``): an ``idle`` handle with messages waiting has a debounce window open, is
    paused, or waits for a slot."""
    window_ends_ms: int | None = None
    """When the open debounce window ends and one turn holds the waiting messages, ms since
    the epoch (workflow time); None: no window open."""

    @property
    def cost_usd(self) -> Decimal | None:
        """The subtree's cost in USD; None when some call was unpriced (cost unknown)."""
        return self.cost.usd


class HandleStatus(WireModel):
    """The small, per-verb part of a view, returned by updates (``turn``, ``admit_post``,
    ``wait``, ...) so each verb adds a constant number of bytes to history: no transcript, no
    last result, no children list, no definition (read those with the ``view`` query)."""

    id: str
    state: HandleStateName
    inbox_count: int = 0
    children_count: int = 0
    usage_total: int = 0
    turns_total: int = 0
    tool_calls_total: int = 0
    pool_tokens: int | None = None
    pool_tool_calls: int | None = None
    wall_deadline_ms: int | None = None
    pending_req: Request | None = None
    result_seq: int = 0
    transcript_len: int = 0
    last_error: str | None = None
    queued: bool = False
    """A wake waits for one of the parent's ``max_concurrent`` slots."""
    paused: bool = False
    """The handle is paused (``pause.py``)."""
    cost: Cost = Field(default_factory=Cost)
    """Money spent by this handle and all its descendants (:class:`Cost`)."""
    pool_cost_usd: Usd | None = None
    """Remaining money pool, USD (None = unlimited)."""


# ---- verb payloads (one model per signal / update so fields can be added later) ----
