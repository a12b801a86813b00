"""A flood of large posts by raw signal to a parked agent (issue 36 item 6).

Two and four senders post 1.5 MiB items with ``temporal workflow signal --name post
--input-file`` (no client can refuse a raw signal before it is stored) to an agent parked on
an approval. On a server with the flood settings of ``docs/guide/production.md`` (``FLOOD_
SETTINGS``) and ``RuntimeOptions(continue_as_new_min_run_ms=0)`` the run continues as new
long before the server's history limits (50 MiB, 51,200 events), no run is terminated, and
the parked Request survives every continue-as-new: the operator's Answer then runs the turn
on.

On the default settings no worker can keep up (``docs/reference/limits.md``: the server
force-fails each workflow task during which more than 2 MiB of signals arrive, and a retry
replays the whole run), so this module runs its own dev server, and is ``stress``.

The issue's trial is 60 s per sender count; ``TNX_FLOOD_S`` sets it (default 15 s: several
continue-as-new under each count). Prints what each run held."""

from __future__ import annotations

import asyncio
import json
import os
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

FLOOD_S = float(os.environ.get("TNX_FLOOD_S", "15"))
"""How long each trial floods, seconds (the issue's trial: 60)."""

FLOOD_SETTINGS = {
    "history.workflowIdReuseMinimalInterval": "0",
    "history.maximumBufferedEventsSizeInBytes": str(7 * 2**19),
}
"""The server's dynamic config for agents open to large signals from many senders, as
``docs/guide/production.md`` gives it: no minimal interval between runs (a run may continue
as new as soon as it is long), and 3.5 MiB of signals may arrive while one workflow task runs
(the default 2 MiB fails the task when two 1.5 MiB signals arrive during it)."""

HISTORY_BYTES_LIMIT = 50 * 2**20
"""The server's ``limit.historySize.error``: a run past it is terminated."""

HISTORY_EVENTS_LIMIT = 51_200
"""The server's ``limit.historyCount.error``."""


@pytest.fixture(scope="module")
async def env() -> AsyncIterator[WorkflowEnvironment]:
    """A dev server with :data:`FLOOD_SETTINGS`."""
    extra: list[str] = []
    for key, value in FLOOD_SETTINGS.items():
        extra += ["--dynamic-config-value", f"{key}={value}"]
    async with await WorkflowEnvironment.start_local(
        dev_server_existing_path=temporal_binary(),
        data_converter=pydantic_data_converter,
        search_attributes=ALL_SEARCH_ATTRIBUTES,
        dev_server_log_level="never",
        dev_server_extra_args=extra,
    ) as environment:
        yield environment


@pytest.mark.parametrize("senders", [2, 4])
async def test_a_flood_of_large_posts_continues_as_new_and_keeps_the_approval(
    make_runtime, client, tmp_path, senders: int
) -> None:
    llm = ScriptedLLM({"stub-model": [tool_calls(("guarded", {})), text("approved and done")]})
    options = RuntimeOptions(continue_as_new_min_run_ms=0)
    async with make_runtime(REGISTRY, llm.transport(), options=options) as rt:
        h = await park(rt)
        wid = rt.workflow_id(h.id)
        req = h.pending_req
        assert req is not None
        big = tmp_path / "big.json"
        big.write_text(json.dumps("x" * (3 * 2**20 // 2)))  # 1.5 MiB: over the post bound
        loop = asyncio.get_running_loop()
        start = loop.time()
        sent = await asyncio.gather(
            *(cli_flood(client, wid, big, start + FLOOD_S) for _ in range(senders))
        )
        took = loop.time() - start
        runs = await runs_of(client, wid)
        sizes = [await history_of(client, wid, run.run_id) for run in runs]
        print(
            f"\n{senders} senders: {sum(sent)} posts of 1.5 MiB in {took:.1f} s "
            f"({sum(sent) * 1.5 / took:.1f} MiB/s); {len(runs)} runs, latest "
            f"{runs[0].status.name if runs[0].status else '?'}; at most "
            f"{max(b for _, b in sizes) / 2**20:.1f} MiB and {max(e for e, _ in sizes)} events"
            " in one run"
        )
        assert runs[0].status == WorkflowExecutionStatus.RUNNING, "the flood ended the run"
        assert all(run.status == WorkflowExecutionStatus.CONTINUED_AS_NEW for run in runs[1:])
        assert len(runs) >= 2  # it continued as new under the flood
        assert max(b for _, b in sizes) < HISTORY_BYTES_LIMIT // 2  # far from the limit
        assert max(e for e, _ in sizes) < HISTORY_EVENTS_LIMIT // 2
        # the approval survived every continue-as-new: the same Request, answered by the CLI
        h = await rt.inspect(h)
        assert h.state == "suspended" and h.pending_req == req
        # the handler kept none of it: over the post bound, each was rejected (a short trace
        # line and last_error), and the inbox is empty
        assert h.inbox_count == 0 and h.last_error is not None
        assert h.last_error.startswith("post rejected: bad payload"), h.last_error
        await cli_answer(client, wid, {"id": req.id, "ok": True, "data": {"by": "cli"}})
        r = await next_result(rt, h, lambda r: r.status != "pending")
        assert (r.status, r.text) == ("done", "approved and done")
        assert llm.requests[1]["messages"][-1]["content"] == 'did it: {"by": "cli"}'
        assert len(llm.requests) == 2
