"""A parked turn across continue-as-new (protocol 3; issue 12 item 8).

A handle parked on a Request may stay parked for days while signals and updates keep
arriving (rejected ones too: each is a history event, and Temporal refuses signals and
updates past a per-run count and terminates a run past 50 MiB of history). So the run
continues as new while parked, exactly like an idle one, once it is long
(``Lifecycle.continue_as_new_due``: updates, signals, events, history bytes, Temporal's
suggestion): the parked turn travels as a :class:`~toolnexus_temporal.workflows.state.
ParkedTurn` in the carried state, and the next run resumes it (the turn waits for the same
Answer, re-runs the tool with it, resolves the later suspensions in call order and goes on
with the LLM loop). The Request and its id stay the same, so an Answer sent to the workflow
id (``temporal workflow signal --name answer``, the web UI, the client) reaches whichever run
is current.

The rules (:func:`carry_blocker`): only a turn parked on its own tool's Request is carried
(its tool batch has finished; nothing of it is in flight), never while an Answer for it has
been accepted but not taken, while an interrupt or close is aborting it, or while a signal
or a handler is in flight. A turn whose delegated ``task`` child is parked is not carried
(the parent's tool batch is still waiting on the child): see README "Known limits".

Deterministic; no I/O.
"""

from __future__ import annotations

import asyncio
from collections.abc import Callable, Coroutine
from typing import Any

from temporalio import workflow

from toolnexus_temporal.workflows.approvals import Approvals
from toolnexus_temporal.workflows.lifecycle import Lifecycle
from toolnexus_temporal.workflows.machine import TurnScratch
from toolnexus_temporal.workflows.outbox import Outbox
from toolnexus_temporal.workflows.visibility import Visibility

with workflow.unsafe.imports_passed_through():
    from toolnexus_temporal.workflows.names import PROTOCOL_HARDENED
    from toolnexus_temporal.workflows.state import AgentInput, HandleState, ParkedTurn


def carry_blocker(s: HandleState, scratch: TurnScratch, waiting: str | None) -> str | None:
    """Why the current turn cannot be carried into a new run now, or None when it can.

    Args:
        s: the handle's state.
        scratch: the running turn's scratch (``batch``: the suspensions being resolved).
        waiting: the id of the Request the turn waits on for an Answer (None: it does not).

    Returns:
        ``protocol < 3``, ``not suspended``, ``closing``, ``interrupted``, ``not parked on
        its own tool`` (an interpreter answers inline, or a delegated child is parked) or
        ``another request``; None when the turn is parked on its own tool's Request.
    """
    if s.protocol < PROTOCOL_HARDENED:
        return "protocol < 3"
    if s.state != "suspended":
        return "not suspended"
    if s.closing:
        return "closing"
    if scratch.interrupt_requested:
        return "interrupted"
    if scratch.batch is None or waiting is None:
        return "not parked on its own tool"
    if s.pending_req is None or s.pending_req.id != waiting:
        return "another request"
    return None


def snapshot(s: HandleState, scratch: TurnScratch) -> ParkedTurn:
    """The parked turn as carried state (call :func:`carry_blocker` first).

    Raises:
        ValueError: the turn is not resolving a suspension.
    """
    if scratch.batch is None or s.pending_req is None:
        raise ValueError("the turn is not parked on a suspension")
    calls, results, index = scratch.batch
    return ParkedTurn(
        calls=list(calls),
        results=list(results),
        index=index,
        request=s.pending_req,
        llm_calls=scratch.llm_calls,
        tokens=scratch.tokens,
        turn_start_len=scratch.turn_start_len,
        unsent_before=list(scratch.unsent_before),
    )


def restore(scratch: TurnScratch, parked: ParkedTurn) -> None:
    """Set up the scratch of a turn resumed from ``parked`` in a new run (the counters and
    rollback point it had; no messages yet: the tool batch produces them)."""
    scratch.start([])
    scratch.llm_calls = parked.llm_calls
    scratch.tokens = parked.tokens
    scratch.turn_start_len = parked.turn_start_len
    scratch.unsent_before = list(parked.unsent_before)


class Parking:
    """Runs a turn to its end, or carries it into a new run while it is parked.

    Args:
        s: the handle's state model.
        scratch: the running turn.
        vis: the trace line of the continue-as-new.
        approvals: which Request the turn waits on, Answers not yet taken.
        outbox: signals in flight (they must be sent before the run ends).
        life: whether the run is long (``continue_as_new_due``) and old enough.
    """

    def __init__(
        self,
        s: HandleState,
        scratch: TurnScratch,
        vis: Visibility,
        approvals: Approvals,
        outbox: Outbox,
        life: Lifecycle,
    ) -> None:
        self.s = s
        self.scratch = scratch
        self.vis = vis
        self.approvals = approvals
        self.outbox = outbox
        self.life = life

    def may_carry(self) -> bool:
        """The turn is parked on its own tool (:func:`carry_blocker`), no Answer waits to be
        taken, nothing is in flight, and the run is long."""
        return (
            carry_blocker(self.s, self.scratch, self.approvals.waiting) is None
            and not self.approvals.answers
            and not self.approvals.parked_tasks
            and self.outbox.signals_in_flight == 0
            and workflow.all_handlers_finished()
            and self.life.continue_as_new_due()
        )

    async def run_turn(self, turn: Callable[[], Coroutine[Any, Any, None]]) -> None:
        """Run the admitted (or carried) turn to its end. Under protocol 3, when the run
        grows long while the turn is parked, continue as new carrying it instead.

        Raises:
            ContinueAsNewError: the run continues as new with the parked turn.
        """
        task = asyncio.create_task(turn())
        self.scratch.task = task
        while self.s.protocol >= PROTOCOL_HARDENED and not task.done():
            await workflow.wait_condition(lambda: task.done() or self.may_carry())
            if task.done():
                break
            if self.life.young_for() is not None:
                await self.life.old_enough(task.done)
                continue  # the turn may have been answered meanwhile: check again
            parked = snapshot(self.s, self.scratch)
            self.vis.trace(f"{self.s.id}: continue-as-new (parked on {parked.request.id})")
            # A copy: the abandoned coroutine of this run must not touch what is carried.
            carried = self.s.model_copy(deep=True, update={"parked": parked})
            workflow.continue_as_new(AgentInput(state=carried))
        await task
        self.scratch.task = None
