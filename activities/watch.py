"""The ``tnx.watch_children`` activity: a parent's eyes on children started by an earlier
run (issue 12 item 13).

A child workflow handle belongs to the run that started it, so after a continue-as-new the
parent no longer learns that a child's workflow ended without a closed report (terminated
from the web UI, failed, timed out): the dead child would keep its ``max_concurrent`` lease
forever. The parent's new run hands the ids of its live children to this activity, which
waits on their results through the worker's Temporal client, heartbeating, and returns as
soon as one has ended; the workflow treats each like a child of its own run that ended, and
starts the watch again for the rest. A child the server does not find is not taken for ended
at once: its start may still be in flight (:data:`NOT_FOUND_GRACE_S`).
"""

from __future__ import annotations

import asyncio
import contextlib
from datetime import timedelta
from typing import Any

from temporalio import activity
from temporalio.client import Client, WorkflowFailureError, WorkflowHandle
from temporalio.exceptions import ApplicationError
from temporalio.service import RPCError, RPCStatusCode

from toolnexus_temporal.workflows.contract.messages import (
    ChildEnd,
    WatchChildrenInput,
    WatchChildrenResult,
)
from toolnexus_temporal.workflows.contract.models import HandleView
from toolnexus_temporal.workflows.contract.names import (
    QUERY_STATE,
    QUERY_VIEW,
    WATCH_CHILDREN_ACTIVITY,
    workflow_id_for,
)
from toolnexus_temporal.workflows.contract.state import HandleState

HEARTBEAT_S = 5.0
"""Seconds between heartbeats (the workflow's heartbeat timeout is a few times this)."""

NOT_FOUND_GRACE_S = 10.0
"""How long a watched workflow the server does not find is taken for one whose start is still
in flight, s: looked up again (0.1 s doubling to 2 s) before it is reported ended ("workflow
not found": it never started, or it was deleted after its retention period). The parent
hands over only children whose start it saw confirmed (``workflows/children/watch.py``), so
this covers a parent's run on an older build, which could hand over a child it was still
starting."""


class WatchActivities:
    """Activities that need the worker's Temporal client.

    Args:
        client: a client connected with ``pydantic_data_converter``.
    """

    def __init__(self, client: Client) -> None:
        self.client = client

    async def _end_of(self, scope: str | None, handle_id: str) -> ChildEnd:
        """Wait until the workflow of ``handle_id`` (following its continue-as-new runs) has
        ended; how it ended. A workflow the server does not find is looked for again for
        :data:`NOT_FOUND_GRACE_S` (its start may still be in flight) before it is reported
        "not found"."""
        wf = self.client.get_workflow_handle(
            workflow_id_for(scope, handle_id), result_type=HandleView
        )
        delay, waited = 0.1, 0.0
        while True:
            try:
                view = await wf.result()
            except RPCError as err:
                if err.status != RPCStatusCode.NOT_FOUND:
                    raise
                if waited >= NOT_FOUND_GRACE_S:
                    return ChildEnd(id=handle_id, why="ended abnormally: workflow not found")
                await asyncio.sleep(delay)  # perhaps still starting: look again
                waited += delay
                delay = min(delay * 2, 2.0)
                continue
            except WorkflowFailureError as err:
                return await self._failed(wf, handle_id, err)
            return ChildEnd(id=handle_id, view=view)

    async def _failed(
        self, wf: WorkflowHandle[Any, HandleView], handle_id: str, err: WorkflowFailureError
    ) -> ChildEnd:
        """How the workflow of ``handle_id`` ended when it did not complete: ``why``, and its
        last view and open children when a query can still read them."""
        cause = err.cause
        text = getattr(cause, "message", None) or str(cause or err)
        why = f"ended abnormally: {type(cause).__name__}: {text}"[:300]
        try:
            last: HandleView | None = await wf.query(QUERY_VIEW, result_type=HandleView)
            state = await wf.query(QUERY_STATE, result_type=HandleState)
        except Exception:  # not readable (no worker can replay it): usage as reported
            return ChildEnd(id=handle_id, why=why)
        orphans = [c for c, i in state.roster.children_info.items() if i.state != "closed"]
        return ChildEnd(id=handle_id, why=why, last=last, orphans=orphans)

    @activity.defn(name=WATCH_CHILDREN_ACTIVITY)
    async def watch_children(self, inp: WatchChildrenInput) -> WatchChildrenResult:
        """Wait until at least one of ``inp.handle_ids`` has ended; heartbeat meanwhile (a
        cancellation, or the parent's run ending, stops the watch).

        Returns:
            Every watched child found ended (at least one).

        Raises:
            RPCError: the server failed other than with NOT_FOUND (the activity is retried).
            ApplicationError: ``WorkerShutdown`` (retryable) when this worker shuts down.
        """
        tasks = [asyncio.create_task(self._end_of(inp.scope, h)) for h in inp.handle_ids]
        shutdown = asyncio.create_task(activity.wait_for_worker_shutdown())
        try:
            while True:
                done, _ = await asyncio.wait(
                    [*tasks, shutdown], timeout=HEARTBEAT_S, return_when=asyncio.FIRST_COMPLETED
                )
                if any(t.done() for t in tasks):
                    return WatchChildrenResult(ended=[t.result() for t in tasks if t.done()])
                if shutdown in done:
                    # A watch never ends by itself: it must not hold a graceful worker
                    # shutdown for its whole timeout. Retried at once on another worker.
                    raise ApplicationError(
                        "the worker is shutting down: the watch moves to another worker",
                        type="WorkerShutdown",
                        next_retry_delay=timedelta(milliseconds=100),
                    )
                activity.heartbeat()
        finally:
            shutdown.cancel()
            for task in tasks:
                task.cancel()
            for task in tasks:
                with contextlib.suppress(BaseException):
                    await task
