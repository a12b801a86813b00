"""The Handle state machine (CONTRACT §2, §7): the transition table, transitions with their
trace line, settling a turn, and the report of each change to the parent.

:data:`TRANSITIONS` is the rule as data, checked by :func:`transition_error`. A transition
the table does not allow is recorded loudly (a trace line, ``last_error`` and an error log)
and then made anyway: failing the workflow task would retry it forever, and the state the
code asked for is the best guess of what is true.

:class:`TurnScratch` holds the per-turn counters and flags shared by the turn, the approvals
and the lifecycle (interrupt). Deterministic; no I/O.
"""

from __future__ import annotations

import asyncio
from collections.abc import Callable, Mapping
from datetime import timedelta
from types import MappingProxyType
from typing import Final

from temporalio import workflow
from temporalio.exceptions import ApplicationError

from toolnexus_temporal.workflows.leases import LeaseBook
from toolnexus_temporal.workflows.outbox import Outbox
from toolnexus_temporal.workflows.visibility.visibility import Visibility, note_error

with workflow.unsafe.imports_passed_through():
    from toolnexus_temporal.workflows.contract.messages import ChildReport
    from toolnexus_temporal.workflows.contract.models import (
        AgentDef,
        Cost,
        HandleStateName,
        LimitName,
        Message,
        Request,
        ResultStatus,
        TaskResult,
        ToolCall,
        ToolResult,
    )
    from toolnexus_temporal.workflows.contract.names import (
        NO_AGENT_DEFINITION,
        SIGNAL_CHILD_REPORT,
    )
    from toolnexus_temporal.workflows.contract.state import HandleState, ParkedTurn

TRANSITIONS: Final[Mapping[HandleStateName, frozenset[HandleStateName]]] = MappingProxyType(
    {
        # an admitted wake (CONTRACT §3 wake); a close of an idle handle
        "idle": frozenset({"running", "closed"}),
        # the turn settled; a tool suspended (inline interpreter or parked, also for a delegated
        # task's child); a close after the shutdown grace (the interrupt settles the turn first,
        # so this is a fallback)
        "running": frozenset({"idle", "suspended", "closed"}),
        # the Answer (or the delegated child's) resumes the turn; an interrupt or the wall-clock
        # watchdog cancels the Request and settles the turn; a close while parked
        "suspended": frozenset({"running", "idle", "closed"}),
        # closed is final: close is not loss, but nothing runs again
        "closed": frozenset(),
    }
)
"""Allowed transitions: state → the states it may move to (CONTRACT §2, §9.1)."""


def transition_error(before: HandleStateName, to: HandleStateName) -> str | None:
    """Check one transition against :data:`TRANSITIONS`.

    Returns:
        None when allowed, else a description of the illegal transition.
    """
    if to in TRANSITIONS[before]:
        return None
    allowed = ", ".join(sorted(TRANSITIONS[before])) or "nothing"
    # no arrow: tools that read the trace's arrows see only the moves themselves
    return f"illegal transition {before} to {to} (allowed from {before}: {allowed})"


def record_illegal(s: HandleState, to: HandleStateName, why: str) -> str | None:
    """Check the move of ``s`` to ``to`` against :data:`TRANSITIONS`; an illegal one is kept
    in ``last_error``.

    Returns:
        None when allowed, else the trace line that records it.
    """
    error = transition_error(s.state, to)
    if error is None:
        return None
    note_error(s, f"{error} ({why})")
    return f"{s.id}: ILLEGAL: {error} ({why})"


def require_defn(s: HandleState) -> AgentDef:
    """The agent definition of a handle that runs turns (every handle but the root).

    Raises:
        ApplicationError: ``NoAgentDefinition`` (non-retryable: it fails the workflow rather
            than retrying its task forever) if a turn ever starts on the root, whose wakes
            are rejected before admission.
    """
    if s.defn is None:
        raise ApplicationError(
            f"{s.id} has no agent definition: the root never runs a turn",
            type=NO_AGENT_DEFINITION,
            non_retryable=True,
        )
    return s.defn


def is_settled(s: HandleState) -> bool:
    """Idle, closed, or parked on a Request (not while an interpreter answers inline, nor
    between a wake's admission and its turn's start)."""
    if s.intake.turn_pending or s.leases.slot_waiting:
        return False
    if s.state == "suspended":
        last = s.last_result
        return (
            last is not None
            and last.status == "pending"
            and last.pending is not None
            and s.approval.pending_req is not None
            and last.pending.id == s.approval.pending_req.id
        )
    return s.state != "running"


def closed_result(s: HandleState) -> TaskResult:
    """The result a waiter gets from a closed handle."""
    return TaskResult(status="closed", is_error=True, text=f"{s.id} is closed")


def report_of(s: HandleState, seq: int, *, parked: bool) -> ChildReport:
    """The snapshot a child sends its parent as report number ``seq``."""
    return ChildReport(
        id=s.id,
        seq=seq,
        state=s.state,
        usage_total=s.usage.usage_total,
        subtree_tool_calls=s.usage.subtree_tool_calls,
        cost=s.usage.cost,
        result_seq=s.result_seq,
        # Only a `task` child's parent reads results; others stay small.
        last_result=s.last_result if s.report_results else None,
        pending_req=s.approval.pending_req,
        parked=parked,
        nonce=s.nonce,
        answer_id=s.approval.answer_id,
        answer_error=s.approval.answer_error,
        paused=s.pause.paused,
    )


class JobBatch:
    """The unique tool jobs of one reply while they run concurrently (identical ``task`` calls
    share one job): what a turn parked on its delegated children carries.

    Attributes:
        calls: the reply's tool calls, in call order.
        unique: the unique jobs.
        call_job: the job of each call.
        done: the results of the jobs that finished, by job index.
    """

    def __init__(self, calls: list[ToolCall], unique: list[ToolCall], call_job: list[int]):
        self.calls = calls
        self.unique = unique
        self.call_job = call_job
        self.done: dict[int, ToolResult] = {}


class TurnScratch:
    """Per-run scratch of the current turn (not in ``HandleState``: a turn spans a
    continue-as-new only while parked, and then travels as a ``ParkedTurn``: see
    ``carry.py``)."""

    def __init__(self) -> None:
        self.task: asyncio.Task[None] | None = None
        """The running turn, cancelled by an interrupt or the wall-clock watchdog."""
        self.interrupt_requested = False
        """An interrupt (or a forced close) is aborting the turn."""
        self.llm_calls = 0
        """LLM round trips of this turn (``max_turns`` counts them)."""
        self.tokens = 0
        """Tokens this turn used."""
        self.cost = Cost()
        """Money this turn's calls cost."""
        self.wall_fired = False
        """The ``max_wall_ms`` watchdog stopped the turn."""
        self.llm_abandoned = False
        """Past the wall deadline and its grace: stop waiting for the LLM call."""
        self.next_messages: list[Message] = []
        """Messages for the next LLM call."""
        self.open_calls: list[ToolCall] = []
        """Tool calls asked for by the model that have not run yet."""
        self.turn_start_len = 0
        """``transcript_len`` when the turn started (a rollback returns to it)."""
        self.unsent_before: list[Message] = []
        """``unsent`` when the turn started (a rollback restores it)."""
        self.jobs: JobBatch | None = None
        """While a reply's tool jobs run concurrently."""
        self.batch: tuple[list[ToolCall], list[ToolResult], int] | None = None
        """While a reply's suspensions are resolved in call order: its calls, their results
        so far and the call being resolved (what a parked turn's snapshot holds)."""

    def start(self, new_messages: list[Message]) -> None:
        """Reset the counters for a new turn whose first LLM call sends ``new_messages``."""
        self.llm_calls = 0
        self.tokens = 0
        self.cost = Cost()
        self.wall_fired = False
        self.llm_abandoned = False
        self.next_messages = new_messages
        self.open_calls = []
        self.jobs = None
        self.batch = None

    def result(
        self,
        status: ResultStatus,
        text: str,
        limit: LimitName | None = None,
        pending: Request | None = None,
    ) -> TaskResult:
        """This turn's result so far with ``status`` (an error unless ``done``/``pending``)."""
        return TaskResult(
            status=status,
            is_error=status not in ("done", "pending"),
            text=text,
            turns=self.llm_calls,
            total_tokens=self.tokens,
            cost=self.cost,
            limit=limit,
            pending=pending,
        )


def restore(scratch: TurnScratch, parked: ParkedTurn) -> None:
    """Set up the scratch of a turn resumed from ``parked`` in a new run (the counters and
    rollback point it had; no messages yet: the tool batch produces them)."""
    scratch.start([])
    scratch.llm_calls = parked.llm_calls
    scratch.tokens = parked.tokens
    scratch.cost = parked.cost
    scratch.turn_start_len = parked.turn_start_len
    scratch.unsent_before = list(parked.unsent_before)


def report_needed_now(s: HandleState, before: HandleStateName | None) -> bool:
    """Whether a change must reach the parent at once, rather than coalesced
    within ``live_usage_ms``: a close; a suspension or a resumption (the parent may route
    Answers and park on it); a ``task`` child (its parent waits on its results); a finite
    pool above (enforced live); or no coalescing configured."""
    return (
        s.state == "closed"
        or s.state == "suspended"
        or before == "suspended"
        or s.report_results
        or s.usage.floor is not None
        or s.options.live_usage_ms is None
    )


class Machine:
    """Moves the handle between states, traces each move and reports it to the parent.

    Owns ``state``, ``last_result``, ``result_seq``, ``report_seq`` and ``report_owed``, and
    per run the last report sent (so an unchanged snapshot is not sent twice).

    Reports (signal ``child_report``, an absolute snapshot): a change the parent needs now
    (:func:`report_needed_now`) is sent at the end of the current workflow activation, so
    several changes in one step coalesce into one signal; any other change (a settled turn's
    usage) is owed and flushed by one durable timer of ``live_usage_ms``, so a burst of turns
    costs one report.

    Args:
        s: the handle's state model.
        vis: trace and search attributes.
        outbox: sends the reports.
        leases: gives a non-sticky lease back when a turn settles or parks.
    """

    def __init__(self, s: HandleState, vis: Visibility, outbox: Outbox, leases: LeaseBook) -> None:
        self.s = s
        self.vis = vis
        self.outbox = outbox
        self.leases = leases
        self.last_report: ChildReport | None = None
        self.flush_scheduled = False
        """A report is to be sent at the end of this activation."""
        self.timer_running = False
        """The coalescing timer runs."""
        self.on_publish: list[Callable[[TaskResult], None]] = []
        """Told each published result, after ``result_seq`` counted it (the inbox's
        message records: ``inbox.py``)."""

    def transition(self, to: HandleStateName, why: str) -> None:
        """Move to ``to``: trace ``{id}: {from}→{to} ({why})``, publish, report.

        A move :data:`TRANSITIONS` does not allow is recorded loudly, then made.
        """
        s = self.s
        before = s.state
        illegal = record_illegal(s, to, why)
        if illegal is not None:
            self.vis.trace(illegal)
            workflow.logger.error("%s", illegal)
        s.state = to
        self.vis.trace(f"{s.id}: {before}→{to} ({why})")
        if not (to == "idle" and s.one_shot):
            # a task child closes next, in this activation or after its on_close hook: its
            # ``closed`` upsert follows (one search attribute upsert per child saved)
            self.vis.publish()
        self.leases.after_transition(to, parked=to == "suspended" and self.settled())
        if to == "idle" and s.one_shot:
            return  # a task child closes next: its closed report carries the result
        if to == "closed" and s.one_shot:
            # A task child's workflow ends once closed, and its result (the closed view,
            # ``report_seq`` counted here) is its closed report: the parent's watch
            # (``children/watch.py`` ``ended``) takes it. No ``child_report`` signal.
            s.report_seq += 1
            s.report_owed = False
            return
        if not (before == "idle" and to == "running"):
            # A parent needs settled results, suspensions, resumptions, closes and usage; a
            # turn's start reaches it with the next report (one signal per turn saved).
            self.report(before=before)

    def publish_result(self, result: TaskResult) -> None:
        """Make ``result`` the handle's latest result: waiters (``wait``, ``turn``) see it.
        The one path that publishes a result: a settled turn (:meth:`settle`) and a
        ``pending`` one (a parked Request, or a surfaced child's: ``approvals.py``)."""
        self.s.last_result = result
        self.s.result_seq += 1
        for told in self.on_publish:
            told(result)

    def settle(self, result: TaskResult) -> None:
        """Settle the turn with ``result``: waiters see it, the handle goes idle."""
        self.publish_result(result)
        self.transition("idle", result.status)

    def settled(self) -> bool:
        """See :func:`is_settled`."""
        return is_settled(self.s)

    def closed_result(self) -> TaskResult:
        """See :func:`closed_result`."""
        return closed_result(self.s)

    def last_or_closed(self) -> TaskResult:
        """The last result, or the closed result when there is none."""
        return self.s.last_result or closed_result(self.s)

    def report(
        self,
        *,
        before: HandleStateName | None = None,
        now: bool = False,
        coalesce: bool = False,
    ) -> None:
        """Tell the parent this handle's current snapshot, unless it already knows it.

        At the end of this activation when the parent needs it now (``now``, or
        :func:`report_needed_now` with ``before`` the state the handle left), else within
        ``live_usage_ms`` (coalesced); ``coalesce``: within ``live_usage_ms`` whatever the
        state (a burst of rejected Answers: one report, not one per activation).
        The parent keeps the highest ``seq``. The workflow does not end (nor continue as
        new) before every report is delivered (or the parent is gone).
        """
        s = self.s
        if s.parent is None:
            return
        s.report_owed = True
        if coalesce and s.options.live_usage_ms is not None:
            self._flush_later()
        elif now or report_needed_now(s, before):
            self._flush_soon()
        else:
            self._flush_later()

    def _flush_soon(self) -> None:
        """Send the report once the current step yields (changes in one step coalesce)."""
        if self.flush_scheduled:
            return
        self.flush_scheduled = True
        self.outbox.signals_in_flight += 1  # counted from now: waiters see it in flight

        async def flush() -> None:
            self.flush_scheduled = False
            self.outbox.signals_in_flight -= 1
            if self.s.report_owed:
                self.send_report()

        asyncio.create_task(flush())  # noqa: RUF006 (counted in signals_in_flight)

    def _flush_later(self) -> None:
        """Start the coalescing timer (one at a time): the owed report goes when it fires."""
        if self.timer_running:
            return
        self.timer_running = True
        every = timedelta(milliseconds=self.s.options.live_usage_ms or 0)

        async def flush() -> None:
            await workflow.sleep(every, summary="usage report to parent")
            self.timer_running = False
            if self.s.report_owed:
                self._flush_soon()

        asyncio.create_task(flush())  # noqa: RUF006 (continue-as-new carries report_owed)

    def send_report(self) -> None:
        """Signal the current snapshot to the parent now, unless it already knows it."""
        s = self.s
        if s.parent is None:
            return
        s.report_owed = False
        parked = s.state == "suspended" and self.settled()
        report = report_of(s, s.report_seq + 1, parked=parked)
        last = self.last_report
        if last is not None and last.model_copy(update={"seq": report.seq}) == report:
            return
        s.report_seq = report.seq
        self.last_report = report
        self.outbox.signal_later(s.parent, SIGNAL_CHILD_REPORT, report)
