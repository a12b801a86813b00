"""Spawn rate and idle-worker memory, in a fresh process per contender.

``python -m bench.idle --contender ours --address HOST:PORT --base-url URL --count 1000``
starts the contender's worker in this process, reads VmRSS, spawns ``count`` agents
(``concurrency`` spawns in flight), makes sure the worker holds every one of them (a query
each), reads VmRSS again, and prints one JSON line. A fresh process per contender keeps one
contender's memory out of another's figure.
"""

from __future__ import annotations

import argparse
import asyncio
import gc
import json
import sys
import tempfile
import time
from pathlib import Path
from typing import Any

from temporalio.client import Client
from temporalio.contrib.pydantic import pydantic_data_converter

from bench.contender import Context
from bench.contenders import make
from bench.sizes import SIZES


def rss_bytes() -> int:
    """This process's resident set size (VmRSS), in bytes."""
    for line in Path("/proc/self/status").read_text().splitlines():
        if line.startswith("VmRSS:"):
            return int(line.split()[1]) * 1024
    return 0


async def measure(args: argparse.Namespace) -> dict[str, Any]:
    client = await Client.connect(args.address, data_converter=pydantic_data_converter)
    contender = make(args.contender)
    with tempfile.TemporaryDirectory() as tmp:
        ctx = Context(
            client=client,
            address=args.address,
            base_url=args.base_url,
            size=SIZES[args.size],
            tmp=Path(tmp),
            run_id=args.run_id,
        )
        async with contender.session(ctx):
            spawn_one = contender.spawn_one  # type: ignore[attr-defined]
            settle = contender.settle  # type: ignore[attr-defined]
            # Warm-up: one agent, so imports and first-use costs are not counted.
            warm = [await spawn_one(-1)]
            await settle(warm)
            pause = 1.0 if args.count >= 50 else 0.1
            await asyncio.sleep(pause)
            gc.collect()
            before = rss_bytes()
            sem = asyncio.Semaphore(args.concurrency)

            async def one(i: int) -> Any:
                async with sem:
                    return await spawn_one(i)

            start = time.perf_counter()
            async with asyncio.TaskGroup() as group:
                tasks = [group.create_task(one(i)) for i in range(args.count)]
            seconds = time.perf_counter() - start
            spawned = [task.result() for task in tasks]
            await settle(list(spawned))
            await asyncio.sleep(pause)
            gc.collect()
            after = rss_bytes()
    return {
        "agents": args.count,
        "concurrency": args.concurrency,
        "spawn_seconds": seconds,
        "spawns_per_s": args.count / seconds if seconds > 0 else None,
        "rejected_and_retried": contender.rejected,
        "retried_spawns": contender.retried_calls,
        "rss_before_bytes": before,
        "rss_after_bytes": after,
        "rss_delta_bytes": after - before,
        "rss_per_agent_bytes": (after - before) / args.count if args.count else None,
    }


def main(argv: list[str] | None = None) -> None:
    parser = argparse.ArgumentParser(prog="python -m bench.idle")
    parser.add_argument("--contender", required=True)
    parser.add_argument("--address", required=True)
    parser.add_argument("--base-url", required=True)
    parser.add_argument("--count", type=int, required=True)
    parser.add_argument("--concurrency", type=int, default=20)
    parser.add_argument("--size", default="tiny")
    parser.add_argument("--run-id", required=True)
    args = parser.parse_args(argv)
    result = asyncio.run(measure(args))
    sys.stdout.write("RESULT " + json.dumps(result) + "\n")


if __name__ == "__main__":
    main()
