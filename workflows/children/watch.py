"""Children whose workflows end (CONTRACT §8): a
child's workflow that ends without a ``closed`` report (terminated, failed, timed out: for
example from the web UI) is marked closed, so nothing waits on it forever and its lease is
freed; a task child's final view is its closed report.

* :meth:`ChildWatch.starting`: a child whose start this run commanded and Temporal has not
  confirmed yet is *starting*: no watch asks the server about it (it may not exist there yet).
* :meth:`ChildWatch.watch`: the children started in this run (their child workflow handle).
* :meth:`ChildWatch.watch_earlier`: the live children of earlier runs, through
  :func:`~toolnexus_temporal.workflows.children.ends.child_ends` (activity
  ``tnx.watch_children``); a child whose start is in flight is not one of them (a spawn in the
  run's first workflow task comes before the run's start: Temporal delivers updates first).
* :meth:`ChildWatch.ended` and :meth:`ChildWatch.mark_closed`: what an end changes.

Used by :class:`~toolnexus_temporal.workflows.children.children.Children`. Deterministic; no I/O.
"""

from __future__ import annotations

import asyncio
from collections.abc import Awaitable, Callable
from typing import Any

from temporalio import workflow

from toolnexus_temporal.workflows.budgets import BudgetLedger, newer_cost
from toolnexus_temporal.workflows.children.ends import child_ends
from toolnexus_temporal.workflows.leases import LeaseBook
from toolnexus_temporal.workflows.machine import Machine
from toolnexus_temporal.workflows.visibility.visibility import Visibility, error_cause

with workflow.unsafe.imports_passed_through():
    from toolnexus_temporal.workflows.contract.messages import ChildEnd, ChildReport, CloseRequest
    from toolnexus_temporal.workflows.contract.models import HandleView
    from toolnexus_temporal.workflows.contract.names import SIGNAL_CLOSE
    from toolnexus_temporal.workflows.contract.state import HandleState


class ChildWatch:
    """The ends of one handle's children's workflows.

    Args:
        s: the handle's state model.
        vis: trace lines, publish.
        machine: the report to this handle's own parent; the outbox (orphans' close).
        budgets: the ledger and floors after a child closed.
        leases: a child's lease when its workflow ended.
        on_report: a child's report (a task child's final view is one).
        on_change: called after a child's info changed (``Children.on_change``).
    """

    def __init__(
        self,
        s: HandleState,
        vis: Visibility,
        machine: Machine,
        budgets: BudgetLedger,
        leases: LeaseBook,
        on_report: Callable[[ChildReport], None],
        on_change: Callable[[], None],
    ) -> None:
        self.s = s
        self.vis = vis
        self.machine = machine
        self.budgets = budgets
        self.leases = leases
        self.on_report = on_report
        self.on_change = on_change
        self.in_flight: set[str] = set()
        """Children whose start this run commanded and Temporal has not confirmed (or
        refused) yet (:meth:`starting`). Run-local: a run continues as new only once no
        handler and no turn runs, so with no start in flight."""

    async def starting(
        self, child_id: str, start: Awaitable[workflow.ChildWorkflowHandle[Any, HandleView]]
    ) -> workflow.ChildWorkflowHandle[Any, HandleView]:
        """Await the start of child ``child_id``'s workflow (``start``: the coroutine of
        ``workflow.start_child_workflow``); meanwhile the child is in :attr:`in_flight`. Until
        Temporal confirmed the start its workflow may not exist on the server yet, so no
        lookup may take it for ended: :meth:`watch_earlier` leaves it out (it is watched
        through its handle once started, :meth:`watch`) and a close waits for the start
        (:meth:`until_started`).

        Returns:
            The child's workflow handle.

        Raises:
            Exception: the start failed (as ``start`` raised it).
        """
        self.in_flight.add(child_id)
        try:
            return await start
        finally:
            self.in_flight.discard(child_id)

    async def until_started(self, child_id: str) -> None:
        """Wait until the start of ``child_id``'s workflow, when one is in flight, was
        confirmed or refused (at once otherwise): a signal to it before then could find no
        workflow."""
        if child_id in self.in_flight:
            await workflow.wait_condition(lambda: child_id not in self.in_flight)

    def mark_closed(self, child_id: str) -> None:
        """Record a child as closed whose workflow is gone (ended without a closed report, or
        never started): nothing waits on it forever, and its lease is freed. The change is
        handled like a closed report: usage and pools recounted, floors pushed, the parent
        told, search attributes and details published."""
        info = self.s.roster.children_info.get(child_id)
        if info is None or info.state == "closed":
            return
        self.s.roster.children_info[child_id] = info.model_copy(
            update={"state": "closed", "parked": False, "pending_req": None}
        )
        self.leases.child_closed(child_id)
        self.on_change()
        self.budgets.recount()
        self.budgets.push_floors()
        self.vis.publish()
        self.machine.report(now=True)

    async def watch(
        self, child_id: str, handle: workflow.ChildWorkflowHandle[Any, HandleView]
    ) -> None:
        """A child's workflow that ends without reporting ``closed`` (terminated, failed,
        timed out: for example from the web UI) is marked closed here, so nothing waits on
        it forever and its slot is freed. (Watches children started in this run; see
        :meth:`watch_earlier` for the others.)"""
        final: HandleView | None = None
        try:
            final = await handle
            why = "ended"
        except Exception as err:
            why = f"ended abnormally: {type(err).__name__}: {error_cause(err)}"
            # its last state: usage, open children
            for end in (await child_ends(self.s.scope, [child_id])).ended:
                self.ended(end.model_copy(update={"why": why}))
            return
        self.ended(ChildEnd(id=child_id, view=final, why=why))

    def watch_earlier(self) -> None:
        """At a run's start: watch the live children started by earlier runs
        (activity ``tnx.watch_children``, restarted for the rest each time one ends), so a
        child terminated after this handle continued as new is noticed like any other.

        A child whose start is in flight (:attr:`in_flight`: spawned by an update in the run's
        first workflow task, which Temporal's SDK runs before the workflow's ``run``) is not
        one of them: the activity could find no workflow for it yet and report it ended; it
        is watched through its handle once its start is confirmed."""
        live = [
            c
            for c, info in self.s.roster.children_info.items()
            if info.state != "closed" and c not in self.in_flight
        ]
        if live:
            asyncio.create_task(self._watch_earlier(live))  # noqa: RUF006 (ends with the run)

    async def _watch_earlier(self, live: list[str]) -> None:
        while live:
            for end in (await child_ends(self.s.scope, live)).ended:
                self.ended(end)
            infos = self.s.roster.children_info
            live = [c for c in live if c in infos and infos[c].state != "closed"]

    def ended(self, end: ChildEnd) -> None:
        """A child's workflow ended (``end.view``: its result when it completed): a task
        child's final view is its closed report; any other end without a closed report marks
        the child closed (:meth:`mark_closed`), with a trace line, counting the usage of its
        ``last`` view (its state when it ended) when that is more, and closing its
        ``orphans`` (children it left open: no cascade reaches them any more)."""
        child_id, final, last = end.id, end.view, end.last
        info = self.s.roster.children_info.get(child_id)
        if info is not None and last is not None and info.state != "closed":
            self.s.roster.children_info[child_id] = info.model_copy(
                update={
                    "usage_total": max(info.usage_total, last.usage_total),
                    "subtree_tool_calls": max(info.subtree_tool_calls, last.subtree_tool_calls),
                    "cost": last.cost if newer_cost(last.cost, info.cost) else info.cost,
                }
            )
        info = self.s.roster.children_info.get(child_id)
        if info is None or info.state == "closed":
            return
        if final is not None and final.state == "closed" and final.report_seq > info.report_seq:
            # The closed report has not arrived (yet): the final view, the workflow's
            # result, stands for it.
            self.on_report(
                ChildReport(
                    id=child_id,
                    seq=final.report_seq,
                    state="closed",
                    usage_total=final.usage_total,
                    subtree_tool_calls=final.subtree_tool_calls,
                    result_seq=final.result_seq,
                    cost=final.cost,
                    last_result=final.last_result,
                )
            )
            return
        self.vis.trace(f"{self.s.id}: child {child_id} {end.why}")
        self.mark_closed(child_id)
        for orphan in end.orphans:
            self.vis.trace(f"{self.s.id}: closes {orphan} (its parent {child_id} ended)")
            reason = f"parent {child_id} ended"
            self.machine.outbox.signal_later(orphan, SIGNAL_CLOSE, CloseRequest(reason=reason))
