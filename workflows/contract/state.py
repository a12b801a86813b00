"""The state model of one handle: ``HandleState``, the single serializable model behind the
``state`` query and continue-as-new, and the records it holds (CONTRACT §2).

Fields are grouped by the component that owns them (see README "Layout"): the top level of
``HandleState`` holds what is set once at creation (identity, budget, options, pools carved
at spawn), the state machine's fields (``machine.py``) and visibility's (``visibility/``);
each other component writes one nested part, a :class:`WireModel` whose docstring names its
owner: ``leases`` (:class:`LeaseState`, ``leases.py``), ``approval`` (:class:`ApprovalState`,
``approvals/``), ``roster`` (:class:`RosterState`, ``children/``), ``intake``
(:class:`InboxState`, ``inbox.py``), ``usage`` (:class:`UsageState`, ``budgets.py``) and
``turn`` (:class:`TurnState`, ``turn/``) and ``background`` (:class:`BackgroundState`,
``children/background.py``). It is still one model: the ``state`` query returns
it and continue-as-new carries it whole (``AgentInput(state=...)``); a part left at its
defaults costs no history bytes. The shape is a durable contract: running workflows carry it
through continue-as-new, so fields are only ever added, with defaults. Deterministic and I/O
free.
"""

from __future__ import annotations

from collections.abc import Mapping
from decimal import Decimal
from types import MappingProxyType
from typing import Any, Final, Literal

from pydantic import Field, model_validator

from toolnexus_temporal.workflows.contract.models import (
    AgentDef,
    Answer,
    Budget,
    ContextSummary,
    Cost,
    HandleStateName,
    InboxItem,
    Message,
    Request,
    RuntimeOptions,
    TaskResult,
    TickSpec,
    ToolCall,
    ToolOptions,
    ToolResult,
    TraceLine,
    Usd,
    WireModel,
)
from toolnexus_temporal.workflows.contract.names import PROTOCOL, PROTOCOLS
from toolnexus_temporal.workflows.contract.workspace import WorkspaceState


class PoolFloor(WireModel):
    """Signal ``pool_floor`` from a parent: the remainder of the tightest ancestor pool,
    computed when the parent knew the child had spent ``basis_tokens`` / ``basis_tool_calls``
    (so the child subtracts what it spent since). None = unlimited. ``nonce``: see
    ``trust.py`` (sent, never kept). ``cost_usd`` / ``basis_cost_usd``: the money pool's, in
    USD (the basis: the child's priced cost)."""

    tokens: int | None = None
    tool_calls: int | None = None
    basis_tokens: int = 0
    basis_tool_calls: int = 0
    cost_usd: Usd | None = None
    basis_cost_usd: Usd = Decimal(0)
    nonce: str | None = Field(default=None, max_length=64)


class QueuedWake(WireModel):
    """A child's wake waiting for one of its parent's ``max_concurrent`` slots."""

    child: str
    prompt: str | None = None


class Lease(WireModel):
    """One of a parent's ``max_concurrent`` slots, held by a child.

    Attributes:
        id: the grant number (the parent's ``grant_seq`` when granted).
        sticky: the child keeps it across turns; False once recalled or when granted while
            other wakes waited (the child then returns it when its turn settles or parks).
    """

    id: int
    sticky: bool = True


class CachedDef(WireModel):
    """An agent definition from the worker's registry, as cached in a handle's state.

    Attributes:
        defn: the definition.
        tool_options: activity options of its tools, by tool name.
        at_ms: workflow time of the lookup, ms since the epoch (the refresh rule's clock).
    """

    defn: AgentDef
    tool_options: dict[str, ToolOptions] = Field(default_factory=dict)
    at_ms: int = 0


class Interpreter(WireModel):
    """One link of an interpreter chain: handle ``handle_id`` answers with ``name``."""

    handle_id: str
    name: str


class ChildInfo(WireModel):
    """What a parent knows of one child, from the child's latest report.

    Attributes:
        state: the child's state.
        usage_total: the child's subtree tokens.
        subtree_tool_calls: the child's subtree tool calls.
        report_seq: the sequence number of the report (older reports are ignored).
        result_seq: the child's settled results.
        last_result: the child's latest result.
        pending_req: the child's pending Request while suspended.
        parked: the child is parked on ``pending_req`` waiting for an Answer from outside
            (not being answered inline by an interpreter).
        nonce: the secret the parent gave the child at spawn: every message
            between the two carries it (see ``trust.py``).
        answer_id: the last Answer the child processed.
        answer_error: why the child rejected ``answer_id`` (None: taken).
        cost: the child's subtree cost (money).
        paused: the child is paused (it reports a pause and an unpause at once).
    """

    state: HandleStateName = "idle"
    usage_total: int = 0
    subtree_tool_calls: int = 0
    report_seq: int = 0
    result_seq: int = 0
    last_result: TaskResult | None = None
    pending_req: Request | None = None
    parked: bool = False
    nonce: str | None = None
    answer_id: str | None = None
    answer_error: str | None = None
    cost: Cost = Field(default_factory=Cost)
    paused: bool = False


class ParkedTurn(WireModel):
    """A turn parked on its own tool's Request, carried across continue-as-new (see
    ``carry.py``). The next run resumes the turn from it: it waits for the Answer to
    ``request``, re-runs call ``index`` with it, resolves the later suspensions in call
    order and continues the LLM loop.

    Attributes:
        calls: the tool calls of the reply being resolved, in call order.
        results: their results so far, in call order (an unresolved suspension keeps its
            ``metadata["pending"]``).
        index: the call whose Request waits for its Answer (-1: see ``unique``).
        request: that Request (the handle's ``pending_req``).
        llm_calls: the turn's LLM round trips so far (``max_turns`` counts them).
        tokens: the turn's tokens so far.
        cost: the turn's cost so far.
        turn_start_len: ``transcript_len`` when the turn started (a rollback returns to it).
        unsent_before: ``unsent`` when the turn started (a rollback restores it).
        unique: (``index`` -1: the reply's tool jobs still run, parked on delegated
            ``task`` children) the unique jobs (identical ``task`` calls share one).
        call_job: the job of each call.
        done: the results of the jobs that finished, by job index.
        children: the ``task`` child each unfinished job waits on, by job index.
    """

    calls: list[ToolCall]
    results: list[ToolResult]
    index: int
    request: Request
    llm_calls: int = 0
    tokens: int = 0
    cost: Cost = Field(default_factory=Cost)
    turn_start_len: int = 0
    unsent_before: list[Message] = Field(default_factory=list)
    unique: list[ToolCall] = Field(default_factory=list)
    call_job: list[int] = Field(default_factory=list)
    done: dict[int, ToolResult] = Field(default_factory=dict)
    children: dict[int, str] = Field(default_factory=dict)


class LeaseState(WireModel):
    """The lease protocol's state (owner: ``workflows/leases.py``, :class:`LeaseBook`): one
    of a parent's ``max_concurrent`` slots per running child.

    Attributes:
        held: (parent) the children holding one of this handle's ``max_concurrent`` slots,
            by child id.
        wake_queue: (parent) children's wakes waiting for a slot, FIFO.
        grant_seq: (parent) leases granted so far (the next lease's id is one more).
        lease: (child) the id of the parent's slot this handle holds, or None.
        lease_sticky: (child) the held lease outlives the turn (until the parent recalls it).
        recalled_lease: (child) the highest lease id recalled before its grant arrived
            (signals may overtake each other): that grant arrives not sticky.
        returned_lease: (child) the highest lease id this handle gave back. A grant of it that
            arrives later is stale: the parent re-sent it while the release was on its way.
        slot_waiting: (child) a wake waits for a slot from the parent (the handle shows
            ``queued``).
        queued_prompt: (child) the prompt of the wake waiting for a slot.
        slot_parent: (child, set at spawn) the parent limits ``max_concurrent``: a wake
            without a lease asks it for one first. False: the handle admits its own wakes (no
            parent round trip).
    """

    held: dict[str, Lease] = Field(default_factory=dict)
    wake_queue: list[QueuedWake] = Field(default_factory=list)
    grant_seq: int = 0
    lease: int | None = None
    lease_sticky: bool = False
    recalled_lease: int = 0
    returned_lease: int = 0
    slot_waiting: bool = False
    queued_prompt: str | None = None
    slot_parent: bool = False


class AuditEntry(WireModel):
    """One answered Request (issue 26 item 3): kept by the handle that raised it.

    Attributes:
        request_id: the Request's id (``{handle id}#{n}``).
        kind: its kind.
        prompt: its prompt (cut to 500 characters).
        tool: the tool that raised it.
        asked_ms: when it was raised (workflow time, ms since the epoch).
        answered_ms: when the Answer was taken (workflow time, ms since the epoch).
        path: how the Answer came to this handle: ``signal``, ``update``, ``interpreter``,
            ``expiry`` or ``escalation`` (an Answer a parent routed down came by ``signal``;
            ``rt.audit`` names the sender's event).
        routed_via: for an Answer a parent routed down, the path it came to the first
            handle by (``Answer.routed_via``; shown on the agent's page), else None.
        ok: the decision.
        reason: why not, when not ok.
        data: the Answer's data (over 2,000 characters of JSON: its start and length,
            ``approvals/audit.py`` ``kept_data``).
        by: who answered, as the sender stated it (``Answer.by``), or the interpreter.
        principal: the server-stamped principal (``type:name``) the approvers were enforced
            against, when the Request had approvers and the server stamped one.
        verified: whether the answerer was checked against that principal (never on a
            server without an authorizer and claim mapper: the dev server has none).
        escalated_to: where it escalated before it was answered (``queue:NAME`` or
            ``interpreter:NAME``).
        expires_at: its deadline (``Request.expires_at``), if it had one.
        arguments: the arguments the model called the tool with (JSON text, cut to 2,000
            characters), when the Request was raised by a tool call.
        edited_args: the arguments the reviewer approved instead (``Answer.edited_args``;
            bounded like ``data``).
        message: the reviewer's words for the model (``Answer.message``, cut to 2,000
            characters).
        run_id: the workflow run whose event delivered the Answer that was taken
            (``signal`` and ``update`` only; issue 36 item 1).
        update_id: that event's update id (``update``): its ``UpdateAccepted`` event.
        signal_seq: that event's place among the run's ``answer`` signals, from 1
            (``signal``): the audit names that event's sender, never a refused one's.
    """

    request_id: str
    kind: str = ""
    prompt: str = ""
    tool: str | None = None
    asked_ms: int | None = None
    answered_ms: int = 0
    path: str = "signal"
    ok: bool = False
    reason: str | None = None
    data: dict[str, Any] | None = None
    by: str | None = None
    principal: str | None = None
    verified: bool = False
    escalated_to: str | None = None
    expires_at: str | None = None
    arguments: str | None = None
    edited_args: dict[str, Any] | None = None
    message: str | None = None
    run_id: str | None = None
    routed_via: str | None = None
    update_id: str | None = None
    signal_seq: int | None = None


class CheckedAnswer(WireModel):
    """An Answer delivered by the ``answer`` signal whose worker-side checks (its sender's
    principal, its edit's schema) are under way (``approvals.Approvals.received``). Kept in
    the state so a continue-as-new carries it: the next run checks it again, in the run that
    delivered it (issue 36 item 8).

    Attributes:
        answer: the Answer as the workflow decoded it.
        run_id: the run whose history holds the signal event that delivered it.
        signal_seq: that event's place among the run's ``answer`` signals, from 1.
        last_event_id: the run's history length when the handler ran (the event is at or
            before it).
    """

    answer: Answer
    run_id: str
    signal_seq: int
    last_event_id: int


class ApprovalState(WireModel):
    """Requests and Answers (owner: ``workflows/approvals/``: :class:`Approvals`, and
    ``carry.py`` for ``parked``; ``pending_since_*`` are stamped by ``Visibility.publish``
    through ``rules.stamp_pending_since``).

    Attributes:
        pending_req: the Request, only while suspended.
        request_seq: Requests raised by this handle (their ids are ``{id}#{n}``).
        answer_id: the last Answer this handle processed (reported to the
            parent, whose ``admit_answer`` update waits for it).
        answer_error: why it rejected ``answer_id`` (None: taken or forwarded).
        parked: the parked turn a continue-as-new carried over; the new run
            resumes it and clears the field.
        pending_since_ms: workflow time, ms since the epoch, when ``pending_req`` was first
            published (None while there is none; set by ``Visibility.publish``, no command).
        pending_since_id: the Request id ``pending_since_ms`` belongs to.
        interpreters: the interpreter chain, nearest first: the handle's own ``wait_for``,
            then its ancestors' (CONTRACT §5); set at spawn.
        audit: the answered Requests of this handle, oldest first, the last
            ``audit.AUDIT_KEEP`` of them (``workflows/approvals/audit.py``).
        escalated_to: where the pending Request escalated (``queue:NAME`` /
            ``interpreter:NAME``), None before; cleared with ``pending_req``.
        checking: Answers by signal being checked (at most ``approvals.CHECKING_MAX``;
            more are refused at once), oldest first: carried across continue-as-new, checked
            again by the next run.
    """

    pending_req: Request | None = None
    request_seq: int = 0
    answer_id: str | None = None
    answer_error: str | None = None
    parked: ParkedTurn | None = None
    pending_since_ms: int | None = None
    pending_since_id: str | None = None
    interpreters: list[Interpreter] = Field(default_factory=list)
    audit: list[AuditEntry] = Field(default_factory=list)
    escalated_to: str | None = None
    checking: list[CheckedAnswer] = Field(default_factory=list)


class RosterState(WireModel):
    """What a parent knows of its children (owner: ``workflows/children/``: ``children.py``
    spawns and takes reports, ``roster.py`` numbers and compacts, ``definitions.py`` caches
    ``agent_defs``).

    Attributes:
        children: child handle ids in spawn order (closed children leave it at
            continue-as-new: ``spawned`` lists all).
        spawn_count: successful spawns under this handle (the id counter).
        children_info: the last report of each child, by child id.
        spawned: every child ever spawned, one character per child in spawn order naming its
            agent in ``spawned_names`` (``roster.py``): the ``children`` of the view at one
            byte per child.
        spawned_names: the agent names of ``spawned``, first spawn first.
        closed_usage_total: subtree tokens of the closed children dropped from
            ``children_info`` at continue-as-new.
        closed_tool_calls: their subtree tool calls.
        closed_cost: their subtree cost.
        agent_defs: agent definitions looked up or inherited, by name (see
            ``definitions.py`` for the refresh rule).
    """

    children: list[str] = Field(default_factory=list)
    spawn_count: int = 0
    children_info: dict[str, ChildInfo] = Field(default_factory=dict)
    spawned: str = ""
    spawned_names: list[str] = Field(default_factory=list)
    closed_usage_total: int = 0
    closed_tool_calls: int = 0
    closed_cost: Cost = Field(default_factory=Cost)
    agent_defs: dict[str, CachedDef] = Field(default_factory=dict)


class WakeMessage(WireModel):
    """A wake's prompt that found its handle busy, kept until a turn holds it (issue 34:
    nothing sent is lost; ``inbox.py``).

    Attributes:
        seq: its number in arrival order over the handle's life (1, 2, ...).
        prompt: the wake's prompt (None: a wake without one).
        via: who sent it and by which path: ``run_turn``, ``wake``, ``tnx`` (the ``turn``
            update, named by the client), ``turn`` (an update that named nobody), ``signal``
            (the ``wake`` signal), ``tick`` (a tick's wake while paused).
        policy: the double-texting policy that applied (``contract/policy.py``).
        at_ms: when it arrived, ms since the epoch (workflow time).
    """

    seq: int = Field(ge=1)
    prompt: str | None = None
    via: str = "turn"
    policy: str = "enqueue"
    at_ms: int = 0


MessageRecordStatus = Literal["waiting", "taken", "answered", "busy", "refused"]
"""What became of a numbered message (:class:`MessageRecord`): ``waiting`` for a turn,
``taken`` by a turn that has no result yet, ``answered`` by a result, refused as ``busy`` (the
``reject`` policy) or ``refused`` (closed, closing: ``error`` says why)."""


class MessageRecord(WireModel):
    """The outcome of one message a host named (``WakeRequest.message_id``): what the client's
    signal fallback reads back with the ``message`` query (``inbox.py``, issue 34).

    Attributes:
        id: the sender's message id (at most :data:`MESSAGE_ID_MAX` characters).
        seq: its message number (``WakeMessage.seq``; 0: refused before it was numbered).
        status: :data:`MessageRecordStatus`.
        answer_seq: ``answered``: the ``result_seq`` of the result that answered it (its
            :class:`AnsweredResult` in ``InboxState.answers``).
        error: ``busy`` and ``refused``: why.
    """

    id: str = Field(max_length=64)
    seq: int = 0
    status: MessageRecordStatus = "waiting"
    answer_seq: int = 0
    error: str | None = None


class AnsweredResult(WireModel):
    """A result that answered some recorded message (kept once for all of them).

    Attributes:
        result_seq: its ``result_seq``.
        result: the result.
        size: its JSON size, bytes (counted against :data:`RECORD_BYTES`).
    """

    result_seq: int
    result: TaskResult
    size: int = 0


MESSAGE_ID_MAX: Final = 64
"""The longest message id a ``wake`` signal may carry, characters."""

RECORDS_MAX: Final = 256
"""How many message records a handle keeps (oldest evicted first)."""

RECORD_BYTES: Final = 128 * 1024
"""The JSON bytes of the answering results the records keep (oldest answered records evicted
first; the newest result is kept whatever its size)."""


class InboxState(WireModel):
    """Posts and wakes on their way into a turn (owner: ``workflows/inbox.py``,
    :class:`Inbox`; ``start_wake`` is set at spawn and consumed by ``Lifecycle.start``).

    Attributes:
        items: items waiting for the next wake.
        wake_prompt: the admitted wake's prompt, consumed when its turn starts.
        turn_inbox: items drained into the current turn (restored on interrupt or error).
        turn_pending: True from admission until the turn starts.
        held_wake: (older runs only) a wake held while an interrupt stopped the turn or while
            paused; a run of this build turns it into a message of ``wakes``.
        held_prompt: the prompt of ``held_wake``.
        start_wake: the handle was spawned with a wake (``wake_prompt`` holds its prompt):
            the wake is admitted when the workflow starts.
        wakes: wakes that found the handle busy, in arrival order, waiting for the turn
            that holds them all (:class:`WakeMessage`).
        turn_wakes: the messages the current turn holds (back to the front of ``wakes``
            when the ``interrupt`` policy stops that turn).
        wake_seq: messages numbered so far (the last ``WakeMessage.seq``).
        drained_seq: the highest message number a turn took; ``drained_after``: the
            ``result_seq`` when it did (the ``turn`` update of a message waits for the first
            result after it).
        restore_wakes: the ``interrupt`` policy stops the current turn: its messages go back.
        due_ms: a ``debounce`` window: no turn starts before this time (ms since the epoch,
            workflow time); None: none.
        records: what became of each message a host named (``WakeRequest.message_id``),
            oldest first, at most :data:`RECORDS_MAX` (:class:`MessageRecord`).
        answers: the results that answered a recorded message, oldest first
            (:class:`AnsweredResult`; at most :data:`RECORD_BYTES` but the newest).
    """

    items: list[InboxItem] = Field(default_factory=list)
    wake_prompt: str | None = None
    turn_inbox: list[InboxItem] = Field(default_factory=list)
    turn_pending: bool = False
    held_wake: bool = False
    held_prompt: str | None = None
    start_wake: bool = False
    wakes: list[WakeMessage] = Field(default_factory=list)
    turn_wakes: list[WakeMessage] = Field(default_factory=list)
    wake_seq: int = 0
    drained_seq: int = 0
    drained_after: int = 0
    restore_wakes: bool = False
    due_ms: int | None = None
    records: list[MessageRecord] = Field(default_factory=list)
    answers: list[AnsweredResult] = Field(default_factory=list)


class BackgroundChild(WireModel):
    """One background child as its parent knows it (``children/background.py``).

    Attributes:
        noted: the child's ``result_seq`` of the last result noted for the parent.
        delivered: the child's ``result_seq`` of the last result the parent got (drained
            into a turn, or returned by a background tool).
        woken: the parent's ``background_post`` woke it and no result has come since (its
            own reports say nothing of a turn's start).
    """

    noted: int = 0
    delivered: int = 0
    woken: bool = False


class BackgroundState(WireModel):
    """Background children that report back (owner: ``workflows/children/background.py``):
    children spawned with ``notify`` (``rt.spawn(..., notify=True)``, or the ``task`` tool
    with ``background: true``) whose settled turns reach this handle as inbox items.

    Attributes:
        followed: the background children, by child id (closed ones leave at
            continue-as-new).
        waiting: one inbox item per settled result of a child (channel ``child``), oldest
            first, for the next wake; never counted against ``inbox_cap``, at most
            ``background.UNREAD_PER_CHILD`` (and ``UNREAD_BYTES_PER_CHILD`` bytes) per child.
    """

    followed: dict[str, BackgroundChild] = Field(default_factory=dict)
    waiting: list[InboxItem] = Field(default_factory=list)


class TickState(WireModel):
    """The handle's tick schedule (owner: ``workflows/ticks.py``, :class:`Ticks`).

    Attributes:
        spec: the schedule in force (None: none).
        started: ``spec`` was taken from the definition (``AgentDef.tick``) once, at the
            first run; later runs keep what ``spec`` holds (``rt.unschedule`` included).
        next_ms: when the next tick fires, ms since the epoch (workflow time); None without
            a schedule.
        fired: ticks over the lifetime, each missed fire time counted (a catch-up tick after
            an outage counts every fire time it stands for).
        woke: ticks that woke the handle (each wake counts the ticks it delivered once).
        woke_at_ms: when a tick last woke the handle, ms since the epoch (workflow time); 0:
            never. A tick within half an interval of it does not wake the handle again
            (``workflows/ticks.py``, :func:`~toolnexus_temporal.workflows.ticks.min_gap_ms`).
    """

    spec: TickSpec | None = None
    started: bool = False
    next_ms: int | None = None
    fired: int = 0
    woke: int = 0
    woke_at_ms: int = 0


class PauseState(WireModel):
    """Whether the handle is paused (owner: ``workflows/pause.py``, :class:`Pause`; the wake
    it holds meanwhile are ``InboxState.wakes``).

    Attributes:
        paused: no turn starts: wakes are held (every one, in order), posts and ticks land in
            the inbox.
        since_ms: when it was paused, ms since the epoch (workflow time).
    """

    paused: bool = False
    since_ms: int | None = None


class UsageState(WireModel):
    """Subtree usage and the pools it draws from (owner: ``workflows/budgets.py``,
    :class:`Budgets`; the children's reports add theirs through ``children/watch.py``).

    Attributes:
        usage_total: tokens of this handle and all descendants.
        subtree_tool_calls: tool calls of this handle and all descendants.
        pool_tokens: remaining token pool: limit - usage_total (None = unlimited).
        pool_tool_calls: remaining tool-call pool (None = unlimited).
        floor: the ancestors' live remainder as last pushed by the parent (None: no
            ancestor has a finite pool).
        pushed_floors: the floor last pushed to each child.
        cost: money spent by this handle and all descendants.
        pool_cost_usd: remaining money pool, USD: limit - ``cost.priced_usd`` (None =
            unlimited).
    """

    usage_total: int = 0
    subtree_tool_calls: int = 0
    pool_tokens: int | None = None
    pool_tool_calls: int | None = None
    floor: PoolFloor | None = None
    pushed_floors: dict[str, PoolFloor] = Field(default_factory=dict)
    cost: Cost = Field(default_factory=Cost)
    pool_cost_usd: Usd | None = None


class TurnState(WireModel):
    """The conversation and this handle's own counters (owner: ``workflows/turn/``:
    :class:`Turn`, and ``toolbatch.py`` for ``tool_calls_total``).

    Attributes:
        transcript_len: messages committed to the conversation store.
        llm_seq: LLM calls started; the fence that stops a stale activity from writing.
        unsent: messages produced but not yet stored (tool results of a turn stopped by a
            limit); they go first into the next LLM call.
        start_len: ``transcript_len`` when the latest turn started: the messages before it
            are never rewritten (a turn rolls back to its own start), so a fork
            (``rt.fork``) of a running handle copies from them.
        turns_total: LLM round trips over the lifetime.
        own_tokens: this handle's own tokens.
        tool_calls_total: this handle's own tool calls over the lifetime.
        summary: the summary of the transcript's older turns under a ``summarize`` context
            policy (bounded by ``summary_max_tokens``; ``workflows/turn/context.py``).
        context_due: the last call's view left messages out, or its reported prompt tokens
            passed the bound: the summarizer runs before the next call.
        context_why: why the summarizer is due (its ``rt.trace`` line says it).
        view_tokens: the size of the committed transcript's view under ``summary`` with
            nothing left out, in estimated tokens (from the last LLM or summarizer result;
            ``workflows/turn/context.py`` adds the next call's messages to it).
        nothing_to_fold: the last summarizer call found no older turn left to fold: it is
            not asked again until a new turn starts.
        summary_tokens: tokens spent by the summarizer over the lifetime (part of
            ``own_tokens``).
        own_cost: this handle's own cost (its LLM and summarizer calls).
    """

    transcript_len: int = 0
    llm_seq: int = 0
    unsent: list[Message] = Field(default_factory=list)
    start_len: int = 0
    turns_total: int = 0
    own_tokens: int = 0
    tool_calls_total: int = 0
    summary: ContextSummary | None = None
    context_due: bool = False
    context_why: str = ""
    view_tokens: int = 0
    nothing_to_fold: bool = False
    summary_tokens: int = 0
    own_cost: Cost = Field(default_factory=Cost)


class UpdateState(WireModel):
    """The updates this handle applied, carried across continue-as-new so that one sent again
    with its id after the run continued is not applied twice (owner:
    ``workflows/lifecycle/updates.py``; Temporal dedupes update ids per run only).

    Attributes:
        applied: update id → what a repeat returns (the turn's ``after_seq``, the child a
            spawn made, the handle an Answer went to; empty for a post or an interrupt), oldest
            first, at most ``updates.APPLIED_CAP`` entries.
    """

    applied: dict[str, str] = Field(default_factory=dict)


class HandleState(WireModel):
    """All state of one handle: the single serializable model behind queries and
    continue-as-new (CONTRACT §2).

    The top level holds what is set once at creation and the machine's and visibility's
    fields; each part below is owned by the component that writes it (its class names the
    owner and its fields).

    Attributes:
        id: the handle id (``root/worker.1``); also the conversation id.
        scope: optional runtime scope prefixed to workflow ids (``{scope}/{id}``).
        task_queue: the task queue every handle of this runtime runs on.
        defn: the agent definition; None only for the root.
        budget: the effective budget (the def's, or the spawn override; the runtime's for
            the root).
        parent: the parent's handle id; None only for the root.
        depth: 0 for the root.
        options: runtime options (``Lifecycle`` reads its continue-as-new thresholds).
        protocol: the wire protocol generation of this handle's tree (``names.PROTOCOL``;
            ``versions.py``).
        nonce: (child) the secret its parent gave it at spawn; messages between
            the two carry it (``trust.py``). Never shown by the ``state`` query.
        one_shot: a ``task`` child: it closes itself once its first turn settles.
        report_results: report each settled result to the parent (children of ``task``).
        tool_options: activity options of the handle's tools, by tool name (read by the
            turn).
        wall_deadline_ms: deadline in ms since the epoch (None = none).
        pool_tokens_limit: the token pool carved at spawn (None = unlimited).
        pool_tool_calls_limit: the tool-call pool carved at spawn (None = unlimited).
        pool_cost_limit: the money pool carved at spawn, USD (None = unlimited).
        store_key: the transcript's key in the conversation store:
            ``{namespace}/{workflow id}@{first run id}``, so a store shared by several
            servers, or an id used again after its handle was gone, never mixes transcripts
            (set by the workflow's first run).
        recovered_from: the id of the run the server terminated that this handle was
            started again from (``AgentRuntime.recover``, ``tnx recover``); None when it
            never was. A recovered run does not run ``on_spawn`` again.
        state: the Handle state.
        last_result: the most recent settled result.
        result_seq: how many results have settled (waiters wait for it to grow).
        report_seq: reports sent to the parent.
        report_owed: a change the parent has not been told yet (sent coalesced).
        closing: close has begun: new posts and wakes are rejected (``Lifecycle``).
        trace: trace lines (at most ``options.trace_cap``).
        trace_seq: trace lines ever written (seq of the newest).
        last_error: the last rejected input or failure, readable by operators.
        leases: :class:`LeaseState` (``leases.py``).
        approval: :class:`ApprovalState` (``approvals/``).
        roster: :class:`RosterState` (``children/``).
        intake: :class:`InboxState` (``inbox.py``).
        usage: :class:`UsageState` (``budgets.py``).
        turn: :class:`TurnState` (``turn/``).
        updates: :class:`UpdateState` (``lifecycle/updates.py``).
        background: :class:`BackgroundState` (``children/background.py``).
        ticks: :class:`TickState` (``ticks.py``).
        pause: :class:`PauseState` (``pause.py``).
        workspace: :class:`WorkspaceState` (``turn/workspace.py``): the worker holding
            the handle's workspace.
    """

    # Identity and configuration, set once at creation (spawn, ``roots.py`` for the root).
    id: str
    scope: str | None = None
    task_queue: str
    defn: AgentDef | None = None
    budget: Budget = Field(default_factory=Budget)
    parent: str | None = None
    depth: int = 0
    options: RuntimeOptions = Field(default_factory=RuntimeOptions)
    protocol: int = PROTOCOL
    nonce: str | None = None
    one_shot: bool = False
    report_results: bool = False
    tool_options: dict[str, ToolOptions] = Field(default_factory=dict)
    wall_deadline_ms: int | None = None
    pool_tokens_limit: int | None = None
    pool_tool_calls_limit: int | None = None
    pool_cost_limit: Usd | None = None
    store_key: str | None = None
    recovered_from: str | None = None
    # The state machine (``machine.py``), and ``closing`` (``lifecycle/``).
    state: HandleStateName = "idle"
    last_result: TaskResult | None = None
    result_seq: int = 0
    report_seq: int = 0
    report_owed: bool = False
    closing: bool = False
    # Visibility (``visibility/``).
    trace: list[TraceLine] = Field(default_factory=list)
    trace_seq: int = 0
    last_error: str | None = None
    # The parts, each owned by one component.
    leases: LeaseState = Field(default_factory=LeaseState)
    approval: ApprovalState = Field(default_factory=ApprovalState)
    roster: RosterState = Field(default_factory=RosterState)
    intake: InboxState = Field(default_factory=InboxState)
    usage: UsageState = Field(default_factory=UsageState)
    turn: TurnState = Field(default_factory=TurnState)
    updates: UpdateState = Field(default_factory=UpdateState)
    background: BackgroundState = Field(default_factory=BackgroundState)
    ticks: TickState = Field(default_factory=TickState)
    pause: PauseState = Field(default_factory=PauseState)
    workspace: WorkspaceState = Field(default_factory=WorkspaceState)


WRITERS: Mapping[str, tuple[str, ...]] = MappingProxyType(
    {
        "leases": ("leases.py",),
        "approval": ("approvals/", "rules/approvals.py", "lifecycle/carry.py"),
        "roster": ("children/", "rules/roster.py"),
        "intake": ("inbox.py",),
        "usage": ("budgets.py",),
        "turn": ("turn/",),
        "updates": ("lifecycle/updates.py",),
        "background": ("children/background.py", "rules/background.py"),
        "ticks": ("ticks.py",),
        "pause": ("pause.py",),
        "workspace": ("turn/workspace.py",),
        "last_error": ("visibility/visibility.py",),
    }
)
"""Who may write each part of :class:`HandleState` (and the top-level fields with one home):
part (or field) name → the modules, as paths under ``workflows/`` (a trailing ``/``: the
folder), that write it. Every other module asks the owner through a method
(``tests/unit/test_state_owners.py`` scans ``workflows/`` and ``client/`` for writes and fails
on one from outside)."""


class AgentInput(WireModel):
    """Workflow input: the handle's whole state (fresh at spawn, carried by continue-as-new).

    The input of a protocol generation this build does not run (a pre-release agent, or one
    of a newer build) has another shape: it is read as its id, task queue and generation
    only, so that the run fails at once with ``UnsupportedProtocol`` (``versions.py``) rather
    than with a workflow task that cannot decode its input and retries forever.
    """

    state: HandleState

    @model_validator(mode="before")
    @classmethod
    def _other_generation(cls, data: Any) -> Any:
        state = data.get("state") if isinstance(data, dict) else None
        if not isinstance(state, dict):
            return data
        protocol = state.get("protocol", 1)  # states from before the field existed: 1
        if protocol in PROTOCOLS:
            return data
        keep = {k: state[k] for k in ("id", "task_queue", "scope") if isinstance(state.get(k), str)}
        keep.setdefault("id", "unknown")
        keep.setdefault("task_queue", "unknown")
        return {"state": {**keep, "protocol": protocol if isinstance(protocol, int) else -1}}


class RecoveryPoint(WireModel):
    """The answer of the ``recovery`` query: what a run started again from this run's
    current state would carry (``carry.py``). ``AgentRuntime.recover`` reads it from a run
    the server terminated (a worker replays that run's history to answer).

    Attributes:
        input: the input of the new run (the state without its nonces, as the ``state``
            query shows it; a parked turn travels in ``approval.parked``), or None.
        why: why there is none (a turn in flight, closed).
    """

    input: AgentInput | None = None
    why: str | None = None
