"""The way back for an agent the server terminated (issue 23 item 6): ``AgentRuntime.recover``
and ``tnx recover`` start it again from its last state; a parked one's Request is answerable
again and its Answer runs the turn on (no LLM call made twice). Running, closed and unknown
agents are refused with a typed error."""

from __future__ import annotations

import asyncio
import json

import pytest
from temporalio.client import Client, WorkflowExecutionStatus

from tests.cli_support import Cli
from tests.helpers import Gate, eventually
from tests.parking import REGISTRY, continue_as_new_by_rejections, park
from toolnexus_temporal.client import (
    AgentRuntime,
    Answer,
    AnswerRejectedError,
    Handle,
    HandleNotFoundError,
    OrphanedHandlesError,
    RecoverRefusedError,
    RuntimeOptions,
    VerbRejectedError,
)
from toolnexus_temporal.client.testing import ScriptedLLM, text, tool_calls


async def terminate(client: Client, workflow_id: str) -> None:
    wf = client.get_workflow_handle(workflow_id)
    await wf.terminate(reason="Workflow history size exceeds limit. (test)")
    assert (await wf.describe()).status == WorkflowExecutionStatus.TERMINATED


def approval_script() -> ScriptedLLM:
    return ScriptedLLM({"stub-model": [tool_calls(("guarded", {})), text("approved and done")]})


async def test_a_terminated_parked_agent_is_recovered_and_answered(
    make_runtime, client, env
) -> None:
    llm = approval_script()
    async with make_runtime(REGISTRY, llm.transport()) as rt:
        h = await park(rt)
        req = h.pending_req
        assert req is not None
        wid = rt.workflow_id(h.id)
        await terminate(client, wid)
        # tnx ls and inspect say it ended (a query still answers "suspended"), and how back
        tnx = Cli(env, rt)

        async def ls_says_terminated() -> bool:
            docs = json.loads((await tnx.ok("ls", "--json")).out)
            return any(d["id"] == wid and d.get("workflow_ended") for d in docs)

        await eventually(ls_says_terminated, within_s=10, what="visibility shows the end")
        docs = json.loads((await tnx.ok("ls", "--json")).out)
        [doc] = [d for d in docs if d["id"] == wid]
        assert (doc["state"], doc["workflow_ended"]) == ("suspended", "terminated"), doc
        shown = await tnx.ok("inspect", h.id)
        assert f"terminated (was suspended): tnx recover {wid}" in shown.out, shown
        listing = await tnx.ok("ls")
        assert "terminated (was suspended)" in listing.out, listing
        # terminated: the Answer has nowhere to go
        with pytest.raises(AnswerRejectedError, match="terminated: `tnx recover"):
            await rt.resume(Answer(id=req.id, ok=True))
        with pytest.raises(VerbRejectedError, match=r"terminated .*tnx recover ID"):
            await rt.wake(h.id, "again")

        back = await rt.recover(h.id)
        assert isinstance(back, Handle)
        assert back.state == "suspended" and back.pending_req == req
        assert (await client.get_workflow_handle(wid).describe()).status == (
            WorkflowExecutionStatus.RUNNING
        )
        lines = await rt.trace_lines(back)
        assert any("recovered (run" in line for line in lines)
        # the same Request, answered by the usual verb: the tool runs with the Answer and
        # the LLM loop goes on; the first reply is not asked for again
        await rt.resume(Answer(id=req.id, ok=True, data={"by": "op"}))
        r = await rt.wait(back)
        assert (r.status, r.text) == ("done", "approved and done")
        assert llm.requests[1]["messages"][-1]["content"] == 'did it: {"by": "op"}'
        assert len(llm.requests) == 2
        # its parent's books follow it again
        root_view = await rt.inspect(rt.root)
        assert root_view.state == "idle"
        assert [c.state for c in await rt.list(rt.root) if c.id == h.id] == ["idle"]
        # recover refuses a running agent, a closed one and an unknown one
        with pytest.raises(RecoverRefusedError, match="running"):
            await rt.recover(h.id)
        await rt.close(back)
        await client.get_workflow_handle(wid).result()  # the closed run completes
        with pytest.raises(RecoverRefusedError, match="closed"):
            await rt.recover(h.id)
        with pytest.raises(HandleNotFoundError):
            await rt.recover("root/nobody.9")


async def test_a_terminated_agent_parked_across_runs_is_recovered(make_runtime, client) -> None:
    """Terminated in a run that started parked (the carried turn of a continue-as-new)."""
    llm = approval_script()
    options = RuntimeOptions(continue_as_new_events=100)
    async with make_runtime(REGISTRY, llm.transport(), options=options) as rt:
        h = await park(rt)
        req = h.pending_req
        assert req is not None
        wid = rt.workflow_id(h.id)
        await continue_as_new_by_rejections(client.get_workflow_handle(wid))
        await terminate(client, wid)
        back = await rt.recover(h)
        assert back.state == "suspended" and back.pending_req == req
        await rt.resume(Answer(id=req.id, ok=True))
        r = await rt.wait(back)
        assert (r.status, r.text) == ("done", "approved and done")
        assert len(llm.requests) == 2


async def test_tnx_recover_an_idle_agent(make_runtime, client, env) -> None:
    llm = ScriptedLLM({"stub-model": [text("first"), text("second")]})
    async with make_runtime(REGISTRY, llm.transport()) as rt:
        h = await rt.spawn(rt.root, "worker")
        assert isinstance(h, Handle)
        assert (await rt.run_turn(h, "one")).text == "first"
        tnx = Cli(env, rt)
        running = await tnx("recover", h.id)
        assert running.code == 1 and "running: nothing to recover" in running.err, running
        await terminate(client, rt.workflow_id(h.id))
        done = await tnx.ok("recover", h.id)
        assert done.out.startswith(f"recover {rt.workflow_id(h.id)} → idle"), done
        r = await rt.run_turn(h, "two")
        assert (r.status, r.text) == ("done", "second")
        # the transcript went on: the second call saw the first turn
        contents = [m["content"] for m in llm.requests[1]["messages"]]
        assert "first" in contents
        view = await rt.inspect(h)
        assert view.turns_total == 2


async def test_a_terminated_root_is_recovered_with_its_children(make_runtime, client) -> None:
    """A root the server terminated (a flood can reach it too): a new runtime refuses to
    start a fresh root over its running children and names ``tnx recover root``; the
    recovered root has them in its books, and they go on."""
    llm = ScriptedLLM({"stub-model": [text("before"), text("after")]})
    async with make_runtime(REGISTRY, llm.transport()) as rt:
        h = await rt.spawn(rt.root, "worker")
        assert isinstance(h, Handle)
        assert (await rt.run_turn(h, "one")).text == "before"
        await terminate(client, rt.workflow_id("root"))
        again = AgentRuntime(client, task_queue=rt.task_queue, scope=rt.scope)
        with pytest.raises(OrphanedHandlesError, match="tnx recover root"):
            await again.start()
        root = await again.recover("root")
        assert root.state == "idle"
        await again.start()
        assert [c.id for c in await again.list(again.root)] == ["root", h.id]
        r = await again.run_turn(h.id, "two")
        assert (r.status, r.text) == ("done", "after")
        child = await again.spawn(again.root, "worker")  # the next id: the books went on
        assert isinstance(child, Handle) and child.id == "root/worker.2"


async def test_an_agent_terminated_mid_turn_is_refused(make_runtime, client) -> None:
    """Its last state is in the middle of an LLM call: no run can start from there."""
    gate = Gate()
    async with make_runtime(REGISTRY, gate.transport()) as rt:
        h = await rt.spawn(rt.root, "worker")
        assert isinstance(h, Handle)
        await rt.wake(h, "think")
        await asyncio.wait_for(gate.entered.wait(), 30)
        await terminate(client, rt.workflow_id(h.id))
        gate.release.set()
        with pytest.raises(RecoverRefusedError, match="running: a turn was in flight"):
            await rt.recover(h)
        desc = await client.get_workflow_handle(rt.workflow_id(h.id)).describe()
        assert desc.status == WorkflowExecutionStatus.TERMINATED  # nothing was started
