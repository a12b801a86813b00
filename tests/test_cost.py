"""Cost in money on a real dev server (issue 34 item 4): the scripted LLM reports usage with
cached tokens, the worker prices it from its table; exact totals per call, turn, handle and at
the root; ``Budget(max_cost_usd=...)`` stops a turn midway, on the handle's own pool and on
an ancestor's; an unpriced model's cost is unknown, and under a money cap its call fails."""

from __future__ import annotations

from decimal import Decimal

import pytest

from tests.helpers import settle, spawn
from toolnexus_temporal.activities import Registry, define_tool
from toolnexus_temporal.activities.llm import LlmConfig
from toolnexus_temporal.cli.render import handle_table, tree_table
from toolnexus_temporal.client import AgentDef, Budget, Handle
from toolnexus_temporal.client.testing import ScriptedLLM, text, tool_calls
from toolnexus_temporal.workflows.contract.pricing import ModelPrice

MODEL = "stub-model"
PRICES = {MODEL: ModelPrice(input="0.15", cached_input="0.075", output="0.60")}
LLM = LlmConfig(base_url="http://mock.local/v1", model=MODEL, prices=PRICES)


def lookup(q: str = "") -> str:
    """returns data(<q>)"""
    return f"data({q})"


LOOKUP = define_tool(lookup)

THREE_TURNS = [
    text("one", prompt_tokens=1000, completion_tokens=100),  # 150 + 60 per million
    text("two", prompt_tokens=2000, completion_tokens=100, cached_tokens=1000),  # 150+75+60
    text("three", prompt_tokens=3000, completion_tokens=100, cached_tokens=2000),  # 150+150+60
]
TURN_COSTS = [Decimal("0.00021"), Decimal("0.000285"), Decimal("0.00036")]


def _render(h: Handle) -> str:
    from rich.console import Console

    console = Console(width=200, record=True)
    console.print(handle_table(h))
    console.print(tree_table([h]))
    return console.export_text()


@pytest.mark.parametrize("style", ["openai", "anthropic"])
async def test_three_turns_with_cached_tokens_roll_up_to_the_root(make_runtime, style) -> None:
    """Cached tokens are counted once and priced at their rate in both wire styles; each
    turn's cost, the handle's and the root's (the roll-up) are exact."""
    reg = {"clerk": AgentDef(name="clerk", style=style)}
    llm = ScriptedLLM({MODEL: list(THREE_TURNS)})
    async with make_runtime(reg, llm.transport(), llm=LLM) as rt:
        h = await spawn(rt, rt.root, "clerk")
        results = [await rt.run_turn(h, f"turn {i}") for i in range(3)]
        assert [r.cost_usd for r in results] == TURN_COSTS
        total = sum(TURN_COSTS, Decimal(0))
        assert total == Decimal("0.000855")
        assert h.cost_usd == total and h.usage_total == 1100 + 2100 + 3100
        view = await rt.inspect(h)
        assert view.cost_usd == total and view.cost.unpriced == 0
        root = await settle(lambda: rt.inspect(rt.root), lambda v: v.cost_usd == total)
        assert root.cost_usd == total, root.cost
        shown = _render(view)
        assert "$0.000855 (this handle and its subtree)" in shown
        assert "$0.000855" in shown.splitlines()[-2] or "$0.000855" in shown


async def test_a_money_cap_stops_a_turn_midway(make_runtime) -> None:
    """The first LLM call of a tool turn spends the whole cap: its tool batch and the second
    call are refused (``incomplete``, ``costUsd``, as ``max_tokens`` stops a turn), and so is
    the next wake."""
    first = tool_calls(("lookup", {"q": "a"}), prompt_tokens=1000, completion_tokens=100)
    reg = Registry(
        [AgentDef(name="shopper", tools=["lookup"], budget=Budget(max_cost_usd="0.00021"))],
        tools=[LOOKUP],
    )
    llm = ScriptedLLM({MODEL: [first, text("never sent")]})
    async with make_runtime(reg, llm.transport(), llm=LLM) as rt:
        h = await spawn(rt, rt.root, "shopper")
        assert h.pool_cost_usd == Decimal("0.00021")
        r = await rt.run_turn(h, "buy")
        assert (r.status, r.limit, r.turns) == ("incomplete", "costUsd", 1), r
        assert r.cost_usd == Decimal("0.00021")
        assert h.tool_calls_total == 0 and len(llm.requests) == 1
        assert h.pool_cost_usd == 0
        again = await rt.run_turn(h, "buy more")
        assert (again.status, again.limit, again.turns) == ("incomplete", "costUsd", 0)
        assert len(llm.requests) == 1


async def test_a_money_cap_stops_a_tool_turn_after_its_tool_ran(make_runtime) -> None:
    """Money left after the first call: the tool runs, the second call starts (the check is
    before a call) and spends past the cap; the turn stops there, before the next tools."""
    call = tool_calls(("lookup", {"q": "a"}), prompt_tokens=1000, completion_tokens=100)
    reg = Registry(
        [AgentDef(name="shopper", tools=["lookup"], budget=Budget(max_cost_usd="0.0003"))],
        tools=[LOOKUP],
    )
    llm = ScriptedLLM({MODEL: [call, call, text("never sent")]})
    async with make_runtime(reg, llm.transport(), llm=LLM) as rt:
        h = await spawn(rt, rt.root, "shopper")
        r = await rt.run_turn(h, "buy")
        assert (r.status, r.limit, r.turns) == ("incomplete", "costUsd", 2), r
        assert r.cost_usd == Decimal("0.00042") and h.pool_cost_usd == Decimal("-0.00012")
        assert h.tool_calls_total == 1 and len(llm.requests) == 2


async def test_an_ancestors_money_pool_stops_a_child_midway(make_runtime) -> None:
    """The root's pool (the runtime's budget) holds a child with no cap of its own: its
    first call spends it, its second is refused; a sibling cannot spawn."""
    first = tool_calls(("lookup", {"q": "a"}), prompt_tokens=1000, completion_tokens=100)
    reg = Registry([AgentDef(name="shopper", tools=["lookup"])], tools=[LOOKUP])
    llm = ScriptedLLM({MODEL: [first, text("ok"), first, text("never sent")]})
    budget = Budget(max_cost_usd="0.0003")
    async with make_runtime(reg, llm.transport(), llm=LLM, budget=budget) as rt:
        h = await spawn(rt, rt.root, "shopper")
        assert h.pool_cost_usd == Decimal("0.0003")
        first_turn = await rt.run_turn(h, "buy")  # 0.00021 + 0.00000165: 0.00008835 left
        assert first_turn.status == "done"
        assert first_turn.cost_usd == Decimal("0.00021165")
        r = await rt.run_turn(h, "buy again")  # one call passes the rest, then none
        assert (r.status, r.limit, r.turns) == ("incomplete", "costUsd", 1), r
        assert len(llm.requests) == 3
        assert h.cost_usd == Decimal("0.00042165")
        root = await settle(lambda: rt.inspect(rt.root), lambda v: v.pool_cost_usd == h.cost_usd)
        assert root.cost_usd == h.cost_usd
        sibling = await rt.spawn(rt.root, "shopper")
        assert not isinstance(sibling, Handle)
        assert sibling.error == "budget exhausted (costUsd)"


async def test_an_unpriced_model_costs_unknown_and_fails_under_a_cap(make_runtime) -> None:
    reg = {
        "free": AgentDef(name="free", model="no-price"),
        "capped": AgentDef(name="capped", model="no-price", budget=Budget(max_cost_usd=1)),
    }
    llm = ScriptedLLM({"no-price": [text("hi")]}, repeat_last=True)
    async with make_runtime(reg, llm.transport(), llm=LLM) as rt:
        h = await spawn(rt, rt.root, "free")
        r = await rt.run_turn(h, "hello")
        assert r.status == "done" and r.cost_usd is None and r.cost.unpriced == 1
        assert h.cost_usd is None and h.cost.text() == "cost unknown"
        assert "cost unknown (this handle and its subtree)" in _render(h)
        capped = await spawn(rt, rt.root, "capped")
        r = await rt.run_turn(capped, "hello")
        assert r.status == "error" and "has no price" in r.text, r
        assert len(llm.requests) == 1  # the capped call was never sent


async def test_summarizer_calls_are_priced_and_counted(make_runtime) -> None:
    """Under a ``summarize`` context policy the summarizer's calls cost money too: the
    handle's cost is every call's, exactly (and they run under a money cap: priced)."""
    from toolnexus_temporal.client import ContextPolicy
    from toolnexus_temporal.workflows.contract.context import SUMMARIZER_INSTRUCTIONS

    summaries = 0

    def answer(request: dict) -> dict:
        nonlocal summaries
        if request["messages"][0].get("content") == SUMMARIZER_INSTRUCTIONS:
            summaries += 1
            return text("summary", prompt_tokens=500, completion_tokens=50)  # 75 + 30
        return text("reply", prompt_tokens=1000, completion_tokens=100)  # 150 + 60

    policy = ContextPolicy(max_tokens=600, keep_turns=1, older="summarize", summary_max_tokens=64)
    reg = {"a": AgentDef(name="a", context=policy, budget=Budget(max_cost_usd=1))}
    llm = ScriptedLLM({MODEL: [answer]}, repeat_last=True)
    async with make_runtime(reg, llm.transport(), llm=LLM) as rt:
        h = await spawn(rt, rt.root, "a")
        for i in range(4):
            assert (await rt.run_turn(h, f"turn {i}")).status == "done"
        assert summaries >= 1, "the summarizer ran"
        view = await rt.inspect(h)
        expected = Decimal("0.00021") * 4 + Decimal("0.000105") * summaries
        assert view.cost_usd == expected
        assert view.pool_cost_usd == 1 - expected
