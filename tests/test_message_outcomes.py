"""Each sender gets the result of the turn that saw its message (issue 34), also when its
``turn`` update was refused for a limit and the client sent the ``wake`` signal instead
(``client/fallback.py``: the message's id, read back with the ``message`` query), when an
``interrupt`` message ends a debounce window, and when waiting messages cross
continue-as-new.

The model answers ``re: <the turn's user message>`` after ``delay_s``, so a sender checks that
its own message is in its reply.
"""

from __future__ import annotations

import asyncio
import json
import time
from typing import Any

import httpx
from temporalio.client import Client

from tests.helpers import eventually, spawn
from tests.parking import continue_as_new_by_rejections
from toolnexus_temporal.activities.registry import Registry
from toolnexus_temporal.client.errors import AgentBusy
from toolnexus_temporal.client.testing import text
from toolnexus_temporal.workflows.contract.models import AgentDef, RuntimeOptions

POLICIES = ("enqueue", "interrupt", "reject", "debounce:50")
"""The storm's policies, message ``i`` takes ``POLICIES[i % 4]``."""


class EchoLLM:
    """Each call sleeps ``delay_s``, then answers ``re: <the user message>``."""

    def __init__(self, delay_s: float) -> None:
        self.delay_s = delay_s
        self.prompts: list[str] = []

    def transport(self) -> httpx.MockTransport:
        return httpx.MockTransport(self.handle)

    async def handle(self, request: httpx.Request) -> httpx.Response:
        user = json.loads(request.content)["messages"][-1]["content"]
        self.prompts.append(user)
        await asyncio.sleep(self.delay_s)
        return httpx.Response(200, json=text(f"re: {user}"))


def registry() -> Registry:
    return Registry([AgentDef(name="w")])


async def waiting(rt: Any, h: Any, n: int) -> bool:
    """``n`` messages wait for a turn."""
    return bool((await rt.inspect(h)).messages_waiting == n)


async def storm(rt: Any, h: Any, tag: str) -> list[Any]:
    """20 concurrent ``run_turn`` on one handle, the policies cycling; each caller's outcome
    (a result or the exception)."""
    calls = [
        rt.run_turn(h, f"{tag}m{i:02d}", policy=POLICIES[i % len(POLICIES)]) for i in range(20)
    ]
    return await asyncio.wait_for(asyncio.gather(*calls, return_exceptions=True), 120)


async def test_a_mixed_policy_storm_gives_each_sender_its_own_turn(make_runtime) -> None:
    """The breaker's reproduction, five rounds: past the handle's five held ``turn`` updates
    the callers go by the ``wake`` signal; every caller's reply is its own turn's (its
    message is in it), a ``reject`` caller gets ``AgentBusy`` or its own turn, nobody an
    earlier or a later turn's result (before the message records, an ``enqueue`` caller held
    by a 14-message turn got ``re: m06``, an ``interrupt`` one "the turn was interrupted"
    while its message went on)."""
    llm = EchoLLM(0.3)
    async with make_runtime(registry(), llm.transport()) as rt:
        h = await spawn(rt, rt.root, "w")
        for rnd in range(5):
            tag = f"r{rnd}"
            outcomes = await storm(rt, h, tag)
            for i, out in enumerate(outcomes):
                mine = f"{tag}m{i:02d}"
                policy = POLICIES[i % len(POLICIES)]
                if isinstance(out, AgentBusy):
                    assert policy == "reject", (mine, out)
                    assert not any(mine in p for p in llm.prompts), (mine, llm.prompts)
                    continue
                assert not isinstance(out, BaseException), (mine, policy, out)
                assert out.status == "done", (mine, policy, out)
                assert mine in out.text, (mine, policy, out.text)
                # its own turn: the reply to the one completed prompt holding its message
                holding = [p for p in llm.prompts if mine in p]
                assert f"re: {holding[-1]}" == out.text, (mine, holding, out.text)
        trace = [e.line for e in await rt.trace(h)]
        assert any("via signal" in line for line in trace), "no caller used the signal"
        await rt.close(h)


async def test_an_interrupt_message_ends_a_debounce_window(make_runtime) -> None:
    """A message waiting in an hour-long debounce window: inspect shows it waiting and when
    the window ends (the handle is idle); an ``interrupt`` message ends the window: one turn
    holds both now. An ``enqueue`` message joins the window instead."""
    llm = EchoLLM(0.05)
    async with make_runtime(registry(), llm.transport()) as rt:
        h = await spawn(rt, rt.root, "w")
        before = time.time() * 1000
        await rt.wake(h, "a", policy="debounce:3600000")
        await rt.wake(h, "joins", policy="enqueue")
        view = await rt.inspect(h)
        assert view.state == "idle" and view.messages_waiting == 2
        assert view.window_ends_ms is not None
        assert before + 3_590_000 < view.window_ends_ms < before + 3_610_000
        assert llm.prompts == []
        r = await asyncio.wait_for(rt.run_turn(h, "b", policy="interrupt"), 15)
        assert r.text == "re: a\n\njoins\n\nb", r
        view = await rt.inspect(h)
        assert view.messages_waiting == 0 and view.window_ends_ms is None
        trace = [e.line for e in await rt.trace(h)]
        assert any("the debounce window ends early" in line for line in trace)
        # a new window after the early end gets its own timer (not the old one's hour)
        r = await asyncio.wait_for(rt.run_turn(h, "c", policy="debounce:200"), 15)
        assert r.text == "re: c"
        await rt.close(h)


async def test_messages_in_a_debounce_window_cross_continue_as_new(
    make_runtime, client: Client
) -> None:
    """Messages waiting in a debounce window when the run continues as new (an update, a
    named signal): the next run keeps them and its timer ends the window; each sender gets
    the turn that holds them all."""
    llm = EchoLLM(0.05)
    options = RuntimeOptions(continue_as_new_events=100)
    async with make_runtime(registry(), llm.transport(), options=options) as rt:
        h = await spawn(rt, rt.root, "w")
        wf = client.get_workflow_handle(rt.workflow_id(h.id))
        first = (await wf.describe()).run_id
        a = asyncio.create_task(rt.run_turn(h, "d1", policy="debounce:12000"))
        await eventually(lambda: waiting(rt, h, 1), what="d1 waits")
        await wf.signal("wake", {"prompt": "d2", "message_id": "sig-d2"})
        await continue_as_new_by_rejections(wf)
        assert (await wf.describe()).run_id != first
        assert llm.prompts == [] and not a.done()
        assert (await rt.inspect(h)).messages_waiting == 2
        ra = await asyncio.wait_for(a, 30)
        assert ra.text == "re: d1\n\nd2"
        out = await wf.query("message", "sig-d2")
        assert out["status"] == "answered" and out["result"]["text"] == "re: d1\n\nd2"
        assert llm.prompts == ["d1\n\nd2"]
        await rt.close(h)


async def test_messages_kept_while_paused_cross_continue_as_new(
    make_runtime, client: Client
) -> None:
    """Messages kept while paused (an update, a named signal) cross continue-as-new; unpause
    starts one turn that holds them, and each sender gets it."""
    llm = EchoLLM(0.05)
    options = RuntimeOptions(continue_as_new_events=100)
    async with make_runtime(registry(), llm.transport(), options=options) as rt:
        h = await spawn(rt, rt.root, "w")
        await rt.pause(h)
        wf = client.get_workflow_handle(rt.workflow_id(h.id))
        first = (await wf.describe()).run_id
        a = asyncio.create_task(rt.run_turn(h, "p1"))
        await eventually(lambda: waiting(rt, h, 1), what="p1 waits")
        await wf.signal("wake", {"prompt": "p2", "message_id": "sig-p2"})
        await continue_as_new_by_rejections(wf)
        assert (await wf.describe()).run_id != first
        assert (await rt.inspect(h)).messages_waiting == 2
        assert llm.prompts == [] and not a.done()
        await rt.unpause(h)
        ra = await asyncio.wait_for(a, 30)
        assert ra.text == "re: p1\n\np2"
        out = await wf.query("message", "sig-p2")
        assert out["status"] == "answered" and out["result"]["text"] == "re: p1\n\np2"
        await rt.close(h)
