"""Issue 36 item 8: a sustained flood of ``answer`` signals to a Request with approvers. Each
such Answer's sender is looked up by an activity, and the ``answer`` handler used to await it:
with a lookup always in flight no handler was ever finished, so the parked run never continued
as new (4,480 signals in 20 s, still the first run). Now the handler returns at once and the
Answers being checked travel in the carried state (``ApprovalState.checking``): the run
continues as new under the flood, and the listed approver's Answer is taken afterwards.

How long a query takes during such a flood is measured by hand (``python -m
bench.answer_flood``), never asserted here."""

from __future__ import annotations

import asyncio

import pytest
from temporalio.client import Client

from tests.expiring import expiry_registry, finished
from tests.helpers import eventually, spawn
from toolnexus_temporal.client import AgentDef, Answer, AnswerRejectedError
from toolnexus_temporal.client.testing import ScriptedLLM, text, tool_calls
from toolnexus_temporal.workflows.contract.models import ApprovalPolicy

pytestmark = pytest.mark.stress

GATED = expiry_registry(
    AgentDef(name="w", tools=["slow"], approval=ApprovalPolicy(approvers={"approval": ["alice"]}))
)
"""One agent whose Request only alice may answer."""


async def test_a_sustained_flood_of_answers_continues_as_new(make_runtime, client: Client) -> None:
    llm = ScriptedLLM({"stub-model": [tool_calls(("slow", {})), text("done"), text("again")]})
    async with make_runtime(GATED, llm.transport()) as rt:
        h = await spawn(rt, rt.root, "w")
        r = await rt.run_turn(h, "go")
        req = r.pending
        assert req is not None
        wf = client.get_workflow_handle(rt.workflow_id(h.id))
        first = (await wf.describe()).run_id
        loop = asyncio.get_running_loop()
        stop = loop.time() + 20
        sent = refused = 0

        async def sender(i: int) -> None:
            nonlocal sent, refused
            while loop.time() < stop:
                bob = {"id": req.id, "ok": True, "by": f"bob{i}"}
                try:
                    await wf.signal("answer", bob)
                    sent += 1
                except Exception:  # refused in the instant of a continue-as-new
                    refused += 1
                    await asyncio.sleep(0.01)

        await asyncio.gather(*[sender(i) for i in range(8)])
        now = (await wf.describe()).run_id
        print(f"\n{sent} answer signals sent ({refused} refused by the server)")
        assert now != first, "the flooded run never continued as new"
        lines = await rt.trace_lines(h)
        assert any(f"continue-as-new (parked on {req.id})" in x for x in lines), lines[-20:]

        async def alice_answers() -> bool:
            if (await rt.inspect(h)).pending_req is None:
                return True
            try:
                await rt.answer(h, Answer(id=req.id, ok=True, by="alice", data={"a": 1}))
            except AnswerRejectedError as err:
                return "already answered" in str(err)
            return True

        await eventually(alice_answers, within_s=60, what="alice's Answer")
        done = await finished(rt, h, within_s=60)
        assert (done.status, done.text) == ("done", "done")
        assert [x.by for x in await rt.audit(h)] == ["alice"]
        # the agent works on: a second turn completes
        again = await rt.run_turn(h, "once more")
        assert (again.status, again.text) == ("done", "again")
