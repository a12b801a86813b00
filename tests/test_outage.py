"""A host rides out a server outage (issue 12 item 15): a pending ``wait`` and ``run_turn``
survive the server going away and coming back (same port, same database) and return the
turn's result, instead of dying with ``RPCError: tcp connect error``."""

from __future__ import annotations

import asyncio
import uuid
from pathlib import Path

import httpx
import pytest
from temporalio.service import RPCError

from tests.conftest import MODEL
from tests.helpers import Gate, spawn
from tests.workers import free_port, start_server
from toolnexus_temporal.activities import LlmConfig, SqliteConversationStore
from toolnexus_temporal.client import AgentDef, AgentRuntime
from toolnexus_temporal.client.cluster import connect
from toolnexus_temporal.worker import create_worker

OUTAGE_S = 5.0
"""How long the server stays down, s (the issue saw 10-30 s; the retry has no such bound)."""


@pytest.mark.stress  # a second dev server, killed and restarted
async def test_wait_and_run_turn_ride_out_a_server_restart(tmp_path: Path) -> None:
    port, db = free_port(), tmp_path / "temporal.db"
    server = await start_server(port, db)
    try:
        client = await connect(f"127.0.0.1:{port}")
        gate = Gate(reply="finished after the outage")
        task_queue = f"tq-{uuid.uuid4().hex[:8]}"
        async with (
            create_worker(
                client,
                registry={"slow": AgentDef(name="slow")},
                llm=LlmConfig(base_url="http://mock.local/v1", model=MODEL),
                task_queue=task_queue,
                store=SqliteConversationStore(tmp_path / "conv.sqlite"),
                transport=httpx.MockTransport(gate.handle),
            ) as worker,
            worker,
        ):
            rt = await AgentRuntime(client, task_queue=task_queue, scope="outage").start()
            first = await spawn(rt, rt.root, "slow")
            second = await spawn(rt, rt.root, "slow")
            await rt.wake(first, "work")
            waiting = asyncio.create_task(rt.wait(first))
            turning = asyncio.create_task(rt.run_turn(second, "work too"))
            await asyncio.wait_for(gate.reached(2).wait(), 60)
            await server.shutdown()  # the outage: nothing listens on the port
            with pytest.raises(RPCError):
                await client.get_workflow_handle(rt.workflow_id(first.id)).describe()
            await asyncio.sleep(OUTAGE_S)  # the scenario: the server stays away a while
            assert not waiting.done() and not turning.done()
            server = await start_server(port, db)
            gate.release.set()
            # hang guards only
            waited = await asyncio.wait_for(waiting, 240)
            turned = await asyncio.wait_for(turning, 240)
            assert (waited.status, waited.text) == ("done", "finished after the outage")
            assert (turned.status, turned.text) == ("done", "finished after the outage")
            assert (await rt.inspect(first)).state == "idle"
    finally:
        await server.shutdown()
