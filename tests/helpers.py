"""Small helpers shared by the test modules."""

from __future__ import annotations

import asyncio
from collections.abc import Awaitable, Callable
from typing import Any

from temporalio.client import Client
from temporalio.contrib.pydantic import pydantic_data_converter
from temporalio.worker import Replayer

from toolnexus_temporal.client import AgentRuntime, Budget, Handle
from toolnexus_temporal.worker import workflow_runner
from toolnexus_temporal.workflows.agent import AgentWorkflow


async def spawn(rt: Any, parent: Any, name: str, budget: Budget | None = None) -> Handle:
    """``rt.spawn`` that must succeed."""
    h = await rt.spawn(parent, name, budget)
    assert isinstance(h, Handle), h
    return h


async def eventually(check: Callable[[], Awaitable[bool]], tries: int = 100) -> None:
    """Poll ``check`` every 0.1 s until it holds (for state that settles by a signal)."""
    for _ in range(tries):
        if await check():
            return
        await asyncio.sleep(0.1)
    raise AssertionError("condition never held")


async def replay_every_run(client: Client, rt: AgentRuntime, *hids: str) -> None:
    """Replay each run of each handle's workflow in the sandbox (determinism of the paths
    a test went through: nonces, the watch activity, continue-as-new with compaction)."""
    replayer = Replayer(
        workflows=[AgentWorkflow],
        data_converter=pydantic_data_converter,
        workflow_runner=workflow_runner(sandboxed=True),
    )
    for hid in hids:
        run: str | None = None
        while True:
            wf = client.get_workflow_handle(rt.workflow_id(hid), run_id=run)
            history = await wf.fetch_history()
            await replayer.replay_workflow(history)
            started = history.events[0].workflow_execution_started_event_attributes
            run = started.continued_execution_run_id or None
            if run is None:
                break
