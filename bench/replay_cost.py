"""Worker CPU to replay one history event: what an agent evicted from the worker's cache
costs at its next workflow task (the sizing guide's input).

Replays the largest committed histories (``tests/histories/``) with ``worker.replayer`` (the
worker's own workflow runner, unsandboxed), three times each, and prints ms per history and
microseconds per event. Run: ``python -m bench.replay_cost [OUT.json]`` (a few seconds).
"""

from __future__ import annotations

import asyncio
import time
from pathlib import Path
from typing import Any

from temporalio.client import WorkflowHistory
from temporalio.contrib.pydantic import pydantic_data_converter

from bench.stamped import emit
from toolnexus_temporal.worker import replayer

HISTORIES = Path(__file__).resolve().parent.parent / "tests" / "histories"
LARGEST = 6
REPEATS = 3


async def measure() -> list[dict[str, Any]]:
    """Replay the :data:`LARGEST` committed histories; one figure each."""
    files = sorted(HISTORIES.glob("*.json"), key=lambda p: -p.stat().st_size)[:LARGEST]
    replay = replayer(pydantic_data_converter)
    out = []
    for path in files:
        history = WorkflowHistory.from_json("wf", path.read_text())
        started = time.perf_counter()
        for _ in range(REPEATS):
            await replay.replay_workflow(history)
        seconds = (time.perf_counter() - started) / REPEATS
        out.append(
            {
                "history": path.name,
                "events": len(history.events),
                "bytes": path.stat().st_size,
                "replay_ms": round(seconds * 1000, 1),
                "us_per_event": round(seconds * 1e6 / len(history.events)),
            }
        )
    return out


def main() -> None:
    """``python -m bench.replay_cost [OUT.json]``: print the figures (and write them)."""
    emit(
        "worker CPU to replay committed histories (bench/replay_cost.py)",
        "bench.replay_cost",
        {"histories": asyncio.run(measure())},
    )


if __name__ == "__main__":
    main()
