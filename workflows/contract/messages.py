"""Messages: one model per signal, update and activity payload (CONTRACT §3), so fields can
be added later without breaking running workflows. Deterministic and I/O free.
"""

from __future__ import annotations

from typing import Any, Literal

from pydantic import BaseModel, ConfigDict, Field, StrictBool

from toolnexus_temporal.workflows.contract.models import (
    MAX_PROMPT,
    MAX_WAIT_MS,
    AgentDef,
    Answer,
    Budget,
    ContextPolicy,
    ContextSummary,
    Cost,
    HandleStateName,
    HandleStatus,
    HandleView,
    Message,
    Policy,
    Request,
    TaskResult,
    TickSpec,
    ToolOptions,
    Usage,
    Usd,
    WireModel,
    WireStyle,
)


class BudgetAsk(WireModel):
    """Signal ``budget_ask`` from a child before an LLM call or tool batch, when a finite pool
    sits above it: carries the child's usage so the parent's ledger is exact, and asks for
    the live remainder (answered by ``budget_reply``)."""

    child: str
    seq: int
    usage_total: int
    subtree_tool_calls: int
    nonce: str | None = Field(default=None, max_length=64)
    cost: Cost = Field(default_factory=Cost)
    """The child's subtree cost."""


class BudgetReply(WireModel):
    """Signal ``budget_reply`` to a child: the live remainder above it (None = unlimited);
    ``cost_usd`` the money pool's, USD."""

    seq: int
    tokens: int | None = None
    tool_calls: int | None = None
    cost_usd: Usd | None = None
    nonce: str | None = Field(default=None, max_length=64)


class ForkSpec(WireModel):
    """What a ``spawn`` that forks carries (``rt.fork``, ``tnx fork``): the conversation to
    copy the first ``turns`` turns of, read by the client from the original's view.

    Attributes:
        source: the original's handle id (a sibling of the fork: same parent).
        store_key: the original's key in the conversation store.
        upto: how many of the original's messages may be read: its committed length when
            it was idle or closed, else where its turn in flight started (``TurnState.
            start_len``): only complete turns, which no later turn rewrites.
        turns: how many turns to copy (1 = the first), at least 1.
        model: the fork's model instead of its definition's (None: the definition's).
    """

    source: str = Field(min_length=1)
    store_key: str = Field(min_length=1)
    upto: int = Field(ge=0)
    turns: int = Field(ge=1)
    model: str | None = Field(default=None, min_length=1)


class ForkCopyInput(WireModel):
    """Input of the ``tnx.fork_transcript`` activity: copy the first ``fork.turns`` turns of
    ``fork.store_key`` (within its first ``fork.upto`` messages) to ``target_key``."""

    fork: ForkSpec
    target_key: str = Field(min_length=1)


class ForkCopyResult(WireModel):
    """Result of ``tnx.fork_transcript``: the fork's transcript length (messages), or why the
    fork is refused (``error``; nothing was written).

    Attributes:
        length: messages written under the target key (0 with ``error``).
        available: the turns the original offers (its complete turns).
        error: the refusal (a turn past the last), else None.
    """

    length: int = 0
    available: int = 0
    error: str | None = None


class SpawnRequest(WireModel):
    """``spawn`` update input: the agent name, an optional budget override, and optionally a
    first wake that travels with the spawn (``wake``, with ``prompt``): the child starts
    running at once, with no second message (a ``wait`` gives its result). ``notify``: a
    background child that reports back: each settled turn of it reaches the parent as one
    inbox item (``children/background.py``)."""

    name: str
    budget: Budget | None = None
    wake: StrictBool = False
    prompt: str | None = Field(default=None, max_length=MAX_PROMPT)
    notify: StrictBool = False
    fork: ForkSpec | None = None
    """A fork of a sibling's conversation (``rt.fork``): the child starts with its first
    turns (``children/fork.py``)."""


class SpawnResult(WireModel):
    """``spawn`` update result: the child's view, or the SpawnError text (never both)."""

    handle: HandleView | None = None
    error: str | None = None


class WakeRequest(WireModel):
    """``wake`` input: an optional prompt. ``granted`` is set by the parent when it hands the
    child one of its ``max_concurrent`` slots (a wake without it asks the parent first).

    ``nonce`` (here and in every runtime-internal message): the secret the parent gave the
    child at spawn, checked by the receiver (``trust.py``)."""

    prompt: str | None = Field(default=None, max_length=MAX_PROMPT)
    policy: Policy | None = None
    """The double-texting policy of this wake (None: the agent's ``double_texting``)."""
    message_id: str | None = Field(default=None, min_length=1, max_length=64)
    """The sender's id of this message (at most 64 characters; None: not recorded): the
    handle records what became of it, read back with the ``message`` query
    (:class:`MessageOutcome`). A second wake with an id already recorded is ignored."""
    granted: StrictBool = False
    lease: int | None = Field(default=None, ge=1)
    sticky: StrictBool = False
    nonce: str | None = Field(default=None, max_length=64)


class SlotRelease(WireModel):
    """Signal ``slot_release`` from a child to its parent: the child gave lease
    ``lease`` back (its turn settled or parked after a recall, or it is closing)."""

    child: str
    lease: int = Field(ge=1)
    nonce: str | None = Field(default=None, max_length=64)


class SlotRecall(WireModel):
    """Signal ``slot_recall`` from a parent to a child holding a sticky lease:
    other wakes wait, so give lease ``lease`` back once no turn of yours is running."""

    lease: int = Field(ge=1)
    nonce: str | None = Field(default=None, max_length=64)


class TurnRequest(WireModel):
    """``turn`` update input: wake with an optional prompt, then wait for that wake's result
    (the client's ``wake`` + ``wait`` as one Temporal update: CONTRACT §3, §9).

    ``policy``: what the wake does when the handle is busy (None: the agent's
    ``double_texting``; ``contract/policy.py``). ``via``: who sent it, kept with the waiting
    message (``run_turn``, ``wake``, ``tnx``; at most 40 characters)."""

    prompt: str | None = Field(default=None, max_length=MAX_PROMPT)
    policy: Policy | None = None
    via: str | None = Field(default=None, max_length=40)


class SlotRequest(WireModel):
    """Signal ``slot_request`` from a child to its parent: ``child`` was woken and holds no
    lease; grant it one of the parent's ``max_concurrent`` slots or queue its wake FIFO
    (CONTRACT §3 wake, §6; ``leases.py``).

    ``returned``: the highest lease id the child has given back. Its ``slot_release`` may
    arrive after this request (Temporal does not order signals between two workflows), so a
    parent whose books still show that lease takes it as returned instead of sending its
    grant again."""

    child: str
    returned: int = Field(default=0, ge=0)
    nonce: str | None = Field(default=None, max_length=64)


class PostResult(WireModel):
    """``post`` result (CONTRACT §3): ``ok`` False with ``error`` (``inbox full``,
    ``inbox closed``) when rejected; the rejection is also a trace line."""

    ok: bool
    error: str | None = None
    status: HandleStatus


class InterruptRequest(WireModel):
    """``interrupt`` input (reserved for future fields)."""


class ScheduleRequest(WireModel):
    """``schedule`` update input: the tick schedule to put in force (``ticks.py``); None
    removes it (``rt.unschedule``)."""

    tick: TickSpec | None = None


class PauseRequest(WireModel):
    """``admit_pause`` update input, and the ``pause`` signal's (``{"now": true}``).

    Attributes:
        paused: True to pause, False to unpause.
        now: (pause) interrupt a running turn at once rather than let it finish.
    """

    paused: StrictBool = True
    now: StrictBool = False


class CloseRequest(WireModel):
    """``close`` input: ``force`` aborts a running turn at once; ``reason`` goes to the
    ``on_close`` hook and the trace."""

    force: StrictBool = False
    reason: str | None = Field(default=None, max_length=500)


class ChildReport(WireModel):
    """Signal ``child_report`` from a child to its parent: an absolute snapshot, so reports
    coalesce and a late one is recognised by ``seq``."""

    id: str
    seq: int = Field(ge=1)
    state: HandleStateName
    usage_total: int = Field(ge=0)
    subtree_tool_calls: int = Field(ge=0)
    result_seq: int = Field(ge=0)
    last_result: TaskResult | None = None
    pending_req: Request | None = None
    parked: StrictBool = False
    nonce: str | None = Field(default=None, max_length=64)
    answer_id: str | None = None
    """The last Answer this handle processed (took, forwarded or rejected)."""
    answer_error: str | None = None
    """Why it rejected ``answer_id`` (None: taken or forwarded)."""
    cost: Cost = Field(default_factory=Cost)
    """The child's subtree cost (money, like ``usage_total`` for tokens)."""
    paused: StrictBool = False
    """The child is paused (``pause.py``): it starts no turn until unpaused."""


class AnswerResult(WireModel):
    """``answer`` update result: whether the Answer matched a pending Request, and where."""

    ok: bool
    error: str | None = None
    answered: str | None = None
    status: HandleStatus


class HookInput(WireModel):
    """Input of the ``tnx.run_hook`` activity: run the registered hook ``hook`` for
    ``event`` (``spawn`` or ``close``) of handle ``handle_id``."""

    hook: str
    event: Literal["spawn", "close"]
    handle_id: str
    reason: str | None = None


class WaitRequest(WireModel):
    """``wait`` update input: timeout in ms (None = wait as long as it takes); ``after_seq``:
    wait for a result beyond this count (set by a wake, so a wait that overtakes the wake's
    delivery still waits for its turn)."""

    timeout_ms: int | None = Field(default=None, ge=0, le=MAX_WAIT_MS)
    after_seq: int | None = Field(default=None, ge=0)


class WaitResponse(WireModel):
    """``wait`` update result: the result and the handle's status after it.

    ``again_after_seq`` set: no result yet, and the handle's idle run is continuing as new
    (``Lifecycle.waits_yield``: a held wait, on a paused handle or one with no result yet,
    would keep the run from ever continuing as new, and its history would grow with every
    tick and post): ask again with the ``wait`` update and ``after_seq`` this value;
    ``result`` is then a ``timeout`` placeholder."""

    result: TaskResult
    status: HandleStatus
    again_after_seq: int | None = None


MessageOutcomeStatus = Literal[
    "waiting", "taken", "answered", "busy", "refused", "closed", "unknown"
]
"""What the ``message`` query says of a message id: a message record's status
(``state.MessageRecordStatus``), ``closed`` (the handle closed before a turn answered it) or
``unknown`` (no record: never sent with that id, or evicted)."""


class MessageOutcome(WireModel):
    """``message`` query result: what became of the wake a host sent with ``message_id``.

    Attributes:
        id: the message id asked about.
        status: :data:`MessageOutcomeStatus`.
        result: ``answered``: the result of the turn that held the message (the first result
            after that turn started; never one of a turn the ``interrupt`` policy stopped and
            whose messages went on to a later turn).
        error: ``busy`` and ``refused``: why.
        handle: the handle's status now.
    """

    id: str
    status: MessageOutcomeStatus
    result: TaskResult | None = None
    error: str | None = None
    handle: HandleStatus


# ---- activity payloads ----


class ResolveAgentInput(WireModel):
    """Input of the ``tnx.resolve_agent`` activity."""

    name: str


class ResolveAgentResult(WireModel):
    """The def and its tools' options, or the sorted known names when the name is unknown."""

    defn: AgentDef | None = None
    known: list[str] = Field(default_factory=list)
    tool_options: dict[str, ToolOptions] = Field(default_factory=dict)
    team: list[ResolveAgentResult] = Field(default_factory=list)
    """The definitions of ``defn.team`` (one level), so a child
    that delegates with ``task`` needs no lookup of its own."""


class ToolCallInput(WireModel):
    """Input of the ``tnx.tool_call`` activity.

    Attributes:
        tool: the registered tool name.
        arguments: the model's JSON arguments text.
        handle_id: the calling handle.
        call_id: the model's tool call id.
        answer: the Answer, when the tool is re-run after its suspension was answered.
    """

    tool: str
    arguments: str = "{}"
    handle_id: str
    call_id: str
    answer: Answer | None = None


class InterpretInput(WireModel):
    """Input of the ``tnx.interpret`` activity: interpreter ``interpreter`` answers
    ``request`` on behalf of handle ``answerer``."""

    interpreter: str
    answerer: str
    request: Request


class LlmCallInput(WireModel):
    """Input of the ``tnx.llm_call`` activity.

    The transcript never travels whole: the activity reads the first ``base_len`` messages
    of the stored conversation ``conv_id``, calls the model with them and ``new_messages``,
    then in one store write truncates the conversation to ``base_len`` (dropping any
    uncommitted tail from an aborted attempt or turn), appends ``new_messages`` and the
    reply, and returns it.

    Attributes:
        conv_id: the conversation key (== handle id, scope-qualified).
        base_len: committed transcript length the workflow knows.
        fence: the call's sequence number; the store refuses writes older than the newest
            fence it has seen, so a cancelled attempt still running cannot overwrite a newer
            turn.
        new_messages: messages to append before the call.
        model: model name or ``"inherit"``.
        style: wire style override, or None for the worker's.
        tools: tool names offered to the model (schemas come from the worker's registry).
        team: agent names of the ``task`` tool (empty: no ``task`` tool).
        mcp: names of the MCP servers whose tools are offered too (the worker lists them,
            ``activities/mcp.py``; their schemas never enter history).
        deadline_ms: the handle's wall deadline (epoch ms): no model call starts
            past it and one in flight is aborted at it (``LlmWallDeadline``).
        context: the handle's context policy: the model is sent the view
            ``workflows/contract/context.py`` builds from the stored transcript (None: the
            whole transcript).
        summary: the summary of the older messages the view uses (bounded, from the
            handle's state).
        need_price: a finite money pool (``max_cost_usd``) holds the handle: a model the
            worker has no price for fails the call (``LlmUnpriced``) before it is sent.
    """

    conv_id: str
    base_len: int
    fence: int = 0
    new_messages: list[Message]
    model: str = "inherit"
    style: WireStyle | None = None
    tools: list[str] = Field(default_factory=list)
    team: list[str] = Field(default_factory=list)
    mcp: list[str] = Field(default_factory=list)
    deadline_ms: int | None = None
    context: ContextPolicy | None = None
    summary: ContextSummary | None = None
    need_price: bool = False


class LlmCallResult(WireModel):
    """Result of ``tnx.llm_call``: the assistant message, its usage, the new stored length.

    Attributes:
        dropped: under a context policy, the stored messages the call's view left out
            (neither sent nor summarized); the workflow runs the summarizer when it is
            above 0 or ``usage.prompt_tokens`` passed the bound.
        sent_estimate: under a context policy, the estimated size of what was sent, in
            tokens (``context.estimate_tokens``).
        view_tokens: under a context policy, the size the next call's view of the stored
            transcript (this reply included) would have if nothing were left out
            (``context.context_tokens``), in estimated tokens: with the messages the next
            call adds, the workflow runs the summarizer first when it would pass the bound.
    """

    message: Message
    usage: Usage
    stored_len: int
    dropped: int = 0
    sent_estimate: int = 0
    view_tokens: int = 0


class SummarizeInput(WireModel):
    """Input of the ``tnx.llm_summarize`` activity: fold the older turns of the committed
    transcript (its first ``length`` messages) into the summary.

    Attributes:
        conv_id: the conversation key.
        length: committed transcript length.
        policy: the handle's context policy (``older="summarize"``).
        summary: the current summary (None: none yet).
        model: model name or ``"inherit"``.
        style: wire style override, or None for the worker's.
        deadline_ms: the handle's wall deadline (epoch ms).
        need_price: as :class:`LlmCallInput`'s.
        pending_turns: the turns the messages about to be sent start
            (``context.summary_span``).
    """

    conv_id: str
    length: int
    policy: ContextPolicy
    summary: ContextSummary | None = None
    model: str = "inherit"
    style: WireStyle | None = None
    deadline_ms: int | None = None
    need_price: bool = False
    pending_turns: int = 0


class SummarizeResult(WireModel):
    """Result of ``tnx.llm_summarize``.

    Attributes:
        summary: the new summary (None: nothing to fold, and no model call was made).
        usage: the summarizer call's usage, in tokens.
        folded: the transcript messages this call folded into the summary.
        view_tokens: the size of the stored transcript's view under the new summary with
            nothing left out (``context.context_tokens``), in estimated tokens.
        older_left: older turns still unfolded (another call can fold them).
    """

    summary: ContextSummary | None = None
    usage: Usage = Field(default_factory=Usage)
    folded: int = 0
    view_tokens: int = 0
    older_left: int = 0


class PrincipalLookup(WireModel):
    """Input of the ``tnx.answer_principal`` activity: which event delivered an Answer.

    Attributes:
        workflow_id / run_id: the run whose history holds the event (the current one).
        request_id: the Answer's id.
        digest: :func:`~toolnexus_temporal.workflows.approvals.audit.answer_digest` of the
            Answer as the workflow decoded it (the event's input must decode to the same).
        path: ``signal`` (the ``answer`` signal) or ``update`` (``admit_answer``).
        update_id: the update's id (``update`` only: its accepted event names it).
        last_event_id: ``signal`` only: the history length when the handler ran; the
            delivering event is at or before it (the newest matching one is taken, when
            ``signal_seq`` is unset: a lookup from an older worker).
        signal_seq: ``signal`` only: the delivering event's place among the run's
            ``answer`` signal events, from 1 (the handler counts them): exactly that event,
            even among identical Answers in one workflow task (issue 36 item 1).
    """

    workflow_id: str
    run_id: str
    request_id: str
    digest: str
    path: Literal["signal", "update"]
    update_id: str | None = None
    last_event_id: int | None = None
    signal_seq: int | None = None


class StampedPrincipal(WireModel):
    """A server-stamped principal (temporal.api.common.v1.Principal): ``type`` (e.g. ``jwt``)
    and ``name`` (the identity the server's claim mapper verified)."""

    type: str = ""
    name: str


class PrincipalFound(WireModel):
    """Result of ``tnx.answer_principal``: the delivering event's id (None: no event matched)
    and its principal (None: the server stamped none, or the event was sent by another
    workflow, an ancestor forwarding the Answer, whose principal is its worker's)."""

    event_id: int | None = None
    principal: StampedPrincipal | None = None


class EditCheck(WireModel):
    """Input of the ``tnx.check_edit`` activity: may ``tool`` run with ``arguments``?

    Attributes:
        tool: the called tool's name (a registered tool, or ``<server>__<tool>``).
        arguments: the reviewer's ``Answer.edited_args``.
        handle_id: the handle whose Request the Answer is for.
    """

    tool: str
    arguments: dict[str, Any]
    handle_id: str


class EditChecked(WireModel):
    """Result of ``tnx.check_edit``: why the edit does not fit the tool's parameters schema
    (one line), or None when it fits."""

    error: str | None = None


class WatchChildrenInput(WireModel):
    """Input of the ``tnx.watch_children`` activity: the handles (ids, in runtime scope
    ``scope``) whose workflows to watch."""

    scope: str | None = None
    handle_ids: list[str]


class ChildEnd(WireModel):
    """One watched child whose workflow ended: its final view when it completed (a closed
    view), else None with ``why`` (terminated, failed, timed out, cancelled, not found) and
    ``last``: its last view (the ``view`` query of the ended workflow) when readable, so
    usage it had not reported yet is still counted, and ``orphans``: its children that were
    not closed then (nobody else can close them)."""

    id: str
    view: HandleView | None = None
    why: str = "ended"
    last: HandleView | None = None
    orphans: list[str] = Field(default_factory=list)


class WatchChildrenResult(WireModel):
    """Result of ``tnx.watch_children``: the watched children whose workflows ended (at least
    one)."""

    ended: list[ChildEnd]


LIVE_TAIL_MAX_CHARS = 2048
"""Most characters of a reply's text one ``LiveOutput`` carries (the end of the text so far).
At the worker's 1 s heartbeat throttle a host keeps up with a model writing up to ~2,000
characters (~500 tokens) a second; past that it reports the characters it skipped."""


class LiveCall(BaseModel):
    """A tool call the model has announced in its stream so far (the name is complete; the
    arguments may still be streaming).

    Attributes:
        id: the model's tool call id.
        name: the tool's name.
    """

    model_config = ConfigDict(extra="ignore")

    id: str
    name: str


class LiveOutput(BaseModel):
    """The heartbeat details of a running ``tnx.llm_call``: the reply streamed so far
    (``activities/live.py`` writes it, ``client/stream.py`` reads it). Never in workflow
    history, except the last one in the failure of a call that timed out; unknown keys are
    ignored, so hosts and workers of different versions read each other's.

    Attributes:
        attempt: the activity attempt that streams it (a retry starts the text again).
        offset: characters of the reply's text before ``tail``.
        tail: the last characters of the text so far (at most ``LIVE_TAIL_MAX_CHARS``).
        calls: tool calls announced so far, in stream order (at most 64).
        chunks: stream events received so far (about one token each for most providers).
        reply: the whole reply, once received, while it could not be stored yet (the
            conversation store is down; issue 23 item 2): a retried attempt of this call
            (``activity.info().heartbeat_details``) stores and returns it instead of asking
            the model again. Only when its JSON fits ``HEARTBEAT_DETAILS_BYTES`` (limits.py).
        fence: the call (``LlmCallInput.fence``) ``reply`` answers.
    """

    model_config = ConfigDict(extra="ignore")

    attempt: int = 1
    offset: int = Field(default=0, ge=0)
    tail: str = ""
    calls: list[LiveCall] = Field(default_factory=list)
    chunks: int = 0
    reply: LlmCallResult | None = None
    fence: int | None = None

    @property
    def length(self) -> int:
        """Characters of text streamed so far."""
        return self.offset + len(self.tail)
