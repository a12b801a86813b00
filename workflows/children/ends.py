"""Waiting for children's workflows to end, whichever run of the parent started them
(issue 12 items 13 and 16).

A child workflow handle belongs to the run that started it: after a continue-as-new the
parent holds none for its live children. The ``tnx.watch_children`` activity waits on their
results through the worker's client instead (see ``activities/watch.py``), and also reads
the last view of a child that ended abnormally, so usage it had not reported yet is counted.
Deterministic; no I/O in workflow code.
"""

from __future__ import annotations

from datetime import timedelta

from temporalio import workflow

with workflow.unsafe.imports_passed_through():
    from toolnexus_temporal.workflows.contract.messages import (
        WatchChildrenInput,
        WatchChildrenResult,
    )
    from toolnexus_temporal.workflows.contract.names import WATCH_CHILDREN_ACTIVITY


async def child_ends(scope: str | None, ids: list[str]) -> WatchChildrenResult:
    """Wait (activity ``tnx.watch_children``, heartbeating) until at least one of the
    handles ``ids`` (in runtime scope ``scope``) has ended; how each found ended ended.

    Retried by Temporal on worker loss (heartbeat timeout 30 s); it ends with the run that
    started it."""
    result: WatchChildrenResult = await workflow.execute_activity(
        WATCH_CHILDREN_ACTIVITY,
        WatchChildrenInput(scope=scope, handle_ids=ids),
        result_type=WatchChildrenResult,
        start_to_close_timeout=timedelta(days=365),
        heartbeat_timeout=timedelta(seconds=30),
        summary=f"watch {len(ids)} children",
    )
    return result
