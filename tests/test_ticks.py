"""Ticks (issue 25 item 1): a handle's tick schedule is a durable timer in its own workflow.

Against the dev server, whose durable timers fire at about 1 s granularity: schedules of one
or two seconds. The turn input the scripted LLM sees is the contract's rendering (CONTRACT
§4): ``[from=clock channel=timer] tick (xN coalesced)``."""

from __future__ import annotations

import asyncio
import itertools
import time
import uuid
from typing import Any

import pytest
from temporalio.client import Client, WorkflowFailureError, WorkflowUpdateFailedError
from temporalio.exceptions import ApplicationError

from tests.helpers import eventually, replay_every_run
from tests.ticking import TICK_LINE, Recorder, guarded, inbox_of, tick_block, ticker_registry
from toolnexus_temporal.activities import LlmConfig, Registry, define_tool
from toolnexus_temporal.client import (
    AgentDef,
    AgentRuntime,
    Answer,
    InboxItem,
    RuntimeOptions,
    TickSpec,
)
from toolnexus_temporal.client.errors import VerbRejectedError
from toolnexus_temporal.client.testing import ScriptedLLM, text, tool_calls
from toolnexus_temporal.worker import create_worker
from toolnexus_temporal.workflows.agent import AgentWorkflow
from toolnexus_temporal.workflows.contract.names import (
    AGENT_NEXT_TICK,
    LLM_CALL_ACTIVITY,
    NOT_AN_AGENT_START,
    WORKFLOW_TYPE,
)
from toolnexus_temporal.workflows.contract.state import HandleState
from toolnexus_temporal.workflows.rules.render import UNTRUSTED_HEADER


async def state_of(rt: AgentRuntime, h: Any) -> HandleState:
    """The handle's state model (the ``state`` query)."""
    wf = rt.client.get_workflow_handle(rt.workflow_id(h.id))
    return await wf.query(AgentWorkflow.state)


async def next_tick_attribute(client: Client, rt: AgentRuntime, hid: str) -> Any:
    desc = await client.get_workflow_handle(rt.workflow_id(hid)).describe()
    return desc.typed_search_attributes.get(AGENT_NEXT_TICK)


async def test_definition_tick_wakes_an_idle_handle(make_runtime: Any, client: Client) -> None:
    """AgentDef.tick: each tick that finds the handle idle wakes it with the prompt, and the
    turn's input ends with the contract's tick line; the next fire time is in the view and
    the AgentNextTick search attribute."""
    llm = Recorder()
    spec = TickSpec(every_ms=1_000, prompt="look at the queue")
    async with make_runtime(ticker_registry(spec), llm.transport()) as rt:
        h = await rt.spawn(rt.root, "ticker")
        await eventually(lambda: len(llm.prompts) >= 2, within_s=15, what="two tick turns")
        assert llm.prompts[0] == f"look at the queue\n\n{tick_block(1)}"
        view = await rt.inspect(h)
        assert view.tick == spec and view.next_tick_ms is not None
        shown = await next_tick_attribute(client, rt, h.id)
        assert shown is not None
        await rt.close(h)
        closed = await rt.inspect(h)
        assert closed.next_tick_ms is None
        assert await next_tick_attribute(client, rt, h.id) is None
        await replay_every_run(client, rt, h.id)


async def test_ticks_coalesce_while_running_and_never_fill_the_inbox(make_runtime: Any) -> None:
    """Ticks that fire while a turn runs become ONE inbox item whose count grows; posts still
    fill the inbox up to its cap; the next tick after the turn wakes the handle with one
    line ``tick (xN coalesced)`` counting them all."""
    llm = Recorder()
    async with make_runtime(ticker_registry(), llm.transport()) as rt:
        h = await rt.spawn(rt.root, "ticker")
        await rt.wake(h, "BLOCK until released")
        await llm.blocked.wait()
        await rt.schedule(h, every=1, prompt="tick turn")

        async def ticks() -> int:
            items = await inbox_of(rt, h)
            return sum(i.count or 1 for i in items if i.channel == "timer")

        await eventually(lambda: _ge(ticks(), 3), within_s=15, what="three ticks coalesced")
        for k in range(8):  # the default inbox cap: the tick item takes no place
            result = await rt.post(h, InboxItem(from_="ops", channel="chat", text=f"post {k}"))
            assert result.ok, result.error
        full = await rt.post(h, "one too many")
        assert not full.ok and full.error == "inbox full (8)"
        items = await inbox_of(rt, h)
        assert [i.channel for i in items].count("timer") == 1
        llm.release()
        await eventually(lambda: len(llm.prompts) >= 2, within_s=15, what="the tick turn")
        tick_turn = llm.prompts[1]
        assert tick_turn.startswith("tick turn\n\n[inbox: 9 item(s)")
        line = tick_turn.splitlines()[3]
        assert line.startswith("1. [from=clock channel=timer] tick (x") and "coalesced" in line
        n = int(line.split("(x")[1].split()[0])
        assert n >= 4
        assert "9. [from=ops channel=chat] post 7" in tick_turn
        view = await rt.inspect(h)
        await rt.close(h)
        assert view.tick is not None and view.tick.every_ms == 1_000


async def _ge(value: Any, n: int) -> bool:
    return (await value) >= n


async def test_inbox_only_ticks_schedule_and_unschedule(make_runtime: Any, client: Client) -> None:
    """A ``wake: false`` schedule only counts ticks into the inbox; unschedule removes the
    next fire time (view and search attribute); a cron schedule fires on its minute; bad
    schedules are refused and change nothing; the root takes none."""
    llm = Recorder()
    async with make_runtime(ticker_registry(), llm.transport()) as rt:
        h = await rt.spawn(rt.root, "ticker")
        await rt.schedule(h, every=1, wake=False)
        assert h.tick == TickSpec(every_ms=1_000, wake=False) and h.next_tick_ms is not None

        async def counted() -> int:
            return sum(i.count or 1 for i in await inbox_of(rt, h))

        await eventually(lambda: _ge(counted(), 2), within_s=15, what="two inbox-only ticks")
        assert (await rt.inspect(h)).turns_total == 0 and llm.prompts == []
        assert len(await inbox_of(rt, h)) == 1
        await rt.unschedule(h)
        assert h.tick is None and h.next_tick_ms is None
        assert await next_tick_attribute(client, rt, h.id) is None
        before = await counted()
        await asyncio.sleep(1.5)
        assert await counted() == before  # no tick after unschedule
        # the coalesced ticks go with the next wake
        await rt.run_turn(h, "now")
        assert llm.prompts[-1] == f"now\n\n{tick_block(before)}"

        await rt.schedule(h, cron="*/5 * * * *", prompt="every five minutes")
        assert h.next_tick_ms is not None and h.next_tick_ms % 300_000 == 0
        with pytest.raises(ValueError, match="cron expression"):
            await rt.schedule(h, cron="61 * * * *")
        with pytest.raises(ValueError, match="exactly one"):
            await rt.schedule(h, every=5, cron="* * * * *")
        with pytest.raises(ValueError):
            await rt.schedule(h, every=0.2)
        # the same bad input sent raw: refused, the schedule in force unchanged
        wf = client.get_workflow_handle(rt.workflow_id(h.id))
        with pytest.raises(WorkflowUpdateFailedError) as refused:
            await wf.execute_update("schedule", {"tick": {"cron": "bogus"}})
        assert "cron" in str(refused.value.cause)
        after = await rt.inspect(h)
        assert after.tick is not None and after.tick.cron == "*/5 * * * *"
        with pytest.raises(VerbRejectedError, match="root"):
            await rt.schedule(rt.root, every=5)
        await rt.close(h)
        with pytest.raises(VerbRejectedError):
            await rt.schedule(h, every=5)


async def test_an_outage_yields_one_catch_up_tick(client: Client) -> None:
    """With the worker down for several fire times, the timer fires once: one wake whose
    tick line counts every fire time missed, never a flood of turns."""
    llm = Recorder()
    scope = f"t-{uuid.uuid4().hex[:10]}"
    queue = f"tq-{scope}"
    reg = ticker_registry(TickSpec(every_ms=1_000, prompt="catch up"))

    def worker() -> Any:
        return create_worker(
            client,
            registry=reg,
            llm=LlmConfig(base_url="http://mock.local/v1", model="stub-model"),
            task_queue=queue,
            transport=llm.transport(),
        )

    async with worker() as w, w:
        rt = await AgentRuntime(client, task_queue=queue, scope=scope).start()
        h = await rt.spawn(rt.root, "ticker")
        await eventually(lambda: len(llm.prompts) >= 1, within_s=15, what="a first tick")
    down_from = len(llm.prompts)
    await asyncio.sleep(6)  # the worker is down for ~6 fire times
    async with worker() as w, w:
        await eventually(lambda: len(llm.prompts) > down_from, within_s=20, what="catch-up")
        await asyncio.sleep(0.5)
        catch_up = llm.prompts[down_from]
        n = int(catch_up.split("tick (x")[1].split()[0])
        assert n >= 4, catch_up
        view = await rt.inspect(h)
        # one turn for the outage, then one per tick again (not one per missed fire time)
        assert view.turns_total <= down_from + 3
        assert view.next_tick_ms is not None
        await rt.close(h)
        await replay_every_run(client, rt, h.id)


async def llm_call_times(client: Client, rt: AgentRuntime, hid: str) -> list[int]:
    """The workflow time (ms since the epoch) at which each LLM call of the handle's current
    run was scheduled: the time of the workflow task that scheduled it (its
    ``WorkflowTaskStarted`` event, what ``workflow.now()`` read there)."""
    history = await client.get_workflow_handle(rt.workflow_id(hid)).fetch_history()
    by_id = {e.event_id: e for e in history.events}
    times = []
    for e in history.events:
        if not e.HasField("activity_task_scheduled_event_attributes"):
            continue
        a = e.activity_task_scheduled_event_attributes
        if a.activity_type.name != LLM_CALL_ACTIVITY:
            continue
        started = by_id[a.workflow_task_completed_event_id - 1]
        assert started.HasField("workflow_task_started_event_attributes")
        times.append(started.event_time.ToMilliseconds())
    return times


async def test_an_outage_ending_just_before_a_fire_time_costs_one_turn(client: Client) -> None:
    """Issue 36 item 3: the worker down over several fire times and back shortly before the
    next one: ONE catch-up turn; the tick that fires just after it only coalesces (no two
    tick turns closer than half the interval, in workflow time) and the next tick's turn
    takes it; the fire times stay on the grid ``first + k * every``, each counted once.

    Whether the worker came back before the fire time is read from the history (the catch-up
    turn's workflow time); an attempt that came back too late (a loaded machine) is tried
    again."""
    every = 6_000
    llm = Recorder()
    scope = f"t-{uuid.uuid4().hex[:10]}"
    queue = f"tq-{scope}"
    reg = ticker_registry(TickSpec(every_ms=every, prompt="catch up"))

    def worker() -> Any:
        return create_worker(
            client,
            registry=reg,
            llm=LlmConfig(base_url="http://mock.local/v1", model="stub-model"),
            task_queue=queue,
            transport=llm.transport(),
        )

    async with worker() as w, w:
        rt = await AgentRuntime(client, task_queue=queue, scope=scope).start()
        h = await rt.spawn(rt.root, "ticker")
        first_ms = (await rt.inspect(h)).next_tick_ms
        assert first_ms is not None
        await eventually(lambda: len(llm.prompts) >= 1, within_s=20, what="a first tick")
        next_ms = (await state_of(rt, h)).ticks.next_ms
    down_from = 0
    for _attempt in range(3):
        assert next_ms is not None
        down_from = len(llm.prompts)
        wanted = down_from + 2
        # the worker is back 2.5 s before the fire time three intervals on
        back_at = next_ms + 3 * every - 2_500
        await asyncio.sleep(max(0.0, back_at / 1000 - time.time()))
        async with worker() as w, w:
            await eventually(lambda: len(llm.prompts) >= wanted, within_s=30,  # noqa: B023
                             what="the catch-up turn and the next tick's")  # fmt: skip
            state = await state_of(rt, h)
            times = await llm_call_times(client, rt, h.id)
            next_ms = state.ticks.next_ms
            caught_up = times[down_from]
            grid_after = first_ms + ((caught_up - first_ms) // every + 1) * every
            if grid_after - caught_up < every // 2:
                await rt.close(h)
                break  # back shortly before a fire time: the case under test
    else:
        pytest.fail("the worker never came back shortly before a fire time")
    after = llm.prompts[down_from:]
    counts = [int(p.split("tick (x")[1].split()[0]) for p in after]
    assert counts[0] >= 3, after  # the catch-up turn counts every fire time missed
    assert counts[1] == 2, after  # the tick just after it coalesced into the next turn
    gaps = [b - a for a, b in itertools.pairwise(times)]
    assert min(gaps) >= every // 2, gaps
    t = state.ticks
    assert t.next_ms is not None
    assert t.next_ms == first_ms + t.fired * every  # on the grid, each fire time once
    pending = sum(i.count or 1 for i in state.intake.items if i.channel == "timer")
    assert t.woke + pending == t.fired
    await replay_every_run(client, rt, h.id)


async def test_ticks_continue_across_continue_as_new(make_runtime: Any, client: Client) -> None:
    """The schedule and its next fire time travel with continue-as-new: ticks go on in the
    next runs, every one counted (woken or coalesced), each fire time once and on the
    schedule's grid (issue 36 item 3)."""
    llm = Recorder()
    options = RuntimeOptions(continue_as_new_events=100)
    async with make_runtime(
        ticker_registry(TickSpec(every_ms=1_000)), llm.transport(), options=options
    ) as rt:
        h = await rt.spawn(rt.root, "ticker")
        wf = client.get_workflow_handle(rt.workflow_id(h.id))
        start = (await state_of(rt, h)).ticks

        async def runs() -> int:
            n = 0
            async for _ in client.list_workflows(f'WorkflowId="{wf.id}"'):
                n += 1
            return n

        await eventually(lambda: _ge(runs(), 3), within_s=40, what="two continue-as-new")
        state = await state_of(rt, h)
        await rt.close(h)
        ticks = state.ticks
        assert ticks.spec == TickSpec(every_ms=1_000) and ticks.fired >= 3
        pending = sum(i.count or 1 for i in state.intake.items if i.channel == "timer")
        assert ticks.woke + pending == ticks.fired
        # exactly once and on the grid across the runs: one fire per second passed
        assert start.next_ms is not None and ticks.next_ms is not None
        assert ticks.next_ms - start.next_ms == (ticks.fired - start.fired) * 1_000
        await replay_every_run(client, rt, h.id)


async def test_a_start_from_outside_fails_at_once(make_runtime: Any, client: Client) -> None:
    """``temporal schedule create --type AgentWorkflow`` (or ``temporal workflow start``)
    starts the workflow with no usable input: the run fails at once, non-retryable, with a
    message that says how to schedule an agent instead."""
    async with make_runtime(ticker_registry(), Recorder().transport()) as rt:
        for args in ([], ["hello"], [{"state": "x"}], [{"schedule": 1}]):
            wf = await client.start_workflow(
                WORKFLOW_TYPE,
                args=args,
                id=f"outside-{uuid.uuid4().hex[:8]}",
                task_queue=rt.task_queue,
            )
            with pytest.raises(WorkflowFailureError) as failed:
                await asyncio.wait_for(wf.result(), 15)
            cause = failed.value.cause
            assert isinstance(cause, ApplicationError) and cause.type == NOT_AN_AGENT_START
            assert cause.non_retryable
            assert "AgentDef.tick" in cause.message and "tnx schedule" in cause.message


async def test_ticks_coalesce_while_parked(make_runtime: Any, client: Client) -> None:
    """Ticks that fire while the handle is parked on a Request start no turn and take no
    place in the inbox: they count into one item; once the Answer lets the parked turn
    finish, the next tick wakes the handle with one line counting them all."""
    reg = Registry(
        [AgentDef(name="ticker", description="d", tools=["guarded"])], tools=[define_tool(guarded)]
    )
    script = {"stub-model": [tool_calls(("guarded", {})), text("approved")]}
    llm = ScriptedLLM(script, repeat_last=True)
    async with make_runtime(reg, llm.transport()) as rt:
        h = await rt.spawn(rt.root, "ticker")
        parked = await rt.run_turn(h, "go")
        assert parked.status == "pending" and parked.pending is not None
        await rt.schedule(h, every=1, prompt="tick turn")

        async def ticks() -> int:
            items = await inbox_of(rt, h)
            return sum(i.count or 1 for i in items if i.channel == "timer")

        await eventually(lambda: _ge(ticks(), 3), within_s=15, what="three ticks while parked")
        view = await rt.inspect(h)
        assert view.state == "suspended" and llm.calls("stub-model") == 1
        assert len(await inbox_of(rt, h)) == 1
        await rt.resume(Answer(id=parked.pending.id, ok=True))
        await eventually(lambda: llm.calls("stub-model") >= 3, within_s=15, what="a tick turn")
        users = [m for m in llm.requests[2]["messages"] if m["role"] == "user"]
        tick_turn = users[-1]["content"]
        assert tick_turn.startswith("tick turn\n\n" + UNTRUSTED_HEADER.format(n=1))
        n = int(tick_turn.split("tick (x")[1].split()[0])
        assert n >= 4 and tick_turn.endswith(f"1. {TICK_LINE.format(n=n)}")
        await rt.close(h)
        await replay_every_run(client, rt, h.id)
