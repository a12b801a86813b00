"""Scale out on one host (issue 28, item 3): throughput with 100 agents in parallel when the
worker runs as 1 and as 2 processes, for our runtime and the floor alike.

The suite's other measures run each contender's worker inside the suite's process; here the
worker runs in processes of its own, the bench's process only drives the turns (spawns,
warm-up, timed turns: ``suite.throughput_level``, the same code as the throughput measure):

* ours: ``tnx-worker --processes N`` itself (the supervisor of ``cli/supervisor.py``), with
  the bench's registry (``bench.processes:REGISTRY``), a SQLite store shared by its
  processes, ``--max-concurrent-turns 1000`` per process, and the ``ours`` contender's
  client side (one runtime, ``Budget(max_concurrent=1000)`` at its root);
* the floor: N processes of ``python -m bench.processes --floor-worker``, each the floor's
  worker (``bench.floor``) on one task queue; the bench is their supervisor.

The gain of a contender is its turns/s with 2 processes over its turns/s with 1. The target
(issue 28): from one process to two, ours gains at least as much as the floor gains.

``python -m bench.processes --size small`` runs just this measure (its own dev server and
scripted LLM) and writes ``bench/results/<date>-<size>-processes.{json,md}``.
"""

from __future__ import annotations

import argparse
import asyncio
import contextlib
import json
import os
import signal
import sys
import tempfile
import time
import uuid
from collections.abc import AsyncIterator, Callable
from datetime import date
from pathlib import Path
from typing import Any

from bench import llm
from bench.contender import Context
from bench.floor import Floor
from bench.ours import Ours, registry
from bench.sizes import SIZES, Size
from toolnexus_temporal.cli.ops import hard_exit

REGISTRY = registry(50)
"""The bench's agents, for ``tnx-worker --registry bench.processes:REGISTRY``."""

CONTENDERS = ("floor", "ours")
"""The contenders this measure runs (in this order)."""

AGENTS = 100
"""Agents in parallel (issue 28: throughput at 100 agents)."""

ROOT = Path(__file__).resolve().parent.parent
READY_S = 120.0
"""How long the worker processes may take to start."""
STOP_S = 60.0
"""How long they may take to drain after SIGTERM."""


def agents_and_turns(size: Size) -> tuple[int, int]:
    """The level measured: ``AGENTS`` agents with the turns per agent of the size's largest
    throughput level (small: 2, full: 5)."""
    largest = max(size.throughput)
    return min(AGENTS, largest[0]), largest[1]


class WorkerProcesses:
    """Worker processes started for one level; started and stopped as a context manager.

    Ready once ``count`` lines ``worker on`` were printed (each worker prints one when it
    polls); stopped with SIGTERM (drained), and their exit codes kept."""

    def __init__(self, argvs: list[list[str]], count: int) -> None:
        self.argvs = argvs
        self.count = count
        self.procs: list[asyncio.subprocess.Process] = []
        self.exit_codes: list[int] = []
        self.output: list[str] = []
        self._drains: list[asyncio.Task[None]] = []

    async def __aenter__(self) -> WorkerProcesses:
        for argv in self.argvs:
            self.procs.append(
                await asyncio.create_subprocess_exec(
                    *argv,
                    cwd=ROOT,
                    env={**os.environ, "PYTHONPATH": str(ROOT)},
                    stdout=asyncio.subprocess.PIPE,
                    stderr=asyncio.subprocess.STDOUT,
                )
            )
        try:
            await asyncio.wait_for(self._ready(), READY_S)
        except BaseException:
            await self._stop()
            raise
        # keep reading, so a worker that logs a lot never blocks on a full pipe
        self._drains = [asyncio.create_task(self._drain(p)) for p in self.procs]
        return self

    async def _ready(self) -> None:
        per_proc = self.count // len(self.procs)
        for proc in self.procs:
            assert proc.stdout is not None
            seen = 0
            while seen < per_proc:
                line = (await proc.stdout.readline()).decode(errors="replace")
                if not line:
                    raise RuntimeError(
                        "a worker process exited before it was ready: " + "".join(self.output)
                    )
                self.output.append(line)
                seen += "worker on " in line

    async def _drain(self, proc: asyncio.subprocess.Process) -> None:
        assert proc.stdout is not None
        async for line in proc.stdout:
            self.output.append(line.decode(errors="replace"))
            del self.output[:-200]

    async def __aexit__(self, *exc: object) -> None:
        await self._stop()

    async def _stop(self) -> None:
        for proc in self.procs:
            if proc.returncode is None:
                with contextlib.suppress(ProcessLookupError):
                    proc.send_signal(signal.SIGTERM)
        for proc in self.procs:
            try:
                await asyncio.wait_for(proc.wait(), STOP_S)
            except TimeoutError:
                proc.kill()
                await proc.wait()
            assert proc.returncode is not None
            self.exit_codes.append(proc.returncode)
        for task in self._drains:
            with contextlib.suppress(Exception):
                await asyncio.wait_for(task, 5)


class OursProcesses(Ours):
    """``ours`` with its worker in ``tnx-worker --processes N``."""

    def __init__(self, processes: int) -> None:
        super().__init__()
        self.processes = processes
        self.workers: WorkerProcesses | None = None

    @contextlib.asynccontextmanager
    async def session(self, ctx: Context) -> AsyncIterator[None]:
        self.ctx = ctx
        self.task_queue = f"bench-ours-{ctx.run_id}"
        argv = [
            str(Path(sys.executable).parent / "tnx-worker"),
            "--processes",
            str(self.processes),
            "--registry",
            "bench.processes:REGISTRY",
            "--address",
            ctx.address,
            "--task-queue",
            self.task_queue,
            "--llm-base-url",
            ctx.base_url,
            "--model",
            llm.MODEL_CHAT,
            "--store",
            str(ctx.tmp / f"ours-{ctx.run_id}.sqlite"),
            "--max-concurrent-turns",
            "1000",
        ]
        async with WorkerProcesses([argv], self.processes) as self.workers:
            yield


class FloorProcesses(Floor):
    """The floor with its worker in N processes of ``--floor-worker``."""

    def __init__(self, processes: int) -> None:
        super().__init__()
        self.processes = processes
        self.workers: WorkerProcesses | None = None

    @contextlib.asynccontextmanager
    async def session(self, ctx: Context) -> AsyncIterator[None]:
        self.ctx = ctx
        self.task_queue = f"bench-floor-{ctx.run_id}"
        argv = [
            sys.executable,
            "-m",
            "bench.processes",
            "--floor-worker",
            "--address",
            ctx.address,
            "--task-queue",
            self.task_queue,
            "--base-url",
            ctx.base_url,
        ]
        async with WorkerProcesses([argv] * self.processes, self.processes) as self.workers:
            yield


def make(name: str, processes: int) -> OursProcesses | FloorProcesses:
    """The contender ``name`` (``ours`` or ``floor``) with its worker in ``processes``
    processes."""
    if name == "ours":
        return OursProcesses(processes)
    if name == "floor":
        return FloorProcesses(processes)
    raise KeyError(f"the processes measure runs {', '.join(CONTENDERS)}, not {name!r}")


async def measure(
    base: Context, names: list[str], log: Callable[[str], None] = print
) -> dict[str, Any]:
    """Throughput with ``AGENTS`` agents for each contender of ``names`` (of
    ``CONTENDERS``), with 1 and with 2 worker processes (``base.size.processes``), one fresh
    set of worker processes per level; a level that fails is recorded with its error.

    Returns:
        ``{"agents", "turns_per_agent", "contenders": {name: {"levels": [...], "gain"}},
        "target"}``, each level a ``suite.throughput_level`` result plus ``processes`` and
        the workers' ``exit_codes``.
    """
    from bench.suite import Deadline, _error, throughput_level

    size = base.size
    agents, turns = agents_and_turns(size)
    out: dict[str, Any] = {"agents": agents, "turns_per_agent": turns, "contenders": {}}
    for name in [n for n in CONTENDERS if n in names]:
        levels: list[dict[str, Any]] = []
        for count in size.processes:
            c = make(name, count)
            ctx = Context(
                client=base.client,
                address=base.address,
                base_url=base.base_url,
                size=size,
                tmp=base.tmp,
                run_id=f"{base.run_id}-p{name}{count}",
                log=log,
            )
            t0 = time.perf_counter()
            try:
                async with c.session(ctx):
                    log(f"processes: {name} with {count} worker processes: ready")
                    level = await throughput_level(
                        c, size, agents, turns, f"tp{agents}p{count}", Deadline(size)
                    )
            except Exception as err:
                level = {"agents": agents, "turns_per_agent": turns, "error": _error(err)}
                log(f"processes: {name} with {count}: FAILED: {level['error']}")
            level["processes"] = count
            level["exit_codes"] = c.workers.exit_codes if c.workers else []
            level["elapsed_s"] = time.perf_counter() - t0
            log(
                f"processes: {name} with {count}: {level.get('turns_per_s') or 0:.1f} turns/s, "
                f"workers exited {level['exit_codes']}"
            )
            levels.append(level)
        out["contenders"][name] = {"levels": levels, "gain": gain(levels)}
    out["target"] = target(out)
    return out


def _rate(levels: list[dict[str, Any]], count: int) -> float | None:
    for level in levels:
        if level.get("processes") == count and not level.get("error"):
            rate = level.get("turns_per_s")
            return float(rate) if rate else None
    return None


def _clean(levels: list[dict[str, Any]]) -> bool:
    return all(
        not lv.get("error") and not lv.get("failed") and not lv.get("warmup_failed")
        for lv in levels
    )


def gain(levels: list[dict[str, Any]]) -> float | None:
    """Turns/s with 2 processes over turns/s with 1 (None: either missing)."""
    one, two = _rate(levels, 1), _rate(levels, 2)
    return two / one if one and two else None


def target(result: dict[str, Any]) -> dict[str, Any]:
    """Issue 28's target: from one process to two, ours gains at least as much as the floor.
    Not met when a turn of ours failed (as for the throughput target); not measured when a
    gain is missing."""
    text = "from one worker process to two, ours gains at least as much as the floor gains"
    cs = result.get("contenders", {})
    ours, floor = cs.get("ours"), cs.get("floor")
    if not ours or not floor or ours.get("gain") is None or floor.get("gain") is None:
        return {"text": text, "verdict": "not measured", "by": "a gain is missing"}
    g_ours, g_floor = ours["gain"], floor["gain"]
    values = {"ours_gain": g_ours, "floor_gain": g_floor}
    if not _clean(ours["levels"]):
        return {"text": text, "verdict": "not met", "by": "a turn of ours failed", "values": values}
    met = g_ours >= g_floor
    by = f"{g_ours:.2f}× vs the floor's {g_floor:.2f}×" + (
        f": margin {g_ours - g_floor:.2f}×" if met else f": {g_floor - g_ours:.2f}× short"
    )
    return {"text": text, "verdict": "met" if met else "not met", "by": by, "values": values}


def markdown(result: dict[str, Any] | None) -> list[str]:
    """The section of the report (empty when the measure did not run)."""
    if not result:
        return []
    if "error" in result:
        return ["## Scale out on one host (issue 28)", "", f"Failed: {result['error']}", ""]
    lines = [
        "## Scale out on one host (issue 28)",
        "",
        f"Throughput with {result['agents']} agents in parallel ({result['turns_per_agent']} "
        "turns each after a warm-up turn), the worker in 1 and in 2 processes of its own "
        "(ours: `tnx-worker --processes N`; the floor: N processes of its worker).",
        "",
        "| contender | 1 process (turns/s) | 2 processes (turns/s) | gain | turns failed "
        "(1 / 2) | workers' exit codes (1 / 2) |",
        "|---|---|---|---|---|---|",
    ]
    for name, c in result.get("contenders", {}).items():
        by = {lv.get("processes"): lv for lv in c["levels"]}

        def rate(n: int, by: dict[Any, Any] = by) -> str:
            lv = by.get(n) or {}
            if lv.get("error"):
                return "failed"
            v = lv.get("turns_per_s")
            return f"{v:.1f}" if v else "—"

        def failed(n: int, by: dict[Any, Any] = by) -> str:
            lv = by.get(n) or {}
            return str(lv.get("failed", 0) + lv.get("warmup_failed", 0)) if lv else "—"

        g = c.get("gain")
        lines.append(
            f"| {name} | {rate(1)} | {rate(2)} | {f'{g:.2f}×' if g else '—'} | "
            f"{failed(1)} / {failed(2)} | {by.get(1, {}).get('exit_codes')} / "
            f"{by.get(2, {}).get('exit_codes')} |"
        )
    t = result.get("target", {})
    lines += ["", f"Target: {t.get('text')}: **{t.get('verdict')}** ({t.get('by')}).", ""]
    for name, c in result.get("contenders", {}).items():
        for lv in c["levels"]:
            if lv.get("error"):
                lines.append(f"- {name}, {lv['processes']} processes: failed: {lv['error']}")
    return lines


# ---------------------------------------------------------------------- the floor's worker


async def floor_worker(address: str, task_queue: str, base_url: str) -> None:
    """One process of the floor's worker (``bench.floor``) until SIGTERM/SIGINT, drained."""
    from temporalio.client import Client
    from temporalio.contrib.pydantic import pydantic_data_converter
    from temporalio.worker import Worker

    from bench.floor import FloorActivities
    from bench.floor_workflows import FloorAgent, FloorChild, FloorLead

    client = await Client.connect(address, data_converter=pydantic_data_converter)
    acts = FloorActivities(base_url)
    stop = asyncio.Event()
    loop = asyncio.get_running_loop()
    for sig in (signal.SIGINT, signal.SIGTERM):
        loop.add_signal_handler(sig, stop.set)
    try:
        worker = Worker(
            client,
            task_queue=task_queue,
            workflows=[FloorAgent, FloorChild, FloorLead],
            activities=[acts.llm_call, acts.tool_call],
        )
        run = asyncio.create_task(worker.run())
        print(f"pid={os.getpid()}: worker on {address} task_queue={task_queue}", flush=True)
        await stop.wait()
        await worker.shutdown()
        await run
    finally:
        await acts.http.aclose()


# ---------------------------------------------------------------------- entry point


async def run_alone(size_name: str, names: list[str]) -> dict[str, Any]:
    """This measure alone, on its own dev server and scripted LLM."""
    from bench.llm import LlmProcess
    from bench.suite import dev_server, log, machine_info, temporal_binary

    size = SIZES[size_name]
    results: dict[str, Any] = {"size": size.as_dict(), "machine": machine_info(temporal_binary())}
    with LlmProcess() as server, tempfile.TemporaryDirectory(prefix="tnx-bench-") as tmp:
        async with dev_server(None) as (client, address):
            base = Context(
                client=client,
                address=address,
                base_url=server.base_url,
                size=size,
                tmp=Path(tmp),
                run_id=uuid.uuid4().hex[:8],
                log=log,
            )
            results["processes"] = await measure(base, names, log)
    return results


def main(argv: list[str] | None = None) -> None:
    parser = argparse.ArgumentParser(prog="python -m bench.processes")
    parser.add_argument("--size", choices=sorted(SIZES), default="small")
    parser.add_argument("--only", default=",".join(CONTENDERS))
    parser.add_argument("--out", type=Path, default=Path("bench/results"))
    parser.add_argument("--floor-worker", action="store_true", help=argparse.SUPPRESS)
    parser.add_argument("--address", help=argparse.SUPPRESS)
    parser.add_argument("--task-queue", help=argparse.SUPPRESS)
    parser.add_argument("--base-url", help=argparse.SUPPRESS)
    args = parser.parse_args(argv)
    if args.floor_worker:
        asyncio.run(floor_worker(args.address, args.task_queue, args.base_url))
        # Drained: end as tnx-worker does (cli.ops.hard_exit), skipping the interpreter's
        # teardown, which can abort a process that used the SDK (temporalio/sdk-python#300:
        # a drained floor worker exited -6 in 1 of 4 runs of tests/test_bench_scale.py).
        hard_exit(0)
    names = [n.strip() for n in args.only.split(",") if n.strip()]
    results = asyncio.run(run_alone(args.size, names))
    stamp = f"{date.today().isoformat()}-{args.size}-processes"
    args.out.mkdir(parents=True, exist_ok=True)
    (args.out / f"{stamp}.json").write_text(json.dumps(results, indent=1) + "\n")
    section = "\n".join(markdown(results["processes"]))
    (args.out / f"{stamp}.md").write_text(section + "\n")
    print(section)


if __name__ == "__main__":
    main()
