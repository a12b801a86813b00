"""The benchmark parts of issue 28 still run, at a tiny size on the session's dev server:
the actant peer (every measure it can do, the others recorded with why) and the scale-out
measure (ours and the floor with 1 and 2 worker processes). Sane results, never speed."""

from __future__ import annotations

import dataclasses
import importlib.util
import json
import uuid
from pathlib import Path

import pytest
from temporalio.testing import WorkflowEnvironment

from bench import processes
from bench.contender import Context
from bench.llm import LlmProcess
from bench.sizes import SIZES
from bench.suite import run_suite


@pytest.mark.stress  # a tiny benchmark run of one contender
@pytest.mark.skipif(importlib.util.find_spec("actant") is None, reason="needs the bench extra")
async def test_actant_peer_runs_every_measure_it_can(
    env: WorkflowEnvironment, tmp_path: Path
) -> None:
    await run_suite("tiny", ["actant"], tmp_path, client=env.client, stamp="actant")
    data = json.loads((tmp_path / "actant.json").read_text())
    c = data["contenders"]["actant"]
    size = data["size"]
    assert "error" not in c
    for measure in ("latency", "throughput", "wake_all", "growth", "fanout"):
        assert "error" not in c[measure] and "skipped" not in c[measure], (measure, c[measure])
    assert c["latency"]["plain"]["turns"] == size["latency_turns"]
    plain, tool = c["latency"]["history_plain"], c["latency"]["history_tool"]
    assert 3 <= plain["events_median"] < tool["events_median"]
    assert all(lv["failed"] == 0 == lv["warmup_failed"] for lv in c["throughput"]["levels"])
    assert c["wake_all"]["all_done"]
    assert c["growth"]["turns"] == size["history_turns"]
    assert all(b > 1000 for b in c["growth"]["bytes_per_turn"])  # a new run each turn
    assert c["fanout"]["median_s"] > 0 and c["fanout"]["events"] > 0
    assert c["idle"]["skipped"]  # with the reason
    assert c["llm_calls"]["bench-chat"] > 0 and c["llm_calls"]["bench-tool"] > 0
    assert c["llm_calls"]["bench-worker"] == size["fanout"] * size["fanout_reps"]
    assert "actant on Temporal: idle not measured" in (tmp_path / "actant.md").read_text()


@pytest.mark.stress  # starts eight worker processes
async def test_processes_measure_runs_one_and_two_processes(
    env: WorkflowEnvironment, tmp_path: Path
) -> None:
    size = dataclasses.replace(SIZES["tiny"], processes=(1, 2), throughput=((4, 1),))
    with LlmProcess() as server:
        base = Context(
            client=env.client,
            address=env.client.service_client.config.target_host,
            base_url=server.base_url,
            size=size,
            tmp=tmp_path,
            run_id=uuid.uuid4().hex[:8],
        )
        result = await processes.measure(base, ["ours", "floor"])
    assert (result["agents"], result["turns_per_agent"]) == (4, 1)
    for name in ("floor", "ours"):
        levels = result["contenders"][name]["levels"]
        assert [lv["processes"] for lv in levels] == [1, 2]
        for lv in levels:
            assert "error" not in lv, lv
            assert lv["done"] == lv["turns"] == 4 and lv["warmup_failed"] == 0, lv
        # drained after SIGTERM: ours is one supervisor (or a worker), the floor N workers
        assert [lv["exit_codes"] for lv in levels] == (
            [[0], [0]] if name == "ours" else [[0], [0, 0]]
        )
        assert result["contenders"][name]["gain"] > 0
    assert result["target"]["verdict"] in ("met", "not met")
    assert "## Scale out on one host (issue 28)" in "\n".join(processes.markdown(result))
