"""A parked turn across continue-as-new (issue 12 item 8).

A handle parked on a Request may stay parked for days while signals and updates keep
arriving (rejected ones too: each is a history event, and Temporal refuses signals and
updates past a per-run count and terminates a run past 50 MiB of history). So the run
continues as new while parked, exactly like an idle one, once it is long
(``Lifecycle.continue_as_new_due``: updates, signals, events, history bytes, Temporal's
suggestion): the parked turn travels as a :class:`~toolnexus_temporal.workflows.contract.state.
ParkedTurn` in the carried state, and the next run resumes it (the turn waits for the same
Answer, re-runs the tool with it, resolves the later suspensions in call order and goes on
with the LLM loop). The Request and its id stay the same, so an Answer sent to the workflow
id (``temporal workflow signal --name answer``, the web UI, the client) reaches whichever run
is current. A run the server terminates anyway (large signals from concurrent senders can fail
every workflow task, so it cannot continue as new) is read back by the ``recovery`` query
(:meth:`CarryOver.recovery`, the same rules) and started again by ``AgentRuntime.recover``.

The rules (:func:`carry_blocker`): a turn is carried when it is parked on its own tool's
Request (its tool jobs have finished), or when every unfinished tool job of its reply is a
``task`` whose child is parked (the children keep running: they are ABANDON children and
report by workflow id; the next run follows them again from ``children_info``). Never while
another tool job runs, while an Answer has been accepted but not taken, while an interrupt or
close is aborting the turn, or while a signal or a handler is in flight.

Deterministic; no I/O.
"""

from __future__ import annotations

import asyncio
from collections.abc import Callable, Coroutine, Mapping
from typing import Any

from temporalio import workflow

from toolnexus_temporal.workflows.approvals.approvals import Approvals
from toolnexus_temporal.workflows.budgets import drop_floors
from toolnexus_temporal.workflows.lifecycle.lifecycle import Lifecycle
from toolnexus_temporal.workflows.machine import TurnScratch
from toolnexus_temporal.workflows.outbox import Outbox
from toolnexus_temporal.workflows.rules.roster import compact
from toolnexus_temporal.workflows.trust import masked
from toolnexus_temporal.workflows.visibility.visibility import Visibility

with workflow.unsafe.imports_passed_through():
    from toolnexus_temporal.workflows.contract.state import (
        AgentInput,
        HandleState,
        ParkedTurn,
        RecoveryPoint,
    )
    from toolnexus_temporal.workflows.rules.approvals import parked_on


def carry_blocker(
    s: HandleState,
    scratch: TurnScratch,
    waiting: str | None,
    parked_children: Mapping[int, str] | None = None,
) -> str | None:
    """Why the current turn cannot be carried into a new run now, or None when it can.

    Args:
        s: the handle's state.
        scratch: the running turn's scratch (``batch``: the suspensions being resolved;
            ``jobs``: the tool jobs running).
        waiting: the id of the Request the turn waits on for an Answer (None: it does not).
        parked_children: the ``task`` jobs parked with their child, job index → child id.

    Returns:
        ``not suspended``, ``closing``, ``interrupted``, ``another
        request``, ``tool jobs running`` (a job is neither finished nor parked on its
        child) or ``not parked`` (an interpreter answers inline); None when the turn is
        parked on its own tool's Request, or its unfinished jobs all wait on parked
        children.
    """
    if s.state != "suspended":
        return "not suspended"
    if s.closing:
        return "closing"
    if scratch.interrupt_requested:
        return "interrupted"
    if scratch.batch is not None and waiting is not None:
        if s.approval.pending_req is None or s.approval.pending_req.id != waiting:
            return "another request"
        return None
    jobs = scratch.jobs
    if jobs is not None and waiting is None and s.approval.pending_req is not None:
        parked = parked_children or {}
        open_jobs = [i for i in range(len(jobs.unique)) if i not in jobs.done]
        if open_jobs and all(i in parked for i in open_jobs):
            return None
        return "tool jobs running"
    return "not parked"


def snapshot(
    s: HandleState, scratch: TurnScratch, parked_children: Mapping[int, str] | None = None
) -> ParkedTurn:
    """The parked turn as carried state (call :func:`carry_blocker` first): the suspension
    being resolved, or the tool jobs with the children they wait on.

    Raises:
        ValueError: the turn is neither resolving a suspension nor running tool jobs.
    """
    if s.approval.pending_req is None or (scratch.batch is None and scratch.jobs is None):
        raise ValueError("the turn is not parked")
    common: dict[str, Any] = {
        "request": s.approval.pending_req,
        "llm_calls": scratch.llm_calls,
        "tokens": scratch.tokens,
        "cost": scratch.cost,
        "turn_start_len": scratch.turn_start_len,
        "unsent_before": list(scratch.unsent_before),
    }
    if scratch.batch is not None:
        calls, results, index = scratch.batch
        return ParkedTurn(calls=list(calls), results=list(results), index=index, **common)
    jobs = scratch.jobs
    assert jobs is not None
    return ParkedTurn(
        calls=list(jobs.calls),
        results=[],
        index=-1,
        unique=list(jobs.unique),
        call_job=list(jobs.call_job),
        done=dict(jobs.done),
        children={i: c for i, c in (parked_children or {}).items() if i not in jobs.done},
        **common,
    )


class CarryOver:
    """Runs a turn to its end, or carries it into a new run while it is parked.

    Args:
        s: the handle's state model.
        scratch: the running turn.
        vis: the trace line of the continue-as-new.
        approvals: which Request the turn waits on, Answers not yet taken, the child each
            ``task`` job follows.
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
        if s.approval.parked is not None:
            approvals.carried(s.approval.parked)

    def parked_children(self) -> dict[int, str]:
        """The ``task`` jobs whose child's latest report shows it parked: job index → child
        id."""
        info = self.s.roster.children_info
        tasks = self.approvals.task_children
        return {i: c for i, c in tasks.items() if parked_on(info.get(c)) is not None}

    def may_carry(self) -> bool:
        """The turn is parked (:func:`carry_blocker`), no Answer waits to be taken, nothing
        is in flight, and the run is long."""
        approvals = self.approvals
        children = self.parked_children()
        blocker = carry_blocker(self.s, self.scratch, approvals.own_parked, children)
        stale = any(  # an Answer forwarded to a child whose report does not show it yet
            parked_on(self.s.roster.children_info.get(c)) in approvals.forwarded
            for c in children.values()
        )
        return (
            blocker is None
            and not stale
            and not approvals.answers
            and self.outbox.signals_in_flight == 0
            and workflow.all_handlers_finished()
            and self.life.continue_as_new_due()
        )

    def recovery(self) -> RecoveryPoint:
        """What a run started again from the current state carries (the ``recovery`` query;
        ``AgentRuntime.recover`` reads it from a run the server terminated): the state as a
        continue-as-new would carry it, without its nonces (the client takes them from the
        run's history). An idle handle is carried as it is; a parked one with its parked
        turn (the same Request and id, :func:`carry_blocker`'s rules, whatever the run's
        length); a handle with a turn in flight, or closed, has none (``why`` says so).
        Never raises; changes nothing."""
        s = self.s
        if s.state == "closed":
            return RecoveryPoint(why="closed")
        if s.state == "idle" and not s.intake.turn_pending and not s.closing:
            carried = s.model_copy(deep=True)
        elif s.state == "suspended" and self.scratch.batch is None and self.scratch.jobs is None:
            if s.approval.parked is None:
                return RecoveryPoint(why="suspended, but the turn is not parked")
            carried = s.model_copy(deep=True)  # carried in, not resumed yet
        elif s.state == "suspended":
            children = self.parked_children()
            blocker = carry_blocker(s, self.scratch, self.approvals.own_parked, children)
            if blocker is not None:
                return RecoveryPoint(why=f"suspended, but {blocker}")
            carried = s.model_copy(deep=True)
            carried.approval.parked = snapshot(s, self.scratch, children)
        else:
            return RecoveryPoint(why=f"{s.state}: a turn was in flight")
        drop_floors(carried, compact(carried))
        return RecoveryPoint(input=AgentInput(state=masked(carried)))

    async def run_turn(self, turn: Callable[[], Coroutine[Any, Any, None]]) -> None:
        """Run the admitted (or carried) turn to its end. When the run grows long while the
        turn is parked, continue as new carrying it instead.

        Raises:
            ContinueAsNewError: the run continues as new with the parked turn.
        """
        task = asyncio.create_task(turn())
        self.scratch.task = task
        while not task.done():
            await workflow.wait_condition(lambda: task.done() or self.may_carry())
            if task.done():
                break
            if self.life.young_for() is not None:
                await self.life.old_enough(task.done)
                continue  # the turn may have been answered meanwhile: check again
            parked = snapshot(self.s, self.scratch, self.parked_children())
            self.vis.trace(f"{self.s.id}: continue-as-new (parked on {parked.request.id})")
            # A copy: the abandoned coroutine of this run must not touch what is carried.
            carried = self.s.model_copy(deep=True)
            carried.approval.parked = parked
            drop_floors(carried, compact(carried))  # closed children, old trace lines stay behind
            workflow.continue_as_new(AgentInput(state=carried))
        await task
        self.scratch.task = None
