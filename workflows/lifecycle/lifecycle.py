"""The verbs that span a handle's life (CONTRACT §3 wait, interrupt, close) and the run's
own life: hooks, and continue-as-new when the run grows long.

* ``wait``: the next result, or at once the last one when the handle is settled.
* ``turn``: a wake from outside and the wait for that wake's result, in one update.
* ``interrupt``: abort the running or parked turn; the handle goes idle.
* ``close``: stop accepting, close the children leaf-first in spawn order, give a running
  turn ``shutdown_ms`` (a forced close aborts it first), run ``on_close``, then ``closed``.
* a cancellation request of the workflow: the same graceful close.
* ``wait`` and ``turn`` are held at most ``WAITERS_MAX`` at once (their validators refuse
  more), so control updates always find one of Temporal's 10 update slots.
* continue-as-new: an idle run past ``continue_as_new_updates`` updates or
  ``continue_as_new_events`` events (or when Temporal suggests it), or past
  ``continue_as_new_signals`` signals or ``continue_as_new_bytes`` of history) carries the
  whole ``HandleState`` into a fresh run once nothing is in flight; a parked turn goes
  with it (``carry.py``).

Deterministic; no I/O.
"""

from __future__ import annotations

from collections.abc import Awaitable, Callable
from datetime import timedelta
from typing import Literal

from temporalio import workflow
from temporalio.common import RetryPolicy
from temporalio.exceptions import ActivityError, ApplicationError

from toolnexus_temporal.workflows.children.children import Children
from toolnexus_temporal.workflows.inbox import Inbox, answered_after
from toolnexus_temporal.workflows.machine import Machine, TurnScratch
from toolnexus_temporal.workflows.outbox import Outbox
from toolnexus_temporal.workflows.visibility.visibility import (
    Visibility,
    error_text,
    note_error,
    status_of,
)

with workflow.unsafe.imports_passed_through():
    from toolnexus_temporal.workflows.contract.limits import SUMMARY_BYTES, fit
    from toolnexus_temporal.workflows.contract.messages import (
        CloseRequest,
        HookInput,
        TurnRequest,
        WaitRequest,
        WaitResponse,
    )
    from toolnexus_temporal.workflows.contract.models import TaskResult
    from toolnexus_temporal.workflows.contract.names import (
        RUN_HOOK_ACTIVITY,
        WAITERS_FULL,
    )
    from toolnexus_temporal.workflows.contract.state import HandleState


WAITERS_MAX = 5
"""How many ``wait`` and ``turn`` updates one handle holds at once. Temporal admits 10
updates in flight per workflow; these two can be held for a whole turn, so without a cap nine
waiting hosts would leave ``interrupt``, ``close`` and the Answer no room. Past the cap the
validator refuses (nothing reaches history) with type :data:`WAITERS_FULL`, and the client
waits by polling the ``view`` query instead (queries take no update slot)."""

MIN_RUN = timedelta(milliseconds=1_200)
"""The shortest run that continues as new by default (Temporal's minimal interval between
runs, ``history.workflowIdReuseMinimalInterval``, is 1 s): see :meth:`Lifecycle.young_for`
and ``RuntimeOptions.continue_as_new_min_run_ms``. Measured from this run's first workflow
task to the current one, it is never more than the server's measure."""


class Lifecycle:
    """Wait, wake-and-wait, interrupt, close, hooks and continue-as-new of one handle.

    Owns ``closing`` and ``options`` (the continue-as-new thresholds); per run, the updates
    handled (``updates``) and whether the close finished (``closed``).

    Args:
        s: the handle's state model.
        scratch: the running turn (an interrupt cancels it) and the interrupt flag.
        vis: trace lines.
        machine: the closed transition, settled results.
        outbox: signals in flight (a finite-pool wait and continue-as-new wait for them).
        inbox: admits a wake from outside.
        children: the close cascade.
    """

    def __init__(
        self,
        s: HandleState,
        scratch: TurnScratch,
        vis: Visibility,
        machine: Machine,
        outbox: Outbox,
        inbox: Inbox,
        children: Children,
    ) -> None:
        self.s = s
        self.scratch = scratch
        self.vis = vis
        self.machine = machine
        self.outbox = outbox
        self.inbox = inbox
        self.children = children
        self.updates = 0
        """Updates handled in this run (each handler counts itself)."""
        self.closed = False
        """The close finished: the run loop ends."""
        self.waiters = 0
        """``wait`` and ``turn`` updates in flight (see :data:`WAITERS_MAX`)."""
        self.continuing = False
        """The run loop waits to continue as new (idle, the run long): see
        :meth:`waits_yield`."""

    # ---- wait and turn

    async def wait(self, req: WaitRequest) -> WaitResponse:
        """The next result, or at once the last one when the handle is settled (CONTRACT §3
        wait). Under a finite pool the result is handed out only once the parent has this
        turn's spending (no signal in flight). Never raises.

        Returns:
            The result (``timeout`` after ``req.timeout_ms``: the turn keeps running;
            ``closed`` when the handle closed without a newer result) and the status.
        """
        s = self.s
        behind = req.after_seq is not None and s.result_seq <= req.after_seq
        if (
            not behind
            and self.machine.settled()
            and (s.last_result is not None or s.state == "closed")
        ):
            if s.usage.floor is not None:
                await workflow.wait_condition(lambda: self.outbox.signals_in_flight == 0)
            return WaitResponse(result=self.machine.last_or_closed(), status=status_of(s))
        seen = s.result_seq if req.after_seq is None else max(req.after_seq, 0)
        timeout = None if req.timeout_ms is None else timedelta(milliseconds=req.timeout_ms)
        try:
            await workflow.wait_condition(
                lambda: self.s.result_seq > seen or self.s.state == "closed" or self.waits_yield(),
                timeout=timeout,
            )
        except TimeoutError:
            result = TaskResult(
                status="timeout",
                is_error=True,
                text=f"no result within {req.timeout_ms} ms; the turn keeps running",
            )
            return WaitResponse(result=result, status=status_of(s))
        if s.result_seq <= seen and s.state != "closed":  # waits_yield: ask again
            result = TaskResult(
                status="timeout",
                is_error=True,
                text="no result yet: the handle continues as new; ask again",
            )
            return WaitResponse(result=result, status=status_of(s), again_after_seq=seen)
        if s.result_seq > seen and s.last_result is not None:
            if s.usage.floor is not None:
                # Under a finite pool the caller must see a settled ledger: the parent has
                # the report of this turn's spending before the result is handed out.
                await workflow.wait_condition(lambda: self.outbox.signals_in_flight == 0)
            return WaitResponse(result=s.last_result, status=status_of(s))
        return WaitResponse(result=self.machine.closed_result(), status=status_of(s))

    def waits_yield(self) -> bool:
        """Held ``wait`` and ``turn`` updates return now, with ``again_after_seq`` (the
        client asks the next run again): the run is due to continue as new (the handle is
        idle, :attr:`continuing`). A run continues as new only once every handler finished,
        and a wait may be held for days: on a paused handle (its held wake's update), or on
        an idle one that has no result yet; its ticks and posts would otherwise grow one
        run's history without end (to the server's limit)."""
        return self.continuing

    async def turn(self, req: TurnRequest) -> WaitResponse:
        """Wake from outside and wait for the result of the turn that holds this wake's
        message (the ``turn`` update). On a free handle the turn starts now (a held lease
        admits it at once; without one the handle asks its parent for a slot: see
        :mod:`~toolnexus_temporal.workflows.leases`); on a busy one the message is kept and
        the double-texting policy applies (``inbox.py``, ``contract/policy.py``). Never the
        result of an earlier turn: a turn the ``interrupt`` policy stopped sends its messages
        on, and the update waits for the turn that answers them."""
        seen = self.s.result_seq
        seq = self.inbox.receive(req.prompt, req.via or "turn", req.policy)
        return await self.answer_of(seq, seen)

    async def answer_of(self, seq: int, seen: int) -> WaitResponse:
        """The first result of the turn that holds message ``seq``; ``closed`` when the
        handle closed first; ``again_after_seq`` ``seen`` when the run continues as new
        meanwhile (a paused handle)."""
        s = self.s
        taken: list[int] = []

        def drained() -> bool:
            after = answered_after(s, seq)
            if after is not None:
                taken.append(after)  # read in the step that drained it
                return True
            return s.state == "closed" or self.waits_yield()

        while True:
            taken.clear()
            await workflow.wait_condition(drained)
            if not taken:
                if s.state == "closed":
                    return WaitResponse(result=self.machine.closed_result(), status=status_of(s))
                result = TaskResult(
                    status="timeout",
                    is_error=True,
                    text="no result yet: the handle continues as new; ask again",
                )
                # not taken yet: its answer is a result past the current one
                again = max(seen, s.result_seq)
                return WaitResponse(result=result, status=status_of(s), again_after_seq=again)
            resp = await self.wait(WaitRequest(after_seq=taken[0]))
            if resp.result.status == "interrupted" and answered_after(s, seq) != taken[0]:
                continue  # stopped by the interrupt policy: the message went on to a new turn
            return resp

    # ---- run start and the one-shot close

    def resume_run(self) -> None:
        """At a run's start: send a report a continue-as-new carried over (``report_owed``),
        and admit a wake that travelled with the spawn (``start_wake``)."""
        s = self.s
        if s.report_owed:
            self.machine.report()
        started, prompt = self.inbox.take_start_wake()
        if started:
            if self.inbox.wake_error() is None:
                self.inbox.wake_from_outside(prompt)
        self.inbox.admit_waiting()  # messages a continue-as-new carried (a debounce window)

    async def close_if_one_shot(self) -> None:
        """A ``task`` child closes itself once its turn settled: its closed report
        (its workflow result) carries the result, and the parent sends no close."""
        s = self.s
        if s.one_shot and s.state == "idle" and not s.closing:
            await self.close(CloseRequest(reason="task done"))

    # ---- interrupt and close

    async def interrupt(self, why: str) -> None:
        """Abort the turn of a running or suspended handle (a suspended one's Request is
        cancelled with it) and wait until it settled; idle and closed: nothing to do."""
        if self.s.state not in ("running", "suspended"):
            return
        self.scratch.interrupt_requested = True
        if self.scratch.task is not None:
            self.scratch.task.cancel()
        await workflow.wait_condition(lambda: self.s.state not in ("running", "suspended"))

    async def close(self, req: CloseRequest) -> None:
        """Stop accepting; close children leaf-first in spawn order; let a running turn
        finish within ``shutdown_ms`` (force: abort it first); run ``on_close``; closed.
        A second close waits for the first."""
        s = self.s
        if s.closing or s.state == "closed":
            await workflow.wait_condition(lambda: self.s.state == "closed")
            return
        s.closing = True
        why = req.reason or ("close --force" if req.force else "close")
        self.vis.trace(f"{s.id}: close requested ({why})")
        if req.force or s.state == "suspended":
            # A forced close aborts the turn first; a parked turn cannot finish by itself, so
            # its Request is cancelled now rather than answered by a closing tree.
            await self.interrupt("close")
        for child_id in list(s.roster.children):
            await self.children.close(child_id, req)
        if s.state == "running" or s.intake.turn_pending:
            grace = timedelta(milliseconds=s.options.shutdown_ms)
            try:
                await workflow.wait_condition(lambda: self.s.state != "running", timeout=grace)
            except TimeoutError:
                await self.interrupt("close: shutdown grace over")
        if s.defn is not None and s.defn.on_close:
            await self.run_hook(s.defn.on_close, "close", req.reason)
        self.inbox.leases.drop_queued()  # a wake queued for a slot ends here
        self.machine.transition("closed", why)
        self.closed = True

    async def close_on_cancel(self) -> None:
        """A cancellation request of the workflow (web UI, ``temporal workflow cancel``) is a
        graceful close of the subtree: the same cascade, grace, hook and ``closed`` state as
        the ``close`` verb."""
        self.vis.trace(f"{self.s.id}: cancellation requested: closing")
        await self.close(CloseRequest(reason="cancellation requested"))

    def check_waiters(self) -> None:
        """The validator of ``wait`` and ``turn``: refuse one more past :data:`WAITERS_MAX`
        held (a validator's refusal adds nothing to history).

        Raises:
            ApplicationError: type :data:`WAITERS_FULL`.
        """
        if self.waiters >= WAITERS_MAX:
            raise ApplicationError(
                f"{WAITERS_MAX} waits already in flight on {self.s.id}: poll the view query",
                type=WAITERS_FULL,
                non_retryable=True,
            )

    async def held(self, waiting: Awaitable[WaitResponse]) -> WaitResponse:
        """Await a ``wait`` or ``turn`` handler's result, counted in :attr:`waiters`."""
        self.waiters += 1
        try:
            return await waiting
        finally:
            self.waiters -= 1

    async def run_hook(
        self, hook: str, event: Literal["spawn", "close"], reason: str | None
    ) -> None:
        """Run the registered hook ``hook`` for ``event`` (activity ``tnx.run_hook``); a
        failing hook is traced and kept in ``last_error``, never fatal."""
        s = self.s
        try:
            await workflow.execute_activity(
                RUN_HOOK_ACTIVITY,
                HookInput(hook=hook, event=event, handle_id=s.id, reason=reason),
                start_to_close_timeout=timedelta(seconds=60),
                retry_policy=RetryPolicy(maximum_attempts=3),
                summary=fit(f"on_{event} hook {hook} for {s.id}", SUMMARY_BYTES),
            )
            self.vis.trace(f"{s.id}: on_{event} {hook} ran")
        except ActivityError as err:
            cause = error_text(err)
            note_error(s, f"on_{event} hook {hook} failed: {cause}")
            self.vis.trace(f"{s.id}: on_{event} {hook} FAILED ({cause})")

    # ---- continue-as-new

    def continue_as_new_due(self) -> bool:
        """This run is long: ``continue_as_new_updates`` updates, ``continue_as_new_events``
        history events, ``continue_as_new_signals`` signals received (rejected ones count:
        Temporal counts them too), ``continue_as_new_bytes`` of history, or Temporal suggests
        it. (Then wait for :meth:`old_enough` before continuing as new.)"""
        info = workflow.info()
        opts = self.s.options
        return (
            self.vis.signals >= opts.continue_as_new_signals
            or info.get_current_history_size() >= opts.continue_as_new_bytes
            or self.updates >= opts.continue_as_new_updates
            or info.get_current_history_length() >= opts.continue_as_new_events
            or info.is_continue_as_new_suggested()
        )

    def young_for(self) -> timedelta | None:
        """How long this run has to live before it may continue as new (None: old
        enough). Temporal delays the first workflow task of a run that follows a run
        shorter than its minimal interval (1 s); under a flood of signals that delay fills
        the new run with signals its first task must take in one go (and fails to, once
        more than 2 MB arrive meanwhile). So a run lives ``continue_as_new_min_run_ms``
        at least (default :data:`MIN_RUN`; the thresholds leave the margin). On a server
        whose interval is 0 it may be 0: a flooded run then continues as new as soon as it
        is long (measured: one sender of 1.5 MiB posts, runs of at most 12 MiB instead of
        42; two concurrent senders held)."""
        shortest = timedelta(milliseconds=self.s.options.continue_as_new_min_run_ms)
        left = shortest - (workflow.now() - workflow.info().start_time)
        return left if left > timedelta(0) else None

    async def old_enough(self, stop: Callable[[], bool]) -> None:
        """Wait (a durable timer) until the run may continue as new (:meth:`young_for`), or
        until ``stop`` holds."""
        left = self.young_for()
        if left is None:
            return
        try:
            await workflow.wait_condition(stop, timeout=left)
        except TimeoutError:
            pass

    def quiescent(self) -> bool:
        """Idle with nothing in flight (no turn, close, signal, queued wake or handler): safe
        to continue as new. Waiting messages go along when paused or held by a debounce
        window (the next run's ``resume_run`` admits them, its timer to the window's end)."""
        s = self.s
        return (
            s.state == "idle"
            and not s.intake.turn_pending
            and not s.closing
            and self.outbox.signals_in_flight == 0
            and not s.leases.wake_queue
            and (not s.intake.wakes or s.pause.paused or self.inbox.window_open())
            and workflow.all_handlers_finished()
        )
