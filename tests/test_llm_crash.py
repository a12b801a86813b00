"""A worker killed (``kill -9``) in the middle of an LLM call (issue 12, items 6 and 7): the
call is neither paid twice nor dropped from the usage, and a wall limit stops the turn on
time with no model call started past it."""

from __future__ import annotations

import asyncio
import sys
import time
import uuid
from collections.abc import AsyncIterator
from contextlib import asynccontextmanager
from pathlib import Path
from typing import Any

from tests.helpers import eventually, spawn
from tests.workers import start_worker_process
from toolnexus_temporal.activities import LlmConfig, SqliteConversationStore
from toolnexus_temporal.client import AgentDef, AgentRuntime, Budget
from toolnexus_temporal.client.testing import ScriptedLLM, ScriptedLLMServer, text
from toolnexus_temporal.worker import create_worker
from toolnexus_temporal.workflows.contract.models import RuntimeOptions

MODEL = "stub-model"


async def start_crash_worker(
    address: str, queue: str, base_url: str, store: Path, marker: Path, mode: str
) -> asyncio.subprocess.Process:
    return await start_worker_process(
        sys.executable,
        *("-m", "tests.crash_worker", address, queue, base_url),
        *(str(store), str(marker), mode),
        ready=b"ready",
    )


async def kill9(proc: asyncio.subprocess.Process) -> None:
    proc.kill()
    await asyncio.wait_for(proc.wait(), 30)


@asynccontextmanager
async def replacement_worker(
    client: Any, queue: str, base_url: str, store: Path
) -> AsyncIterator[None]:
    async with create_worker(
        client,
        registry={"w": AgentDef(name="w")},
        llm=LlmConfig(base_url=base_url, model=MODEL),
        task_queue=queue,
        store=SqliteConversationStore(store),
    ) as worker:
        async with worker:
            yield


async def _true(value: bool) -> bool:
    return value


async def test_a_call_answered_before_a_kill_9_is_paid_and_counted_once(
    client, env, tmp_path: Path
) -> None:
    """Item 6: the worker dies after the reply was stored, before the activity completed;
    the retry on another worker returns the stored completion."""
    llm = ScriptedLLM({MODEL: [text("answer", prompt_tokens=10, completion_tokens=5)]})
    address = env.client.service_client.config.target_host
    scope = f"t-{uuid.uuid4().hex[:10]}"
    queue = f"tq-{scope}"
    store, marker = tmp_path / "store.sqlite", tmp_path / "stored"
    options = RuntimeOptions(llm_heartbeat_ms=1_000, llm_initial_retry_ms=100)
    with ScriptedLLMServer(llm) as server:
        proc = await start_crash_worker(
            address, queue, server.base_url, store, marker, "hang_after_reply"
        )
        try:
            rt = await AgentRuntime(client, task_queue=queue, scope=scope, options=options).start()
            h = await spawn(rt, rt.root, "w")
            await rt.wake(h, "go")
            await eventually(lambda: _true(marker.exists()), tries=300)
        finally:
            await kill9(proc)
        async with replacement_worker(client, queue, server.base_url, store):
            result = await rt.wait(h)
            assert (result.status, result.text) == ("done", "answer"), result.text
            assert llm.calls() == 1, f"the provider answered {llm.calls()} times"
            assert result.total_tokens == 15
            assert (await rt.inspect(h)).usage_total == 15


async def test_wall_limit_after_a_kill_9_starts_no_call_past_the_deadline(
    client, env, tmp_path: Path
) -> None:
    """Item 7: the worker dies with a call in flight; the turn stops at the wall limit
    (``incomplete``, ``wallMs``) and no model call starts past the deadline (the dead call's
    retry lands after it: heartbeat timeout 2 s + retry 1 s > the 2.5 s limit)."""

    def slow(_request: dict[str, Any]) -> dict[str, Any]:
        time.sleep(20)
        return text("too late")

    llm = ScriptedLLM({MODEL: [slow]}, repeat_last=True)
    address = env.client.service_client.config.target_host
    scope = f"t-{uuid.uuid4().hex[:10]}"
    queue = f"tq-{scope}"
    store = tmp_path / "store.sqlite"
    options = RuntimeOptions(llm_heartbeat_ms=2_000, llm_initial_retry_ms=1_000)
    with ScriptedLLMServer(llm) as server:
        proc = await start_crash_worker(
            address, queue, server.base_url, store, tmp_path / "unused", "plain"
        )
        try:
            rt = await AgentRuntime(client, task_queue=queue, scope=scope, options=options).start()
            h = await spawn(rt, rt.root, "w", Budget(max_wall_ms=2_500))
            await rt.wake(h, "go")
            await eventually(lambda: _true(llm.calls() >= 1), tries=300)
        finally:
            await kill9(proc)
        async with replacement_worker(client, queue, server.base_url, store):
            result = await rt.wait(h)
            settled_ms = time.time() * 1000
            view = await rt.inspect(h)
            late_ms = settled_ms - (view.wall_deadline_ms or 0)
            print(f"turn settled {late_ms:.0f} ms after the wall deadline")
            assert (result.status, result.limit) == ("incomplete", "wallMs"), result.text
            assert llm.calls() == 1, f"{llm.calls() - 1} model call(s) started past the deadline"
