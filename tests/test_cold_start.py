"""A turn that reaches a worker with a cold cache must write a history that replays (found by
the many-hosts test: ``[TMPRL1100] Nondeterminism error: Signal external WF machine does not
handle this event: UpsertWorkflowSearchAttributes``; a handle stuck for good).

Temporal's SDK core folds a commandless workflow task of the history (a child's first one)
into the activation that delivers a new update, when the worker has the workflow in no cache
(temporalio/sdk-python#1591); the update handler then runs before ``run`` started, while a
later replay runs ``run`` first. Handlers must not depend on what ``run`` does first.
"""

from __future__ import annotations

import uuid
from typing import Any

from temporalio.client import Client

from tests.conftest import MODEL
from tests.helpers import eventually, replay_every_run, spawn
from toolnexus_temporal.activities import LlmConfig, SqliteConversationStore
from toolnexus_temporal.client import AgentDef, AgentRuntime
from toolnexus_temporal.client.testing import ScriptedLLM, text
from toolnexus_temporal.worker import create_worker

REGISTRY = {"w": AgentDef(name="w")}


def worker(client: Client, queue: str, llm: ScriptedLLM, store: SqliteConversationStore) -> Any:
    """An in-process worker with an empty workflow cache."""
    return create_worker(
        client,
        registry=REGISTRY,
        llm=LlmConfig(base_url="http://mock.local/v1", model=MODEL),
        task_queue=queue,
        store=store,
        transport=llm.transport(),
    )


async def first_task_done(client: Client, workflow_id: str) -> bool:
    """The workflow's first workflow task completed (it issued no command)."""
    history = await client.get_workflow_handle(workflow_id).fetch_history()
    return any(e.HasField("workflow_task_completed_event_attributes") for e in history.events)


async def test_a_turn_on_a_cold_worker_writes_a_history_that_replays(
    client: Client, store: SqliteConversationStore
) -> None:
    llm = ScriptedLLM({MODEL: [text("hello")]}, repeat_last=True)
    scope = f"t-{uuid.uuid4().hex[:10]}"
    queue = f"tq-{scope}"
    rt = AgentRuntime(client, task_queue=queue, scope=scope, store=store)
    for attempt in range(3):
        async with worker(client, queue, llm, store) as first, first:
            if attempt == 0:
                await rt.start()
            h = await spawn(rt, rt.root, "w")
            wid = rt.workflow_id(h.id)
            await eventually(lambda wid=wid: first_task_done(client, wid))
        # The first worker is gone with its cache: the turn's update reaches a cold worker.
        async with worker(client, queue, llm, store) as second, second:
            result = await rt.run_turn(h, "hi")
            assert (result.status, result.text) == ("done", "hello")
            await replay_every_run(client, rt, h.id)
