"""``AgentWorkflow``: one workflow per Handle, the root included (CONTRACT §2, §8).

The state machine runs here, deterministically; LLM calls, tools, interpreters and hooks are
activities; all state is one ``HandleState``. This module is the durable surface: the
workflow's run, every handler and the queries, each delegating to one component (a plain
class that owns one concept). The rooms of ``workflows/`` are floors, and a module imports
only from its own room or a lower floor (``tests/unit/test_layers.py``, ``FLOORS``).

Floors of workflows/, lowest first: ``contract/`` (types, names, limits, the clock
``now_ms``, the error types), ``rules/`` (pure rules over the state: Request routing, the
roster, background items, rendering for the model), ``visibility/`` (trace, search
attributes, views), ``outbox.py`` (signals to other handles), then ``leases.py``
(``max_concurrent``), ``budgets.py`` and ``trust.py`` on one floor,
``machine.py`` (the transition table, settle, reports), ``inbox.py`` (post bounds, wake
admission), ``approvals/`` (suspension, Answer routing, parking on task children, expiry),
``children/`` (spawn, child reports, closing a child, ``watch``, the ``task`` tool,
background children), ``turn/`` (the LLM loop and tool calls, its span and metrics) and
``ticks.py`` on one floor, ``lifecycle/`` (wait, interrupt, close, hooks, the run loop, a
parked turn carried across continue-as-new, verbs exactly once across runs), ``pause.py``,
and this module, ``agent.py``.

The docs' "Where each rule lives" page maps each rule to its module.

Messages: every name is a durable contract in ``contract/names.py``; the docs' "The
protocol between workflows" says what each is for. The public signals (``wake``, ``post``,
``interrupt``, ``close``, ``answer``) work from ``temporal workflow signal``; a rejected signal
leaves a trace line and ``last_error``, never a silent drop. Updates are the client's
synchronous path, one message per verb; queries are ``view``, ``state``, ``trace``, ``inbox``
(and ``recovery``, read by ``recover`` from a terminated run).
Each handler's ``description`` (``contract/handler_docs.py``) is what the web UI's dialogs show.
"""

from __future__ import annotations

from collections.abc import Sequence
from typing import Any

from temporalio import workflow
from temporalio.common import RawValue
from temporalio.exceptions import ApplicationError

from toolnexus_temporal.workflows.approvals.approvals import Approvals
from toolnexus_temporal.workflows.budgets import BudgetLedger
from toolnexus_temporal.workflows.children.background import Background, BackgroundWake
from toolnexus_temporal.workflows.children.children import Children
from toolnexus_temporal.workflows.children.delegation import Delegation
from toolnexus_temporal.workflows.inbox import (
    HISTORY_FULL,
    POST_REFUSED,
    Inbox,
    message_outcome,
    post_history_error,
)
from toolnexus_temporal.workflows.leases import LeaseBook
from toolnexus_temporal.workflows.lifecycle.carry import CarryOver
from toolnexus_temporal.workflows.lifecycle.lifecycle import Lifecycle
from toolnexus_temporal.workflows.lifecycle.runloop import RunLoop
from toolnexus_temporal.workflows.lifecycle.updates import UpdateLog
from toolnexus_temporal.workflows.machine import Machine, TurnScratch
from toolnexus_temporal.workflows.outbox import Outbox
from toolnexus_temporal.workflows.pause import Pause
from toolnexus_temporal.workflows.ticks import (
    Ticks,
    parse_payload,
    start_input,
)
from toolnexus_temporal.workflows.trust import Trust, masked
from toolnexus_temporal.workflows.turn.context import ContextBound
from toolnexus_temporal.workflows.turn.observe import TurnTelemetry
from toolnexus_temporal.workflows.turn.turn import Turn
from toolnexus_temporal.workflows.visibility.visibility import (
    INVALID,
    Visibility,
    status_of,
    view_of,
)

with workflow.unsafe.imports_passed_through():
    from toolnexus_temporal.workflows.contract import handler_docs as docs
    from toolnexus_temporal.workflows.contract import names
    from toolnexus_temporal.workflows.contract.messages import (
        AnswerResult,
        BudgetAsk,
        BudgetReply,
        ChildReport,
        CloseRequest,
        InterruptRequest,
        MessageOutcome,
        PauseRequest,
        PostResult,
        ScheduleRequest,
        SlotRecall,
        SlotRelease,
        SlotRequest,
        SpawnRequest,
        SpawnResult,
        TurnRequest,
        WaitRequest,
        WaitResponse,
    )
    from toolnexus_temporal.workflows.contract.models import (
        Answer,
        HandleStatus,
        HandleView,
        InboxItem,
        TraceEntry,
    )
    from toolnexus_temporal.workflows.contract.state import (
        AgentInput,
        HandleState,
        PoolFloor,
        RecoveryPoint,
    )


@workflow.defn(name=names.WORKFLOW_TYPE)
class AgentWorkflow:
    """One Handle. Started by the client for the root, by a parent's ``spawn`` for the rest.

    Each concept is a component built here (see the module docstring); handlers parse their
    input and delegate to one component.
    """

    @workflow.init
    def __init__(self, inp: Any = None) -> None:
        # ``Any``: a start from outside with input the runtime never sends (a Temporal
        # Schedule's, ``temporal workflow start``) must fail the run at once with a message
        # (``ticks.start_input``), not a workflow task that cannot decode it and retries.
        parsed = start_input(inp)
        self._bad_start: str | None = None
        self._answer_signals = 0
        """``answer`` signals this run has received (each one's place names its event)."""
        if isinstance(parsed, str):
            self._bad_start = parsed
            info = workflow.info()
            parsed = AgentInput(state=HandleState(id=info.workflow_id, task_queue=info.task_queue))
        s = parsed.state
        self.s: HandleState = s
        """The whole handle state, shared by every component (``state`` query)."""
        # Set before any handler: a cold worker may run an update before ``run`` (#1591).
        if s.store_key is None:
            info = workflow.info()
            s.store_key = f"{info.namespace}/{info.workflow_id}@{info.first_execution_run_id}"
        self._vis = Visibility(s)
        self._updates = UpdateLog(s)
        self._trust = Trust(s, self._vis)
        self._outbox = Outbox(s, self._vis)
        self._leases = LeaseBook(s, self._vis, self._outbox)
        self._machine = Machine(s, self._vis, self._outbox, self._leases)
        self._scratch = TurnScratch()
        self._budgets = BudgetLedger(s, self._outbox)
        self._inbox = Inbox(s, self._vis, self._machine, self._leases, self._scratch)
        self._approvals = Approvals(s, self._scratch, self._vis, self._machine, self._outbox)
        wake = BackgroundWake(s, self._vis, self._inbox)
        self._children = Children(
            s,
            self._vis,
            self._machine,
            self._budgets,
            self._leases,
            on_change=self._approvals.sync_parking,
            on_background=wake.wake_if_due,
        )
        self._background = Background(s, self._vis, self._children)
        self._delegation = Delegation(
            s, self._vis, self._children, self._approvals, self._background
        )
        self._turn = Turn(
            s,
            self._scratch,
            self._vis,
            self._machine,
            self._budgets,
            self._approvals,
            self._delegation,
            # the span (when the worker traces) and the metrics; the context bound
            observers=(TurnTelemetry(), ContextBound()),
        )
        self._lifecycle = Lifecycle(
            s,
            self._scratch,
            self._vis,
            self._machine,
            self._outbox,
            self._inbox,
            self._children,
        )
        self._parking = CarryOver(
            s, self._scratch, self._vis, self._approvals, self._outbox, self._lifecycle
        )
        self._ticks = Ticks(s, self._vis, self._inbox)
        self._pause = Pause(s, self._vis, self._inbox, self._lifecycle)
        self._loop = RunLoop(
            s,
            self._vis,
            self._outbox,
            self._lifecycle,
            self._children,
            self._parking,
            self._turn,
            self._ticks,
            wake.wake_if_due,
        )

    # ------------------------------------------------------------------ run loop

    @workflow.run
    async def run(self, inp: Any = None) -> HandleView:
        """Serve verbs until the handle is closed; each admitted wake runs one turn
        (``runloop.py``).

        Returns:
            The final view (readable after close: close is not loss).

        Raises:
            ApplicationError: ``NotAnAgentStart`` (non-retryable, at once): the workflow was
                started with input that is not an ``AgentInput``; the message says how to
                schedule an agent instead (``ticks.start_input``).
        """
        if self._bad_start is not None:
            raise ApplicationError(
                self._bad_start, type=names.NOT_AN_AGENT_START, non_retryable=True
            )
        return await self._loop.run()

    # ------------------------------------------------------------------ queries

    @workflow.query(name=names.QUERY_VIEW, description=docs.VIEW)
    def view(self) -> HandleView:
        """The handle's public view (CONTRACT §2 fields)."""
        return view_of(self.s)

    @workflow.query(name=names.QUERY_STATE, description=docs.STATE)
    def state(self) -> HandleState:
        """The whole handle state model (without its nonces: ``trust.py``)."""
        return masked(self.s)

    @workflow.query(name=names.QUERY_TRACE, description=docs.TRACE)
    def trace(self) -> list[TraceEntry]:
        """This handle's trace lines, oldest first (CONTRACT §7), each with its time readable
        (``at``, ISO 8601 UTC) beside ``at_ms``."""
        return [TraceEntry.of(line) for line in self.s.trace]

    @workflow.query(name=names.QUERY_INBOX, description=docs.INBOX)
    def inbox(self) -> list[InboxItem]:
        """Items waiting for the next wake, oldest first: the posts, then the background
        children's items (``children/background.py``)."""
        return [*self.s.intake.items, *self.s.background.waiting]

    @workflow.query(name=names.QUERY_RECOVERY, description=docs.RECOVERY)
    def recovery(self) -> RecoveryPoint:
        """What a run started again from here carries (``carry.py``; read from a run the
        server terminated by ``AgentRuntime.recover``)."""
        return self._parking.recovery()

    @workflow.query(name=names.QUERY_MESSAGE, description=docs.MESSAGE)
    def message(self, message_id: str) -> MessageOutcome:
        """What became of the wake sent with ``message_id`` (``inbox.message_outcome``): the
        client's signal fallback reads its turn's result here."""
        return message_outcome(self.s, message_id)

    # ------------------------------------------------------------------ spawn and leases

    @workflow.update(name=names.UPDATE_SPAWN, description=docs.SPAWN)
    async def spawn(self, req: SpawnRequest) -> SpawnResult:
        """Spawn a child handle as a child workflow (CONTRACT §3 spawn).

        Checks, in order: unknown name; parent closed; depth; max_children; pools exhausted.
        A failed check is a SpawnResult with ``error`` set (spawn never raises).
        """
        self._lifecycle.updates += 1
        child = self._updates.repeat()
        if child is not None:  # sent again after a continue-as-new: no second child
            return SpawnResult(handle=self._children.known_view(child))
        result = await self._children.spawn(req)
        if result.handle is not None:
            self._updates.record(result.handle.id)
            self._vis.publish()  # the web UI's details count the child now, not next turn
        return result

    @workflow.signal(name=names.SIGNAL_SLOT_REQUEST, description=docs.SLOT_REQUEST)
    def slot_request(self, *args: Any) -> None:
        """A child asks for a slot for a wake it received (internal)."""
        req = self._vis.parse(names.SIGNAL_SLOT_REQUEST, SlotRequest, args)
        if req is not None and self._trust.from_child("slot_request", req.child, req.nonce):
            self._leases.on_request(req)

    @workflow.signal(name=names.SIGNAL_SLOT_RELEASE, description=docs.SLOT_RELEASE)
    def slot_release(self, *args: Any) -> None:
        """A child gives its lease back (internal)."""
        rel = self._vis.parse(names.SIGNAL_SLOT_RELEASE, SlotRelease, args)
        if rel is not None and self._trust.from_child("slot_release", rel.child, rel.nonce):
            self._leases.on_release(rel)

    @workflow.signal(name=names.SIGNAL_SLOT_RECALL, description=docs.SLOT_RECALL)
    def slot_recall(self, *args: Any) -> None:
        """The parent recalls this handle's lease: other wakes wait (internal)."""
        rec = self._vis.parse(names.SIGNAL_SLOT_RECALL, SlotRecall, args)
        if rec is not None and self._trust.from_parent(
            "slot_recall", rec.nonce
        ):  # busy: a turn of its own runs (not settled)
            self._leases.on_recall(rec, busy=not self._machine.settled())

    # ------------------------------------------------------------------ wake

    @workflow.signal(name=names.SIGNAL_WAKE, description=docs.WAKE)
    def wake_signal(self, *args: Any) -> None:
        """``wake`` as a signal: a prompt string, ``null``, or ``{"prompt": ...}`` (a parent's
        slot grant too: ``granted``)."""
        req = self._vis.parse_wake(args)
        if req is not None and (not req.granted or self._trust.grant(req)):
            self._inbox.wake_signal(req)

    @workflow.update(name=names.UPDATE_TURN, description=docs.TURN)
    async def turn(self, req: TurnRequest) -> WaitResponse:
        """``wake`` then ``wait`` for that wake's result, as one update: the host's turn costs
        one client round trip and one update (CONTRACT §3 wake, wait).

        On an idle handle the wake is admitted (at once with a held lease, else after the
        parent grants one: see ``leases.py``) and the update
        returns the result that turn settles (``pending`` when it parks on a Request). On a
        busy handle the prompt is kept as a message and the double-texting policy applies
        (``contract/policy.py``); the update returns the result of the turn that holds it.

        Raises (in the validator, so a rejection adds nothing to history):
            ApplicationError: ``WakeRejected`` for the root or a closed handle,
                ``AgentBusy`` under the ``reject`` policy on a busy handle,
                ``WaitersFull`` past ``WAITERS_MAX`` held waits (the client then polls).
        """
        self._lifecycle.updates += 1
        seen = self._updates.repeat()
        if seen is not None:  # sent again after a continue-as-new: wait, no second wake
            return await self._lifecycle.held(
                self._lifecycle.wait(WaitRequest(after_seq=int(seen)))
            )
        self._updates.record(str(self.s.result_seq))
        return await self._lifecycle.held(self._lifecycle.turn(req))

    @turn.validator
    def _validate_turn(self, req: TurnRequest) -> None:
        """Reject a ``turn`` on the root or a closed handle, or on a busy one under the
        ``reject`` policy, before it reaches history.

        Raises:
            ApplicationError: ``WakeRejected``, ``AgentBusy``.
        """
        error = self._inbox.wake_error()
        if error is not None:
            raise ApplicationError(error, type=names.WAKE_REJECTED, non_retryable=True)
        busy = self._inbox.busy_error(req.policy)
        if busy is not None:
            raise ApplicationError(busy, type=names.AGENT_BUSY, non_retryable=True)
        self._lifecycle.check_waiters()

    # ------------------------------------------------------------------ post

    @workflow.update(name=names.UPDATE_POST, description=docs.ADMIT_POST)
    def admit_post(self, item: InboxItem) -> PostResult:
        """Append an item to the inbox; never changes state (CONTRACT §3 post).

        Returns:
            ``ok`` True, or ``ok`` False with ``inbox closed`` / ``inbox full (N)``: loud to
            the sender, and a trace line.

        Raises (in the validator, so a refusal adds nothing to history):
            ApplicationError: ``PostRefused`` for a post the inbox would refuse
                (``contract.posts.post_error``); ``HistoryFull`` past
                ``inbox.POST_HISTORY_BYTES`` of this run's history (the client sends it
                again, then returns ``ok`` False).
        """
        self._lifecycle.updates += 1
        if self._updates.repeat() is not None:  # sent again after a continue-as-new
            return PostResult(ok=True, status=status_of(self.s))
        error = self._inbox.post(item)
        if error is None:
            self._updates.record()
        return PostResult(ok=error is None, error=error, status=status_of(self.s))

    @admit_post.validator
    def _validate_post(self, item: InboxItem) -> None:
        """Refuse, before it reaches history, a post the inbox would refuse (issue 36 item 6:
        a flood of refused posts through the client writes nothing; the sender gets the
        reason), and any post while this run's history is past ``POST_HISTORY_BYTES`` (the
        run continues as new when it can). A post sent again after a continue-as-new that
        its first run took is let through (the handler answers it ``ok``). The handler
        checks the inbox again: another post of the same workflow task may fill it first.

        Raises:
            ApplicationError: ``PostRefused`` (the inbox's reason: ``inbox full (N)``,
                ``inbox closed``, ...), ``HistoryFull``.
        """
        if self._updates.repeat() is not None:
            return
        refused = self._inbox.post_error(item)
        if refused is not None:
            raise ApplicationError(refused, type=POST_REFUSED, non_retryable=True)
        error = post_history_error(workflow.info().get_current_history_size())
        if error is not None:
            raise ApplicationError(error, type=HISTORY_FULL, non_retryable=True)

    @workflow.signal(name=names.SIGNAL_POST, description=docs.POST)
    def post_signal(self, *args: Any) -> None:
        """``post`` as a signal: an InboxItem as JSON (``{"from": ..., "channel": ...,
        "text": ...}``) or a bare string (an external item)."""
        item = self._vis.parse_post(args)
        if item is not None:
            self._inbox.post(item)

    # ------------------------------------------------------------------ wait

    @workflow.update(name=names.UPDATE_WAIT, description=docs.WAIT)
    async def wait(self, req: WaitRequest) -> WaitResponse:
        """The next result, or at once the last one when the handle is settled (CONTRACT §3).

        Settled means: idle with a result, suspended, or closed. A timeout returns status
        ``timeout`` and the turn keeps running. Never raises.
        """
        self._lifecycle.updates += 1
        return await self._lifecycle.held(self._lifecycle.wait(req))

    @wait.validator
    def _validate_wait(self, req: WaitRequest) -> None:
        """Refuse a ``wait`` past ``WAITERS_MAX`` held (nothing reaches history)."""
        self._lifecycle.check_waiters()

    # ------------------------------------------------------------------ interrupt

    @workflow.update(name=names.UPDATE_INTERRUPT, description=docs.ADMIT_INTERRUPT)
    async def admit_interrupt(self, req: InterruptRequest) -> HandleStatus:
        """Abort the running turn (CONTRACT §3 interrupt) and return once the handle is idle.

        Idle or closed: a no-op. The drained inbox returns to the front, the aborted turn's
        transcript is not kept, waiters get ``interrupted``.
        """
        self._lifecycle.updates += 1
        if self._updates.repeat() is None:  # a repeat would stop a later turn
            self._updates.record()
            await self._lifecycle.interrupt("interrupt")
        return status_of(self.s)

    @workflow.signal(name=names.SIGNAL_INTERRUPT, description=docs.INTERRUPT)
    async def interrupt_signal(self, *args: Any) -> None:
        """``interrupt`` as a signal (no input, or ``null``)."""
        if self._vis.one(names.SIGNAL_INTERRUPT, args) is not INVALID:
            await self._lifecycle.interrupt("interrupt")

    # ------------------------------------------------------------------ close

    @workflow.update(name=names.UPDATE_CLOSE, description=docs.ADMIT_CLOSE)
    async def admit_close(self, req: CloseRequest) -> HandleStatus:
        """Close this handle and its subtree (CONTRACT §3 close); returns once closed."""
        self._lifecycle.updates += 1
        await self._lifecycle.close(req)
        return status_of(self.s)

    @workflow.signal(name=names.SIGNAL_CLOSE, description=docs.CLOSE)
    async def close_signal(self, *args: Any) -> None:
        """``close`` as a signal: ``null`` or ``{"force": bool, "reason": str}``."""
        req = self._vis.parse_close(args)
        if req is not None:
            await self._lifecycle.close(req)

    # ------------------------------------------------------------------ ticks and pause

    @workflow.update(name=names.UPDATE_SCHEDULE, description=docs.SCHEDULE)
    def schedule(self, req: ScheduleRequest | Any) -> HandleView:
        """Put a tick schedule in force, replacing any (``req.tick`` None: remove it); the
        next fire time counts from now (``ticks.py``). The input is parsed by the validator
        (``ticks.parse_payload``), so a bad one is refused with its reason.

        Returns:
            The view (``tick``, ``next_tick_ms``).
        """
        self._lifecycle.updates += 1
        if self._updates.repeat() is None:  # a repeat would restart the fire time
            self._ticks.set(parse_payload(ScheduleRequest, req, names.SCHEDULE_REJECTED).tick)
            self._updates.record()
        return view_of(self.s)

    @schedule.validator
    def _validate_schedule(self, req: ScheduleRequest | Any) -> None:
        """Reject a bad payload, or a schedule on the root or a closed handle, before it
        reaches history.

        Raises:
            ApplicationError: ``ScheduleRejected``.
        """
        parse_payload(ScheduleRequest, req, names.SCHEDULE_REJECTED)
        error = self._ticks.schedule_error()
        if error is not None:
            raise ApplicationError(error, type=names.SCHEDULE_REJECTED, non_retryable=True)

    @workflow.update(name=names.UPDATE_PAUSE, description=docs.ADMIT_PAUSE)
    async def admit_pause(self, req: PauseRequest | Any) -> HandleStatus:
        """Pause (``req.now``: interrupt the running turn, returning once it stopped) or
        unpause (``req.paused`` False; a held wake is admitted) (``pause.py``)."""
        self._lifecycle.updates += 1
        if self._updates.repeat() is None:  # a repeat would undo a later unpause
            self._updates.record()
            await self._pause.apply(parse_payload(PauseRequest, req, names.PAUSE_REJECTED))
        return status_of(self.s)

    @admit_pause.validator
    def _validate_pause(self, req: PauseRequest | Any) -> None:
        """Reject a bad payload, or a pause of the root or a closed handle, before it
        reaches history.

        Raises:
            ApplicationError: ``PauseRejected``.
        """
        parse_payload(PauseRequest, req, names.PAUSE_REJECTED)
        error = self._pause.error()
        if error is not None:
            raise ApplicationError(error, type=names.PAUSE_REJECTED, non_retryable=True)

    @workflow.signal(name=names.SIGNAL_PAUSE, description=docs.PAUSE)
    async def pause_signal(self, *args: Any) -> None:
        """``pause`` as a signal: ``null`` or ``{"now": true}``."""
        await self._pause.signal(names.SIGNAL_PAUSE, args)

    @workflow.signal(name=names.SIGNAL_UNPAUSE, description=docs.UNPAUSE)
    async def unpause_signal(self, *args: Any) -> None:
        """``unpause`` as a signal (``null``)."""
        await self._pause.signal(names.SIGNAL_UNPAUSE, args)

    # ------------------------------------------------------------------ answer

    @workflow.update(name=names.UPDATE_ANSWER, description=docs.ADMIT_ANSWER)
    async def admit_answer(self, answer: Answer) -> AnswerResult:
        """Deliver an Answer (CONTRACT §3 resume, §5): to this handle's parked Request, or
        routed down to the child on the path to the id's handle, from any ancestor
        (``answered`` names where it went).

        Returns:
            ``ok`` False with the reason when the id matches no pending Request (nothing
            changes; a trace line records it: CONTRACT §9.2).
        """
        self._lifecycle.updates += 1
        went = self._updates.repeat()
        if went is not None:  # sent again after a continue-as-new: taken once already
            return AnswerResult(ok=True, answered=went or None, status=status_of(self.s))
        error, answered = await self._approvals.admit(self._unscoped(answer))
        if error is None:
            self._updates.record(answered or "")
        return AnswerResult(
            ok=error is None, error=error, answered=answered, status=status_of(self.s)
        )

    @workflow.signal(name=names.SIGNAL_ANSWER, description=docs.ANSWER)
    def answer_signal(self, *args: Any) -> None:
        """``answer`` as a signal: an Answer as JSON (``{"id": ..., "ok": true}``); for a
        Request with approvers, its sender's principal is read first (``tnx.answer_principal``),
        beside the handler, which returns at once (``Approvals.received``: a flood of Answers
        holds back no continue-as-new). Every ``answer`` signal is counted (the audit names
        the event by its place)."""
        self._answer_signals += 1
        answer = self._vis.parse(names.SIGNAL_ANSWER, Answer, args)
        if answer is not None:
            self._approvals.received(self._unscoped(answer), self._answer_signals)

    def _unscoped(self, answer: Answer) -> Answer:
        """``answer`` with its id as this workflow names Requests (a scope-qualified id, as
        ``tnx`` prints it, taken as printed: :func:`~.names.id_in_scope`)."""
        given = names.id_in_scope(self.s.scope, answer.id)
        return answer if given == answer.id else answer.model_copy(update={"id": given})

    # ------------------------------------------------------------------ between handles

    @workflow.signal(name=names.SIGNAL_CHILD_REPORT, description=docs.CHILD_REPORT)
    def child_report(self, *args: Any) -> None:
        """A child's snapshot (internal: sent by child workflows, not by hosts)."""
        report = self._vis.parse(names.SIGNAL_CHILD_REPORT, ChildReport, args)
        if report is not None and self._trust.from_child("child_report", report.id, report.nonce):
            self._children.on_report(report)

    @workflow.signal(name=names.SIGNAL_BUDGET_ASK, description=docs.BUDGET_ASK)
    async def budget_ask(self, *args: Any) -> None:
        """A child asks for the live remainder before spending (internal; CONTRACT §6)."""
        ask = self._vis.parse(names.SIGNAL_BUDGET_ASK, BudgetAsk, args)
        if ask is not None and self._trust.from_child("budget_ask", ask.child, ask.nonce):
            await self._budgets.on_ask(ask)

    @workflow.signal(name=names.SIGNAL_BUDGET_REPLY, description=docs.BUDGET_REPLY)
    def budget_reply(self, *args: Any) -> None:
        """The parent's answer to a ``budget_ask`` (internal)."""
        reply = self._vis.parse(names.SIGNAL_BUDGET_REPLY, BudgetReply, args)
        if reply is not None and self._trust.from_parent("budget_reply", reply.nonce):
            error = self._budgets.on_reply(reply)
            if error is not None:
                self._vis.reject("budget_reply", error)

    @workflow.signal(name=names.SIGNAL_POOL_FLOOR, description=docs.POOL_FLOOR)
    def pool_floor(self, *args: Any) -> None:
        """The parent's live remainder (internal; see :class:`PoolFloor`)."""
        floor = self._vis.parse(names.SIGNAL_POOL_FLOOR, PoolFloor, args)
        if floor is not None and self._trust.from_parent("pool_floor", floor.nonce):
            self._budgets.on_floor(floor)

    @workflow.signal(dynamic=True)
    def unknown_signal(self, name: str, args: Sequence[RawValue]) -> None:
        """A signal with a name this workflow does not know: rejected loudly, not buffered."""
        self._vis.unknown_signal(name)
