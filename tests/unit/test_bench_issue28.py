"""Issue 28's verdicts (bench/issue28.py) on made-up results: each target judged against the
floor of the same run, the peers compared, missing values "not measured"."""

from __future__ import annotations

from typing import Any

from bench import issue28


def contender(
    p50: float, p99: float, tps: float, spawn: float, fan: float, hist: float
) -> dict[str, Any]:
    return {
        "latency": {
            "plain": {"p50_ms": p50, "p99_ms": p99},
            "history_plain": {"bytes_median": hist},
        },
        "throughput": {
            "levels": [{"agents": 100, "turns_per_s": tps, "failed": 0, "unfinished": 0}]
        },
        "idle": {"levels": [{"agents": 100, "spawns_per_s": spawn}]},
        "fanout": {"median_s": fan},
    }


def test_each_target_is_judged_against_the_same_run() -> None:
    results = {
        "contenders": {
            "floor": contender(20, 40, 100, 200, 1.5, 1500),
            "ours": contender(22, 60, 85, 150, 1.4, 2000),
            "openai_agents": contender(50, 90, 60, 250, 0.7, 20000),
        },
        "spawn_floor": {"child_via_update_per_s": 160.0},
    }
    ts = issue28.targets(results, {"cpu": {"ours": {"parallel_ratio": 1.6}}})
    verdicts = {k: t["verdict"] for k, t in ts.items()}
    assert verdicts["cpu_per_turn"] == "not met"  # 1.6 > 1.3
    assert verdicts["plain_p50"] == "met"  # 1.1 <= 1.15
    assert verdicts["plain_p99"] == "not met"  # 1.5 > 1.3
    assert verdicts["throughput_100"] == "met"  # 0.85 >= 0.8
    assert verdicts["spawn_vs_spawn_floor"] == "met"  # 150/160 = 0.94 >= 0.9
    assert verdicts["fanout"] == "met"  # 1.4 / 1.5
    assert verdicts["processes_gain"] == "not measured"
    assert verdicts["ahead_plain_turn_p50"] == "not measured"  # actant did not run
    results["contenders"]["actant"] = contender(30, 70, 10, 0, 3, 3000)
    ts = issue28.targets(results, {})
    assert ts["ahead_plain_turn_p50"]["verdict"] == "met"
    assert ts["ahead_throughput"]["verdict"] == "met"
    assert ts["ahead_history_bytes_per_plain_turn"]["verdict"] == "met"
    assert ts["cpu_per_turn"]["verdict"] == "not measured"


def test_latency_across_runs_wants_three_steady_runs() -> None:
    def run(p50: float) -> dict[str, Any]:
        return {
            "contenders": {
                "floor": contender(20, 40, 1, 1, 1, 1),
                "ours": contender(p50, 45, 1, 1, 1, 1),
            }
        }

    assert issue28.across_runs([run(22), run(22.5), run(21)])["p50_each_run"] == "met"
    assert issue28.across_runs([run(22), run(22.5)])["p50_each_run"] == "not met"  # two runs
    many = issue28.across_runs([run(22), run(50), run(21)])
    assert (many["p50_each_run"], many["no_run_twice_as_slow"]) == ("not met", "not met")
