"""The approval queue as the web UI shows it (issue 14 item 1), on a real dev server: the
pending Request's search attributes, current details that start with the Answer to paste, a
rejected answer shown on the agent's page, handler descriptions, static details."""

from __future__ import annotations

import json
from typing import Any

import pytest
from temporalio.api.sdk.v1 import WorkflowMetadata
from temporalio.client import Client
from temporalio.common import SearchAttributePair, TypedSearchAttributes
from temporalio.contrib.pydantic import pydantic_data_converter
from temporalio.testing import WorkflowEnvironment

from tests.approving import WORKER, approvals_registry
from tests.conftest import temporal_binary
from tests.helpers import settle, spawn
from toolnexus_temporal.client import AgentDef, AgentRuntime
from toolnexus_temporal.client.errors import SearchAttributesMissingError
from toolnexus_temporal.client.testing import ScriptedLLM, text, tool_calls
from toolnexus_temporal.workflows.agent import AgentWorkflow
from toolnexus_temporal.workflows.contract.handler_docs import INTERNAL
from toolnexus_temporal.workflows.contract.names import (
    AGENT_DEPTH,
    AGENT_NAME,
    AGENT_PARENT,
    AGENT_STATE,
    ROOT_ID,
)
from toolnexus_temporal.workflows.contract.state import AgentInput, HandleState


async def metadata(client: Client, wf_id: str) -> WorkflowMetadata:
    """What the web UI reads from a worker: current details and handler definitions."""
    return await client.get_workflow_handle(wf_id).query(
        "__temporal_workflow_metadata", result_type=WorkflowMetadata
    )


async def attributes(client: Client, wf_id: str) -> dict[str, Any]:
    desc = await client.get_workflow_handle(wf_id).describe()
    return {p.key.name: p.value for p in desc.typed_search_attributes}


async def queue(client: Client, scope: str) -> list[str]:
    query = (
        f'AgentState="suspended" AND AgentRequestKind="approval"'
        f' AND WorkflowId STARTS_WITH "{scope}/"'
    )
    return sorted([wf.id async for wf in client.list_workflows(query)])


async def test_a_parked_agent_is_in_the_queue_with_its_request(make_runtime, client) -> None:
    llm = ScriptedLLM({"stub-model": [tool_calls(("ask_approval", {})), text("deployed")]})
    async with make_runtime(approvals_registry(WORKER), llm.transport()) as rt:
        h = await spawn(rt, rt.root, "worker")
        wf_id = rt.workflow_id(h.id)
        await rt.wake(h, "deploy")
        r = await rt.wait(h)
        assert r.status == "pending" and r.pending is not None
        req = r.pending

        found = await settle(lambda: queue(client, rt.scope), lambda ids: ids == [wf_id])
        assert found == [wf_id]
        attrs = await attributes(client, wf_id)
        assert attrs["AgentRequestId"] == rt.workflow_id(req.id)  # as tnx prints it
        assert attrs["AgentRequestKind"] == "approval"
        assert attrs["AgentRequestPrompt"] == "need approval to proceed"
        assert attrs["AgentWaitingSince"].year >= 2026

        meta = await metadata(client, wf_id)
        head = meta.current_details.split("\n\n")
        assert head[0] == "**Waiting for approval:** need approval to proceed"
        assert head[1] == f"Request id: `{rt.workflow_id(req.id)}`"  # as tnx prints it
        to_paste = head[2].split("`")[3]
        assert json.loads(to_paste) == {"id": rt.workflow_id(req.id), "ok": True}
        signals = {d.name: d.description for d in meta.definition.signal_definitions}
        assert signals["child_report"].startswith(INTERNAL)
        assert signals["pool_floor"].startswith(INTERNAL)
        assert not signals["answer"].startswith(INTERNAL)
        assert '"ok": true' in signals["answer"]

        # A wrong answer (as the UI's Signal dialog sends it): the page says it was rejected.
        wf = client.get_workflow_handle(wf_id)
        await wf.signal("answer", {"id": f"{h.id}#99", "ok": True})
        rejected = await settle(
            lambda: metadata(client, wf_id),
            lambda m: m.current_details.startswith("**⚠ answer rejected:"),
        )
        assert f"{h.id}#99" in rejected.current_details.split("\n\n")[0]
        assert "**Waiting for approval:**" in rejected.current_details  # still waits
        trace = await rt.trace_lines(h)
        assert any("answer REJECTED" in line and "#99" in line for line in trace)

        # The JSON from the details, sent as the signal: the agent finishes.
        await wf.signal("answer", json.loads(to_paste))
        done = await rt.wait(h)
        assert done.status == "done" and done.text == "deployed"
        cleared = await attributes(client, wf_id)
        assert not {"AgentRequestId", "AgentRequestKind", "AgentWaitingSince"} & cleared.keys()
        assert cleared["AgentState"] == "idle"
        assert await settle(lambda: queue(client, rt.scope), lambda ids: ids == []) == []
        meta = await metadata(client, wf_id)
        assert meta.current_details.startswith(f"**{rt.workflow_id(h.id)}** — `idle`")


async def test_a_task_parent_surfaces_the_request_in_the_queue(make_runtime, client) -> None:
    boss = AgentDef(name="boss", description="delegates", team=["worker"])
    llm = ScriptedLLM(
        {
            "stub-model": [
                tool_calls(("task", {"agent": "worker", "prompt": "deploy"})),
                tool_calls(("ask_approval", {})),
                text("deployed"),
                text("boss done"),
            ]
        }
    )
    async with make_runtime(approvals_registry(boss, WORKER), llm.transport()) as rt:
        b = await spawn(rt, rt.root, "boss")
        await rt.wake(b, "go")
        r = await rt.wait(b)
        assert r.status == "pending" and r.pending is not None
        ids = [rt.workflow_id(b.id), rt.workflow_id(f"{b.id}/worker.1")]
        found = await settle(lambda: queue(client, rt.scope), lambda got: got == sorted(ids))
        assert found == sorted(ids)
        for wf_id in ids:
            assert (await attributes(client, wf_id))["AgentRequestId"] == rt.workflow_id(
                r.pending.id
            )
        child = await client.get_workflow_handle(ids[1]).describe()
        parent = rt.workflow_id("root/boss.1")  # the id as tnx prints it
        assert await child.static_summary() == f"agent worker (child of {parent}): does risky work"
        details = await child.static_details()
        assert details is not None and "Purpose: does risky work" in details
        # Answered at the parent's page (routed down to the owner): both leave the queue.
        await client.get_workflow_handle(ids[0]).signal("answer", {"id": r.pending.id, "ok": True})
        assert (await rt.wait(b)).text == "boss done"
        assert await settle(lambda: queue(client, rt.scope), lambda got: got == []) == []
        # the child's page says how the sender sent it, routed down by the parent (walk 8)
        meta = await metadata(client, ids[1])
        assert "via signal (routed down by its parent) · unverified" in meta.current_details
        trace = await rt.trace_lines(f"{b.id}/worker.1")
        assert any("via signal (routed down; sent via signal)" in line for line in trace), trace


async def test_a_rejection_is_shown_until_the_state_changes(make_runtime, client) -> None:
    llm = ScriptedLLM({"stub-model": [text("one")]})
    async with make_runtime(approvals_registry(WORKER), llm.transport()) as rt:
        h = await spawn(rt, rt.root, "worker")
        wf_id = rt.workflow_id(h.id)
        await client.get_workflow_handle(wf_id).signal("answer", {"id": f"{h.id}#5", "ok": True})
        shown = await settle(
            lambda: metadata(client, wf_id),
            lambda m: m.current_details.startswith("**⚠ answer rejected:"),
        )
        assert "has no pending request" in shown.current_details.split("\n")[0]
        await rt.run_turn(h, "go")
        meta = await settle(
            lambda: metadata(client, wf_id), lambda m: not m.current_details.startswith("**⚠")
        )
        assert meta.current_details.startswith(f"**{rt.workflow_id(h.id)}** — `idle`")


async def test_the_details_count_a_child_as_soon_as_it_is_spawned(make_runtime, client) -> None:
    """The parent's current details said ``children 0`` until its next turn (walk 5): a
    spawn refreshes them (no command: the state did not change)."""
    async with make_runtime(approvals_registry(WORKER), ScriptedLLM({}).transport()) as rt:
        await spawn(rt, rt.root, "worker")
        root_id = rt.workflow_id(rt.root.id)
        assert "children 1" in (await metadata(client, root_id)).current_details
        await spawn(rt, rt.root, "worker")
        assert "children 2" in (await metadata(client, root_id)).current_details


async def test_a_rejection_in_the_first_workflow_task_is_shown(make_runtime, client) -> None:
    """A wrong answer that lands in a run's first workflow task (seen under load right after
    a spawn; forced here by signal-with-start): the run's first publish is no state change
    and keeps it on the page."""
    async with make_runtime(approvals_registry(WORKER), ScriptedLLM({}).transport()) as rt:
        scope = f"{rt.scope}-first"
        state = HandleState(id=ROOT_ID, scope=scope, task_queue=rt.task_queue)
        wf_id = f"{scope}/{ROOT_ID}"
        await client.start_workflow(
            AgentWorkflow.run,
            AgentInput(state=state),
            id=wf_id,
            task_queue=rt.task_queue,
            search_attributes=TypedSearchAttributes([SearchAttributePair(AGENT_STATE, "idle")]),
            start_signal="answer",
            start_signal_args=[{"id": "root#5", "ok": True}],
        )
        shown = await settle(
            lambda: metadata(client, wf_id),
            lambda m: m.current_details.startswith("**⚠ answer rejected:"),
        )
        assert shown.current_details.startswith("**⚠ answer rejected:"), shown.current_details
        await client.get_workflow_handle(wf_id).signal("close", None)


async def test_a_namespace_without_the_queue_attributes_is_refused_at_start() -> None:
    """A namespace set up before protocol 4 lacks ``AgentRequest*``: a parked agent's upsert
    would fail its workflow task forever, so a runtime refuses to start, naming the fix."""
    old = (AGENT_STATE, AGENT_NAME, AGENT_PARENT, AGENT_DEPTH)
    async with await WorkflowEnvironment.start_local(
        dev_server_existing_path=temporal_binary(),
        data_converter=pydantic_data_converter,
        search_attributes=old,
        dev_server_log_level="error",
    ) as env:
        rt = AgentRuntime(env.client, task_queue="tq-none", scope="old-namespace")
        with pytest.raises(SearchAttributesMissingError) as info:
            await rt.start()
        assert info.value.missing == [
            "AgentEscalatedTo",
            "AgentNextTick",
            "AgentPaused",
            "AgentRequestExpires",
            "AgentRequestId",
            "AgentRequestKind",
            "AgentRequestPrompt",
            "AgentWaitingSince",
        ]
        assert "temporal operator search-attribute create" in str(info.value)
        assert "AgentWaitingSince --type Datetime" in str(info.value)
        assert "AgentPaused --type Bool" in str(info.value)
        assert "AgentEscalatedTo --type Keyword" in str(info.value)
        assert "AgentRequestExpires --type Datetime" in str(info.value)
        assert [wf async for wf in env.client.list_workflows()] == []  # nothing started


async def test_a_parked_handle_keeps_its_queue_entry_across_continue_as_new(
    make_runtime, client
) -> None:
    """The attributes travel with continue-as-new; the new run neither re-stamps
    ``AgentWaitingSince`` nor loses the Request, and unsets them once answered."""
    from tests.parking import REGISTRY, continue_as_new_by_rejections, park, script
    from toolnexus_temporal.client import RuntimeOptions

    options = RuntimeOptions(continue_as_new_events=100)
    async with make_runtime(REGISTRY, script().transport(), options=options) as rt:
        h = await park(rt)
        wf_id = rt.workflow_id(h.id)
        before = await attributes(client, wf_id)
        assert before["AgentState"] == "suspended" and before["AgentRequestId"] == rt.workflow_id(
            f"{h.id}#1"
        )
        wf = client.get_workflow_handle(wf_id)
        await continue_as_new_by_rejections(wf)
        after = await settle(
            lambda: attributes(client, wf_id), lambda a: a.get("AgentState") == "suspended"
        )
        for name in ("AgentRequestId", "AgentRequestKind", "AgentRequestPrompt"):
            assert after[name] == before[name], name
        assert after["AgentWaitingSince"] == before["AgentWaitingSince"]
        meta = await metadata(client, wf_id)
        assert f"Request id: `{rt.workflow_id(h.id)}#1`" in meta.current_details
        await wf.signal("answer", {"id": f"{h.id}#1", "ok": True})
        second = await settle(
            lambda: attributes(client, wf_id),
            lambda a: a.get("AgentRequestId") == rt.workflow_id(f"{h.id}#2"),
        )
        assert second["AgentRequestId"] == rt.workflow_id(f"{h.id}#2")
        await wf.signal("answer", {"id": f"{h.id}#2", "ok": True})
        done = await settle(
            lambda: attributes(client, wf_id), lambda a: a.get("AgentState") == "idle"
        )
        assert "AgentRequestId" not in done and "AgentWaitingSince" not in done
