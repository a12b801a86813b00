"""The run of an ``AgentWorkflow`` (CONTRACT §8): its start (``on_spawn``, a parked turn or
an owed report carried from an earlier run, the children of earlier runs watched), the loop
that runs one turn per admitted wake, continue-as-new once the run is long and idle, and a
cancellation request of the workflow, which becomes a graceful close.

:class:`RunLoop` holds it; ``AgentWorkflow.run`` (``agent.py``) only calls it. Deterministic;
no I/O.
"""

from __future__ import annotations

import asyncio
from collections.abc import Callable

from temporalio import workflow

from toolnexus_temporal.workflows.budgets import drop_floors
from toolnexus_temporal.workflows.children.children import Children
from toolnexus_temporal.workflows.contract.versions import check_protocol
from toolnexus_temporal.workflows.lifecycle.carry import CarryOver
from toolnexus_temporal.workflows.lifecycle.lifecycle import Lifecycle
from toolnexus_temporal.workflows.outbox import Outbox
from toolnexus_temporal.workflows.rules import background
from toolnexus_temporal.workflows.rules.roster import compact
from toolnexus_temporal.workflows.ticks import Ticks
from toolnexus_temporal.workflows.turn.turn import Turn
from toolnexus_temporal.workflows.visibility.visibility import Visibility, view_of

with workflow.unsafe.imports_passed_through():
    from toolnexus_temporal.workflows.contract.models import HandleView
    from toolnexus_temporal.workflows.contract.state import AgentInput, HandleState


class RunLoop:
    """The run of one handle: start, serve wakes, continue as new, close on cancellation.

    Args:
        s: the handle's state model.
        vis: trace lines, the first publish.
        outbox: signals in flight (the run ends once none is).
        lifecycle: hooks, the close, continue-as-new thresholds.
        children: watching the children of earlier runs.
        parking: runs a turn, or the parked turn carried over.
        turn: the LLM loop.
        ticks: the tick schedule's timer loop (runs beside the serve loop).
        after_turn: called after a turn when a background child's item waits, once a held
            wake had its chance: the item wakes the handle (``BackgroundWake.wake_if_due``,
            which checks the rest; without an item it has nothing to do).
    """

    def __init__(
        self,
        s: HandleState,
        vis: Visibility,
        outbox: Outbox,
        lifecycle: Lifecycle,
        children: Children,
        parking: CarryOver,
        turn: Turn,
        ticks: Ticks,
        after_turn: Callable[[], None],
    ) -> None:
        self.s = s
        self._vis = vis
        self._outbox = outbox
        self._lifecycle = lifecycle
        self._children = children
        self._parking = parking
        self._turn = turn
        self.after_turn = after_turn
        self._ticks = ticks

    async def run(self) -> HandleView:
        """Serve verbs until the handle is closed; each admitted wake runs one turn.

        Returns:
            The final view (readable after close: close is not loss).

        Raises:
            ApplicationError: ``UnsupportedProtocol``: the handle's protocol generation is
                not one this build runs (``versions.py``); the workflow fails at once.
        """
        s = self.s
        check_protocol(s.protocol)
        life = self._lifecycle
        info = workflow.info()
        self._vis.publish()
        first_run = info.continued_run_id is None and s.recovered_from is None
        if info.continued_run_id is None and s.recovered_from is not None:
            self._vis.trace(f"{s.id}: recovered (run {s.recovered_from} was terminated)")
        try:
            if first_run and s.defn is not None and s.defn.on_spawn:
                await life.run_hook(s.defn.on_spawn, "spawn", None)
            life.resume_run()
            self._parking.approvals.check()  # the Answers an earlier run was checking
            self._children.watcher.watch_earlier()
            # The timer loop ends with the handle's close; a continue-as-new drops its timer
            # and the next run starts it again from ``TickState.next_ms`` (ticks.py).
            ticking = asyncio.create_task(self._tick_loop())
            await self._serve()
            await ticking  # closed: the loop unsets AgentNextTick and ends
        except asyncio.CancelledError:
            # A cancellation request (web UI "Request Cancellation", `temporal workflow
            # cancel`) is a graceful close of this subtree. The run then completes with its
            # final view like every closed handle, so its parent reads the closed report.
            await life.close_on_cancel()
        await workflow.wait_condition(
            lambda: workflow.all_handlers_finished() and self._outbox.signals_in_flight == 0
        )
        return view_of(s)

    async def _tick_loop(self) -> None:
        """The tick schedule's timer loop (``ticks.py``), started once there is a schedule
        (or the handle closes): until then its wait is this field read, so a handle without
        a schedule runs no tick code at each activation."""
        s = self.s
        if not self._ticks.begin():
            await workflow.wait_condition(
                lambda: s.ticks.spec is not None or s.state == "closed" or s.closing
            )
        await self._ticks.run()

    async def _serve(self) -> None:
        """The run loop: each admitted wake runs one turn, until the handle is closed (or the
        run continues as new)."""
        s = self.s
        life = self._lifecycle
        while True:
            await workflow.wait_condition(
                lambda: (
                    s.intake.turn_pending
                    or s.approval.parked is not None
                    or life.closed
                    or life.continue_as_new_due()
                )
            )
            if life.closed:
                return
            if (
                s.intake.turn_pending or s.approval.parked is not None
            ):  # parked: carried over, resumed
                # A cancellation request reaches the run loop, not the turn nor a close
                # under way: the close it becomes gives the turn its grace, or waits.
                run = self._parking.run_turn(self._turn.run)
                await asyncio.shield(asyncio.create_task(run))
                life.inbox.admit_waiting()  # messages that came during the turn
                if s.background.waiting:  # a background child's item came during the turn
                    self.after_turn()
                await asyncio.shield(asyncio.create_task(life.close_if_one_shot()))
                continue
            # Idle and the run is long: once nothing is in flight, carry the whole state model
            # into a fresh run (children keep running: they are ABANDON children and signal by
            # workflow id). A wake or a close first takes precedence. An owed report is
            # carried over (``report_owed``) and sent by the next run.
            await life.old_enough(lambda: s.intake.turn_pending or life.closed)
            life.continuing = True  # a paused handle's held waits yield (waits_yield)
            await workflow.wait_condition(
                lambda: s.intake.turn_pending or life.closed or life.quiescent()
            )
            life.continuing = False
            if life.quiescent():
                self._vis.trace(f"{s.id}: continue-as-new")
                drop_floors(s, compact(s))  # closed children and old trace lines stay behind
                background.compact(s)  # closed background children too (unread items stay)
                workflow.continue_as_new(AgentInput(state=s))
