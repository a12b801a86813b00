"""Tools that keep to one worker (issue 27, item 5): a workspace tool (``ToolOptions.
workspace``) runs on the worker that holds its handle's workspace, for as long as that
worker lives.

This is Temporal's worker-specific task queue pattern (samples-python
``worker_specific_task_queues``): every worker that runs workspace tools also polls a task
queue of its own (``activities/workspace.py``). A handle's first workspace call runs the
small ``tnx.workspace_claim`` activity on the shared task queue; the worker that takes it
starts the handle's workspace directory and answers its own queue, which the handle keeps
in ``HandleState.workspace`` (carried across continue-as-new). Every later workspace call
is scheduled on that queue with a schedule-to-start timeout of
``RuntimeOptions.workspace_lost_ms``: a call no worker started in that time means the
holding worker is gone (nothing else polls its queue), so the handle claims a new
workspace, runs the call there, and tells the model in the tool result (and the trace)
that the workspace was lost: never a silent fresh start. The call itself never ran on the
lost worker (it was never started), so running it on the new one runs it once.

Deterministic; no I/O.
"""

from __future__ import annotations

import asyncio
from collections.abc import Awaitable, Callable
from datetime import timedelta

from temporalio import workflow
from temporalio.common import RetryPolicy
from temporalio.exceptions import ActivityError, CancelledError, TimeoutError, TimeoutType

from toolnexus_temporal.workflows.visibility.visibility import Visibility, error_text

with workflow.unsafe.imports_passed_through():
    from toolnexus_temporal.workflows.contract.limits import SUMMARY_BYTES, fit
    from toolnexus_temporal.workflows.contract.models import ToolCall, ToolResult
    from toolnexus_temporal.workflows.contract.names import (
        WORKSPACE_CLAIM_ACTIVITY,
        WORKSPACE_LOST_MS,
    )
    from toolnexus_temporal.workflows.contract.state import HandleState
    from toolnexus_temporal.workflows.contract.workspace import (
        WorkspaceClaim,
        WorkspaceClaimInput,
    )

WORKER_NAME_BYTES = 200
"""A worker identity as the trace and the model see it is cut to this many bytes."""

ScheduleTool = Callable[[str, timedelta], Awaitable[ToolResult]]
"""Runs the tool activity on ``task_queue`` with this schedule-to-start timeout; raises
``ActivityError`` when it fails."""


class Workspaces:
    """The workspace pin of one handle (see the module docstring). Owns
    ``HandleState.workspace``.

    Args:
        s: the handle's state model.
        vis: trace lines.
    """

    def __init__(self, s: HandleState, vis: Visibility) -> None:
        self.s = s
        self.vis = vis
        self._lock = asyncio.Lock()

    @property
    def lost_after(self) -> timedelta:
        """The schedule-to-start timeout of a workspace call (``workspace_lost_ms``)."""
        ms = self.s.options.workspace_lost_ms
        return timedelta(milliseconds=WORKSPACE_LOST_MS if ms is None else ms)

    async def run(self, call: ToolCall, schedule: ScheduleTool) -> ToolResult:
        """Run one workspace tool call on the worker holding the handle's workspace,
        claiming one first when there is none, and a new one when that worker is gone.

        Calls of one reply run concurrently: they share one claim, and the first of them
        to find the worker gone drops the pin (``_lock``). A call its worker never started
        (schedule-to-start timeout) runs once more in the new workspace. A call whose
        worker stopped heartbeating while it ran (it died mid-call: Temporal's heartbeat
        timeout) is not run again, its effects being unknown: its result is an error, and
        the next call runs in the new workspace.

        Returns:
            The tool's result; after a loss its output starts with a note that the
            workspace was lost and a new one started (``metadata["workspace"]`` says so
            too), or an ``is_error`` result when no worker takes the claim.

        Raises:
            ActivityError: the tool activity failed otherwise (the turn makes it an
                ``is_error`` result, or an interrupt).
        """
        ws = self.s.workspace
        lost: str | None = None  # the lost worker, once this call lost its workspace
        for _ in range(2):
            async with self._lock:  # concurrent calls of one reply share one claim
                if ws.task_queue is None:
                    failed = await self._claim()
                    if failed is not None:
                        return self._noted(failed, lost)
                queue, holder = ws.task_queue, ws.worker or "?"
            assert queue is not None
            try:
                return self._noted(await schedule(queue, self.lost_after), lost)
            except ActivityError as err:
                how = loss_of(err)
                if how is None:
                    if lost is None:
                        raise
                    return self._noted(error_result(error_text(err)), lost)
            lost = holder
            async with self._lock:
                if ws.task_queue == queue:  # the first call to find it gone drops the pin
                    self._lose(call, how, holder)
                if how == TimeoutType.HEARTBEAT:
                    failed = await self._claim() if ws.task_queue is None else None
                    died = error_result(
                        f"the worker {holder} holding this agent's workspace stopped during "
                        "this call, so what it did is unknown"
                    )
                    return self._noted(failed or died, lost, died_mid_call=True)
        return self._noted(error_result("no worker started this call"), lost)

    def _lose(self, call: ToolCall, how: TimeoutType, old: str) -> None:
        """The pin's worker ``old`` is gone: count it, say so in the trace, drop the pin."""
        ws = self.s.workspace
        ws.lost += 1
        ws.task_queue = ws.path = ws.worker = None
        if how == TimeoutType.HEARTBEAT:
            why = f"stopped heartbeating during tool {call.name} ({call.id})"
        else:
            ms = int(self.lost_after.total_seconds() * 1000)
            why = f"did not start tool {call.name} ({call.id}) within {ms} ms"
        self.vis.trace(f"{self.s.id}: workspace lost: worker {old} {why} (gone)")

    def _noted(
        self, result: ToolResult, lost: str | None, died_mid_call: bool = False
    ) -> ToolResult:
        """``result`` with the note that the workspace of worker ``lost`` was lost (none
        when ``lost`` is None)."""
        if lost is None:
            return result
        ws = self.s.workspace
        if ws.worker is None:
            where = "No new workspace could be started yet: the next call tries again"
        elif died_mid_call:
            where = f"A new, empty workspace was started on worker {ws.worker}; call again"
        else:
            where = (
                f"A new, empty workspace was started on worker {ws.worker}, and this call ran in it"
            )
        note = (
            f"[workspace lost: the worker {lost} that held this agent's workspace is gone, "
            f"and with it every file and process earlier calls left there. {where}.]"
        )
        return result.model_copy(
            update={
                "output": f"{note}\n{result.output}",
                "metadata": {
                    **result.metadata,
                    "workspace": {"lost": lost, "worker": ws.worker, "path": ws.path},
                },
            }
        )

    async def _claim(self) -> ToolResult | None:
        """Claim a workspace on the shared task queue: the pin then names the worker that
        took it. Returns None, or an ``is_error`` result when no worker took it."""
        ws = self.s.workspace
        try:
            got: WorkspaceClaim = await workflow.execute_activity(
                WORKSPACE_CLAIM_ACTIVITY,
                WorkspaceClaimInput(handle_id=self.s.id),
                result_type=WorkspaceClaim,
                schedule_to_start_timeout=self.lost_after,
                start_to_close_timeout=timedelta(seconds=30),
                # a worker of the queue that runs no workspace tools refuses the activity
                # (not registered): another attempt may reach one that does.
                retry_policy=RetryPolicy(maximum_attempts=3),
                summary=fit(f"workspace claim for {self.s.id}", SUMMARY_BYTES),
            )
        except ActivityError as err:
            if isinstance(err.cause, CancelledError):
                raise  # an interrupt: the turn stops (turn.py)
            ws.task_queue = ws.worker = ws.path = None
            why = "no worker took it" if worker_gone(err) else error_text(err)
            self.vis.trace(f"{self.s.id}: workspace claim failed: {fit(why, 300)}")
            return ToolResult(
                output=(
                    f"error: no workspace: the claim on task queue {self.s.task_queue} "
                    f"failed ({why}); is a worker with workspace tools running?"
                ),
                is_error=True,
            )
        ws.task_queue = got.task_queue
        ws.worker = fit(got.worker, WORKER_NAME_BYTES)
        ws.path = fit(got.path, WORKER_NAME_BYTES * 5)
        ws.claims += 1
        self.vis.trace(f"{self.s.id}: workspace {ws.claims} on worker {ws.worker}")
        return None


def worker_gone(err: ActivityError) -> bool:
    """Whether an activity failed because no worker started it in time (Temporal's
    schedule-to-start timeout): on a worker's own task queue, that worker is gone."""
    return loss_of(err) == TimeoutType.SCHEDULE_TO_START


def loss_of(err: ActivityError) -> TimeoutType | None:
    """How a call on a worker's own task queue shows that worker is gone: never started
    (``SCHEDULE_TO_START``) or stopped heartbeating while it ran (``HEARTBEAT``); None for
    any other failure."""
    cause = err.cause
    if isinstance(cause, TimeoutError) and cause.type in (
        TimeoutType.SCHEDULE_TO_START,
        TimeoutType.HEARTBEAT,
    ):
        return cause.type
    return None


def error_result(why: str) -> ToolResult:
    """An ``is_error`` tool result: ``error: {why}``."""
    return ToolResult(output=f"error: {why}", is_error=True)
