"""One reply's tool calls (CONTRACT §4, §5): run concurrently as unique jobs (identical
``task`` calls share one child), then their suspensions resolved one at a time in call
order; a batch carried across continue-as-new while parked goes on from its snapshot
(``carry.py``). Deterministic; no I/O.
"""

from __future__ import annotations

import asyncio
import json
from collections.abc import Awaitable, Callable
from typing import Any

from temporalio import workflow

from toolnexus_temporal.workflows.approvals.approvals import Approvals, rerun_result
from toolnexus_temporal.workflows.budgets import BudgetLedger
from toolnexus_temporal.workflows.children.delegation import Delegation
from toolnexus_temporal.workflows.machine import JobBatch, TurnScratch
from toolnexus_temporal.workflows.rules.approvals import edited_call, reviewed_result

with workflow.unsafe.imports_passed_through():
    from toolnexus_temporal.workflows.contract.models import (
        Answer,
        Message,
        Request,
        ToolCall,
        ToolResult,
    )
    from toolnexus_temporal.workflows.contract.names import TASK_TOOL
    from toolnexus_temporal.workflows.contract.state import HandleState, ParkedTurn


class ToolBatch:
    """The tool calls of one reply of a handle's turn.

    Args:
        s: the handle's state model (``tool_calls_total``).
        scratch: the turn's scratch: ``jobs`` and ``batch`` show the progress (what a
            parked turn's snapshot holds).
        budgets: recounts the tool-call pools.
        approvals: suspensions.
        delegation: follows a ``task`` child again after a continue-as-new.
        tool_job: runs unique job ``index`` (``task``, a registered tool, or an error).
        exec_tool: runs a tool once more with its Answer.
    """

    def __init__(
        self,
        s: HandleState,
        scratch: TurnScratch,
        budgets: BudgetLedger,
        approvals: Approvals,
        delegation: Delegation,
        tool_job: Callable[[int, ToolCall], Awaitable[ToolResult]],
        exec_tool: Callable[[ToolCall, Answer | None], Awaitable[ToolResult]],
    ) -> None:
        self.s = s
        self.scratch = scratch
        self.budgets = budgets
        self.approvals = approvals
        self.delegation = delegation
        self.tool_job = tool_job
        self.exec_tool = exec_tool

    async def resume(self, parked: ParkedTurn) -> list[Message]:
        """Go on with a batch carried across continue-as-new while parked: the tool jobs
        that wait on delegated children (``index`` -1), or the suspension waiting for its
        Answer and the later ones in call order. Returns one tool message per call."""
        if parked.index < 0:  # the task children's reports resume it or keep it parked
            self.approvals.sync_parking()
            batch = JobBatch(parked.calls, parked.unique, parked.call_job)
            batch.done = dict(parked.done)
            return await self.gather(batch, parked.children)
        return await self.resolve_from(
            parked.calls, list(parked.results), parked.index, parked.request
        )

    async def run(self, calls: list[ToolCall]) -> list[Message]:
        """Run all tool calls of one reply concurrently; suspensions are then resolved one
        at a time in call order. Returns one tool message per call, in call order."""
        s = self.s
        s.turn.tool_calls_total += len(calls)
        self.budgets.recount()
        # Identical task calls within one response share one child (CONTRACT §4).
        jobs: dict[str, int] = {}
        call_job: list[int] = []
        unique: list[ToolCall] = []
        for call in calls:
            key = f"{call.name}\x00{canonical(call.arguments)}" if call.name == TASK_TOOL else ""
            if key and key in jobs:
                call_job.append(jobs[key])
                continue
            call_job.append(len(unique))
            if key:
                jobs[key] = len(unique)
            unique.append(call)
        return await self.gather(JobBatch(calls, unique, call_job), {})

    async def gather(self, batch: JobBatch, children: dict[int, str]) -> list[Message]:
        """Run the reply's unique jobs concurrently, then resolve the suspensions in call
        order. A batch carried across continue-as-new keeps the results of its finished jobs
        and follows ``children`` (the ``task`` child of each unfinished job) again."""
        self.scratch.jobs = batch

        async def job(index: int, call: ToolCall) -> ToolResult:
            if index in batch.done:
                return batch.done[index]
            child = children.get(index)
            if child is not None:
                result = await self.delegation.follow(index, child)
            else:
                result = await self.tool_job(index, call)
            batch.done[index] = result
            return result

        outcomes = await asyncio.gather(*(job(i, call) for i, call in enumerate(batch.unique)))
        self.scratch.jobs = None
        return await self.resolve_from(batch.calls, [outcomes[j] for j in batch.call_job], 0)

    async def resolve_from(
        self,
        calls: list[ToolCall],
        results: list[ToolResult],
        start: int,
        carried: Request | None = None,
    ) -> list[Message]:
        """Resolve the suspensions among ``results`` from call ``start`` on, one at a time in
        call order (``carried``: call ``start`` is already parked on it); one tool message
        per call, in call order. ``scratch.batch`` shows the progress (a parked turn's
        snapshot)."""
        for index in range(start, len(calls)):
            fields = results[index].metadata.get("pending")
            if isinstance(fields, dict):
                self.scratch.batch = (calls, results, index)
                request = carried if index == start else None
                results[index] = await self.resolve_suspension(calls[index], fields, request)
        self.scratch.batch = None
        return [
            Message(role="tool", tool_call_id=call.id, content=result.output)
            for call, result in zip(calls, results, strict=True)
        ]

    async def resolve_suspension(
        self, call: ToolCall, fields: dict[str, Any], carried: Request | None
    ) -> ToolResult:
        """Resolve one suspension (CONTRACT §5) and, when its Answer is ``ok``, run the tool
        once more with it: with the reviewer's ``edited_args`` when it edits, its result
        preceded by a note naming the edit and the reviewer's message (issue 34 item 3)."""
        outcome = await self.approvals.suspend(call, fields, carried)
        if isinstance(outcome, ToolResult):
            return outcome
        answer = outcome.answer
        again = await self.exec_tool(edited_call(call, answer), answer)
        return reviewed_result(answer, rerun_result(outcome.request, again))


def canonical(arguments: str) -> str:
    """JSON arguments with sorted keys (the key of identical ``task`` calls)."""
    try:
        return json.dumps(json.loads(arguments or "{}"), sort_keys=True)
    except ValueError:
        return arguments
