"""Suite sizes: ``tiny`` (seconds: the smoke test), ``small`` (a quick look), ``full`` (the
numbers the README reports)."""

from __future__ import annotations

from dataclasses import asdict, dataclass
from typing import Any


@dataclass(frozen=True)
class Size:
    """How much of each measure to run.

    Attributes:
        name: tiny, small or full.
        warmup: turns run before timing, per agent kind (not recorded).
        latency_turns: sequential plain turns of one agent (p50/p95/p99).
        tool_turns: sequential tool turns (LLM → tool → LLM) of one agent.
        throughput: (parallel agents, turns per agent) levels.
        history_turns: turns of the ~1 KB-per-message conversation (history growth).
        spawn_levels: agents spawned for the spawn rate and the idle-worker RSS, one fresh
            process per level; the RSS per idle agent is read at the largest level.
        spawn_concurrency: spawns in flight at once (spawn rate, and the spawns that set up
            the throughput and wake-all measures).
        wake_all: agents spawned under one parent, then all woken for one plain turn at the
            same instant (no client-side gate).
        burst_timeout_s: how long the turns of one throughput level, or of the wake-all, may
            take before the unfinished ones are cancelled and counted as failed.
        fanout: tasks in the 1 → N fan-out.
        fanout_reps: timed fan-out repetitions.
        history_byte_cap: stop a conversation whose history passes this many bytes (the
            dev server fails a workflow at 50 MiB).
        phase_timeout_s: give up a contender's measure after this long (recorded).
        processes: worker process counts of the scale-out measure (``bench.processes``:
            throughput with 100 agents, ours and the floor); empty: not run.
    """

    name: str
    warmup: int
    latency_turns: int
    tool_turns: int
    throughput: tuple[tuple[int, int], ...]
    history_turns: int
    spawn_levels: tuple[int, ...]
    spawn_concurrency: int
    wake_all: int
    burst_timeout_s: float
    fanout: int
    fanout_reps: int
    history_byte_cap: int = 45 * 1024 * 1024
    phase_timeout_s: float = 300.0
    processes: tuple[int, ...] = (1, 2)

    def as_dict(self) -> dict[str, Any]:
        return asdict(self)


SIZES: dict[str, Size] = {
    "tiny": Size(
        name="tiny",
        warmup=1,
        latency_turns=2,
        tool_turns=1,
        throughput=((1, 1), (2, 1)),
        history_turns=3,
        spawn_levels=(3,),
        spawn_concurrency=3,
        wake_all=3,
        burst_timeout_s=60.0,
        fanout=2,
        fanout_reps=1,
        phase_timeout_s=60.0,
        processes=(),
    ),
    "small": Size(
        name="small",
        warmup=5,
        latency_turns=50,
        tool_turns=20,
        throughput=((1, 20), (10, 5), (100, 2)),
        history_turns=60,
        spawn_levels=(100,),
        spawn_concurrency=8,
        wake_all=200,
        burst_timeout_s=60.0,
        fanout=50,
        fanout_reps=2,
    ),
    "full": Size(
        name="full",
        warmup=10,
        latency_turns=200,
        tool_turns=50,
        throughput=((1, 50), (10, 20), (100, 5)),
        history_turns=500,
        spawn_levels=(100, 1000),
        spawn_concurrency=8,
        wake_all=1000,
        burst_timeout_s=240.0,
        fanout=50,
        fanout_reps=3,
        phase_timeout_s=600.0,
    ),
}
