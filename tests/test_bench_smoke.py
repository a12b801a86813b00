"""The benchmark suite still runs: ``bench`` at its tiny size, our runtime (both variants) and
the floor only, on the session's dev server. It checks that the results are written and sane,
never how fast anything is (benchmarks are not timed tests)."""

from __future__ import annotations

import importlib.util
import json
from pathlib import Path

import pytest
from temporalio.testing import WorkflowEnvironment

from bench.suite import run_suite


@pytest.mark.stress  # a whole (tiny) benchmark run: every contender, every scenario
async def test_tiny_suite_writes_sane_results(env: WorkflowEnvironment, tmp_path: Path) -> None:
    results = await run_suite(
        "tiny", ["ours", "ours_direct", "floor"], tmp_path, client=env.client, stamp="smoke"
    )

    data = json.loads((tmp_path / "smoke.json").read_text())
    assert set(data["contenders"]) == {"ours", "ours_direct", "floor"}
    assert data["machine"]["cores"] and data["machine"]["temporalio"]
    size = data["size"]
    for name, c in data["contenders"].items():
        assert "error" not in c, (name, c["error"])
        for measure in ("latency", "throughput", "wake_all", "growth", "fanout", "idle"):
            assert "error" not in c[measure], (name, measure, c[measure])
        for kind, turns in (("plain", size["latency_turns"]), ("tool", size["tool_turns"])):
            lat = c["latency"][kind]
            assert lat["turns"] == turns
            assert 0 < lat["p50_ms"] <= lat["p95_ms"] <= lat["p99_ms"] <= lat["max_ms"]
        plain, tool = c["latency"]["history_plain"], c["latency"]["history_tool"]
        # A turn writes at least its activities' events; a tool turn runs three activities.
        assert plain["events_median"] >= 3 and plain["bytes_median"] > 0
        assert tool["events_median"] > plain["events_median"]
        assert tool["event_types_median_turn"]["ACTIVITY_TASK_SCHEDULED"] >= 3
        levels = c["throughput"]["levels"]
        assert [lv["agents"] for lv in levels] == [n for n, _ in size["throughput"]]
        assert all(lv["turns_per_s"] > 0 for lv in levels), levels
        for lv in levels:
            assert lv["done"] == lv["turns"] and lv["failed"] == 0 == lv["warmup_failed"], lv
            assert lv["retried_turns"] >= 0 and lv["rejected_and_retried"] >= 0
        wake = c["wake_all"]
        assert wake["agents"] == size["wake_all"] and wake["seconds"] > 0
        assert wake["done"] == wake["agents"] and wake["failed"] == 0 and wake["all_done"], wake
        assert wake["retried_turns"] >= 0 and wake["latency"]["turns"] == wake["done"]
        growth = c["growth"]
        assert growth["turns"] == size["history_turns"] and growth["stopped"] is None
        assert all(b > 1000 for b in growth["bytes_per_turn"])  # each turn carries ~2 KB
        assert c["fanout"]["median_s"] > 0 and c["fanout"]["events"] > 0
        idle = c["idle"]["levels"]
        assert [lv["agents"] for lv in idle] == size["spawn_levels"]
        assert all(lv["spawns_per_s"] > 0 and lv["rss_after_bytes"] > 0 for lv in idle), idle
        # Every LLM call crossed HTTP to the scripted server.
        assert c["llm_calls"]["bench-chat"] > size["wake_all"] and c["llm_calls"]["bench-tool"] > 0
        assert c["llm_calls"]["bench-worker"] == size["fanout"] * size["fanout_reps"]

    derived = data["derived"]
    assert derived["ratios_to_floor"]["ours"]["latency_plain_p50_ms"] > 0
    assert derived["history_split"]["floor"]["events_per_llm_call"] > 0
    assert derived["ratios_to_floor"]["ours"]["wake_all_seconds"] > 0
    assert set(derived["targets_by_variant"]) == {"ours", "ours_direct"}
    assert derived["targets"] == derived["targets_by_variant"]["ours"]
    expected = {
        "latency_plain_p50",
        "latency_plain_p99",
        "latency_tool_p50",
        "events_plain_turn",
        "events_per_wake",
        "bytes_plain_turn",
        "throughput_100",
        "wake_all",
        "spawn_rate_100",
        "spawn_rate_1000",
        "fanout_vs_peer",
        "rss_per_idle_agent",
        "flat_history",
    }
    for variant, ts in derived["targets_by_variant"].items():
        assert set(ts) == expected, variant
        for key, t in ts.items():
            assert t["target"] and t["verdict"] in {"met", "not met", "not measured"}, (key, t)
            assert t["met"] == {"met": True, "not met": False}.get(t["verdict"]), (key, t)
            assert t["by"], (key, t)  # how far from the target, or why it was not measured
        # Judged from this run: every ratio target against the floor has a measured value.
        for key in ("latency_plain_p50", "latency_plain_p99", "latency_tool_p50"):
            assert ts[key]["verdict"] != "not measured" and ts[key]["values"]["ratio"] > 0
            assert " vs 1." in ts[key]["by"]
        plain_events = data["contenders"][variant]["latency"]["history_plain"]["events_median"]
        assert ts["events_plain_turn"]["values"]["ours"] == plain_events
        # Tiny has no 100-agent throughput or spawn level, and no peer: not measured.
        for key in ("throughput_100", "spawn_rate_100", "spawn_rate_1000", "fanout_vs_peer"):
            assert ts[key]["verdict"] == "not measured", (key, ts[key])
        assert ts["wake_all"]["verdict"] == "met" and "1,000" in ts["wake_all"]["note"]
        assert ts["flat_history"]["extra"]

    md = (tmp_path / "smoke.md").read_text()
    assert "| measure | Temporal floor | toolnexus-temporal |" in md
    assert "## Targets (issue 11)" in md
    assert "| plain turn: wake → result p50 within 1.1× the floor | **" in md
    assert f"wake all {size['wake_all']} at once: turns done / failed" in md
    if importlib.util.find_spec("matplotlib") is not None:
        for plot in ("latency", "throughput", "history"):
            assert results["files"][f"{plot}_png"] == str(tmp_path / f"smoke-{plot}.png")
            assert len((tmp_path / f"smoke-{plot}.png").read_bytes()) > 10_000


async def test_a_missing_package_skips_its_contender(
    env: WorkflowEnvironment, tmp_path: Path, monkeypatch: pytest.MonkeyPatch
) -> None:
    import bench.toolnexus_ref

    real = importlib.util.find_spec
    monkeypatch.setattr(
        bench.toolnexus_ref.importlib.util,  # type: ignore[attr-defined]
        "find_spec",
        lambda name, *a: None if name == "toolnexus" else real(name, *a),
    )
    results = await run_suite("tiny", ["toolnexus"], tmp_path, client=env.client, stamp="skipped")
    assert results["contenders"] == {}
    assert "not installed" in results["skipped"]["toolnexus"]
    assert "toolnexus skipped" in (tmp_path / "skipped.md").read_text()
