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
        idle_agents: agents spawned for the spawn rate and the idle-worker RSS.
        spawn_concurrency: spawns in flight at once.
        fanout: tasks in the 1 → N fan-out.
        fanout_reps: timed fan-out repetitions.
        history_byte_cap: stop a conversation whose history passes this many bytes (the
            dev server fails a workflow at 50 MiB).
        phase_timeout_s: give up a contender's measure after this long (recorded).
    """

    name: str
    warmup: int
    latency_turns: int
    tool_turns: int
    throughput: tuple[tuple[int, int], ...]
    history_turns: int
    idle_agents: int
    spawn_concurrency: int
    fanout: int
    fanout_reps: int
    history_byte_cap: int = 45 * 1024 * 1024
    phase_timeout_s: float = 300.0

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
        idle_agents=3,
        spawn_concurrency=3,
        fanout=2,
        fanout_reps=1,
        phase_timeout_s=60.0,
    ),
    "small": Size(
        name="small",
        warmup=5,
        latency_turns=50,
        tool_turns=20,
        throughput=((1, 20), (10, 5), (100, 2)),
        history_turns=60,
        idle_agents=100,
        spawn_concurrency=8,
        fanout=10,
        fanout_reps=2,
    ),
    "full": Size(
        name="full",
        warmup=10,
        latency_turns=200,
        tool_turns=50,
        throughput=((1, 50), (10, 20), (100, 5)),
        history_turns=500,
        idle_agents=1000,
        spawn_concurrency=8,
        fanout=50,
        fanout_reps=3,
        phase_timeout_s=600.0,
    ),
}
