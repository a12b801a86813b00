"""The Temporal floor of a *child* spawn, beside a client's direct start (README "Benchmarks").

The contract makes every agent a child workflow started by its parent (CONTRACT §8), so a
``spawn`` is an update on the parent whose workflow starts the child. This script measures
the least that costs on the same dev server: a one-line parent workflow whose update starts
a child (no state, no checks, unsandboxed) against ``client.start_workflow`` of the same
child, ``N`` of each with 8 in flight, each followed by a query of the child (as the suite's
spawn-rate measure settles its agents). Run: ``python -m bench.spawn_floor [N]``; the suite
runs :func:`measure_on` on its own server after the contenders (issue 28's spawn target).
"""

from __future__ import annotations

import asyncio
import sys
import time
from pathlib import Path

from temporalio import workflow
from temporalio.client import Client
from temporalio.testing import WorkflowEnvironment
from temporalio.worker import UnsandboxedWorkflowRunner, Worker


@workflow.defn
class Kid:
    """A child that lives until terminated."""

    @workflow.run
    async def run(self) -> None:
        await workflow.wait_condition(lambda: False)

    @workflow.query
    def ping(self) -> int:
        return 1


@workflow.defn
class Parent:
    """A parent whose ``spawn`` update starts one child and returns its workflow id."""

    def __init__(self) -> None:
        self.n = 0

    @workflow.run
    async def run(self) -> None:
        await workflow.wait_condition(lambda: False)

    @workflow.update
    async def spawn(self) -> str:
        self.n += 1
        wid = f"{workflow.info().workflow_id}/kid.{self.n}"
        await workflow.start_child_workflow(
            Kid.run, id=wid, parent_close_policy=workflow.ParentClosePolicy.ABANDON
        )
        return wid


async def measure_on(client: Client, n: int, task_queue: str = "sf") -> dict[str, float]:
    """Spawns per second on ``client``'s server: ``n`` children started through a parent's
    update, then ``n`` started by the client directly (8 in flight each, each followed by a
    query of the child). The children stay open (the caller's server goes away with them).

    Returns:
        ``child_via_update_per_s``, ``client_start_per_s`` (agents/s) and their ``ratio``.
    """
    runner = UnsandboxedWorkflowRunner()
    async with Worker(
        client, task_queue=task_queue, workflows=[Kid, Parent], workflow_runner=runner
    ):
        parent = await client.start_workflow(
            Parent.run, id=f"{task_queue}-parent", task_queue=task_queue
        )
        gate = asyncio.Semaphore(8)

        async def via_parent() -> None:
            async with gate:
                wid = await parent.execute_update(Parent.spawn)
                await client.get_workflow_handle(wid).query(Kid.ping)

        async def direct(i: int) -> None:
            async with gate:
                handle = await client.start_workflow(
                    Kid.run, id=f"{task_queue}-kid-{i}", task_queue=task_queue
                )
                await handle.query(Kid.ping)

        start = time.perf_counter()
        await asyncio.gather(*(via_parent() for _ in range(n)))
        child = n / (time.perf_counter() - start)
        start = time.perf_counter()
        await asyncio.gather(*(direct(i) for i in range(n)))
        top = n / (time.perf_counter() - start)
    return {
        "agents": n,
        "child_via_update_per_s": child,
        "client_start_per_s": top,
        "ratio": child / top,
    }


async def measure(n: int) -> dict[str, float]:
    """:func:`measure_on` on a dev server of its own (the ``temporal`` binary beside Python)."""
    temporal = str(Path(sys.executable).parent / "temporal")
    async with await WorkflowEnvironment.start_local(
        dev_server_existing_path=temporal, dev_server_log_level="error"
    ) as env:
        return await measure_on(env.client, n)


if __name__ == "__main__":
    print(asyncio.run(measure(int(sys.argv[1]) if len(sys.argv) > 1 else 100)))
