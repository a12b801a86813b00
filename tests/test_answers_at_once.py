"""Breaker: Answers sent at once to one Request with approvers (signals and updates, listed
and unlisted senders), and Answers in flight while the handle closes."""

from __future__ import annotations

import asyncio

from temporalio.client import Client

from tests.helpers import spawn
from tests.test_expiry import finished, registry
from toolnexus_temporal.client import AgentDef, Answer
from toolnexus_temporal.client.testing import ScriptedLLM, text, tool_calls
from toolnexus_temporal.workflows.contract.models import ApprovalPolicy


async def test_concurrent_answers_exactly_one_listed_one_is_taken(
    make_runtime, client: Client
) -> None:
    llm = ScriptedLLM({"stub-model": [tool_calls(("slow", {})), text("done")]})
    agent = AgentDef(
        name="w", tools=["slow"], approval=ApprovalPolicy(approvers={"approval": ["alice"]})
    )
    async with make_runtime(registry(agent), llm.transport()) as rt:
        h = await spawn(rt, rt.root, "w")
        r = await rt.run_turn(h, "go")
        assert r.pending is not None
        req = r.pending
        wf = client.get_workflow_handle(rt.workflow_id(h.id))
        sends = []
        for i in range(6):
            bob = {"id": req.id, "ok": True, "by": "bob", "data": {"i": i}}
            sends.append(wf.signal("answer", bob))
            sends.append(rt.answer(h, Answer(id=req.id, ok=True, by="mallory", data={"u": i})))
            sends.append(wf.signal("answer", {"id": req.id, "ok": "yes"}))  # malformed
        sends.append(wf.signal("answer", {"id": req.id, "ok": False, "by": "alice"}))
        sends.append(rt.answer(h, Answer(id=req.id, ok=True, by="alice", data={"a": 1})))
        await asyncio.gather(*sends, return_exceptions=True)
        r = await finished(rt, h, within_s=30)
        assert (r.status, r.text) == ("done", "done")
        records = await rt.audit(h)
        assert len(records) == 1 and records[0].by == "alice", records


async def test_answer_in_flight_while_closing(make_runtime, client: Client) -> None:
    llm = ScriptedLLM({"stub-model": [tool_calls(("slow", {})), text("done")]})
    agent = AgentDef(
        name="w", tools=["slow"], approval=ApprovalPolicy(approvers={"approval": ["alice"]})
    )
    async with make_runtime(registry(agent), llm.transport()) as rt:
        h = await spawn(rt, rt.root, "w")
        r = await rt.run_turn(h, "go")
        assert r.pending is not None
        req = r.pending
        wf = client.get_workflow_handle(rt.workflow_id(h.id))
        sends = [
            wf.signal("answer", {"id": req.id, "ok": True, "by": "alice"}),
            rt.answer(h, Answer(id=req.id, ok=True, by="alice")),
            rt.close(h),
        ]
        await asyncio.gather(*sends, return_exceptions=True)
        final = await asyncio.wait_for(wf.result(), timeout=30)  # it completes: no hang
        assert final["state"] == "closed"
        records = await rt.audit(h)
        assert len(records) <= 1 and all(x.by == "alice" for x in records)
