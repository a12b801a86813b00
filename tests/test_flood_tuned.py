"""The server setting that lets a flooded agent continue as new sooner (issue 23 item 6): on
a dev server started with ``history.workflowIdReuseMinimalInterval=0`` and
``RuntimeOptions(continue_as_new_min_run_ms=0)``, a parked agent flooded with 1.5 MiB posts
by one sender continues as new as soon as its run is long (4 MiB), not after 1.2 s: its runs
stay small (measured: at most 6 to 12 MiB, where the defaults let them reach 42 MiB under
load), and its approval is answered. (Two concurrent senders still ended the run in 2 of 4
tries: ``docs/reference/limits.md``.) Its own dev server, so ``stress``."""

from __future__ import annotations

import asyncio
import json
from collections.abc import AsyncIterator

import pytest
from temporalio.client import WorkflowExecutionStatus
from temporalio.contrib.pydantic import pydantic_data_converter
from temporalio.testing import WorkflowEnvironment

from tests.conftest import temporal_binary
from tests.parking import (
    REGISTRY,
    cli_answer,
    cli_flood,
    history_of,
    next_result,
    park,
    runs_of,
)
from toolnexus_temporal.client import RuntimeOptions
from toolnexus_temporal.client.testing import ScriptedLLM, text, tool_calls
from toolnexus_temporal.workflows.contract.names import ALL_SEARCH_ATTRIBUTES

pytestmark = pytest.mark.stress


@pytest.fixture(scope="module")
async def env() -> AsyncIterator[WorkflowEnvironment]:
    """A dev server without the 1 s minimal interval between runs."""
    async with await WorkflowEnvironment.start_local(
        dev_server_existing_path=temporal_binary(),
        data_converter=pydantic_data_converter,
        search_attributes=ALL_SEARCH_ATTRIBUTES,
        dev_server_log_level="error",
        dev_server_extra_args=[
            "--dynamic-config-value",
            "history.workflowIdReuseMinimalInterval=0",
        ],
    ) as environment:
        yield environment


async def test_a_flooded_run_continues_as_new_at_once_without_the_minimal_interval(
    make_runtime, client, tmp_path
) -> None:
    llm = ScriptedLLM({"stub-model": [tool_calls(("guarded", {})), text("approved and done")]})
    options = RuntimeOptions(continue_as_new_min_run_ms=0)
    async with make_runtime(REGISTRY, llm.transport(), options=options) as rt:
        h = await park(rt)
        wid = rt.workflow_id(h.id)
        req = h.pending_req
        assert req is not None
        big = tmp_path / "big.json"
        big.write_text(json.dumps("x" * (3 * 2**20 // 2)))
        loop = asyncio.get_running_loop()
        start = loop.time()
        sent = await cli_flood(client, wid, big, start + 15)
        took = loop.time() - start
        runs = await runs_of(client, wid)
        sizes = [b for _, b in [await history_of(client, wid, run.run_id) for run in runs]]
        print(
            f"\none sender, no minimal interval: {sent} posts of 1.5 MiB in {took:.1f} s "
            f"({sent * 1.5 / took:.1f} MiB/s); {len(runs)} runs, "
            f"at most {max(sizes) / 2**20:.1f} MiB in one"
        )
        assert runs[0].status == WorkflowExecutionStatus.RUNNING
        assert len(runs) > 10 and max(sizes) < 20 * 2**20
        await cli_answer(client, wid, {"id": req.id, "ok": True, "data": {"by": "cli"}})
        r = await next_result(rt, h, lambda r: r.status != "pending")
        assert (r.status, r.text) == ("done", "approved and done")
        assert len(llm.requests) == 2
