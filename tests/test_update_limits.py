"""Control verbs always get through (issue 12 item 12): Temporal admits 10 updates in flight
per workflow and a bounded number per run; any number of waiting hosts and any number of
earlier verbs leave ``interrupt``, ``post``, ``close`` and the Answer working (the handle caps
held waits; past a limit a verb uses its signal form and confirms it by query)."""

from __future__ import annotations

import asyncio
import uuid
from collections.abc import AsyncIterator
from pathlib import Path
from typing import Any

import httpx
import pytest
from temporalio.client import Client
from temporalio.contrib.pydantic import pydantic_data_converter
from temporalio.testing import WorkflowEnvironment

from tests.cli_support import Cli
from tests.conftest import MODEL, temporal_binary
from tests.helpers import Gate, accepted_updates, eventually, spawn, split_loop
from tests.registries import APPROVALS
from toolnexus_temporal.activities import LlmConfig, SqliteConversationStore
from toolnexus_temporal.client import AgentDef, AgentRuntime, Answer, TaskResult
from toolnexus_temporal.client.testing import ScriptedLLM, text, tool_calls
from toolnexus_temporal.worker import create_worker
from toolnexus_temporal.workflows.contract.names import ALL_SEARCH_ATTRIBUTES

TOTAL_UPDATES = 30
"""The per-run update limit of this module's own server (Temporal's default is 2,000: the
same refusal, reached in seconds)."""


async def hold_nine_waits(
    rt: AgentRuntime, client: Client, hid: str
) -> list[asyncio.Task[TaskResult]]:
    """Nine hosts (runtimes of their own) blocked in ``wait`` on ``hid``; returns once the
    handle holds at least five waits (the rest may poll)."""
    hosts = [
        await AgentRuntime(client, task_queue=rt.task_queue, scope=rt.scope).start(create=False)
        for _ in range(9)
    ]
    waiters = [asyncio.create_task(host.wait(hid)) for host in hosts]
    wid = rt.workflow_id(hid)
    before = await accepted_updates(client, wid)

    async def held() -> bool:  # the waits that reached the workflow are held there
        return await accepted_updates(client, wid) >= before + 4

    await eventually(held, tries=300)
    assert not any(w.done() for w in waiters)
    return waiters


async def test_nine_waiting_hosts_leave_interrupt_post_and_close_working(
    make_runtime, client
) -> None:
    gate = Gate()
    reg = {"slow": AgentDef(name="slow")}
    async with make_runtime(reg, httpx.MockTransport(gate.handle)) as rt:
        h = await spawn(rt, rt.root, "slow")
        await rt.wake(h, "work")  # its turn update is in flight too
        await asyncio.wait_for(gate.entered.wait(), 30)
        waiters = await hold_nine_waits(rt, client, h.id)
        # hang guards only: each verb must complete
        post = await asyncio.wait_for(rt.post(h.id, "news"), 60)
        assert post.ok
        stopped = await asyncio.wait_for(rt.interrupt(h.id), 60)
        assert stopped.state == "idle"
        results = await asyncio.wait_for(asyncio.gather(*waiters), 60)
        assert {r.status for r in results} == {"interrupted"}
        # again with the waiters in place, then close
        await rt.wake(h, "again")
        waiters = await hold_nine_waits(rt, client, h.id)
        closed = await asyncio.wait_for(rt.close(h.id, force=True), 60)
        assert closed.state == "closed"
        results = await asyncio.wait_for(asyncio.gather(*waiters), 60)
        assert {r.status for r in results} <= {"interrupted", "closed"}
        gate.release.set()


@split_loop("iterations", 1, 6)
async def test_twenty_waiters_of_a_handle_closed_by_signal_never_raise(
    make_runtime, client, iterations: range
) -> None:
    """``wait`` never raises: a close (here the ``close`` signal, as from the web UI) that ends
    the workflow while waits are admitted but not yet delivered makes the server refuse them
    ("... wasn't processed by worker"); each waiter gets the closed result instead."""
    gate = Gate()
    reg = {"slow": AgentDef(name="slow")}
    async with make_runtime(reg, httpx.MockTransport(gate.handle)) as rt:
        for _ in iterations:
            gate.entered.clear()
            h = await spawn(rt, rt.root, "slow")
            await rt.wake(h, "work")
            await asyncio.wait_for(gate.entered.wait(), 30)
            hosts = [
                await AgentRuntime(client, task_queue=rt.task_queue, scope=rt.scope).start(
                    create=False
                )
                for _ in range(20)
            ]
            wid = rt.workflow_id(h.id)
            before = await accepted_updates(client, wid)
            waiters = [asyncio.create_task(host.wait(h.id)) for host in hosts]

            async def held(wid: str = wid, before: int = before) -> bool:
                return await accepted_updates(client, wid) >= before + 4

            await eventually(held, tries=300)
            # the close races the other waits: refused (WaitersFull) and asked again, or
            # admitted but not yet delivered when the workflow ends
            await client.get_workflow_handle(wid).signal("close", {})
            results = await asyncio.wait_for(asyncio.gather(*waiters), 90)  # hang guard
            assert {r.status for r in results} <= {"interrupted", "closed"}, results


async def test_tnx_control_verbs_get_through_nine_waiters(make_runtime, client, env) -> None:
    gate = Gate()
    reg = {"slow": AgentDef(name="slow")}
    async with make_runtime(reg, httpx.MockTransport(gate.handle)) as rt:
        tnx = Cli(env, rt)
        h = await spawn(rt, rt.root, "slow")
        await rt.wake(h, "work")
        await asyncio.wait_for(gate.entered.wait(), 30)
        waiters = await hold_nine_waits(rt, client, h.id)
        await tnx.ok("post", h.id, "news")
        await tnx.ok("interrupt", h.id)
        assert (await rt.inspect(h.id)).state == "idle"
        results = await asyncio.wait_for(asyncio.gather(*waiters), 60)
        assert {r.status for r in results} == {"interrupted"}
        await tnx.ok("close", h.id)
        assert (await rt.inspect(h.id)).state == "closed"
        gate.release.set()


@pytest.fixture
async def limited_env(tmp_path: Path) -> AsyncIterator[WorkflowEnvironment]:
    """A dev server of its own whose per-run update limit is :data:`TOTAL_UPDATES`."""
    async with await WorkflowEnvironment.start_local(
        dev_server_existing_path=temporal_binary(),
        data_converter=pydantic_data_converter,
        search_attributes=ALL_SEARCH_ATTRIBUTES,
        dev_server_log_level="error",
        dev_server_extra_args=[
            "--dynamic-config-value",
            f"history.maxTotalUpdates={TOTAL_UPDATES}",
        ],
    ) as env:
        yield env


def wf_events(client: Client, workflow_id: str) -> AsyncIterator[Any]:
    """Every event of the current run of ``workflow_id``."""
    return client.get_workflow_handle(workflow_id).fetch_history_events()


async def test_a_parked_handle_past_the_update_limit_stays_answerable(
    limited_env: WorkflowEnvironment, tmp_path: Path
) -> None:
    client = limited_env.client
    llm = ScriptedLLM(
        {MODEL: [tool_calls(("check_secret", {})), text("approved, thanks")]},
    )
    task_queue = f"tq-{uuid.uuid4().hex[:8]}"
    async with (
        create_worker(
            client,
            registry=APPROVALS,
            llm=LlmConfig(base_url="http://mock.local/v1", model=MODEL),
            task_queue=task_queue,
            store=SqliteConversationStore(tmp_path / "conv.sqlite"),
            transport=llm.transport(),
        ) as worker,
        worker,
    ):
        rt = await AgentRuntime(client, task_queue=task_queue, scope="lim").start()
        asker = await spawn(rt, rt.root, "asker")
        parked = await rt.run_turn(asker, "get the secret")
        assert parked.status == "pending" and parked.pending is not None
        results = [
            await asyncio.wait_for(rt.post(asker, f"note {i}"), 60)
            for i in range(TOTAL_UPDATES + 10)
        ]
        # the inbox (cap 8) fills, then every later post is refused as full: the same answer
        # through the update and, past the server's limit, through the signal
        assert all(r.ok for r in results[:8])
        assert {r.error for r in results[8:]} == {"inbox full (8)"}
        wid = rt.workflow_id(asker.id)
        assert await accepted_updates(client, wid) <= TOTAL_UPDATES
        # a refused post reached no history, by update or by signal (issue 36 item 6)
        stored = b"".join([e.SerializeToString() async for e in wf_events(client, wid)])
        assert all(f"note {i}".encode() not in stored for i in range(8, TOTAL_UPDATES + 10))
        again = await asyncio.wait_for(rt.wait(asker), 60)
        assert again.status == "pending" and again.pending == parked.pending
        await asyncio.wait_for(rt.resume(Answer(id=parked.pending.id, ok=True)), 60)
        done = await asyncio.wait_for(rt.wait(asker), 60)
        assert (done.status, done.text) == ("done", "approved, thanks")
        closed = await asyncio.wait_for(rt.close(rt.root), 60)
        assert closed.state == "closed"
