"""The fleet gauges' oldest wait (observability/prometheus.py) is the oldest waiting
Request's at any queue length. SQL visibility lists newest first and cannot order by
``AgentWaitingSince``: with more waiting Requests than one list reads, the gauge read the
newest page's oldest and under-reported the wait. Here one list reads a single row
(``FLEET_LIST_LIMIT`` patched to 1) and three agents park one after another."""

from __future__ import annotations

from datetime import datetime
from typing import Any

import pytest
from temporalio.client import Client
from temporalio.common import MetricMeter

from tests.helpers import eventually, spawn
from tests.registries import APPROVALS, check_secret  # noqa: F401 (registry module)
from toolnexus_temporal.client.queries import quoted
from toolnexus_temporal.client.testing import ScriptedLLM, tool_calls
from toolnexus_temporal.observability import prometheus as metrics
from toolnexus_temporal.workflows.contract.names import AGENT_WAITING_SINCE


async def test_the_oldest_wait_is_the_oldest_request_past_one_list(
    make_runtime, client: Client, monkeypatch: pytest.MonkeyPatch
) -> None:
    monkeypatch.setattr(metrics, "FLEET_LIST_LIMIT", 1)
    llm = ScriptedLLM({"stub-model": [tool_calls(("check_secret", {}))]}, repeat_last=True)
    async with make_runtime(APPROVALS, llm.transport()) as rt:
        since: list[datetime] = []
        for _ in range(3):
            h = await spawn(rt, rt.root, "asker")
            assert (await rt.run_turn(h, "secret please")).status == "pending"
            wf = client.get_workflow_handle(rt.workflow_id(h.id))

            async def stamped(wf: Any = wf) -> bool:
                return (await wf.describe()).typed_search_attributes.get(
                    AGENT_WAITING_SINCE
                ) is not None

            await eventually(stamped, what="AgentWaitingSince in visibility")
            described = await wf.describe()
            stamp = described.typed_search_attributes.get(AGENT_WAITING_SINCE)
            assert stamp is not None
            since.append(stamp)
        assert since == sorted(since) and since[0] < since[-1]
        gauges = metrics.FleetGauges(client, rt.task_queue, MetricMeter.noop, quote=quoted)

        async def counted() -> bool:
            return (await gauges.read()).approvals_waiting == 3

        await eventually(counted, what="three Requests in the approval queue")
        snap = await gauges.read()
        read_at = datetime.now(since[0].tzinfo)
        newest_wait_ms = (read_at - since[-1]).total_seconds() * 1000
        oldest_wait_ms = (read_at - since[0]).total_seconds() * 1000
        # within the read's own duration of the oldest Request's wait, well past the newest's
        assert oldest_wait_ms - 2_000 <= snap.oldest_wait_ms <= oldest_wait_ms + 50, snap
        assert snap.oldest_wait_ms > newest_wait_ms + (oldest_wait_ms - newest_wait_ms) / 2
