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


def with_measures(c: dict[str, Any], p50: float, p99: float, tps: float) -> dict[str, Any]:
    c["latency"]["plain"] = {"p50_ms": p50, "p99_ms": p99}
    c["throughput"] = {"levels": [{"agents": 100, "turns_per_s": tps}]}
    return c


def run(ours_p50: float, plugin_p50: float) -> dict[str, Any]:
    tick = {"actions": 2, "action_kinds": {"timer started": 1}}
    return {
        "contenders": {
            "floor": with_measures(durable(2, 4, 11, tick), 40.0, 50.0, 100.0),
            "ours": with_measures(durable(2, 4, 11, tick), ours_p50, 60.0, 90.0),
            "openai_agents": with_measures(durable(2, 4, 11, tick), plugin_p50, 70.0, 50.0),
            "actant": with_measures(durable(5, 9, 20, tick), 90.0, 95.0, 30.0),
        }
    }


def test_a_target_across_runs_is_met_only_when_every_run_meets_it() -> None:
    from bench import issue35_runs

    good, slow = run(44.0, 45.0), run(48.0, 45.0)  # p50 1.10x then 1.20x the floor
    one = issue35_runs.judge(good)
    assert one["plain_p50"]["ok"] is True and one["throughput_100"]["ok"] is True
    assert one["ahead_plain_turn_p50"]["ok"] is True  # 44 < 45 and < 90
    assert one["ahead_billable_actions_per_plain_turn"]["ok"] is False  # level with the plugin
    assert one["cpu_per_turn"]["ok"] is None  # not in the results: not measured
    two = issue35_runs.judge(slow)
    assert two["plain_p50"]["ok"] is False and two["ahead_plain_turn_p50"]["ok"] is False
    rows = {
        line.split(" | ")[0]: line
        for line in issue35_runs.markdown([("a", good), ("b", slow)])
        if line.startswith("| plain turn p50")
    }
    assert rows["| plain turn p50 at most 1.15× the floor"].endswith("**not met** |")
