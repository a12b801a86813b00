"""A sync tool's thread stops when its activity is cancelled (issue 12, item 11), without a
Temporal server: ``run_stoppable`` raises ``ToolCancelled`` in the thread and returns only
once the thread ended."""

from __future__ import annotations

import asyncio
import threading
import time

import pytest

from toolnexus_temporal.activities.threads import run_stoppable


async def test_cancel_returns_only_after_the_thread_stopped() -> None:
    for _ in range(10):
        steps: list[int] = []
        exited = threading.Event()
        started = threading.Event()

        def work(
            n: int,
            steps: list[int] = steps,
            started: threading.Event = started,
            exited: threading.Event = exited,
        ) -> str:
            try:
                for i in range(n):
                    steps.append(i)
                    started.set()
                    time.sleep(0.05)
                return "done"
            finally:
                exited.set()

        task = asyncio.create_task(run_stoppable(work, n=200))
        await asyncio.to_thread(started.wait, 10)
        task.cancel()
        with pytest.raises(asyncio.CancelledError):
            await task
        assert exited.is_set()  # the thread ended: no step can start after this
        assert len(steps) < 200


async def test_results_and_errors_pass_through() -> None:
    assert await run_stoppable(lambda x: x * 2, x=21) == 42

    def boom() -> None:
        raise KeyError("nope")

    with pytest.raises(KeyError):
        await run_stoppable(boom)
