"""``AgentWorkflow``: one workflow per Handle, the root included (CONTRACT §2, §8).

The Handle state machine runs here, deterministically; LLM calls and hooks are activities.
All state lives in one ``HandleState`` (``state.py``), so queries return it as is and
continue-as-new can carry it whole.

Messages (names are a durable contract; see README "Verbs on the wire"):

* signals ``wake`` (a prompt string, ``null`` or ``{"prompt": ...}``), ``post`` (an InboxItem
  or a string), ``interrupt`` (no input) and ``close`` (``{"force": bool, "reason": str}``):
  usable from ``temporal workflow signal``; a rejected signal leaves a trace line and
  ``last_error``, never a silent drop. ``child_report`` is internal (child → parent).
* updates ``spawn``, ``wake_child`` (on the parent: a ``max_concurrent`` slot), ``turn``
  (wake + wait for that turn's result), ``admit_post``, ``admit_interrupt``, ``admit_close``,
  ``admit_answer`` and ``wait``: the client's synchronous path.
* queries ``view`` (HandleView), ``state`` (HandleState), ``trace`` and ``inbox``.

Children are child workflows with ``ParentClosePolicy.ABANDON``: closing a parent closes its
subtree through the graceful cascade below (leaf-first, spawn order), never by Temporal
termination. Children report to their parent with the ``child_report`` signal (state, usage,
results): an absolute snapshot, coalesced by one reporter loop.
"""

from __future__ import annotations

import asyncio
from collections.abc import Sequence
from datetime import timedelta
from typing import Any

from temporalio import workflow
from temporalio.common import RawValue, RetryPolicy
from temporalio.exceptions import ActivityError, ApplicationError

from toolnexus_temporal.workflows.approvals import Approvals
from toolnexus_temporal.workflows.budgets import BudgetLedger
from toolnexus_temporal.workflows.children import Children
from toolnexus_temporal.workflows.delegation import Delegation
from toolnexus_temporal.workflows.inbox import Inbox
from toolnexus_temporal.workflows.machine import Machine, TurnScratch
from toolnexus_temporal.workflows.outbox import Outbox
from toolnexus_temporal.workflows.slots import SlotBook
from toolnexus_temporal.workflows.turn import Turn
from toolnexus_temporal.workflows.visibility import (
    INVALID,
    Visibility,
    error_text,
    status_of,
    view_of,
)

with workflow.unsafe.imports_passed_through():
    from toolnexus_temporal.workflows.messages import (
        AnswerResult,
        BudgetAsk,
        BudgetReply,
        ChildReport,
        CloseRequest,
        HookInput,
        InterruptRequest,
        PostResult,
        SpawnRequest,
        SpawnResult,
        TurnRequest,
        WaitRequest,
        WaitResponse,
        WakeChildRequest,
        WakeChildResult,
    )
    from toolnexus_temporal.workflows.models import (
        Answer,
        HandleStatus,
        HandleView,
        InboxItem,
        TaskResult,
        TraceLine,
    )
    from toolnexus_temporal.workflows.names import (
        RUN_HOOK_ACTIVITY,
    )
    from toolnexus_temporal.workflows.state import (
        AgentInput,
        HandleState,
        PoolFloor,
    )


@workflow.defn(name="AgentWorkflow")
class AgentWorkflow:
    """One Handle. Started by the client for the root, by a parent's ``spawn`` for the rest.

    The turn itself (LLM loop, tools, suspension, delegation) is in ``turn.py``."""

    @workflow.init
    def __init__(self, inp: AgentInput) -> None:
        self.s: HandleState = inp.state
        self._vis = Visibility(self.s)
        self._outbox = Outbox(self.s, self._vis)
        self._machine = Machine(self.s, self._vis, self._outbox)
        self._scratch = TurnScratch()
        self._budgets = BudgetLedger(self.s, self._outbox)
        self._slots = SlotBook(self.s, self._vis, self._outbox)
        self._inbox = Inbox(self.s, self._vis, self._machine, self._outbox)
        self._children = Children(self.s, self._vis, self._machine, self._budgets, self._slots)
        self._approvals = Approvals(self.s, self._scratch, self._vis, self._machine, self._outbox)
        self._delegation = Delegation(
            self.s, self._vis, self._children, self._slots, self._approvals
        )
        self._turn = Turn(
            self.s,
            self._scratch,
            self._vis,
            self._machine,
            self._budgets,
            self._approvals,
            self._delegation,
        )
        self._updates = 0
        self._closed_event = False

    # ------------------------------------------------------------------ run loop

    @workflow.run
    async def run(self, inp: AgentInput) -> HandleView:
        """Serve verbs until the handle is closed; each admitted wake runs one turn.

        Returns:
            The final view (readable after close: close is not loss).
        """
        info = workflow.info()
        if self.s.store_key is None:
            self.s.store_key = f"{info.namespace}/{info.workflow_id}@{info.first_execution_run_id}"
        self._vis.publish(initial=True)
        first_run = info.continued_run_id is None
        if first_run and self.s.defn is not None and self.s.defn.on_spawn:
            await self._run_hook(self.s.defn.on_spawn, "spawn", None)
        while True:
            await workflow.wait_condition(
                lambda: self.s.turn_pending or self._closed_event or self._continue_as_new_due()
            )
            if self._closed_event:
                break
            if self.s.turn_pending:
                self._scratch.task = asyncio.create_task(self._turn.run())
                await self._scratch.task
                self._scratch.task = None
                continue
            # Idle and the run is long: once nothing is in flight, carry the whole state model
            # into a fresh run (children keep running: they are ABANDON children and signal by
            # workflow id). A wake or a close first takes precedence.
            await workflow.wait_condition(
                lambda: self.s.turn_pending or self._closed_event or self._quiescent()
            )
            if self._quiescent():
                self._vis.trace(f"{self.s.id}: continue-as-new")
                workflow.continue_as_new(AgentInput(state=self.s))
        await workflow.wait_condition(
            lambda: workflow.all_handlers_finished() and self._outbox.signals_in_flight == 0
        )
        return view_of(self.s)

    def _continue_as_new_due(self) -> bool:
        info = workflow.info()
        opts = self.s.options
        return (
            self._updates >= opts.continue_as_new_updates
            or info.get_current_history_length() >= opts.continue_as_new_events
            or info.is_continue_as_new_suggested()
        )

    def _quiescent(self) -> bool:
        """Idle with nothing in flight: safe to continue as new."""
        s = self.s
        return (
            s.state == "idle"
            and not s.turn_pending
            and not s.closing
            and self._outbox.signals_in_flight == 0
            and not s.wake_queue
            and workflow.all_handlers_finished()
        )

    # ------------------------------------------------------------------ queries

    @workflow.query(name="view")
    def view(self) -> HandleView:
        """The handle's public view (CONTRACT §2 fields)."""
        return view_of(self.s)

    @workflow.query(name="state")
    def state(self) -> HandleState:
        """The whole handle state model."""
        return self.s

    @workflow.query(name="trace")
    def trace(self) -> list[TraceLine]:
        """This handle's trace lines, oldest first (CONTRACT §7)."""
        return list(self.s.trace)

    @workflow.query(name="inbox")
    def inbox(self) -> list[InboxItem]:
        """Items waiting for the next wake, oldest first."""
        return list(self.s.inbox)

    # ------------------------------------------------------------------ spawn

    @workflow.update(name="spawn")
    async def spawn(self, req: SpawnRequest) -> SpawnResult:
        """Spawn a child handle as a child workflow (CONTRACT §3 spawn).

        Checks, in order: unknown name; parent closed; depth; max_children; pools exhausted.
        A failed check is a SpawnResult with ``error`` set (spawn never raises).
        """
        self._updates += 1
        return await self._children.spawn(req)

    # ------------------------------------------------------------------ wake

    @workflow.update(name="wake_child")
    def wake_child(self, req: WakeChildRequest) -> WakeChildResult:
        """Admit a child's wake under this handle's ``max_concurrent`` (CONTRACT §3 wake, §6).

        The slot take happens here, atomically with the call: the child is then told by a
        durable signal (it drains its inbox and flips to ``running`` when it lands), or the
        wake is queued FIFO until a sibling hands its slot over.

        Raises:
            ApplicationError: ``NoSuchChild`` or ``WakeRejected`` (closed child).
        """
        self._updates += 1
        return self._slots.wake_child(req)

    @workflow.signal(name="slot_request")
    def slot_request(self, *args: Any) -> None:
        """A child asks for a slot for a wake it received as a signal (internal)."""
        req = self._vis.parse("slot_request", WakeChildRequest, args)
        if req is None:
            return
        self._slots.slot_request(req)

    @workflow.signal(name="wake")
    def wake_signal(self, *args: Any) -> None:
        """``wake`` as a signal: a prompt string, ``null``, or ``{"prompt": ...}``.

        Under a parent that limits ``max_concurrent`` a wake from outside asks the parent for
        a slot first; the parent's grant comes back as a ``wake`` with ``granted``."""
        req = self._vis.parse_wake(args)
        if req is None:
            return
        self._inbox.wake_signal(req)

    @workflow.update(name="turn")
    async def turn(self, req: TurnRequest) -> WaitResponse:
        """``wake`` then ``wait`` for that wake's result, as one update: the host's turn costs
        one client round trip and one update, like the floor (CONTRACT §3 wake, wait).

        On an idle handle the wake is admitted and the update returns the result that turn
        settles (``pending`` when it parks on a Request). Under a parent that limits
        ``max_concurrent`` the caller first takes a slot with the parent's ``wake_child``
        (``relay``) and passes its ``grant`` here; without one, or with the grant this
        handle used last (the parent had not yet heard that turn settle), the handle asks
        the parent (``slot_request``) and waits for the grant. A grant is trusted like the
        ``wake`` signal's ``granted`` flag (namespace permissions are the trust boundary). On
        a running or suspended handle the wake is a no-op and the update behaves as
        ``wait``.

        Raises (in the validator, so a rejection adds nothing to history):
            ApplicationError: ``WakeRejected`` for the root or a closed handle.
        """
        self._updates += 1
        s = self.s
        if s.state != "idle":
            return await self._wait(WaitRequest())
        seen = s.result_seq
        # No grant, or the one this handle last used: the parent's books are behind (this
        # handle's settle report is still on its way). Then it asks the parent for a slot
        # with its own result count, which frees the old one first.
        self._inbox.wake_from_outside(req.prompt, granted=self._slots.consume_grant(req.grant))
        return await self._wait(WaitRequest(after_seq=seen))

    @turn.validator
    def _validate_turn(self, req: TurnRequest) -> None:
        error = self._inbox.wake_error()
        if error is not None:
            raise ApplicationError(error, type="WakeRejected", non_retryable=True)

    # ------------------------------------------------------------------ post

    @workflow.update(name="admit_post")
    def admit_post(self, item: InboxItem) -> PostResult:
        """Append an item to the inbox; never changes state (CONTRACT §3 post).

        Returns:
            ``ok`` True, or ``ok`` False with ``inbox closed`` / ``inbox full (N)``: loud to
            the sender, and a trace line.
        """
        self._updates += 1
        error = self._inbox.post(item)
        return PostResult(ok=error is None, error=error, status=status_of(self.s))

    @workflow.signal(name="post")
    def post_signal(self, *args: Any) -> None:
        """``post`` as a signal: an InboxItem as JSON (``{"from": ..., "channel": ...,
        "text": ...}``) or a bare string (an external item)."""
        item = self._vis.parse_post(args)
        if item is None:
            return
        self._inbox.post(item)

    # ------------------------------------------------------------------ interrupt

    @workflow.update(name="admit_interrupt")
    async def admit_interrupt(self, req: InterruptRequest) -> HandleStatus:
        """Abort the running turn (CONTRACT §3 interrupt) and return once the handle is idle.

        Idle or closed: a no-op. The drained inbox returns to the front, the aborted turn's
        transcript is not kept, waiters get ``interrupted``.
        """
        self._updates += 1
        await self._interrupt("interrupt")
        return status_of(self.s)

    @workflow.signal(name="interrupt")
    async def interrupt_signal(self, *args: Any) -> None:
        """``interrupt`` as a signal (no input, or ``null``)."""
        if self._vis.one("interrupt", args) is INVALID:
            return
        await self._interrupt("interrupt")

    async def _interrupt(self, why: str) -> None:
        """Abort the turn of a running or suspended handle (a suspended one's Request is
        cancelled with it); idle and closed: nothing to do."""
        if self.s.state not in ("running", "suspended"):
            return
        self._scratch.interrupt_requested = True
        if self._scratch.task is not None:
            self._scratch.task.cancel()
        await workflow.wait_condition(lambda: self.s.state not in ("running", "suspended"))

    # ------------------------------------------------------------------ close

    @workflow.update(name="admit_close")
    async def admit_close(self, req: CloseRequest) -> HandleStatus:
        """Close this handle and its subtree (CONTRACT §3 close); returns once closed."""
        self._updates += 1
        await self._close(req)
        return status_of(self.s)

    @workflow.signal(name="close")
    async def close_signal(self, *args: Any) -> None:
        """``close`` as a signal: ``null`` or ``{"force": bool, "reason": str}``."""
        req = self._vis.parse_close(args)
        if req is None:
            return
        await self._close(req)

    async def _close(self, req: CloseRequest) -> None:
        """Stop accepting; close children leaf-first in spawn order; let a running turn
        finish within ``shutdown_ms`` (force: abort it first); run ``on_close``; closed."""
        s = self.s
        if s.closing or s.state == "closed":
            await workflow.wait_condition(lambda: self.s.state == "closed")
            return
        s.closing = True
        why = req.reason or ("close --force" if req.force else "close")
        self._vis.trace(f"{s.id}: close requested ({why})")
        if req.force or s.state == "suspended":
            # A forced close aborts the turn first; a parked turn cannot finish by itself, so
            # its Request is cancelled now rather than answered by a closing tree.
            await self._interrupt("close")
        for child_id in list(s.children):
            await self._children.close(child_id, req)
        if s.state == "running" or s.turn_pending:
            grace = timedelta(milliseconds=s.options.shutdown_ms)
            try:
                await workflow.wait_condition(lambda: self.s.state != "running", timeout=grace)
            except TimeoutError:
                await self._interrupt("close: shutdown grace over")
        if s.defn is not None and s.defn.on_close:
            await self._run_hook(s.defn.on_close, "close", req.reason)
        self._machine.transition("closed", why)
        self._closed_event = True

    # ------------------------------------------------------------------ answer

    @workflow.update(name="admit_answer")
    def admit_answer(self, answer: Answer) -> AnswerResult:
        """Deliver an Answer (CONTRACT §3 resume, §5): to this handle's parked Request, or
        routed down to the child whose parked Request has this id.

        Returns:
            ``ok`` False with the reason when the id matches no pending Request (nothing
            changes; a trace line records it: CONTRACT §9.2).
        """
        self._updates += 1
        error, answered = self._approvals.answer(answer)
        return AnswerResult(
            ok=error is None, error=error, answered=answered, status=status_of(self.s)
        )

    @workflow.signal(name="answer")
    def answer_signal(self, *args: Any) -> None:
        """``answer`` as a signal: an Answer as JSON (``{"id": ..., "ok": true}``)."""
        answer = self._vis.parse("answer", Answer, args)
        if answer is not None:
            self._approvals.answer(answer)

    # ------------------------------------------------------------------ children

    @workflow.signal(name="child_report")
    def child_report(self, *args: Any) -> None:
        """A child's snapshot (internal: sent by child workflows, not by hosts)."""
        report = self._vis.parse("child_report", ChildReport, args)
        if report is None:
            return
        self._children.on_report(report)

    @workflow.signal(name="budget_ask")
    async def budget_ask(self, *args: Any) -> None:
        """A child asks for the live remainder before spending (internal; CONTRACT §6)."""
        ask = self._vis.parse("budget_ask", BudgetAsk, args)
        if ask is None:
            return
        await self._budgets.on_ask(ask)

    @workflow.signal(name="budget_reply")
    def budget_reply(self, *args: Any) -> None:
        """The parent's answer to a ``budget_ask`` (internal)."""
        reply = self._vis.parse("budget_reply", BudgetReply, args)
        if reply is not None:
            self._budgets.on_reply(reply)

    @workflow.signal(name="pool_floor")
    def pool_floor(self, *args: Any) -> None:
        """The parent's live remainder (internal; see :class:`PoolFloor`)."""
        floor = self._vis.parse("pool_floor", PoolFloor, args)
        if floor is not None:
            self._budgets.on_floor(floor)

    # ------------------------------------------------------------------ wait

    @workflow.update(name="wait")
    async def wait(self, req: WaitRequest) -> WaitResponse:
        """The next result, or at once the last one when the handle is settled (CONTRACT §3).

        Settled means: idle with a result, suspended, or closed. A timeout returns status
        ``timeout`` and the turn keeps running. Never raises.
        """
        self._updates += 1
        return await self._wait(req)

    async def _wait(self, req: WaitRequest) -> WaitResponse:
        s = self.s
        behind = req.after_seq is not None and s.result_seq <= req.after_seq
        if (
            not behind
            and self._machine.settled()
            and (s.last_result is not None or s.state == "closed")
        ):
            if s.floor is not None:
                await workflow.wait_condition(lambda: self._outbox.signals_in_flight == 0)
            return WaitResponse(result=self._machine.last_or_closed(), status=status_of(s))
        seen = s.result_seq if req.after_seq is None else max(req.after_seq, 0)
        timeout = None if req.timeout_ms is None else timedelta(milliseconds=req.timeout_ms)
        try:
            await workflow.wait_condition(
                lambda: self.s.result_seq > seen or self.s.state == "closed", timeout=timeout
            )
        except TimeoutError:
            result = TaskResult(
                status="timeout",
                is_error=True,
                text=f"no result within {req.timeout_ms} ms; the turn keeps running",
            )
            return WaitResponse(result=result, status=status_of(s))
        if s.result_seq > seen and s.last_result is not None:
            if s.floor is not None:
                # Under a finite pool the caller must see a settled ledger: the parent has
                # the report of this turn's spending before the result is handed out.
                await workflow.wait_condition(lambda: self._outbox.signals_in_flight == 0)
            return WaitResponse(result=s.last_result, status=status_of(s))
        return WaitResponse(result=self._machine.closed_result(), status=status_of(s))

    async def _run_hook(self, hook: str, event: str, reason: str | None) -> None:
        """Run a registered hook as an activity; a failing hook is traced, never fatal."""
        s = self.s
        try:
            await workflow.execute_activity(
                RUN_HOOK_ACTIVITY,
                HookInput(
                    hook=hook,
                    event="spawn" if event == "spawn" else "close",
                    handle_id=s.id,
                    reason=reason,
                ),
                start_to_close_timeout=timedelta(seconds=60),
                retry_policy=RetryPolicy(maximum_attempts=3),
                summary=f"on_{event} hook {hook} for {s.id}",
            )
            self._vis.trace(f"{s.id}: on_{event} {hook} ran")
        except ActivityError as err:
            cause = error_text(err)
            s.last_error = f"on_{event} hook {hook} failed: {cause}"[:500]
            self._vis.trace(f"{s.id}: on_{event} {hook} FAILED ({cause})")

    # ------------------------------------------------------------------ trace & visibility

    @workflow.signal(dynamic=True)
    def unknown_signal(self, name: str, args: Sequence[RawValue]) -> None:
        """A signal with a name this workflow does not know: rejected loudly, not buffered."""
        self._vis.unknown_signal(name)
