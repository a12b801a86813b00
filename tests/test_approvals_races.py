"""Issue 12, "Approvals and waits": races between parked children, Answers, waits and
close, each looped so a lost race shows (dev server, scripted LLM)."""

from __future__ import annotations

from typing import Any

import pytest

from toolnexus_temporal.activities import Registry
from toolnexus_temporal.client import AgentDef, Handle, VerbRejectedError
from toolnexus_temporal.client.testing import ScriptedLLM, text


async def spawn(rt: Any, parent: Any, name: str) -> Handle:
    h = await rt.spawn(parent, name)
    assert isinstance(h, Handle), h
    return h


# ---------------------------------------------------------------- item 4: wake after close


async def test_wake_of_a_just_closed_handle_raises_every_time(make_runtime) -> None:
    reg = Registry([AgentDef(name="worker")])
    llm = ScriptedLLM({"stub-model": [text("hi")]}, repeat_last=True)
    async with make_runtime(reg, llm.transport()) as rt:
        for i in range(12):
            h = await spawn(rt, rt.root, "worker")
            if i % 2:
                assert (await rt.run_turn(h, "go")).status == "done"
            await rt.close(h)
            with pytest.raises(VerbRejectedError, match="closed"):
                await rt.wake(h, "again")
            r = await rt.wait(h)  # never raises
            assert r.status in ("closed", "done"), r
            with pytest.raises(VerbRejectedError, match="closed"):
                await rt.run_turn(h.id, "again")
