"""A deploy that removes a tool never bricks the agents that used it (issue 23 item 5): an
agent parked on its ``deploy`` tool's approval, its worker replaced by one whose registry has
no ``deploy``. Before: after the Answer the turn ended ``error`` "LLM call failed: KeyError:
'deploy'" and every later wake failed the same way. Now the re-run tool is an error result the
model sees, the agent stays usable, and ``tnx replay-check --registry`` names it first."""

from __future__ import annotations

import json
import uuid
from typing import Any

from temporalio.client import Client

from tests.conftest import MODEL
from toolnexus_temporal.activities import (
    LlmConfig,
    Registry,
    SqliteConversationStore,
    ToolContext,
    define_tool,
    pending,
)
from toolnexus_temporal.cli.replaycheck import replay_check
from toolnexus_temporal.client import AgentDef, AgentRuntime, Answer, Handle
from toolnexus_temporal.client.testing import ScriptedLLM, text, tool_calls
from toolnexus_temporal.worker import create_worker


async def deploy(ctx: ToolContext) -> Any:
    """Deploys after an approval."""
    if ctx.answer is None:
        return pending(kind="approval", prompt="deploy to production?")
    return "deployed"


WITH_DEPLOY = Registry(
    [AgentDef(name="ops", tools=["deploy"], team=["helper"]), AgentDef(name="helper")],
    tools=[define_tool(deploy, input_schema={"type": "object", "properties": {}})],
)
WITHOUT = Registry([AgentDef(name="ops")])
"""The next deploy's registry: no ``deploy`` tool, no ``helper`` agent."""


async def test_an_agent_parked_on_a_dropped_tool_stays_usable(
    client: Client, store: SqliteConversationStore
) -> None:
    scope = f"t-{uuid.uuid4().hex[:10]}"
    task_queue = f"tq-{scope}"
    llm = ScriptedLLM(
        {MODEL: [tool_calls(("deploy", {})), text("went on without it"), text("later")]}
    )

    def worker(registry: Registry) -> Any:
        return create_worker(
            client,
            registry=registry,
            llm=LlmConfig(base_url="http://mock.local/v1", model=MODEL),
            task_queue=task_queue,
            store=store,
            transport=llm.transport(),
        )

    async with worker(WITH_DEPLOY) as w, w:
        rt = await AgentRuntime(client, task_queue=task_queue, scope=scope).start()
        h = await rt.spawn(rt.root, "ops")
        assert isinstance(h, Handle)
        parked = await rt.run_turn(h, "ship it")
        assert parked.status == "pending" and parked.pending is not None

    report = await replay_check(client, scope=scope, registry=WITHOUT)
    by_id = {o.workflow_id: o for o in report.outcomes}
    named = by_id[rt.workflow_id(h.id)]
    assert named.status == "missing" and named.label == "MISSING IN REGISTRY"
    assert "tool 'deploy'" in named.detail and "agent 'helper'" in named.detail
    assert by_id[rt.workflow_id("root")].status == "ok"
    assert report.exit_code == 1
    assert (await replay_check(client, scope=scope, registry=WITH_DEPLOY)).exit_code == 0

    async with worker(WITHOUT) as w, w:
        rt = await AgentRuntime(client, task_queue=task_queue, scope=scope).start()
        await rt.resume(Answer(id=parked.pending.id, ok=True))
        r = await rt.wait(h)
        assert (r.status, r.text) == ("done", "went on without it"), r
        sent = json.dumps(llm.requests[-1])
        assert "not registered on this worker" in sent  # the model saw why
        assert '"deploy"' not in json.dumps(llm.requests[-1].get("tools", []))
        again = await rt.run_turn(h, "next")
        assert (again.status, again.text) == ("done", "later"), again
        await rt.close(h)
