"""Breaker: Answers sent at once to one Request with approvers (signals and updates, listed
and unlisted senders), and Answers in flight while the handle closes."""

from __future__ import annotations

import asyncio
from typing import Any

import pytest
from temporalio.client import Client, WorkflowHandle

from tests.expiring import expiry_registry, finished
from tests.helpers import eventually, spawn
from toolnexus_temporal.client import AgentDef, Answer, AnswerRejectedError, Handle, Request
from toolnexus_temporal.client.testing import ScriptedLLM, text, tool_calls
from toolnexus_temporal.workflows.contract.models import ApprovalPolicy


def script() -> ScriptedLLM:
    """The model: call ``slow`` (it parks), then answer ``done``."""
    return ScriptedLLM({"stub-model": [tool_calls(("slow", {})), text("done")]})


GATED = expiry_registry(
    AgentDef(name="w", tools=["slow"], approval=ApprovalPolicy(approvers={"approval": ["alice"]}))
)
"""One agent whose Request only alice may answer."""


async def parked(rt: Any, client: Client) -> tuple[Handle, Request, WorkflowHandle[Any, Any]]:
    """A ``w`` parked on its Request: the handle, the Request and its workflow."""
    h = await spawn(rt, rt.root, "w")
    r = await rt.run_turn(h, "go")
    assert r.pending is not None
    return h, r.pending, client.get_workflow_handle(rt.workflow_id(h.id))


async def alice_answers(rt, h, req) -> bool:
    """alice (listed) answers ``req``: True once taken or already answered (by her earlier
    Answer of the burst); False when refused because other lookups were in flight."""
    if (await rt.inspect(h)).pending_req is None:
        return True
    try:
        await rt.answer(h, Answer(id=req.id, ok=True, by="alice", data={"a": 1}))
    except AnswerRejectedError as err:
        if "already answered" in str(err):
            return True
        assert "being checked" in str(err), err
        return False
    return True


async def test_concurrent_answers_exactly_one_listed_one_is_taken(
    make_runtime, client: Client
) -> None:
    async with make_runtime(GATED, script().transport()) as rt:
        h, req, wf = await parked(rt, client)
        sends = []
        for i in range(6):
            bob = {"id": req.id, "ok": True, "by": "bob", "data": {"i": i}}
            sends.append(wf.signal("answer", bob))
            sends.append(rt.answer(h, Answer(id=req.id, ok=True, by="mallory", data={"u": i})))
            sends.append(wf.signal("answer", {"id": req.id, "ok": "yes"}))  # malformed
        sends.append(wf.signal("answer", {"id": req.id, "ok": False, "by": "alice"}))
        sends.append(rt.answer(h, Answer(id=req.id, ok=True, by="alice", data={"a": 1})))
        await asyncio.gather(*sends, return_exceptions=True)
        # past LOOKUPS_MAX lookups at once alice's Answers may have been refused too
        await eventually(lambda: alice_answers(rt, h, req), within_s=60, what="alice's Answer")
        r = await finished(rt, h, within_s=30)
        assert (r.status, r.text) == ("done", "done")
        records = await rt.audit(h)
        assert len(records) == 1 and records[0].by == "alice", records


async def test_answer_in_flight_while_closing(make_runtime, client: Client) -> None:
    async with make_runtime(GATED, script().transport()) as rt:
        h, req, wf = await parked(rt, client)
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


@pytest.mark.stress
async def test_a_flood_of_answers_to_a_request_with_approvers_fails_no_task(
    make_runtime, client: Client
) -> None:
    """Anyone who may signal sees the Request's id in the approval queue: 8 senders of
    ``answer`` signals for 20 s each started a principal lookup, and at 2,000 pending
    activities every workflow task failed (queries refused, the handle hung). Now at most
    ``LOOKUPS_MAX`` run; the rest are refused at once, and the listed approver still
    answers."""
    async with make_runtime(GATED, script().transport()) as rt:
        h, req, wf = await parked(rt, client)
        loop = asyncio.get_running_loop()
        stop = loop.time() + 20
        sent = 0

        async def sender() -> None:
            nonlocal sent
            while loop.time() < stop:
                await wf.signal("answer", {"id": req.id, "ok": True, "by": "bob"})
                sent += 1

        await asyncio.gather(*[sender() for _ in range(8)])
        print(f"\n{sent} answer signals sent")
        view = await asyncio.wait_for(rt.inspect(h), 30)  # queries answer: no failed task
        assert view.state == "suspended" and view.pending_req == req

        await eventually(lambda: alice_answers(rt, h, req), within_s=60, what="alice's Answer")
        r = await finished(rt, h, within_s=60)
        assert (r.status, r.text) == ("done", "done")
        assert [x.by for x in await rt.audit(h)] == ["alice"]
