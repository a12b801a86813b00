"""Plain, serializable data for the toolnexus agent contract (CONTRACT.md §1, §2).

Everything that crosses a Temporal boundary (workflow input, signal, update, query, activity
argument or result) is one of these pydantic models, so fields can be added later without
breaking running workflows. All durations are in milliseconds, all usage in tokens.

This module is deterministic and I/O free: the workflow sandbox imports it.
"""

from __future__ import annotations

from typing import Any, Literal

from pydantic import BaseModel, ConfigDict, Field, StrictBool

HandleStateName = Literal["idle", "running", "suspended", "closed"]
"""The four Handle states (CONTRACT §2)."""

ResultStatus = Literal["done", "pending", "incomplete", "interrupted", "closed", "timeout", "error"]
"""The closed TaskResult status vocabulary (CONTRACT §1). Only ``done`` and ``pending`` are not
errors."""

LimitName = Literal["maxTurns", "tokens", "toolCalls", "wallMs"]
"""Which budget limit stopped an ``incomplete`` turn (CONTRACT §1)."""

WireStyle = Literal["openai", "anthropic"]
"""LLM wire styles (CONTRACT §4)."""

ROOT_ID = "root"
"""The root handle's id (depth 0; never runs an LLM)."""

MAX_TEXT = 64_000
"""Characters at most in one inbox item, answer reason or tool output kept in history:
Temporal payloads are capped at 2 MB, and a turn carries the whole drained inbox. Larger
content belongs in a store, referenced by id or URL."""

MAX_PROMPT = 200_000
"""Characters at most in a wake prompt."""

MAX_WAIT_MS = 366 * 24 * 3600 * 1000
"""The longest ``wait`` timeout and ``max_wall_ms``: a year, in ms."""


class _Model(BaseModel):
    """Base: accept field names and aliases, forbid unknown keys so bad input is loud."""

    model_config = ConfigDict(populate_by_name=True, extra="forbid")


class Budget(_Model):
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
    """

    max_turns: int | None = Field(default=6, ge=1)
    max_tokens: int | None = Field(default=None, ge=0)
    max_tool_calls: int | None = Field(default=None, ge=0)
    max_wall_ms: int | None = Field(default=None, ge=1, le=MAX_WAIT_MS)
    max_children: int | None = Field(default=None, ge=0)
    max_concurrent: int | None = Field(default=8, ge=1)
    max_depth: int | None = Field(default=3, ge=0)


class AgentDef(_Model):
    """An agent definition; a registry maps names to these (CONTRACT §1).

    Attributes:
        name: the registry key; also the id segment of spawned handles.
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
    """

    name: str = Field(min_length=1, pattern=r"^[A-Za-z0-9_-]+$")
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


class InboxItem(_Model):
    """One unsolicited message waiting for the next wake (CONTRACT §1).

    The sender field is ``from`` on the wire (``from_`` in Python).
    """

    from_: str = Field(default="external", alias="from", min_length=1, max_length=200)
    channel: str = Field(default="external", min_length=1, max_length=64)
    text: str = Field(max_length=MAX_TEXT)


class Request(_Model):
    """A suspension's question (CONTRACT §1; wire keys fixed: ``expiresAt``)."""

    id: str
    kind: str
    prompt: str
    url: str | None = None
    data: dict[str, Any] | None = None
    expires_at: str | None = Field(default=None, alias="expiresAt")


class Answer(_Model):
    """The answer to a Request (CONTRACT §1). ``reason`` only when not ok."""

    id: str = Field(min_length=1, max_length=500)
    ok: StrictBool
    data: dict[str, Any] | None = None
    reason: Literal["declined", "cancelled", "expired"] | None = None


class TaskResult(_Model):
    """The outcome of one wake (CONTRACT §1).

    Attributes:
        text: the final reply, or the error text.
        is_error: True for every status except ``done`` and ``pending``.
        status: one of :data:`ResultStatus`.
        pending: the Request, when status is ``pending``.
        turns: LLM round trips this wake used.
        total_tokens: tokens this wake used.
        limit: which limit stopped the turn, only when status is ``incomplete``.
    """

    text: str = ""
    is_error: bool = False
    status: ResultStatus
    pending: Request | None = None
    turns: int = 0
    total_tokens: int = 0
    limit: LimitName | None = None


class Usage(_Model):
    """Token usage of one LLM call, in tokens."""

    prompt_tokens: int = 0
    completion_tokens: int = 0
    total_tokens: int = 0


class ToolCall(_Model):
    """One tool call requested by the model; ``arguments`` is the raw JSON text."""

    id: str
    name: str
    arguments: str = "{}"


class Message(_Model):
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


class ToolResult(_Model):
    """What a tool returns (CONTRACT §1): ``output`` text, ``is_error``, ``metadata``.

    ``metadata["pending"]`` holding a Request (without ``id``: the workflow assigns a
    deterministic one) is a suspension, never an error; build it with ``pending(...)``.
    """

    output: str = ""
    is_error: bool = False
    metadata: dict[str, Any] = Field(default_factory=dict)


class ToolOptions(_Model):
    """How the workflow schedules one tool's activity (set by the tool, resolved at spawn).

    Attributes:
        timeout_ms: start-to-close timeout of one attempt, in ms.
        max_attempts: attempts before the error becomes an ``is_error`` result (default 1:
            tools may have side effects; a tool opts in to retries).
        initial_retry_ms: first retry delay, in ms.
    """

    timeout_ms: int = Field(default=60_000, ge=1)
    max_attempts: int = Field(default=1, ge=1)
    initial_retry_ms: int = Field(default=1_000, ge=1)


class RuntimeOptions(_Model):
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
            (Temporal allows 2,000 per run).
        continue_as_new_events: history events after which an idle handle continues as new
            (Temporal terminates a run at 51,200); it also does when Temporal suggests it.
        live_usage_ms: inside a turn, a handle tells its parent its usage after an LLM call
            when its last report is at least this old (workflow time, ms), so usage rolls up
            live (CONTRACT §4) at one signal per interval rather than one per call. Under a
            finite pool above it reports after every call (the pool is enforced live). None:
            only when a turn settles or suspends.
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
    live_usage_ms: int | None = Field(default=1_000, ge=0)


class TraceLine(_Model):
    """One trace line (CONTRACT §7): ``"{id}: {from}→{to} ({why})"`` or an event line.

    Attributes:
        seq: per-handle sequence number, from 1.
        at_ms: workflow time of the event, ms since the Unix epoch.
        line: the text.
    """

    seq: int
    at_ms: int
    line: str


class PoolFloor(_Model):
    """Signal ``pool_floor`` from a parent: the remainder of the tightest ancestor pool,
    computed when the parent knew the child had spent ``basis_tokens`` / ``basis_tool_calls``
    (so the child subtracts what it spent since). None = unlimited."""

    tokens: int | None = None
    tool_calls: int | None = None
    basis_tokens: int = 0
    basis_tool_calls: int = 0


class BudgetAsk(_Model):
    """Signal ``budget_ask`` from a child before an LLM call or tool batch, when a finite pool
    sits above it: carries the child's usage so the parent's ledger is exact, and asks for
    the live remainder (answered by ``budget_reply``)."""

    child: str
    seq: int
    usage_total: int
    subtree_tool_calls: int


class BudgetReply(_Model):
    """Signal ``budget_reply`` to a child: the live remainder above it (None = unlimited)."""

    seq: int
    tokens: int | None = None
    tool_calls: int | None = None


class QueuedWake(_Model):
    """A child's wake waiting for one of its parent's ``max_concurrent`` slots."""

    child: str
    prompt: str | None = None


class Interpreter(_Model):
    """One link of an interpreter chain: handle ``handle_id`` answers with ``name``."""

    handle_id: str
    name: str


class ChildInfo(_Model):
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
    """

    state: HandleStateName = "idle"
    usage_total: int = 0
    subtree_tool_calls: int = 0
    report_seq: int = 0
    result_seq: int = 0
    last_result: TaskResult | None = None
    pending_req: Request | None = None
    parked: bool = False


class HandleState(_Model):
    """All state of one handle: the single serializable model behind queries and
    continue-as-new (CONTRACT §2).

    Attributes:
        id: the handle id (``root/worker.1``); also the conversation id.
        scope: optional runtime scope prefixed to workflow ids (``{scope}/{id}``).
        task_queue: the task queue every handle of this runtime runs on.
        defn: the agent definition; None only for the root.
        budget: the effective budget (the def's, or the spawn override; the runtime's for
            the root).
        parent: the parent's handle id; None only for the root.
        depth: 0 for the root.
        state: the Handle state.
        inbox: items waiting for the next wake.
        children: child handle ids in spawn order (never shrinks).
        spawn_count: successful spawns under this handle (the id counter).
        usage_total: tokens of this handle and all descendants.
        turns_total: LLM round trips over the lifetime.
        tool_calls_total: this handle's own tool calls over the lifetime.
        own_tokens: this handle's own tokens.
        subtree_tool_calls: tool calls of this handle and all descendants.
        pool_tokens_limit: the token pool carved at spawn (None = unlimited).
        pool_tool_calls_limit: the tool-call pool carved at spawn (None = unlimited).
        pool_tokens: remaining token pool: limit - usage_total (None = unlimited).
        pool_tool_calls: remaining tool-call pool (None = unlimited).
        wall_deadline_ms: deadline in ms since the epoch (None = none).
        pending_req: the Request, only while suspended.
        last_result: the most recent settled result.
        result_seq: how many results have settled (waiters wait for it to grow).
        transcript_len: messages committed to the conversation store.
        llm_seq: LLM calls started; the fence that stops a stale activity from writing.
        store_key: the transcript's key in the conversation store:
            ``{namespace}/{workflow id}@{first run id}``, so a store shared by several
            servers, or an id used again after its handle was gone, never mixes transcripts.
        request_seq: Requests raised by this handle (their ids are ``{id}#{n}``).
        floor: the ancestors' live remainder as last pushed by the parent (None: no
            ancestor has a finite pool).
        running_children: children holding one of this handle's ``max_concurrent`` slots,
            with their result count when the slot was granted.
        wake_queue: children's wakes waiting for a slot, FIFO.
        pushed_floors: the floor last pushed to each child.
        interpreters: the interpreter chain, nearest first: the handle's own ``wait_for``,
            then its ancestors' (CONTRACT §5).
        tool_options: activity options of the handle's tools, by tool name.
        report_results: report each settled result to the parent (children of ``task``).
        slot_parent: the parent limits ``max_concurrent``: a wake from outside asks it for a
            slot first. False: the handle admits its own wakes (no parent round trip). None
            (handles started before this field existed): ask the parent.
        grant_seq: slot grants handed to callers that relay the wake (``wake_child`` relay).
        grants: the undelivered-or-running relay grant id per child holding a slot.
        consumed_grant: the relay grant id this handle last admitted a wake for.
        children_info: the last report of each child, by child id.
        closing: close has begun: new posts and wakes are rejected.
        report_seq: reports sent to the parent.
        wake_prompt: the admitted wake's prompt, consumed when its turn starts.
        turn_inbox: items drained into the current turn (restored on interrupt or error).
        turn_pending: True from admission until the turn starts.
        unsent: messages produced but not yet stored (tool results of a turn stopped by a
            limit); they go first into the next LLM call.
        last_error: the last rejected input or failure, readable by operators.
        trace: trace lines (at most ``options.trace_cap``).
        trace_seq: trace lines ever written (seq of the newest).
        options: runtime options.
    """

    id: str
    scope: str | None = None
    task_queue: str
    defn: AgentDef | None = None
    budget: Budget = Field(default_factory=Budget)
    parent: str | None = None
    depth: int = 0
    state: HandleStateName = "idle"
    inbox: list[InboxItem] = Field(default_factory=list)
    children: list[str] = Field(default_factory=list)
    spawn_count: int = 0
    usage_total: int = 0
    turns_total: int = 0
    tool_calls_total: int = 0
    own_tokens: int = 0
    subtree_tool_calls: int = 0
    pool_tokens_limit: int | None = None
    pool_tool_calls_limit: int | None = None
    pool_tokens: int | None = None
    pool_tool_calls: int | None = None
    wall_deadline_ms: int | None = None
    pending_req: Request | None = None
    last_result: TaskResult | None = None
    result_seq: int = 0
    transcript_len: int = 0
    llm_seq: int = 0
    store_key: str | None = None
    request_seq: int = 0
    floor: PoolFloor | None = None
    running_children: dict[str, int] = Field(default_factory=dict)
    wake_queue: list[QueuedWake] = Field(default_factory=list)
    pushed_floors: dict[str, PoolFloor] = Field(default_factory=dict)
    interpreters: list[Interpreter] = Field(default_factory=list)
    tool_options: dict[str, ToolOptions] = Field(default_factory=dict)
    report_results: bool = False
    slot_parent: bool | None = None
    grant_seq: int = 0
    grants: dict[str, int] = Field(default_factory=dict)
    consumed_grant: int = 0
    children_info: dict[str, ChildInfo] = Field(default_factory=dict)
    closing: bool = False
    report_seq: int = 0
    wake_prompt: str | None = None
    turn_inbox: list[InboxItem] = Field(default_factory=list)
    turn_pending: bool = False
    unsent: list[Message] = Field(default_factory=list)
    last_error: str | None = None
    trace: list[TraceLine] = Field(default_factory=list)
    trace_seq: int = 0
    options: RuntimeOptions = Field(default_factory=RuntimeOptions)


class HandleView(_Model):
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


class HandleStatus(_Model):
    """The small, per-verb part of a view, returned by updates (``turn``, ``admit_post``,
    ``wait``, ...) so each verb adds a constant number of bytes to history: no transcript, no
    last result, no children list, no definition (read those with the ``view`` query)."""

    id: str
    state: HandleStateName
    inbox_count: int
    children_count: int
    usage_total: int
    turns_total: int
    tool_calls_total: int
    pool_tokens: int | None
    pool_tool_calls: int | None
    wall_deadline_ms: int | None
    pending_req: Request | None
    result_seq: int
    transcript_len: int
    last_error: str | None


# ---- verb payloads (one model per signal / update so fields can be added later) ----


class AgentInput(_Model):
    """Workflow input: the handle's whole state (fresh at spawn, carried by continue-as-new)."""

    state: HandleState


class SpawnRequest(_Model):
    """``spawn`` update input: the agent name and an optional budget override."""

    name: str
    budget: Budget | None = None


class SpawnResult(_Model):
    """``spawn`` update result: the child's view, or the SpawnError text (never both)."""

    handle: HandleView | None = None
    error: str | None = None


class WakeRequest(_Model):
    """``wake`` input: an optional prompt. ``granted`` is set by the parent when it hands the
    child one of its ``max_concurrent`` slots (a wake without it asks the parent first)."""

    prompt: str | None = Field(default=None, max_length=MAX_PROMPT)
    granted: StrictBool = False


class TurnRequest(_Model):
    """``turn`` update input: wake with an optional prompt, then wait for that wake's result
    (the client's ``wake`` + ``wait`` as one Temporal update: CONTRACT §3, §9).

    ``grant``: the slot grant id a parent that limits ``max_concurrent`` returned from
    ``wake_child`` with ``relay``; the handle admits one wake per grant id (a repeat of the
    id it used last goes through the parent's ``slot_request`` instead)."""

    prompt: str | None = Field(default=None, max_length=MAX_PROMPT)
    grant: int | None = Field(default=None, ge=1)


class WakeChildRequest(_Model):
    """``wake_child`` update / ``slot_request`` signal to a parent: admit ``child``'s wake
    under the parent's ``max_concurrent`` (CONTRACT §3 wake, §6).

    ``seen_result_seq``: how many results of the child the caller has seen settle; it tells
    the parent that a turn whose settle report is still on its way is over.

    ``relay``: the caller delivers the wake itself (``turn`` update with the returned
    ``grant``) instead of the parent signalling the child: no signal races the caller's
    update to the child, and the wake costs no signal events. A caller that dies before
    delivering it leaves the slot held until a ``wake`` of the same child is retried (the
    parent returns the same grant) or the child is closed.

    ``settled``: siblings' result counts the caller has seen settle since its last
    ``wake_child`` (child id → result_seq): their slots are freed at once, before their own
    reports arrive, so a wake right after a sibling's result is never queued behind it."""

    child: str
    prompt: str | None = Field(default=None, max_length=MAX_PROMPT)
    seen_result_seq: int = Field(default=0, ge=0)
    relay: StrictBool = False
    settled: dict[str, int] = Field(default_factory=dict, max_length=256)


class WakeChildResult(_Model):
    """``wake_child`` result: ``admitted`` (a slot was taken and the child told), ``queued``
    (FIFO, until a sibling hands its slot over) or ``noop`` (already running or suspended).

    ``after_seq`` is the child's result count at admission: a ``wait`` for the turn this wake
    starts waits for a result beyond it."""

    outcome: Literal["admitted", "queued", "noop"]
    after_seq: int
    state: HandleStateName
    grant: int | None = None


class PostResult(_Model):
    """``post`` result (CONTRACT §3): ``ok`` False with ``error`` (``inbox full``,
    ``inbox closed``) when rejected; the rejection is also a trace line."""

    ok: bool
    error: str | None = None
    status: HandleStatus


class InterruptRequest(_Model):
    """``interrupt`` input (reserved for future fields)."""


class CloseRequest(_Model):
    """``close`` input: ``force`` aborts a running turn at once; ``reason`` goes to the
    ``on_close`` hook and the trace."""

    force: StrictBool = False
    reason: str | None = Field(default=None, max_length=500)


class ChildReport(_Model):
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


class AnswerResult(_Model):
    """``answer`` update result: whether the Answer matched a pending Request, and where."""

    ok: bool
    error: str | None = None
    answered: str | None = None
    status: HandleStatus


class HookInput(_Model):
    """Input of the ``tnx.run_hook`` activity: run the registered hook ``hook`` for
    ``event`` (``spawn`` or ``close``) of handle ``handle_id``."""

    hook: str
    event: Literal["spawn", "close"]
    handle_id: str
    reason: str | None = None


class WaitRequest(_Model):
    """``wait`` update input: timeout in ms (None = wait as long as it takes); ``after_seq``:
    wait for a result beyond this count (set by a wake, so a wait that overtakes the wake's
    delivery still waits for its turn)."""

    timeout_ms: int | None = Field(default=None, ge=0, le=MAX_WAIT_MS)
    after_seq: int | None = Field(default=None, ge=0)


class WaitResponse(_Model):
    """``wait`` update result: the result and the handle's status after it."""

    result: TaskResult
    status: HandleStatus


# ---- activity payloads ----


class ResolveAgentInput(_Model):
    """Input of the ``tnx.resolve_agent`` activity."""

    name: str


class ResolveAgentResult(_Model):
    """The def and its tools' options, or the sorted known names when the name is unknown."""

    defn: AgentDef | None = None
    known: list[str] = Field(default_factory=list)
    tool_options: dict[str, ToolOptions] = Field(default_factory=dict)


class ToolCallInput(_Model):
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


class InterpretInput(_Model):
    """Input of the ``tnx.interpret`` activity: interpreter ``interpreter`` answers
    ``request`` on behalf of handle ``answerer``."""

    interpreter: str
    answerer: str
    request: Request


class LlmCallInput(_Model):
    """Input of the ``tnx.llm_call`` activity.

    The transcript never travels whole: the activity truncates the stored conversation
    ``conv_id`` to ``base_len`` messages (dropping any uncommitted tail from an aborted
    attempt or turn), appends ``new_messages``, calls the model with the whole stored
    transcript, stores the reply and returns it.

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
    """

    conv_id: str
    base_len: int
    fence: int = 0
    new_messages: list[Message]
    model: str = "inherit"
    style: WireStyle | None = None
    tools: list[str] = Field(default_factory=list)
    team: list[str] = Field(default_factory=list)


class LlmCallResult(_Model):
    """Result of ``tnx.llm_call``: the assistant message, its usage, the new stored length."""

    message: Message
    usage: Usage
    stored_len: int


def workflow_id_for(scope: str | None, handle_id: str) -> str:
    """The workflow id of a handle: its handle id, prefixed by ``{scope}/`` when scoped."""
    return f"{scope}/{handle_id}" if scope else handle_id


TASK_TOOL = "task"
"""The delegation tool's name (CONTRACT §4): ``{"agent": ..., "prompt": ...}``."""
