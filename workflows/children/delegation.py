"""Delegation: the ``task`` tool (CONTRACT §4, §5), spawn → wake → wait → close of one child,
run in workflow code inside the parent's turn; with ``"background": true`` the call only
starts the child and the background tools follow it (``background.py``).

The child starts a fresh transcript; the parent's model gets exactly one tool message (the
child's text, or ``[status] text``). While the child is parked on a Request, the parent parks
too (see :mod:`~toolnexus_temporal.workflows.approvals.approvals`). An interrupted parent turn
closes the child with ``force``. Deterministic; no I/O.
"""

from __future__ import annotations

import asyncio
import json

from temporalio import workflow

from toolnexus_temporal.workflows.approvals.approvals import Approvals
from toolnexus_temporal.workflows.children.background import Background
from toolnexus_temporal.workflows.children.children import Children
from toolnexus_temporal.workflows.machine import require_defn
from toolnexus_temporal.workflows.visibility.visibility import Visibility

with workflow.unsafe.imports_passed_through():
    from toolnexus_temporal.workflows.contract.messages import CloseRequest
    from toolnexus_temporal.workflows.contract.models import TaskResult, ToolCall, ToolResult
    from toolnexus_temporal.workflows.contract.names import BACKGROUND_TOOLS
    from toolnexus_temporal.workflows.contract.state import ChildInfo, HandleState


class Delegation:
    """The ``task`` tool of one handle.

    Args:
        s: the handle's state model.
        vis: trace lines.
        children: spawns and closes the child.
        approvals: parks and unparks this handle with the child.
        background: background children (``"background": true`` and the background tools).
    """

    def __init__(
        self,
        s: HandleState,
        vis: Visibility,
        children: Children,
        approvals: Approvals,
        background: Background,
    ) -> None:
        self.s = s
        self.vis = vis
        self.children = children
        self.approvals = approvals
        self.background = background

    async def tool(self, index: int, call: ToolCall) -> ToolResult:
        """Run call ``index`` of a reply to a delegation tool: ``task``, or one of the
        background tools (``names.BACKGROUND_TOOLS``)."""
        if call.name in BACKGROUND_TOOLS:
            return await self.background.tool(call)
        return await self.task(index, call)

    async def task(self, index: int, call: ToolCall) -> ToolResult:
        """Run the ``task`` call ``index`` of a reply (``{"agent": ..., "prompt": ...}``,
        optionally ``"background": true``).

        Returns:
            The child's text, or an error result: bad arguments, an agent outside the team
            (the team is named), a refused spawn, or the child's non-``done`` result. In the
            background: at once, the child's id (its results arrive as inbox items).

        Raises:
            asyncio.CancelledError: the parent's turn was interrupted (the child is closed
                with ``force`` first).
        """
        s = self.s
        defn = require_defn(s)
        try:
            args = json.loads(call.arguments or "{}")
            agent, prompt = str(args["agent"]), str(args["prompt"])
            background = args.get("background", False)
            if not isinstance(background, bool):
                raise TypeError("background is not a boolean")
        except (ValueError, KeyError, TypeError, AttributeError):
            return ToolResult(
                output=(
                    'error: task needs {"agent": <team member>, "prompt": <text>} '
                    '(and optionally "background": true)'
                ),
                is_error=True,
            )
        if agent not in defn.team:
            team = ", ".join(sorted(defn.team))
            return ToolResult(
                output=f"error: agent {agent!r} is not in the team (team: {team})",
                is_error=True,
            )
        if background:
            return await self.background.start(agent, prompt)
        child_id, error = await self.children.spawn_for_task(agent, prompt)
        if child_id is None:
            return ToolResult(output=f"error: spawn {agent} refused: {error}", is_error=True)
        self.vis.trace(f"{s.id}: task → {child_id}")  # the wake travelled with the spawn
        return await self.follow(index, child_id)

    async def follow(self, index: int, child_id: str) -> ToolResult:
        """Wait for the child of ``task`` call ``index`` (parking with it), close it and
        return its result for the model. Also the way back to a child started by an earlier
        run, for a turn carried across continue-as-new while parked (the child reports its
        close, so no watch of its workflow is needed).

        Raises:
            asyncio.CancelledError: the parent's turn was interrupted (the child is closed
                with ``force`` first).
        """
        try:
            result = await self.await_child_result(index, child_id)
        except asyncio.CancelledError:
            # The parent's turn was interrupted: the delegated work is abandoned with it.
            await self.children.close(child_id, CloseRequest(force=True, reason="task aborted"))
            raise
        await self.children.close(child_id, CloseRequest(reason="task done"))
        if result.status == "done":
            return ToolResult(output=result.text)
        return ToolResult(output=f"[{result.status}] {result.text}", is_error=True)

    async def await_child_result(self, index: int, child_id: str) -> TaskResult:
        """Wait for the child's first settled result; while the child is parked on a
        Request, this handle parks too, with the Request stamped with its own path."""
        s = self.s

        def info() -> ChildInfo:
            return s.roster.children_info.get(child_id, ChildInfo())

        # Parking follows the children's reports (Approvals.sync_parking, on every report
        # and Answer); this call only waits for the child's result.
        self.approvals.track_task(index, child_id)
        try:
            await workflow.wait_condition(
                lambda: (
                    info().state == "closed" or (info().result_seq >= 1 and info().state == "idle")
                )
            )
        except BaseException:  # interrupted, or the coroutine is torn down (eviction)
            self.approvals.untrack_task(index, sync=False)
            raise
        self.approvals.untrack_task(index)
        current = info()
        if current.last_result is not None and current.result_seq >= 1:
            return current.last_result
        return TaskResult(status="closed", is_error=True, text=f"{child_id} closed")
