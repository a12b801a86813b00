"""Values the server would refuse never reach it (issue 23 item 3), on a real dev server: a
tool that suspends with a 3,000-character ``kind`` parks, shows in the approval queue and is
answered (the server used to terminate the workflow: "BadSearchAttributes ... exceeds size
limit 2048"); a spawn whose child workflow id would pass 1,000 bytes is a SpawnError and the
parent goes on working (its workflow task used to fail for good)."""

from __future__ import annotations

import json
from typing import Any

from temporalio.client import WorkflowExecutionStatus

from tests.helpers import spawn
from toolnexus_temporal.activities import Registry, ToolContext, define_tool, pending
from toolnexus_temporal.client import AgentDef, Answer, Handle, SpawnError
from toolnexus_temporal.client.testing import ScriptedLLM, text, tool_calls
from toolnexus_temporal.workflows.contract.limits import SEARCH_ATTRIBUTE_TEXT_BYTES
from toolnexus_temporal.workflows.contract.models import AGENT_NAME_MAX, Budget
from toolnexus_temporal.workflows.contract.names import AGENT_REQUEST_KIND

LONG_KIND = "approval-" + "k" * 3000


async def odd_approval(ctx: ToolContext) -> Any:
    """Suspends with a very long kind and prompt."""
    if ctx.answer is None:
        return pending(kind=LONG_KIND, prompt="é" * 5000)
    return "approved"


async def test_a_request_with_a_huge_kind_parks_and_is_answered(make_runtime, client) -> None:
    reg = Registry(
        [AgentDef(name="ops", tools=["odd_approval"])],
        tools=[define_tool(odd_approval, input_schema={"type": "object", "properties": {}})],
    )
    llm = ScriptedLLM({"stub-model": [tool_calls(("odd_approval", {})), text("done after")]})
    async with make_runtime(reg, llm.transport()) as rt:
        h = await spawn(rt, rt.root, "ops")
        r = await rt.run_turn(h, "go")
        assert r.status == "pending" and r.pending is not None
        assert r.pending.kind == LONG_KIND  # the Request itself is whole
        wf = client.get_workflow_handle(rt.workflow_id(h.id))
        desc = await wf.describe()
        assert desc.status == WorkflowExecutionStatus.RUNNING
        kind = desc.typed_search_attributes.get(AGENT_REQUEST_KIND)
        assert kind is not None and len(json.dumps(kind)) <= SEARCH_ATTRIBUTE_TEXT_BYTES
        assert kind.startswith("approval-k") and kind.endswith("…")
        await rt.resume(Answer(id=r.pending.id, ok=True))
        r = await rt.wait(h)
        assert (r.status, r.text) == ("done", "done after"), r


async def test_a_spawn_past_the_workflow_id_limit_is_refused_and_the_parent_works(
    make_runtime,
) -> None:
    name = "n" * AGENT_NAME_MAX
    deep = Budget(max_depth=20)
    reg = Registry([AgentDef(name=name, team=[name], model="m", budget=deep)])
    llm = ScriptedLLM({"m": [text("fine")]}, repeat_last=True)
    async with make_runtime(reg, llm.transport(), budget=deep) as rt:
        parent: Handle = rt.root
        refused: SpawnError | None = None
        for _ in range(12):  # each level adds ~103 bytes; Temporal's limit is 1,000
            child = await rt.spawn(parent, name)
            if isinstance(child, SpawnError):
                refused = child
                break
            parent = child
        assert refused is not None and "over Temporal's 1000" in refused.error, refused
        assert parent is not rt.root
        assert (await rt.run_turn(parent, "still there?")).text == "fine"
        assert isinstance(await rt.spawn(rt.root, name), Handle)  # the root spawns on
        assert len((await rt.inspect(rt.root)).children) == 2
