"""Issue 35's action verdicts (bench/issue35.py) on made-up results: computed from the counts
against the floor of the same run; a shape a peer cannot do is n/a with its reason."""

from __future__ import annotations

from typing import Any

from bench import issue35


def durable(plain: int, tool: int, events: int, tick: dict[str, Any]) -> dict[str, Any]:
    return {
        "durable": True,
        "latency": {
            "history_plain": {"actions_median": plain, "events_median": events},
            "history_tool": {"actions_median": tool, "events_median": events + 12},
        },
        "actions": {"tick": tick, "spawn": {"na": "no child agents"}},
    }


def test_the_action_targets_follow_the_counts() -> None:
    floor_tick = {"actions": 2, "action_kinds": {"timer started": 1, "activity started": 1}}
    results = {
        "contenders": {
            "floor": durable(2, 4, 11, floor_tick),
            "ours": {
                **durable(2, 5, 13, {"actions": 3, "action_kinds": {}}),
                "tnx_wall": {
                    "version": {"p50_s": 0.2},
                    "ls": {"p50_s": 0.31},
                    "visibility_query": {"p50_s": 0.02},
                },
            },
        }
    }
    ts = issue35.targets(results)
    verdicts = {k: t["verdict"] for k, t in ts.items()}
    assert verdicts == {
        "actions_plain": "met",  # 2 vs 2
        "actions_tool": "not met",  # 5 vs 4
        "actions_tick": "met",  # 3 vs 2 + 1 timer
        "events_plain": "not met",  # 13 vs 11
        "tnx_version": "met",  # 0.2 < 0.3
        "tnx_ls": "met",  # 0.31 < 0.3 + 0.02
    }
    table = issue35.table(results)
    assert table["ours"]["spawn"] == {"na": "no child agents"}
    assert table["floor"]["approval"] == {"na": "not measured"}


def test_no_wall_times_are_not_measured() -> None:
    results = {"contenders": {"floor": durable(2, 4, 11, {}), "ours": durable(2, 4, 11, {})}}
    ts = issue35.targets(results)
    assert ts["tnx_ls"]["verdict"] == "not measured"
    assert ts["actions_tick"]["verdict"] == "not measured"
