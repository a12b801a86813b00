"""The benchmark's worker-CPU measure (issue 28): the CPU read from /proc, the idle samples
dropped from a py-spy profile, the summaries, and the verdict against the floor. Pure: no
server (``tests/test_bench_smoke.py`` runs the measure in the suite)."""

from __future__ import annotations

import os
import time
import xml.etree.ElementTree as ET

from bench import cpu

LOOP = "<module> (bench/cpu.py:1);run (asyncio/runners.py:160)"
POOL = "Thread._bootstrap (threading.py:988);_worker (concurrent/futures/thread.py:69)"
COLLAPSED = "\n".join(
    [
        f"{LOOP};Handle._run (asyncio/events.py:78);"
        "llm_call (toolnexus_temporal/activities/llm.py:237) 30",
        f"{LOOP};EpollSelector.select (selectors.py:451) 500",
        f"{POOL} 900",
        f"{POOL};_WorkItem.run (concurrent/futures/thread.py:53);"
        "SqliteConversationStore._write (toolnexus_temporal/activities/store.py:139) 10",
    ]
)


def test_cpu_seconds_counts_this_process() -> None:
    before = cpu.cpu_seconds(os.getpid())
    end = time.process_time() + 0.2
    while time.process_time() < end:
        pass
    assert cpu.cpu_seconds(os.getpid()) - before >= 0.1


def test_profile_drops_waiting_threads_and_sums_the_rest() -> None:
    stacks, dropped = cpu.busy_stacks(COLLAPSED)
    assert dropped == 1400
    assert sum(stacks.values()) == 40
    top = cpu.top_entries(stacks, dropped)
    assert "40 busy samples" in top and "1400 samples of waiting threads dropped" in top
    assert "40 100.0%  toolnexus_temporal/activities" in top
    assert "30  75.0%  llm_call (toolnexus_temporal/activities/llm.py:237)" in top
    svg = cpu.flame_svg(stacks, "t <&>")
    titles = [t.text for t in ET.fromstring(svg).iter("{http://www.w3.org/2000/svg}title")]
    assert any(t and t.startswith("llm_call (toolnexus_temporal") for t in titles)
    assert not any(t and "EpollSelector" in t for t in titles)


def test_the_verdict_is_a_ratio_to_the_floor_of_the_same_run() -> None:
    def m(seq: float, par: float) -> dict[str, object]:
        return {"sequential": {"cpu_ms_per_turn": seq}, "parallel": {"cpu_ms_per_turn": par}}

    derived = cpu.derive({"floor": m(10.0, 5.0), "ours": m(12.0, 6.0), "ours_direct": m(9.0, 7.0)})
    assert derived["ours"]["parallel_ratio"] == 1.2 and derived["ours"]["met"] is True
    assert (
        derived["ours_direct"]["parallel_ratio"] == 1.4 and derived["ours_direct"]["met"] is False
    )
    results = {
        "contenders": {
            "floor": {"label": "Temporal floor", "cpu": m(10.0, 5.0)},
            "ours": {"label": "toolnexus-temporal", "cpu": m(12.0, 6.0)},
        }
    }
    table = "\n".join(cpu.markdown(results))
    assert "| toolnexus-temporal | 12.0 (1.20×)" in table and "| met |" in table
    assert cpu.markdown({"contenders": {"ours": {"label": "x"}}}) == []
