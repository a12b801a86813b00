"""Budget pools as plain rules (CONTRACT §3 spawn, §6): remainder under a pushed floor,
carving a child's pools, the ledger recount, floors to push, and the stop reasons."""

from __future__ import annotations

import pytest

from tests.unit.fakes import FakeSignals, handle, parent_with
from toolnexus_temporal.workflows.budgets import (
    BudgetLedger,
    budget_limit,
    carve,
    exhausted,
    floors_to_push,
    min_opt,
    recount,
    remaining,
)
from toolnexus_temporal.workflows.contract.models import Budget
from toolnexus_temporal.workflows.contract.state import ChildInfo, PoolFloor


@pytest.mark.parametrize(
    ("a", "b", "expected"),
    [(None, None, None), (None, 5, 5), (5, None, 5), (3, 5, 3), (7, 2, 2), (0, None, 0)],
)
def test_min_opt_treats_none_as_unlimited(a: int | None, b: int | None, expected: int | None):
    assert min_opt(a, b) == expected


def test_remaining_without_a_floor_is_the_own_pool():
    s = handle(pool_tokens=700, pool_tool_calls=4)
    assert remaining(s) == (700, 4)
    assert remaining(handle()) == (None, None)


def test_remaining_under_a_floor_subtracts_the_spend_since_the_floors_basis():
    # The parent saw 100 tokens / 2 calls spent when it pushed 300 / 5 left above; the
    # subtree has spent 150 / 3 since: 50 tokens and 1 call more.
    s = handle(
        pool_tokens=1_000,
        pool_tool_calls=10,
        usage_total=150,
        subtree_tool_calls=3,
        floor=PoolFloor(tokens=300, tool_calls=5, basis_tokens=100, basis_tool_calls=2),
    )
    assert remaining(s) == (250, 4)


def test_remaining_takes_the_tighter_of_own_pool_and_floor():
    floor = PoolFloor(tokens=300, tool_calls=None, basis_tokens=0)
    s = handle(pool_tokens=120, pool_tool_calls=None, usage_total=0, floor=floor)
    assert remaining(s) == (120, None)  # own pool tighter; an unlimited floor adds nothing
    unlimited_own = handle(pool_tokens=None, usage_total=40, floor=floor)
    assert remaining(unlimited_own) == (260, None)


def test_remaining_can_go_negative_when_siblings_overshot():
    s = handle(usage_total=90, floor=PoolFloor(tokens=50, basis_tokens=10))
    assert remaining(s)[0] == -30


def test_recount_sums_own_and_children_and_drains_the_pools():
    s = parent_with(
        "p/x.1",
        "p/y.2",
        own_tokens=100,
        tool_calls_total=1,
        pool_tokens_limit=1_000,
        pool_tool_calls_limit=10,
    )
    s.roster.children_info["p/x.1"] = ChildInfo(usage_total=200, subtree_tool_calls=2)
    s.roster.children_info["p/y.2"] = ChildInfo(usage_total=50, subtree_tool_calls=3)
    recount(s)
    assert (s.usage.usage_total, s.usage.subtree_tool_calls) == (350, 6)
    assert (s.usage.pool_tokens, s.usage.pool_tool_calls) == (650, 4)


def test_recount_leaves_unlimited_pools_unlimited():
    s = handle(own_tokens=10)
    recount(s)
    assert s.usage.usage_total == 10
    assert (s.usage.pool_tokens, s.usage.pool_tool_calls) == (None, None)


@pytest.mark.parametrize(
    ("own", "live", "expected"),
    [
        (800, 500, 500),  # the parent's live remainder is tighter
        (200, 500, 200),  # the child's own limit is tighter
        (None, 500, 500),  # no own limit: the remainder
        (300, None, 300),  # unlimited parent: the own limit
        (None, None, None),
    ],
)
def test_carve_takes_min_of_own_limit_and_parents_live_remainder(
    own: int | None, live: int | None, expected: int | None
):
    parent = handle(id="p", pool_tokens=live, pool_tool_calls=live)
    pools = carve(parent, Budget(max_tokens=own, max_tool_calls=own), now_ms=1_000)
    assert pools.tokens_limit == expected
    assert pools.tool_calls_limit == expected


def test_carve_uses_the_live_remainder_under_the_parents_floor():
    parent = handle(
        id="p", pool_tokens=900, usage_total=60, floor=PoolFloor(tokens=100, basis_tokens=20)
    )
    pools = carve(parent, Budget(max_tokens=500), now_ms=0)
    assert pools.tokens_limit == 60  # 100 - (60 - 20)
    assert pools.floor == PoolFloor(tokens=60, tool_calls=None)


def test_carve_sets_a_floor_only_when_some_pool_above_is_finite():
    assert carve(handle(id="p"), Budget(max_tokens=10), now_ms=0).floor is None
    finite = carve(handle(id="p", pool_tool_calls=7), Budget(), now_ms=0)
    assert finite.floor == PoolFloor(tokens=None, tool_calls=7)


@pytest.mark.parametrize(
    ("max_wall_ms", "parent_deadline", "expected"),
    [(5_000, None, 6_000), (5_000, 3_000, 3_000), (None, 3_000, 3_000), (None, None, None)],
)
def test_carve_deadline_is_the_earlier_of_own_wall_and_parents(
    max_wall_ms: int | None, parent_deadline: int | None, expected: int | None
):
    parent = handle(id="p", wall_deadline_ms=parent_deadline)
    pools = carve(parent, Budget(max_wall_ms=max_wall_ms), now_ms=1_000)
    assert pools.wall_deadline_ms == expected


def test_carve_caps_max_depth_by_the_parents():
    parent = handle(id="p", budget=Budget(max_depth=2))
    assert carve(parent, Budget(max_depth=5), now_ms=0).budget.max_depth == 2
    assert carve(parent, Budget(max_depth=1), now_ms=0).budget.max_depth == 1
    assert carve(parent, Budget(max_depth=None), now_ms=0).budget.max_depth == 2


def test_floors_to_push_skips_closed_children_and_unchanged_floors():
    s = parent_with("p/x.1", "p/y.2", "p/z.3", pool_tokens=500)
    s.roster.children_info["p/x.1"] = ChildInfo(state="running", usage_total=40)
    s.roster.children_info["p/y.2"] = ChildInfo(state="closed", usage_total=10)
    pushes = floors_to_push(s)
    assert pushes == [
        ("p/x.1", PoolFloor(tokens=500, basis_tokens=40)),
        ("p/z.3", PoolFloor(tokens=500, basis_tokens=0)),
    ]
    assert set(s.usage.pushed_floors) == {"p/x.1", "p/z.3"}
    assert floors_to_push(s) == []  # nothing changed since
    s.usage.pool_tokens = 400
    assert [child for child, _ in floors_to_push(s)] == ["p/x.1", "p/z.3"]


def test_floors_to_push_is_empty_when_every_pool_is_unlimited():
    s = parent_with("p/x.1")
    assert floors_to_push(s) == []
    assert s.usage.pushed_floors == {}


def test_ledger_push_floors_signals_pool_floor_per_changed_child():
    sent = FakeSignals()
    s = parent_with("p/x.1", pool_tool_calls=3)
    BudgetLedger(s, sent).push_floors()
    assert sent.sent == [("p/x.1", "pool_floor", PoolFloor(tool_calls=3))]


@pytest.mark.parametrize(
    ("fields", "batch", "now_ms", "expected"),
    [
        ({}, 0, 10_000, None),
        ({"wall_deadline_ms": 10_000}, 0, 10_000, "wallMs"),  # at the deadline
        ({"wall_deadline_ms": 10_000}, 0, 9_999.5, None),  # just before it
        ({"wall_deadline_ms": 10_000, "pool_tokens": 0}, 0, 10_000, "wallMs"),  # deadline first
        ({"pool_tokens": 0}, 0, 0, "tokens"),
        ({"pool_tokens": -5}, 3, 0, "tokens"),  # tokens before tool calls
        ({"pool_tokens": 1}, 0, 0, None),
        ({"pool_tool_calls": 2}, 3, 0, "toolCalls"),  # fewer left than the batch
        ({"pool_tool_calls": 3}, 3, 0, None),  # exactly enough
        ({"pool_tool_calls": 0}, 0, 0, None),  # an LLM call spends no tool calls
        (
            {"pool_tool_calls": 10, "floor": PoolFloor(tool_calls=2)},
            3,
            0,
            "toolCalls",
        ),  # the ancestor's floor is tighter
    ],
)
def test_budget_limit_names_the_limit_that_stops_the_turn(fields, batch, now_ms, expected):
    assert budget_limit(handle(**fields), batch, now_ms) == expected


@pytest.mark.parametrize(
    ("fields", "now_ms", "expected"),
    [
        ({}, 0, None),
        ({"pool_tokens": 0}, 0, "budget exhausted (tokens)"),
        ({"pool_tool_calls": 0}, 0, "budget exhausted (toolCalls)"),
        ({"pool_tokens": 0, "pool_tool_calls": 0}, 0, "budget exhausted (tokens)"),
        ({"wall_deadline_ms": 5}, 5, "budget exhausted (wallMs)"),
        ({"wall_deadline_ms": 5, "pool_tool_calls": 0}, 5, "budget exhausted (toolCalls)"),
        ({"wall_deadline_ms": 5}, 4, None),
    ],
)
def test_exhausted_gives_the_spawn_error(fields, now_ms, expected):
    assert exhausted(handle(**fields), now_ms) == expected
