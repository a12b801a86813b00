"""The children watch (``tnx.watch_children``) never ends by itself: a graceful worker
shutdown must not wait its whole grace period for it (``tnx-worker --graceful-shutdown-s``)."""

from __future__ import annotations

import asyncio
from typing import Any

import pytest
from temporalio.exceptions import ApplicationError
from temporalio.testing import ActivityEnvironment

from toolnexus_temporal.activities.watch import WatchActivities
from toolnexus_temporal.workflows.contract.messages import ChildEnd, WatchChildrenInput


class NeverEnding(WatchActivities):
    """A watch whose children never end (no server needed)."""

    def __init__(self) -> None:
        super().__init__(client=None)  # type: ignore[arg-type]

    async def _end_of(self, scope: str | None, handle_id: str) -> ChildEnd:
        await asyncio.Event().wait()
        raise AssertionError("unreachable")


async def test_a_watch_gives_way_to_a_worker_shutdown() -> None:
    env = ActivityEnvironment()
    acts = NeverEnding()
    run: Any = asyncio.create_task(
        env.run(acts.watch_children, WatchChildrenInput(scope=None, handle_ids=["root/a.1"]))
    )
    await asyncio.sleep(0.05)  # let it start waiting (it must not end on its own)
    assert not run.done()
    env.worker_shutdown()
    with pytest.raises(ApplicationError) as err:
        await asyncio.wait_for(run, 3)
    assert err.value.type == "WorkerShutdown"
    assert not err.value.non_retryable
