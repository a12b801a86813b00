"""The runtime's in-flight turn bookkeeping (client/turns.py): ``wait`` awaits the turn of this
runtime's last wake of a handle, given its ``Handle``, a copy or its id; a newer turn
supersedes an older one nobody waited for; and ``wait`` never raises on a handle whose
workflow ended under it."""

from __future__ import annotations

import asyncio

import pytest

from tests.helpers import eventually, spawn
from toolnexus_temporal import AgentDef, Registry, define_tool
from toolnexus_temporal.client.testing import ScriptedLLM, text, tool_calls


async def test_wait_after_run_turn_is_that_turns_result_not_an_older_wakes(make_runtime) -> None:
    llm = ScriptedLLM({"stub-model": [text("one"), text("two"), text("three"), text("four")]})
    async with make_runtime({"w": AgentDef(name="w")}, llm.transport()) as rt:
        h = await spawn(rt, rt.root, "w")
        for ref, (first, second) in ((h.id, ("one", "two")), (h, ("three", "four"))):
            await rt.wake(ref, "nobody waits for this one")

            async def idle() -> bool:
                view = await rt.inspect(h.id)
                return view.state == "idle" and view.last_result is not None

            await eventually(idle)
            assert (await rt.inspect(h.id)).last_result.text == first  # type: ignore[union-attr]
            assert (await rt.run_turn(ref, "again")).text == second
            # the last wake of this handle is run_turn's: wait returns its result at once
            assert (await asyncio.wait_for(rt.wait(ref), 10)).text == second


released = asyncio.Event()


async def hold() -> str:
    """Holds the turn until the test releases it."""
    await released.wait()
    return "held"


@pytest.mark.parametrize("by", ["id", "handle"])
async def test_wait_on_a_handle_terminated_mid_turn_returns_closed(
    make_runtime, client, by
) -> None:
    released.clear()
    reg = Registry([AgentDef(name="w", tools=["hold"])], tools=[define_tool(hold)])
    llm = ScriptedLLM({"stub-model": [tool_calls(("hold", {})), text("never")]})
    async with make_runtime(reg, llm.transport()) as rt:
        h = await spawn(rt, rt.root, "w")
        ref = h.id if by == "id" else h
        await rt.wake(ref, "go")

        async def in_tool() -> bool:
            return (await rt.inspect(h.id)).turns_total >= 1

        await eventually(in_tool)
        await client.get_workflow_handle(rt.workflow_id(h.id)).terminate(reason="operator")
        released.set()
        result = await asyncio.wait_for(rt.wait(ref), 30)  # wait never raises
        assert result.status == "closed" and result.is_error
