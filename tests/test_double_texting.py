"""Talking to a live agent (issue 34 items 1 and 2): a message that reaches a busy handle is
kept and answered by the turn that holds it, under each double-texting policy.

The model is a slow scripted LLM behind ``httpx.MockTransport``: every call takes
``CALL_S`` seconds and answers ``re: <the turn's user message>``; the second message comes
``0.5 s`` into the first call.
"""

from __future__ import annotations

import asyncio
import json
from typing import Any

import httpx
import pytest

from tests.cli_support import Cli
from tests.helpers import eventually, spawn, split_loop
from tests.ticking import guarded
from toolnexus_temporal.activities.registry import Registry
from toolnexus_temporal.activities.tools import define_tool
from toolnexus_temporal.client.errors import AgentBusy, InvalidPolicyError
from toolnexus_temporal.client.testing import ScriptedLLM, text, tool_calls
from toolnexus_temporal.workflows.agent import AgentWorkflow
from toolnexus_temporal.workflows.contract.models import AgentDef, Answer
from toolnexus_temporal.workflows.contract.state import HandleState

CALL_S = 2.0
"""How long each LLM call takes, seconds."""


class SlowLLM:
    """Each call sleeps ``delay_s`` then answers ``re: <last user message>``; the user message
    ``use tool`` gets a ``slow_tool`` call first. Counts calls, cancelled calls,
    and keeps each call's user message in order."""

    def __init__(self, delay_s: float = CALL_S) -> None:
        self.delay_s = delay_s
        self.prompts: list[str] = []
        self.cancelled = 0
        self.started = asyncio.Event()

    def transport(self) -> httpx.MockTransport:
        return httpx.MockTransport(self.handle)

    async def handle(self, request: httpx.Request) -> httpx.Response:
        body: dict[str, Any] = json.loads(request.content)
        messages = body["messages"]
        last = messages[-1]
        if last["role"] == "tool":  # the tool's result: answer at once
            return httpx.Response(200, json=text(f"tool said {last['content']}"))
        user = last["content"]
        self.prompts.append(user)
        self.started.set()
        try:
            await asyncio.sleep(self.delay_s)
        except asyncio.CancelledError:
            self.cancelled += 1
            raise
        if user == "use tool":
            return httpx.Response(200, json=tool_calls(("slow_tool", {})))
        return httpx.Response(200, json=text(f"re: {user}"))


def registry(policy: str = "enqueue", tool_started: asyncio.Event | None = None) -> Registry:
    """One agent ``w`` with ``double_texting=policy`` and a tool that runs 30 s."""
    tool_cancelled: list[bool] = []

    async def slow_tool() -> str:
        if tool_started is not None:
            tool_started.set()
        try:
            await asyncio.sleep(30)
        except asyncio.CancelledError:
            tool_cancelled.append(True)
            raise
        return "slow"

    tool = define_tool(slow_tool, name="slow_tool", description="takes 30 s")
    reg = Registry([AgentDef(name="w", tools=["slow_tool"], double_texting=policy)], tools=[tool])
    reg.tool_cancelled = tool_cancelled  # type: ignore[attr-defined]
    return reg


async def second_message_mid_call(
    rt: Any, h: Any, llm: SlowLLM, policy: str | None
) -> tuple[Any, Any]:
    """Send ``first`` (a 2 s call), then ``second`` 0.5 s into it; both callers' results."""
    first = asyncio.create_task(rt.run_turn(h, "first"))
    await asyncio.wait_for(llm.started.wait(), 30)
    await asyncio.sleep(0.5)
    second = asyncio.create_task(rt.run_turn(h, "second", policy=policy))
    results = await asyncio.wait_for(asyncio.gather(first, second, return_exceptions=True), 60)
    return results[0], results[1]


async def test_enqueue_answers_the_second_message_in_the_next_turn(make_runtime) -> None:
    """enqueue (the default): the first caller gets the first turn's answer, the second the
    next turn's, which saw "second" (never the first turn's result); two LLM calls, in
    order."""
    llm = SlowLLM()
    async with make_runtime(registry(), llm.transport()) as rt:
        h = await spawn(rt, rt.root, "w")
        r1, r2 = await second_message_mid_call(rt, h, llm, None)
        assert r1.text == "re: first"
        assert r2.text == "re: second"
        assert llm.prompts == ["first", "second"]
        trace = [e.line for e in await rt.trace(h)]
        assert any("message #2 via run_turn kept (enqueue: a turn is running)" in t for t in trace)


async def test_enqueue_several_messages_one_turn_in_order(make_runtime) -> None:
    """Three messages while a turn runs: one turn after it holds all three, in arrival order;
    each caller gets that turn's result."""
    llm = SlowLLM()
    async with make_runtime(registry(), llm.transport()) as rt:
        h = await spawn(rt, rt.root, "w")
        first = asyncio.create_task(rt.run_turn(h, "first"))
        await asyncio.wait_for(llm.started.wait(), 30)
        later = []
        for n, word in enumerate(("a", "b", "c"), start=1):
            later.append(asyncio.create_task(rt.run_turn(h, word)))
            await eventually(lambda n=n: waiting(rt, h, n))
        results = await asyncio.wait_for(asyncio.gather(first, *later), 60)
        assert results[0].text == "re: first"
        assert [r.text for r in results[1:]] == ["re: a\n\nb\n\nc"] * 3
        assert llm.prompts == ["first", "a\n\nb\n\nc"]


async def waiting(rt: Any, h: Any, n: int) -> bool:
    """``n`` messages wait on ``h``."""
    state: HandleState = await rt._rpc.query(h.id, AgentWorkflow.state)
    return len(state.intake.wakes) >= n


async def test_reject_refuses_with_agent_busy_and_changes_nothing(make_runtime) -> None:
    """reject: the second caller gets AgentBusy (the update's validator: nothing reaches
    history), the first its own answer; one LLM call; the handle as it was."""
    llm = SlowLLM()
    async with make_runtime(registry(), llm.transport()) as rt:
        h = await spawn(rt, rt.root, "w")
        r1, r2 = await second_message_mid_call(rt, h, llm, "reject")
        assert r1.text == "re: first"
        assert isinstance(r2, AgentBusy), r2
        assert "busy (a turn is running)" in r2.reason and r2.verb == "turn"
        assert llm.prompts == ["first"]
        state: HandleState = await rt._rpc.query(h.id, AgentWorkflow.state)
        assert state.intake.wakes == [] and state.intake.wake_seq == 1
        # an idle handle is not busy: reject does not refuse
        assert (await rt.run_turn(h, "third", policy="reject")).text == "re: third"


async def test_interrupt_stops_the_call_and_one_turn_holds_both(make_runtime) -> None:
    """interrupt: the 2 s call is cancelled 0.5 s in; one turn holds "first" then "second";
    both callers get that turn's answer (the first is not told "interrupted": its message
    went on); two calls started, one cancelled."""
    llm = SlowLLM()
    async with make_runtime(registry(), llm.transport()) as rt:
        h = await spawn(rt, rt.root, "w")
        r1, r2 = await second_message_mid_call(rt, h, llm, "interrupt")
        assert r1.text == r2.text == "re: first\n\nsecond"
        assert llm.prompts == ["first", "first\n\nsecond"]
        assert llm.cancelled == 1
        trace = [e.line for e in await rt.trace(h)]
        assert any("interrupt: the turn in flight stops" in t for t in trace)
        assert any("running→idle (interrupted)" in t for t in trace)


async def test_interrupt_policy_hitting_a_running_tool(make_runtime) -> None:
    """interrupt while a tool runs: the tool's activity is cancelled (it acknowledges), the
    turn rolls back, and one turn holds the first message and the new one."""
    llm = SlowLLM(delay_s=0.1)
    tool_started = asyncio.Event()
    reg = registry("interrupt", tool_started)
    async with make_runtime(reg, llm.transport()) as rt:
        h = await spawn(rt, rt.root, "w")
        first = asyncio.create_task(rt.run_turn(h, "use tool"))
        await asyncio.wait_for(tool_started.wait(), 30)
        second = await asyncio.wait_for(rt.run_turn(h, "never mind"), 60)
        assert second.text == "re: use tool\n\nnever mind"
        assert (await asyncio.wait_for(first, 30)).text == second.text
        assert reg.tool_cancelled == [True]  # type: ignore[attr-defined]
        assert llm.prompts[:2] == ["use tool", "use tool\n\nnever mind"]
        trace = [e.line for e in await rt.trace(h)]
        assert any("tool slow_tool (c1) stopped (interrupt)" in t for t in trace)


async def test_debounce_five_messages_start_one_turn(make_runtime) -> None:
    """debounce:1500 on an idle handle: five messages within the window start one turn that
    holds them all, in order; every caller gets its answer; one LLM call."""
    llm = SlowLLM(delay_s=0.1)
    async with make_runtime(registry("debounce:1500"), llm.transport()) as rt:
        h = await spawn(rt, rt.root, "w")
        callers = []
        for k in range(5):
            callers.append(asyncio.create_task(rt.run_turn(h, f"m{k}")))
            await eventually(lambda n=k + 1: waiting(rt, h, n))
        results = await asyncio.wait_for(asyncio.gather(*callers), 60)
        want = "re: " + "\n\n".join(f"m{k}" for k in range(5))
        assert [r.text for r in results] == [want] * 5
        assert llm.prompts == ["\n\n".join(f"m{k}" for k in range(5))]
        trace = [e.line for e in await rt.trace(h)]
        assert any("one turn holds message(s) #1, #2, #3, #4, #5" in t for t in trace)


async def test_debounce_mid_call_waits_for_the_window_and_the_turn(make_runtime) -> None:
    """debounce:300 0.5 s into a 2 s call: the message waits for the turn in flight (its
    window is over by then) and the next turn answers it."""
    llm = SlowLLM()
    async with make_runtime(registry(), llm.transport()) as rt:
        h = await spawn(rt, rt.root, "w")
        r1, r2 = await second_message_mid_call(rt, h, llm, "debounce:300")
        assert (r1.text, r2.text) == ("re: first", "re: second")
        assert llm.prompts == ["first", "second"]


async def test_a_bad_policy_is_refused_in_one_line(make_runtime, client) -> None:
    """A bad policy: InvalidPolicyError from Python before anything is sent; a bad
    ``policy`` in the wake signal's JSON is rejected loudly (trace, last_error); a bad
    ``double_texting`` on an AgentDef is refused at definition. The agent is as it was."""
    llm = SlowLLM(delay_s=0.01)
    async with make_runtime(registry(), llm.transport()) as rt:
        h = await spawn(rt, rt.root, "w")
        with pytest.raises(InvalidPolicyError) as err:
            await rt.run_turn(h, "x", policy="later")
        assert "\n" not in str(err.value) and "unknown double-texting policy 'later'" in str(
            err.value
        )
        with pytest.raises(InvalidPolicyError):
            await rt.wake(h, "x", policy="debounce:0")
        wf = client.get_workflow_handle(rt.workflow_id(h.id))
        await wf.signal("wake", {"prompt": "x", "policy": "sometimes"})

        async def rejected() -> bool:
            view = await rt.inspect(h)
            return "sometimes" in (view.last_error or "")

        await eventually(rejected)
        view = await rt.inspect(h)
        assert view.state == "idle" and view.last_result is None and llm.prompts == []
        with pytest.raises(ValueError, match="unknown double-texting policy"):
            AgentDef(name="x", double_texting="drop")


async def test_wake_signal_json_names_its_policy(make_runtime, client) -> None:
    """The ``wake`` signal's JSON carries ``policy``: ``reject`` on a busy handle is refused
    loudly (AgentBusy in last_error); ``enqueue`` keeps the message for the next turn."""
    llm = SlowLLM()
    async with make_runtime(registry(), llm.transport()) as rt:
        h = await spawn(rt, rt.root, "w")
        first = asyncio.create_task(rt.run_turn(h, "first"))
        await asyncio.wait_for(llm.started.wait(), 30)
        wf = client.get_workflow_handle(rt.workflow_id(h.id))
        await wf.signal("wake", {"prompt": "no", "policy": "reject"})
        await wf.signal("wake", {"prompt": "yes", "policy": "enqueue"})
        assert (await asyncio.wait_for(first, 30)).text == "re: first"

        async def answered() -> bool:
            view = await rt.inspect(h)
            return view.state == "idle" and llm.prompts == ["first", "yes"]

        await eventually(answered, tries=300)
        view = await rt.inspect(h)
        assert "reject policy refused" in (view.last_error or "")
        assert view.last_result is not None and view.last_result.text == "re: yes"


async def test_tnx_wake_policy(make_runtime, env) -> None:
    """``tnx wake --policy``: a bad one is one line on stderr and exit 2 (nothing sent, the
    agent as it was); ``reject`` on a busy handle exits 1 with AgentBusy; ``enqueue`` keeps
    the message for the next turn."""
    llm = SlowLLM()
    async with make_runtime(registry(), llm.transport()) as rt:
        tnx = Cli(env, rt)
        h = await spawn(rt, rt.root, "w")
        bad = await tnx("wake", h.id, "x", "--policy", "sometimes")
        assert bad.code == 2, bad
        assert bad.err.strip().count("\n") == 0 and "unknown double-texting policy" in bad.err
        view = await rt.inspect(h)
        assert view.state == "idle" and view.last_result is None and llm.prompts == []
        first = asyncio.create_task(rt.run_turn(h, "first"))
        await asyncio.wait_for(llm.started.wait(), 30)
        busy = await tnx("wake", h.id, "no", "--policy", "reject")
        assert busy.code == 1 and "reject policy refused" in busy.err, busy
        await tnx.ok("wake", h.id, "yes", "--policy", "enqueue")
        assert (await asyncio.wait_for(first, 30)).text == "re: first"

        async def answered() -> bool:
            view = await rt.inspect(h)
            return view.last_result is not None and view.last_result.text == "re: yes"

        await eventually(answered, tries=300)
        assert llm.prompts == ["first", "yes"]
        state: HandleState = await rt._rpc.query(h.id, AgentWorkflow.state)
        assert state.intake.turn_wakes == [] and state.intake.drained_seq == 2


@pytest.mark.parametrize("policy", ["enqueue", "interrupt"])
async def test_a_message_to_a_parked_handle(make_runtime, policy: str) -> None:
    """A parked handle keeps a message (seed 001: wake on a suspended handle buffers): under
    enqueue it stays suspended until the Answer, the Answer's turn settles first, then the
    next turn holds the message and its sender gets that turn's result. Under interrupt the
    parked turn is stopped (its Request cancelled) and one turn holds "go" and the message."""
    park = tool_calls(("guarded", {}))
    llm = ScriptedLLM({"stub-model": [park, text("approved"), text("later done")]})
    reg = Registry(
        [AgentDef(name="w", tools=["guarded"], double_texting=policy)],
        tools=[define_tool(guarded)],
    )
    async with make_runtime(reg, llm.transport()) as rt:
        h = await spawn(rt, rt.root, "w")
        parked = await rt.run_turn(h, "go")
        assert parked.status == "pending" and parked.pending is not None
        later = asyncio.create_task(rt.run_turn(h, "later"))
        if policy == "enqueue":
            await eventually(lambda: waiting(rt, h, 1))
            assert (await rt.inspect(h)).state == "suspended" and not later.done()
            await rt.resume(Answer(id=parked.pending.id, ok=True))
            assert (await asyncio.wait_for(later, 30)).text == "later done"
            users = [r["messages"][-1]["content"] for r in llm.requests]
            assert users[-1] == "later"
        else:
            result = await asyncio.wait_for(later, 30)
            assert result.text == "approved"  # the next scripted reply: one turn, both messages
            users = [m["content"] for m in llm.requests[-1]["messages"] if m["role"] == "user"]
            assert users[-1] == "go\n\nlater"


@pytest.mark.parametrize("policy", ["enqueue", "interrupt", "debounce:20"])
@split_loop("iterations", 8, 40)
async def test_a_message_racing_the_turns_end_is_answered_by_its_own_turn(
    make_runtime, policy: str, iterations: range
) -> None:
    """A second message sent right behind the first (a fast model: it lands before, during
    or right as the first turn settles): each sender gets a result whose turn saw its
    message, never an earlier turn's; nothing is lost."""
    llm = SlowLLM(delay_s=0.02)
    async with make_runtime(registry(), llm.transport()) as rt:
        h = await spawn(rt, rt.root, "w")
        for i in iterations:
            a = asyncio.create_task(rt.run_turn(h, f"a{i}"))
            await asyncio.sleep(0.01 * (i % 5))
            b = asyncio.create_task(rt.run_turn(h, f"b{i}", policy=policy))
            ra, rb = await asyncio.wait_for(asyncio.gather(a, b), 30)
            assert f"b{i}" in rb.text, (i, ra, rb)
            assert f"a{i}" in ra.text, (i, ra, rb)
            assert any(f"b{i}" in p for p in llm.prompts), (i, llm.prompts)
