"""A worker whose codec keys cannot read its task queue's payloads takes no work (issue 23,
item 4): the key canary refuses it at start (another key under the same id, another id, no
key), a rotation re-writes the canary, and a worker that slipped in before the canary existed
stops itself at its first undecodable payload, so a mixed fleet strands no agent."""

from __future__ import annotations

import asyncio
import base64
import dataclasses
import os
import sys
import uuid
from collections.abc import AsyncIterator
from contextlib import asynccontextmanager
from pathlib import Path
from typing import Any

import httpx
import pytest
from temporalio import activity
from temporalio.client import Client, WorkflowQueryFailedError
from temporalio.contrib.pydantic import pydantic_data_converter
from temporalio.converter import DefaultFailureConverterWithEncodedAttributes
from temporalio.worker import Worker

from tests.conftest import MODEL
from tests.helpers import eventually, split_loop
from toolnexus_temporal.activities import LlmConfig, Registry
from toolnexus_temporal.activities.store import SqliteConversationStore
from toolnexus_temporal.client import AgentDef, AgentRuntime, Handle, RuntimeOptions
from toolnexus_temporal.client.codec import AesGcmCodec, data_converter, with_codec
from toolnexus_temporal.client.errors import WorkflowTaskFailingError
from toolnexus_temporal.client.keycheck import (
    KeyMismatchError,
    canary_workflow_id,
    read_canary,
)
from toolnexus_temporal.client.testing import text
from toolnexus_temporal.worker import create_worker, stale_keys
from toolnexus_temporal.workflows.contract.messages import LlmCallInput, LlmCallResult
from toolnexus_temporal.workflows.contract.names import LLM_CALL_ACTIVITY

ROOT = Path(__file__).resolve().parent.parent
KEY_A = os.urandom(32)
KEY_B = os.urandom(32)
REGISTRY = Registry([AgentDef(name="helper", description="answers")])


class FirstAttemptFails:
    """An LLM whose first attempt at each call answers 503 and every later one the reply: a
    turn then needs a retry, which Temporal may hand to any worker of the task queue."""

    def __init__(self) -> None:
        self.seen: set[bytes] = set()
        self.calls = 0

    def transport(self) -> httpx.MockTransport:
        return httpx.MockTransport(self.handle)

    def handle(self, request: httpx.Request) -> httpx.Response:
        self.calls += 1
        if request.content not in self.seen:
            self.seen.add(request.content)
            return httpx.Response(503, text="busy, try again")
        return httpx.Response(200, json=text("fine"))


def worker(
    client: Client,
    task_queue: str,
    store: SqliteConversationStore,
    codec: AesGcmCodec | None,
    transport: httpx.AsyncBaseTransport | None = None,
    **options: Any,
) -> Any:
    return create_worker(
        client,
        codec=codec,
        registry=REGISTRY,
        llm=LlmConfig(base_url="http://mock.local/v1", model=MODEL),
        task_queue=task_queue,
        store=store,
        transport=transport or FirstAttemptFails().transport(),
        **options,
    )


@asynccontextmanager
async def serving(
    client: Client, store: SqliteConversationStore, codec: AesGcmCodec, **options: Any
) -> AsyncIterator[AgentRuntime]:
    """The right worker (``codec``) and a runtime of a fresh scope on a fresh task queue."""
    scope = f"t-{uuid.uuid4().hex[:10]}"
    async with worker(client, f"tq-{scope}", store, codec, **options) as w, w:
        rt = AgentRuntime(
            with_codec(client, codec),
            task_queue=f"tq-{scope}",
            scope=scope,
            options=RuntimeOptions(llm_initial_retry_ms=50),
        )
        yield await rt.start()


async def test_a_worker_with_another_key_or_none_refuses_to_start_and_agents_keep_working(
    client: Client, store: SqliteConversationStore, tmp_path: Path
) -> None:
    right = AesGcmCodec({"k1": KEY_A})
    async with serving(client, store, right) as rt:
        h = await rt.spawn(rt.root, "helper")
        assert isinstance(h, Handle)
        assert (await rt.run_turn(h, "one")).status == "done"
        canary = await read_canary(client, rt.task_queue)
        assert canary.key_id == "k1"
        for wrong, why in [
            (AesGcmCodec({"k1": KEY_B}), "does not decrypt"),  # same id, another key
            (AesGcmCodec({"k2": KEY_B}), "not among the known keys"),  # another id
            (None, "no payload codec"),  # no key at all
        ]:
            with pytest.raises(KeyMismatchError, match=why) as caught:
                async with worker(client, rt.task_queue, store, wrong):
                    raise AssertionError("a worker with the wrong keys started")
            assert caught.value.key_id == "k1"
            assert f"task queue {rt.task_queue!r}" in str(caught.value)
        # tnx-worker: one line naming the key id, exit 1, no traceback.
        env = {k: v for k, v in os.environ.items() if not k.startswith("TNX_")}
        proc = await asyncio.create_subprocess_exec(
            str(Path(sys.executable).parent / "tnx-worker"),
            "--registry",
            "tests.registries:APPROVALS",
            "--address",
            client.service_client.config.target_host,
            "--task-queue",
            rt.task_queue,
            "--llm-base-url",
            "http://127.0.0.1:9/v1",
            "--model",
            MODEL,
            "--store",
            str(tmp_path / "w.sqlite"),
            cwd=ROOT,
            env={
                **env,
                "PYTHONPATH": str(ROOT),
                "TNX_CODEC_KEYS": f"k1:{base64.b64encode(KEY_B).decode()}",
            },
            stdout=asyncio.subprocess.PIPE,
            stderr=asyncio.subprocess.PIPE,
        )
        out, err = await asyncio.wait_for(proc.communicate(), 60)
        lines = err.decode().strip().splitlines()
        assert proc.returncode == 1, (out, err)
        assert len(lines) == 1 and "key id 'k1'" in lines[0], lines
        assert "Traceback" not in err.decode()
        # Nothing of that touched the agents.
        r = await rt.run_turn(h, "two")
        assert (r.status, r.text) == ("done", "fine")
        assert (await rt.inspect(h.id)).turns_total == 2


async def test_a_rotation_rewrites_the_canary_and_then_refuses_the_old_key_alone(
    client: Client, store: SqliteConversationStore
) -> None:
    tq = f"tq-{uuid.uuid4().hex[:10]}"
    old, rotated = AesGcmCodec({"a": KEY_A}), AesGcmCodec({"b": KEY_B, "a": KEY_A})
    async with worker(client, tq, store, old) as w, w:
        assert (await read_canary(client, tq)).key_id == "a"
    async with worker(client, tq, store, old) as w, w:  # the same keys start again
        pass
    async with worker(client, tq, store, rotated) as w, w:  # new key first, old one decodes
        assert (await read_canary(client, tq)).key_id == "b"
    with pytest.raises(KeyMismatchError, match="key id 'b'"):
        async with worker(client, tq, store, old):
            pass
    async with worker(client, tq, store, AesGcmCodec({"b": KEY_B})) as w, w:  # old key dropped
        pass
    # A plain task queue: a worker without keys starts, and writes no canary.
    plain_tq = f"tq-{uuid.uuid4().hex[:10]}"
    async with worker(client, plain_tq, store, None) as w, w:
        assert (await read_canary(client, plain_tq)).payload is None


@split_loop("rounds", 6, 20)
async def test_a_keyless_worker_started_before_the_canary_stops_and_strands_no_turn(
    client: Client, store: SqliteConversationStore, rounds: range
) -> None:
    """The keyless worker polls first (no canary yet: a plain task queue), then the right
    worker writes the canary. Every turn's first LLM attempt fails, so its retries may go to
    either worker: the keyless one's first undecodable payload makes it read the canary and
    stop, and no turn ends ``error``."""
    scope = f"t-{uuid.uuid4().hex[:10]}"
    tq = f"tq-{scope}"
    right = AesGcmCodec({"k1": KEY_A})
    # Another connection: the SDK refuses two workers of one task queue on one client.
    other = await Client.connect(client.service_client.config.target_host)
    async with worker(other, tq, store, None) as keyless, keyless:
        async with worker(client, tq, store, right) as good, good:
            assert (await read_canary(client, tq)).key_id == "k1"
            rt = await AgentRuntime(
                with_codec(client, right),
                task_queue=tq,
                scope=scope,
                options=RuntimeOptions(llm_initial_retry_ms=50),
            ).start()
            handles = []
            for _ in range(4):
                h = await rt.spawn(rt.root, "helper")
                assert isinstance(h, Handle)
                handles.append(h)
            # The old code ended 4 of 80 such turns `error` ("LLM call failed: Failed
            # decoding arguments": the retries had landed on the keyless worker).
            for round_ in rounds:
                results = await asyncio.gather(
                    *(rt.run_turn(h, f"round {round_}") for h in handles)
                )
                assert [(r.status, r.text) for r in results] == [("done", "fine")] * 4
            stopped = stale_keys(keyless)
            assert stopped is not None, "the keyless worker never took a task"
            assert stopped.key_id == "k1" and "no codec keys" in str(stopped)
    wf = client.get_workflow_handle(canary_workflow_id(tq))
    await wf.terminate("test done")


@pytest.mark.stress  # ~45 s: the server refuses updates only after the task failed a while
async def test_a_wake_on_an_agent_whose_tasks_a_worker_fails_waits_for_the_fix_never_raw(
    client: Client, store: SqliteConversationStore
) -> None:
    """A worker with another key that keeps failing an agent's workflow tasks (its canary
    gone, so it cannot tell it is wrong): Temporal then refuses updates and queries ("Workflow
    Task in failed state"; the old code raised that RPCError from ``wake`` and ``inspect``).
    A read says so as WorkflowTaskFailingError naming the bad worker's key id; a wake waits
    and goes through once the right worker is back."""
    right = AesGcmCodec({"a": KEY_A})
    async with serving(client, store, right) as rt:
        h = await rt.spawn(rt.root, "helper")
        assert isinstance(h, Handle)
        assert (await rt.run_turn(h, "one")).status == "done"
    await client.get_workflow_handle(canary_workflow_id(rt.task_queue)).terminate("test")
    bad = AesGcmCodec({"b": KEY_B})
    async with worker(client, rt.task_queue, store, bad, check_keys=False) as w, w:
        wake = asyncio.create_task(rt.wake(h, "two"))
        refused: list[WorkflowTaskFailingError] = []

        async def refused_read() -> bool:
            try:
                await rt.inspect(h.id)
            except WorkflowTaskFailingError as err:
                refused.append(err)
                return True
            return False

        await eventually(
            refused_read, within_s=60, ignoring=(WorkflowQueryFailedError,), what="refused"
        )
        assert "key id 'b'" in refused[0].reason, refused[0]
        assert "a worker fails this agent's workflow tasks" in str(refused[0])
        assert not wake.done()
    async with worker(client, rt.task_queue, store, right) as w, w:
        woke = await asyncio.wait_for(wake, 90)  # 15 s here: the server's retry backoff
        assert woke.id == h.id
        r = await rt.wait(h)
        assert (r.status, r.text) == ("done", "fine")


def always_fine() -> httpx.MockTransport:
    return httpx.MockTransport(lambda _: httpx.Response(200, json=text("fine")))


@activity.defn(name=LLM_CALL_ACTIVITY)
async def llm_call_elsewhere(inp: LlmCallInput) -> LlmCallResult:
    """The LLM activity of a worker elsewhere: never reached, its input does not decode."""
    raise AssertionError("decoded a payload under another key")


async def activity_failed(client: Client, workflow_id: str) -> bool:
    history = await client.get_workflow_handle(workflow_id).fetch_history()
    return any(e.HasField("activity_task_failed_event_attributes") for e in history.events)


@pytest.mark.parametrize("old_build", [False, True], ids=["marked", "old-build-failure"])
async def test_an_llm_failure_written_with_another_key_does_not_poison_the_agent(
    client: Client, store: SqliteConversationStore, old_build: bool
) -> None:
    """A worker with another key runs the agent's LLM call (the right worker runs only
    workflow tasks): the call's input does not decode and its failure is encrypted with the
    wrong key. The right worker reads it as a failure it cannot read, so the turn ends
    ``error`` and the agent goes on (the old code failed every later workflow task of it:
    "payload encrypted with key id 'k1' does not decrypt").

    ``old_build``: the failure as an older build wrote it (no mark, key id k2): the agent is
    stuck until the right workers get k2 as an extra decode key (the documented recovery)."""
    scope = f"t-{uuid.uuid4().hex[:10]}"
    tq = f"tq-{scope}"
    right = AesGcmCodec({"k1": KEY_A})
    rt = AgentRuntime(
        with_codec(client, right),
        task_queue=tq,
        scope=scope,
        options=RuntimeOptions(llm_max_attempts=1),
    )
    async with worker(client, tq, store, right, always_fine()) as w, w:
        rt = await rt.start()
        h = await rt.spawn(rt.root, "helper")
        assert isinstance(h, Handle)
        assert (await rt.run_turn(h, "one")).status == "done"
    if old_build:
        converter = dataclasses.replace(
            pydantic_data_converter,
            payload_codec=AesGcmCodec({"k2": KEY_B}),
            failure_converter_class=DefaultFailureConverterWithEncodedAttributes,
        )
    else:
        converter = data_converter(AesGcmCodec({"k1": KEY_B}))  # same id, another key
    config = (await Client.connect(client.service_client.config.target_host)).config()
    config["data_converter"] = converter
    elsewhere = Worker(Client(**config), task_queue=tq, activities=[llm_call_elsewhere])
    only_workflows = worker(client, tq, store, right, always_fine(), no_remote_activities=True)
    wf_id = f"{scope}/{h.id}"
    async with only_workflows as w1, w1, elsewhere:
        turn = asyncio.create_task(rt.run_turn(h, "two"))
        await eventually(lambda: activity_failed(client, wf_id), within_s=30, what="failed")
        if not old_build:
            r = await asyncio.wait_for(turn, 60)
            assert r.status == "error" and "cannot read" in r.text and "'k1'" in r.text, r
        else:
            await asyncio.sleep(2)
            assert not turn.done()  # stuck: every workflow task fails on the failure
    recovery = right if not old_build else AesGcmCodec({"k1": KEY_A, "k2": KEY_B})
    async with worker(client, tq, store, recovery, always_fine()) as w, w:
        if old_build:
            r = await asyncio.wait_for(turn, 60)
            assert r.status == "error" and "Failed decoding arguments" in r.text, r
        r = await rt.run_turn(h, "three")
        assert (r.status, r.text) == ("done", "fine")
