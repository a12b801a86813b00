"""Bad input and odd sequences leave every agent's state intact and nothing stuck (the
adversarial review's findings, each pinned)."""

from __future__ import annotations

import asyncio
from typing import Any

import httpx
import pytest
from temporalio.client import WorkflowExecutionStatus

from tests.helpers import eventually, spawn
from tests.registries import APPROVALS, check_secret  # noqa: F401 (registry module)
from toolnexus_temporal.activities import Registry
from toolnexus_temporal.client import AgentDef, Answer, AnswerRejectedError, Budget, SpawnError
from toolnexus_temporal.client.testing import ScriptedLLM, text, tool_calls


async def test_signals_with_extra_inputs_or_unknown_names_are_rejected(make_runtime, client):
    llm = ScriptedLLM({"stub-model": [text("still fine")]})
    async with make_runtime({"w": AgentDef(name="w")}, llm.transport()) as rt:
        h = await spawn(rt, rt.root, "w")
        wf = client.get_workflow_handle(rt.workflow_id(h.id))
        await wf.signal("interrupt", args=[1, 2])
        await wf.signal("wake", args=["a", "b"])
        await wf.signal("Wake", "typo")
        await wf.signal("child_report", {"id": "x", "seq": "bogus"})
        await wf.signal("post", "y" * 70_000)  # over the per-item cap

        async def traced() -> bool:
            lines = await rt.trace_lines(h)
            return sum("REJECTED" in line for line in lines) >= 5

        await eventually(traced)
        lines = await rt.trace_lines(h)
        assert any("interrupt REJECTED (expected one input, got 2)" in x for x in lines)
        assert any("Wake REJECTED (unknown signal" in x for x in lines)
        assert any("child_report REJECTED (bad payload" in x for x in lines)
        assert (await rt.inspect(h)).inbox_count == 0
        # the workflow still works
        assert (await rt.run_turn(h, "go")).text == "still fine"


async def test_close_of_a_parked_tree_ends_every_workflow(make_runtime, client) -> None:
    llm = ScriptedLLM(
        {
            "m-parent": [tool_calls(("task", {"agent": "asker", "prompt": "x"}))],
            "stub-model": [tool_calls(("check_secret", {}))],
        }
    )
    async with make_runtime(APPROVALS, llm.transport()) as rt:
        parent = await spawn(rt, rt.root, "parent")
        assert (await rt.run_turn(parent, "go")).status == "pending"
        child_id = f"{parent.id}/asker.1"
        await rt.close(rt.root, reason="shutdown")
        for hid in ("root", parent.id, child_id):
            wf = client.get_workflow_handle(rt.workflow_id(hid))

            async def completed(wf: Any = wf) -> bool:
                # a handle reports `closed` a moment before its workflow run returns
                return (await wf.describe()).status == WorkflowExecutionStatus.COMPLETED

            await eventually(completed)
        for hid in (parent.id, child_id):
            view = await rt.inspect(hid)
            assert view.state == "closed" and view.pending_req is None
            assert view.last_result is not None and view.last_result.status == "interrupted"
        assert llm.calls() == 2  # nothing ran on after the close began


async def test_root_pools_drain_and_max_depth_is_inherited(make_runtime) -> None:
    llm = ScriptedLLM({"stub-model": [text("a"), text("b"), text("c")]})
    reg = {"w": AgentDef(name="w")}
    async with make_runtime(reg, llm.transport(), budget=Budget(max_tokens=12, max_depth=1)) as rt:
        first = await spawn(rt, rt.root, "w")
        await rt.run_turn(first, "go")
        await rt.run_turn(first, "again")
        root = await rt.inspect(rt.root)
        assert (root.usage_total, root.pool_tokens) == (10, 2)
        second = await spawn(rt, rt.root, "w")
        assert second.pool_tokens == 2  # carved from the live remainder
        await rt.run_turn(second, "go")
        refused = await rt.spawn(rt.root, "w")
        assert isinstance(refused, SpawnError) and refused.error == "budget exhausted (tokens)"
        deep = await rt.spawn(first, "w")
        assert isinstance(deep, SpawnError) and deep.error == "depth 2 over max_depth 1"


async def test_a_terminated_child_does_not_hang_its_parent(make_runtime, client) -> None:
    release = asyncio.Event()

    async def answer(request: httpx.Request) -> httpx.Response:
        import json

        body = json.loads(request.content)
        if body["model"] == "m-lead":
            if any(m["role"] == "tool" for m in body["messages"]):
                tool_msg = next(m for m in body["messages"] if m["role"] == "tool")
                return httpx.Response(200, json=text(f"lead saw: {tool_msg['content']}"))
            return httpx.Response(
                200, json=tool_calls(("task", {"agent": "slow", "prompt": "work"}))
            )
        await release.wait()
        return httpx.Response(200, json=text("never"))

    reg = Registry([AgentDef(name="lead", team=["slow"], model="m-lead"), AgentDef(name="slow")])
    async with make_runtime(reg, httpx.MockTransport(answer)) as rt:
        lead = await spawn(rt, rt.root, "lead")
        await rt.wake(lead, "go")
        child_wf = client.get_workflow_handle(rt.workflow_id(f"{lead.id}/slow.1"))

        async def child_running() -> bool:
            try:
                return (await child_wf.query("view"))["state"] == "running"
            except Exception:
                return False

        await eventually(child_running)
        await child_wf.terminate(reason="operator pressed Terminate")
        result = await asyncio.wait_for(rt.wait(lead), 30)
        assert result.status == "done"
        assert result.text.startswith("lead saw: [closed]")
        release.set()


async def test_an_answer_is_taken_once(make_runtime) -> None:
    worker = AgentDef(name="w", tools=["check_secret"])
    llm = ScriptedLLM({"stub-model": [tool_calls(("check_secret", {})), text("done")]})
    reg = Registry([worker], tools=APPROVALS.tools.values())
    async with make_runtime(reg, llm.transport()) as rt:
        h = await spawn(rt, rt.root, "w")
        assert (await rt.run_turn(h, "go")).status == "pending"
        assert h.pending_req is not None
        req_id = h.pending_req.id
        results = await asyncio.gather(
            rt.answer(h, Answer(id=req_id, ok=True)),
            rt.answer(h, Answer(id=req_id, ok=False, reason="declined")),
            return_exceptions=True,
        )
        accepted = [r for r in results if not isinstance(r, BaseException)]
        rejected = [r for r in results if isinstance(r, AnswerRejectedError)]
        assert len(accepted) == 1 and len(rejected) == 1, results
        assert "already answered" in str(rejected[0]) or "no pending request" in str(rejected[0])
        assert (await rt.wait(h)).status == "done"


async def test_spawn_under_a_closed_parent_is_a_spawn_error(make_runtime) -> None:
    async with make_runtime({"w": AgentDef(name="w")}, ScriptedLLM({}).transport()) as rt:
        parent = await spawn(rt, rt.root, "w")
        await rt.close(parent)
        refused = await rt.spawn(parent, "w")
        assert isinstance(refused, SpawnError) and refused.error.startswith("parent closed")


async def test_a_parked_child_gives_its_slot_to_a_sibling(make_runtime) -> None:
    reg = Registry(
        [AgentDef(name="asker", tools=["check_secret"]), AgentDef(name="w")],
        tools=APPROVALS.tools.values(),
    )
    llm = ScriptedLLM(
        {"stub-model": [tool_calls(("check_secret", {})), text("sibling ran"), text("asker done")]}
    )
    async with make_runtime(reg, llm.transport(), budget=Budget(max_concurrent=1)) as rt:
        asker = await spawn(rt, rt.root, "asker")
        sibling = await spawn(rt, rt.root, "w")
        assert (await rt.run_turn(asker, "go")).status == "pending"
        await rt.wake(sibling, "go")  # queued until the parked asker gives its lease back
        assert (await rt.wait(sibling)).text == "sibling ran"
        assert (await rt.inspect(asker)).state == "suspended"  # still parked: it ran first
        assert asker.pending_req is not None
        await rt.resume(Answer(id=asker.pending_req.id, ok=True))
        assert (await rt.wait(asker)).text == "asker done"


def test_inputs_are_bounded() -> None:
    from toolnexus_temporal.workflows.contract.messages import CloseRequest, WaitRequest
    from toolnexus_temporal.workflows.contract.models import InboxItem

    with pytest.raises(ValueError):
        WaitRequest(timeout_ms=10**18)
    with pytest.raises(ValueError):
        InboxItem(text="x" * 70_000)
    with pytest.raises(ValueError):
        CloseRequest.model_validate({"force": "yes"})
    with pytest.raises(ValueError):
        Answer.model_validate({"id": "a#1", "ok": "yes"})
