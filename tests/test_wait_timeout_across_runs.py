"""A ``wait`` with a timeout whose run continues as new while it is held returns within
that timeout, not the timeout again from the continue-as-new (``Turns.again``)."""

from __future__ import annotations

import asyncio
from typing import Any

from temporalio.client import Client

from tests.parking import continue_as_new_by_rejections
from tests.ticking import Recorder, ticker_registry
from toolnexus_temporal.client import RuntimeOptions

TIMEOUT_MS = 8_000


async def test_a_wait_timeout_counts_from_its_start_across_continue_as_new(
    make_runtime: Any, client: Client
) -> None:
    llm = Recorder()
    options = RuntimeOptions(continue_as_new_events=100)
    async with make_runtime(ticker_registry(), llm.transport(), options=options) as rt:
        h = await rt.spawn(rt.root, "ticker")
        loop = asyncio.get_running_loop()
        start = loop.time()
        waiter = asyncio.create_task(rt.wait(h, timeout_ms=TIMEOUT_MS))
        wf = client.get_workflow_handle(rt.workflow_id(h.id))
        while loop.time() - start < TIMEOUT_MS / 2000:  # half the timeout held in one run
            assert not waiter.done()
            await asyncio.sleep(0.2)
        await continue_as_new_by_rejections(wf)
        result = await asyncio.wait_for(waiter, TIMEOUT_MS / 1000 * 3)
        took_ms = (loop.time() - start) * 1000
        print(f"\nwait(timeout_ms={TIMEOUT_MS}) returned after {took_ms:.0f} ms")
        assert result.status == "timeout"
        assert took_ms < TIMEOUT_MS + 2_000, took_ms
        await rt.close(h)
