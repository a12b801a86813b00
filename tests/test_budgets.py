"""Budgets and backpressure on a real dev server (CONTRACT §6, §9.3): carving, live
roll-up, each limit's named ``incomplete``, siblings on a shared pool, the concurrency and
turn gates, and no deadlock under an LLM cap of 1."""

from __future__ import annotations

import asyncio
import time
from typing import Any

import httpx

from tests.fixture_llm import FixtureLLM, load_fixture
from tests.helpers import spawn
from toolnexus_temporal.activities import Registry, define_tool
from toolnexus_temporal.client import AgentDef, Budget, Handle, RuntimeOptions, SpawnError
from toolnexus_temporal.client.testing import ScriptedLLM, text, tool_calls


def lookup(q: str = "") -> str:
    """returns data(<q>)"""
    return f"data({q})"


LOOKUP = define_tool(lookup)


def budget_of(spec: dict[str, Any] | None) -> Budget | None:
    if spec is None:
        return None
    names = {
        "maxTokens": "max_tokens",
        "maxChildren": "max_children",
        "maxTurns": "max_turns",
        "maxToolCalls": "max_tool_calls",
        "maxConcurrent": "max_concurrent",
        "maxWallMs": "max_wall_ms",
    }
    return Budget(**{names[k]: v for k, v in spec.items()})


def fixture_registry(fixture: dict[str, Any], overrides: dict[str, Any] | None = None) -> Registry:
    agents = []
    for name, spec in fixture["registry"].items():
        extra = (overrides or {}).get(name, {})
        budget = budget_of(extra.get("budget"))
        agents.append(
            AgentDef(
                name=name,
                description=spec["does"],
                model=spec["model"],
                tools=spec.get("tools", []),
                team=spec.get("team", []),
                **({"budget": budget} if budget else {}),
            )
        )
    return Registry(agents, tools=[LOOKUP])


async def test_budgets_fixture(make_runtime) -> None:
    """tests/fixtures/toolnexus/subagent-budgets.json, step by step. One deliberate
    difference (CONTRACT §9.3): budgets are enforced inside a turn too, so the step the
    reference lets finish (it checks only at turn start) stops here at its second LLM call,
    as ``incomplete`` with limit ``tokens``."""
    fixture = load_fixture("subagent-budgets")
    llm = FixtureLLM(fixture["mockLLM"])
    async with make_runtime(fixture_registry(fixture), llm.transport()) as rt:
        # The fixture numbers ids per agent name; the contract counts spawns under a parent
        # across names (root/coordinator.1, then root/looper.2): map fixture ids to ours.
        handles: dict[str, Handle] = {"root": rt.root}
        by_name: dict[str, str] = {"root": "root", "coordinator": "root/coordinator.1"}
        results = []
        for step in fixture["steps"]:
            expect = step.get("expect", {})
            if "spawn" in step:
                args = step["spawn"]
                parent_fid = by_name[args["parent"]]
                got = await rt.spawn(
                    handles[parent_fid], args["def"], budget_of(args.get("budget"))
                )
                if "isError" in expect:
                    assert isinstance(got, SpawnError)
                    assert got.error == "children over max_children 2"
                    continue
                assert isinstance(got, Handle), got
                same = sum(1 for k in handles if k.startswith(f"{parent_fid}/{args['def']}."))
                handles[f"{parent_fid}/{args['def']}.{same + 1}"] = got
                if "effectiveTokens" in expect:
                    assert got.pool_tokens == expect["effectiveTokens"]
            else:
                args = step["wakeWait"]
                h = handles[args["handle"]]
                r = await rt.run_turn(h, args["prompt"])
                results.append((args["handle"], r))
                if "parentPoolAfter" in expect:
                    assert (await rt.inspect(h.parent or "root")).pool_tokens == expect[
                        "parentPoolAfter"
                    ]
        (_, first), (_, second), (_, third), (_, looped) = results
        assert first.status == "done" and first.total_tokens == 80
        # §9.3: the coordinator's pool (20 left) admits the first call; the second is refused
        assert (second.status, second.limit, second.turns) == ("incomplete", "tokens", 1)
        assert "budget exhausted" in second.text
        assert (third.status, third.limit, third.turns) == ("incomplete", "tokens", 0)
        assert "budget exhausted" in third.text
        assert (looped.status, looped.limit, looped.turns) == ("incomplete", "maxTurns", 3)
        coordinator = await rt.inspect("root/coordinator.1")
        assert coordinator.pool_tokens == 100 - 80 - 40
        assert coordinator.usage_total == 120


async def test_live_ledger_like_the_seed(make_runtime) -> None:
    """shared/seeds/000 example 2: a carved pool drains live as usage rolls up."""
    reg = {"clerk": AgentDef(name="clerk", budget=Budget(max_tokens=1_000))}
    llm = ScriptedLLM({"stub-model": [text("report filed", prompt_tokens=5, completion_tokens=3)]})
    async with make_runtime(reg, llm.transport()) as rt:
        h = await spawn(rt, rt.root, "clerk")
        assert h.pool_tokens == 1_000
        await rt.run_turn(h, "file the quarterly report")
        assert (h.pool_tokens, h.usage_total) == (992, 8)
        assert h.last_result is not None and h.last_result.status == "done"


async def test_each_limit_is_a_named_incomplete(make_runtime) -> None:
    reg = Registry(
        [
            AgentDef(name="spender", tools=["lookup"], budget=Budget(max_tokens=10)),
            AgentDef(name="caller", tools=["lookup"], budget=Budget(max_tool_calls=2)),
            AgentDef(name="slow", tools=["lookup"], budget=Budget(max_wall_ms=1_500)),
        ],
        tools=[LOOKUP],
    )
    two_calls = tool_calls(("lookup", {"q": "a"}), ("lookup", {"q": "b"}))
    one_call = tool_calls(("lookup", {"q": "c"}))
    release = asyncio.Event()

    async def answer(request: httpx.Request) -> httpx.Response:
        import json

        body = json.loads(request.content)
        user = body["messages"][0]["content"]
        if user == "hang":
            await release.wait()
        if user in ("spend", "call"):
            return httpx.Response(200, json=two_calls if len(body["messages"]) == 1 else one_call)
        return httpx.Response(200, json=text("ok"))

    async with make_runtime(reg, httpx.MockTransport(answer)) as rt:
        spender = await spawn(rt, rt.root, "spender")
        r = await rt.run_turn(spender, "spend")  # 7 tokens, then 7 more: over 10
        assert (r.status, r.limit, r.turns) == ("incomplete", "tokens", 2)
        # partial work kept: user, assistant (2 calls), 2 tool results, assistant (1 call)
        assert spender.pool_tokens == 10 - 14 and spender.transcript_len == 5

        caller = await spawn(rt, rt.root, "caller")
        r = await rt.run_turn(caller, "call")  # 2 tool calls allowed, the next batch is not
        assert (r.status, r.limit, r.turns) == ("incomplete", "toolCalls", 2)
        assert caller.tool_calls_total == 2

        slow = await spawn(rt, rt.root, "slow")
        started = time.monotonic()
        r = await rt.run_turn(slow, "hang")  # the durable timer stops the hanging call
        assert (r.status, r.limit) == ("incomplete", "wallMs")
        assert time.monotonic() - started < 10
        release.set()
        # the next wake is past the deadline too: stopped before any LLM call
        r = await rt.run_turn(slow, "again")
        assert (r.status, r.limit, r.turns) == ("incomplete", "wallMs", 0)


async def test_siblings_on_one_pool_overshoot_by_at_most_the_calls_in_flight(
    make_runtime,
) -> None:
    """8 parallel children on a pool that allows 3 LLM calls (40 tokens each)."""
    reg = Registry(
        [
            AgentDef(
                name="lead",
                team=["worker"],
                model="m-lead",
                budget=Budget(max_tokens=120, max_turns=2),
            ),
            AgentDef(name="worker", tools=["lookup"], model="m-worker"),
        ],
        tools=[LOOKUP],
    )
    worker_calls = 0

    async def answer(request: httpx.Request) -> httpx.Response:
        nonlocal worker_calls
        import json

        body = json.loads(request.content)
        if body["model"] == "m-lead":
            if any(m["role"] == "tool" for m in body["messages"]):
                return httpx.Response(
                    200, json=text("lead done", prompt_tokens=0, completion_tokens=0)
                )
            fan = [("task", {"agent": "worker", "prompt": f"job {i}"}) for i in range(8)]
            return httpx.Response(200, json=tool_calls(*fan, prompt_tokens=0, completion_tokens=0))
        worker_calls += 1
        await asyncio.sleep(0.05)
        return httpx.Response(
            200,
            json=tool_calls(("lookup", {"q": "more"}), prompt_tokens=30, completion_tokens=10),
        )

    async with make_runtime(reg, httpx.MockTransport(answer)) as rt:
        lead = await spawn(rt, rt.root, "lead")
        r = await rt.run_turn(lead, "fan out")
        # the children drained the lead's own pool too: its next LLM call is refused
        assert (r.status, r.limit, r.turns) == ("incomplete", "tokens", 1), r
        lead = await rt.inspect(lead)
        children = [await rt.inspect(c) for c in lead.children]
        assert len(children) == 8
        # The pool allows 3 calls; calls already in flight when it ran out may land (at most
        # one per sibling), and no sibling starts another after the ledger reached it.
        # In flight = admitted while the ledger had room, not yet settled: with 8 siblings at
        # most 8, so the 120-token pool ends at most 8 calls over.
        assert 3 <= worker_calls <= 3 + 8, worker_calls
        assert lead.usage_total == 40 * worker_calls
        assert lead.usage_total <= 120 + 40 * 8
        assert all(
            c.last_result is not None and c.last_result.status == "incomplete" for c in children
        )
        assert {c.last_result.limit for c in children if c.last_result} == {"tokens"}


async def test_concurrency_gate_fixture(make_runtime) -> None:
    fixture = load_fixture("subagent-lifecycle")
    scenario = fixture["scenarios"]["concurrencyGate"]
    llm = FixtureLLM(fixture["mockLLM"])
    reg = fixture_registry(fixture, scenario["registryOverride"])
    async with make_runtime(reg, llm.transport()) as rt:
        entry = await spawn(rt, rt.root, scenario["run"]["entry"])
        r = await rt.run_turn(entry, scenario["run"]["prompt"])
        assert r.status == scenario["expect"]["status"]
        lines = await rt.trace_lines()
        for needle in scenario["expect"]["traceContains"]:
            assert any(needle in line for line in lines), (needle, lines)
        # one child ran at a time
        assert llm.max_in_flight == 1


async def test_turn_gate_fixture_cannot_deadlock(make_runtime) -> None:
    fixture = load_fixture("subagent-lifecycle")
    scenario = fixture["scenarios"]["turnGate"]
    llm = FixtureLLM(fixture["mockLLM"])
    cap = scenario["runtime"]["maxConcurrentTurns"]
    async with make_runtime(
        fixture_registry(fixture), llm.transport(), max_concurrent_turns=cap
    ) as rt:
        entry = await spawn(rt, rt.root, scenario["run"]["entry"])
        # The parent waits on two children while holding no LLM slot: with a cap of 1 the
        # tree still finishes.
        r = await asyncio.wait_for(rt.run_turn(entry, scenario["run"]["prompt"]), 60)
        assert r.status == scenario["expect"]["status"]
        assert llm.max_in_flight == scenario["expect"]["maxObservedConcurrentTurns"]
        assert llm.calls() == 2 + 2 * 2  # parent 2, each child 2


async def test_host_wakes_queue_on_the_parents_slots(make_runtime) -> None:
    release = asyncio.Event()

    async def answer(request: httpx.Request) -> httpx.Response:
        await release.wait()
        return httpx.Response(200, json=text("ok"))

    reg = {"w": AgentDef(name="w")}
    async with make_runtime(
        reg, httpx.MockTransport(answer), budget=Budget(max_concurrent=1)
    ) as rt:
        first = await spawn(rt, rt.root, "w")
        second = await spawn(rt, rt.root, "w")
        await rt.wake(first, "a")
        assert first.state == "running" and not first.queued
        await rt.wake(second, "b")
        assert second.queued and second.state == "idle"
        release.set()
        assert (await rt.wait(first)).status == "done"
        assert (await rt.wait(second)).status == "done"
        lines = await rt.trace_lines(rt.root)
        assert any(f"{second.id} wake QUEUED" in line for line in lines)
        assert any(f"DEQUEUED wake {second.id}" in line for line in lines)


async def _usage_mid_turn(make_runtime, live_usage_ms: int | None) -> tuple[int, int]:
    """The root's usage_total while a child's turn waits on its second LLM call, and after."""
    reg = Registry([AgentDef(name="worker", tools=["lookup"])], tools=[LOOKUP])
    second_call = asyncio.Event()
    release = asyncio.Event()

    async def answer(request: httpx.Request) -> httpx.Response:
        import json

        body = json.loads(request.content)
        if len(body["messages"]) == 1:  # first call: use the tool (7 tokens)
            return httpx.Response(200, json=tool_calls(("lookup", {"q": "x"})))
        second_call.set()
        await release.wait()
        return httpx.Response(200, json=text("done"))

    options = RuntimeOptions(live_usage_ms=live_usage_ms)
    async with make_runtime(reg, httpx.MockTransport(answer), options=options) as rt:
        h = await spawn(rt, rt.root, "worker")
        await rt.wake(h, "go")
        await asyncio.wait_for(second_call.wait(), 30)
        if live_usage_ms is None:
            await asyncio.sleep(1.0)  # an absence: a report would have landed by now
            during = (await rt.inspect(rt.root)).usage_total
        else:  # a presence: wait for the live report (it travels as a signal), never assume
            for _ in range(300):
                during = (await rt.inspect(rt.root)).usage_total
                if during:
                    break
                await asyncio.sleep(0.1)
        release.set()
        assert (await rt.wait(h)).status == "done"
        for _ in range(50):  # the settle report lands a moment after the result
            after = (await rt.inspect(rt.root)).usage_total
            if after == 12:  # 7 tokens for the tool call, 5 for the final answer
                break
            await asyncio.sleep(0.1)
        return during, after


async def test_usage_rolls_up_live_inside_a_turn(make_runtime) -> None:
    """CONTRACT §4: every LLM call's tokens count on every ancestor, live: with
    live_usage_ms the parent sees the first call's usage while the turn still runs."""
    during, after = await _usage_mid_turn(make_runtime, live_usage_ms=0)
    assert (during, after) == (7, 12)


async def test_usage_rolls_up_at_settle_without_live_reports(make_runtime) -> None:
    """live_usage_ms=None: the parent learns a turn's usage when it settles (fewer events)."""
    during, after = await _usage_mid_turn(make_runtime, live_usage_ms=None)
    assert (during, after) == (0, 12)
