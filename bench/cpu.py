"""Worker CPU per turn (issue 28): the CPU seconds the contender's worker process spends per
plain turn, ours and the floor's, in the same run; and, on request, a py-spy profile of that
worker under the 100-agent burst.

The worker runs in a process of its own (``python -m bench.cpu worker ...``: the
contender's :meth:`~bench.contender.Contender.session` and nothing else), so its CPU is not
mixed with the clients': this process drives the agents (:meth:`Contender.attach`) and
reads the worker's ``utime + stime`` from ``/proc/<pid>/stat`` before and after a batch of
turns. That counts every thread of the worker process: workflow activations, activities
(the LLM's HTTP exchange and SSE parsing, our conversation store), the SDK's Rust core
(gRPC to the server), the garbage collector and any polling while the batch runs. It does
not count the Temporal server, the LLM server or the clients. Warm-up turns are not counted.

Two batches per contender: ``sequential`` (one agent, ``size.latency_turns`` plain turns
back to back) and ``parallel`` (the size's largest throughput level: 100 agents in small and
full, each running its turns back to back after one warm-up turn each, all at once).

``python -m bench.cpu --size small --out DIR --stamp NAME [--profile]`` runs this measure
alone (its own dev server and scripted LLM, ours and the floor): ``NAME.json`` and
``NAME.md``; with ``--profile``, for each contender one more parallel burst recorded by
py-spy (every Python thread, 100 Hz): its stacks (``NAME-<contender>.collapsed.txt``), a
flame graph of the busy samples (``NAME-<contender>.svg``) and their top functions by self
and total samples, and samples per package (``NAME-<contender>-top.txt``). The suite
(``python -m bench``) runs the measure for ours, ours_direct and the floor after their other
measures.
"""

from __future__ import annotations

import argparse
import asyncio
import contextlib
import json
import os
import shutil
import signal
import sys
import tempfile
import time
import zlib
from collections import Counter
from collections.abc import Callable
from datetime import UTC, date, datetime
from pathlib import Path
from typing import Any

from temporalio.client import Client
from temporalio.contrib.pydantic import pydantic_data_converter

from bench.contender import Agent, Contender, Context
from bench.contenders import make
from bench.sizes import SIZES, Size

ROOT = Path(__file__).resolve().parent.parent
CONTENDERS = ("floor", "ours", "ours_direct")
"""The contenders whose worker can run in its own process (``Contender.attach``)."""

CPU_PER_TURN_MAX = 1.3
"""Issue 28: worker CPU per plain turn within 1.3x the floor's (same run)."""

CLOCK_TICKS = os.sysconf("SC_CLK_TCK")
SPY_RATE_HZ = 100


def cpu_times(pid: int) -> tuple[float, float]:
    """User and system CPU seconds of process ``pid`` so far, all its threads
    (``/proc/<pid>/stat`` fields 14 and 15, ``man 5 proc``)."""
    stat = Path(f"/proc/{pid}/stat").read_text()
    fields = stat[stat.rindex(")") + 2 :].split()
    return int(fields[11]) / CLOCK_TICKS, int(fields[12]) / CLOCK_TICKS


def cpu_seconds(pid: int) -> float:
    """User + system CPU seconds of process ``pid`` so far (:func:`cpu_times`)."""
    return sum(cpu_times(pid))


# ---------------------------------------------------------------------- the worker process


async def serve_worker(args: argparse.Namespace) -> None:
    """Run ``args.contender``'s worker session until stdin closes; print ``READY <pid>``."""
    client = await Client.connect(args.address, data_converter=pydantic_data_converter)
    contender = make(args.contender)
    with tempfile.TemporaryDirectory(prefix="tnx-bench-cpu-") as tmp:
        ctx = Context(
            client=client,
            address=args.address,
            base_url=args.base_url,
            size=SIZES[args.size],
            tmp=Path(tmp),
            run_id=args.run_id,
        )
        async with contender.session(ctx):
            print(f"READY {os.getpid()}", flush=True)
            await asyncio.get_running_loop().run_in_executor(None, sys.stdin.read)


class WorkerProcess:
    """``python -m bench.cpu worker`` for one contender, as an async context manager."""

    def __init__(self, name: str, ctx: Context) -> None:
        self.name = name
        self.ctx = ctx
        self.proc: asyncio.subprocess.Process | None = None

    @property
    def pid(self) -> int:
        assert self.proc is not None
        return self.proc.pid

    async def __aenter__(self) -> WorkerProcess:
        argv = [
            sys.executable, "-m", "bench.cpu", "worker",
            "--contender", self.name,
            "--address", self.ctx.address,
            "--base-url", self.ctx.base_url,
            "--size", self.ctx.size.name,
            "--run-id", self.ctx.run_id,
        ]  # fmt: skip
        self.proc = await asyncio.create_subprocess_exec(
            *argv,
            cwd=ROOT,
            stdin=asyncio.subprocess.PIPE,
            stdout=asyncio.subprocess.PIPE,
            env={**os.environ, "PYTHONPATH": str(ROOT)},
        )
        assert self.proc.stdout is not None
        line = (await asyncio.wait_for(self.proc.stdout.readline(), 120)).decode().strip()
        if not line.startswith("READY "):
            await self.__aexit__()
            raise RuntimeError(f"{self.name}: worker process did not start: {line!r}")
        return self

    async def __aexit__(self, *exc: object) -> None:
        proc = self.proc
        if proc is None or proc.returncode is not None:
            return
        assert proc.stdin is not None
        proc.stdin.close()
        try:
            await asyncio.wait_for(proc.wait(), 30)
        except TimeoutError:
            proc.kill()
            await proc.wait()


# ---------------------------------------------------------------------- py-spy


def py_spy() -> str | None:
    """The ``py-spy`` binary (bench extra), or None."""
    candidate = Path(sys.executable).parent / "py-spy"
    return str(candidate) if candidate.exists() else shutil.which("py-spy")


@contextlib.asynccontextmanager
async def recording(pid: int, out: Path) -> Any:
    """py-spy sampling every thread of ``pid`` while the block runs, by function, written
    to ``out`` as collapsed stacks (``frame;frame;... count``, root first) on SIGINT.

    py-spy's own idle detection counted every waiting thread-pool thread as busy on this
    machine, so :func:`busy_stacks` drops the samples of a thread that was waiting."""
    binary = py_spy()
    if binary is None:
        raise RuntimeError("py-spy is missing: pip install -e '.[bench]'")
    proc = await asyncio.create_subprocess_exec(
        binary, "record", "--pid", str(pid), "--rate", str(SPY_RATE_HZ), "--function",
        "--format", "raw", "--output", str(out),
        stdout=asyncio.subprocess.DEVNULL, stderr=asyncio.subprocess.PIPE,
    )  # fmt: skip
    await asyncio.sleep(1.0)  # py-spy attaches
    try:
        yield
    finally:
        proc.send_signal(signal.SIGINT)
        _, err = await asyncio.wait_for(proc.communicate(), 60)
        if b"Error" in err:
            raise RuntimeError(f"py-spy failed ({out}): {err.decode()[-500:]}")


IDLE_LEAVES = (
    "_worker (concurrent/futures/thread.py",  # a pool thread waiting for work
    "_WorkItem.run (concurrent/futures/thread.py",  # a C call in a pool thread: stdin.read
    "EpollSelector.select (selectors.py",  # the event loop waiting for I/O
    "Condition.wait (threading.py",
    "Event.wait (threading.py",
    "Thread._wait_for_tstate_lock (threading.py",
)
"""Innermost frames of a thread that waits (blocked in C with the GIL released), dropped
from the profile. ``_WorkItem.run`` as the innermost frame is a C function called straight
from a pool thread: here only the worker process's blocking ``stdin.read``."""


def busy_stacks(collapsed: str) -> tuple[Counter[str], int]:
    """py-spy's collapsed stacks without the samples of waiting threads
    (:data:`IDLE_LEAVES`); returns them and the number of samples dropped."""
    kept: Counter[str] = Counter()
    dropped = 0
    for line in collapsed.splitlines():
        stack, _, count = line.rpartition(" ")
        if not stack or not count.isdigit():
            continue
        if stack.rsplit(";", 1)[-1].startswith(IDLE_LEAVES):
            dropped += int(count)
        else:
            kept[stack] += int(count)
    return kept, dropped


def top_entries(stacks: Counter[str], dropped: int, k: int = 40) -> str:
    """A text summary of busy stacks: samples per package (of the innermost frame), then
    the top ``k`` functions by self samples and by total samples (a function counted once
    per stack)."""
    self_n: Counter[str] = Counter()
    total_n: Counter[str] = Counter()
    package_n: Counter[str] = Counter()
    samples = sum(stacks.values())
    for stack, n in stacks.items():
        frames = stack.split(";")
        self_n[frames[-1]] += n
        package_n[_package(frames[-1])] += n
        for frame in set(frames):
            total_n[frame] += n
    out = [
        f"{samples} busy samples at {SPY_RATE_HZ} Hz, every Python thread "
        f"({dropped} samples of waiting threads dropped; the Rust core's own threads are not "
        "sampled)",
        "",
        "samples by package of the innermost frame:",
    ]
    out += [f"{n:8d} {n / max(samples, 1):6.1%}  {p}" for p, n in package_n.most_common(30)]
    for title, counter in (("self", self_n), ("total", total_n)):
        out += ["", f"top {k} by {title} samples:"]
        out += [f"{n:8d} {n / max(samples, 1):6.1%}  {f}" for f, n in counter.most_common(k)]
    return "\n".join(out) + "\n"


def flame_svg(stacks: Counter[str], title: str, width: int = 1600) -> str:
    """A flame graph (root at the bottom, width = samples) of collapsed stacks, as SVG with
    a tooltip per frame (Brendan Gregg's layout; no script)."""
    tree: dict[str, Any] = {"n": 0, "kids": {}}
    for stack, n in stacks.items():
        node = tree
        node["n"] += n
        for frame in stack.split(";"):
            node = node["kids"].setdefault(frame, {"n": 0, "kids": {}})
            node["n"] += n
    total = max(tree["n"], 1)
    row_h, rects = 16, []
    depth_max = 0

    def walk(node: dict[str, Any], x: float, depth: int) -> None:
        nonlocal depth_max
        for frame, kid in sorted(node["kids"].items()):
            w = kid["n"] * width / total
            if w >= 0.3:
                depth_max = max(depth_max, depth)
                rects.append((x, depth, w, frame, kid["n"]))
                walk(kid, x, depth + 1)
            x += w

    walk(tree, 0.0, 0)
    height = (depth_max + 1) * row_h + 40
    out = [
        f'<svg xmlns="http://www.w3.org/2000/svg" width="{width}" height="{height}" '
        'font-family="monospace" font-size="11">',
        f'<text x="4" y="14" font-size="13">{_esc(title)} ({total} samples)</text>',
    ]
    for x, depth, w, frame, n in rects:
        y = height - (depth + 1) * row_h
        name = frame.split(" (")[0]
        hue = 10 + zlib.crc32(name.encode()) % 40  # the same colour for a name in every run
        label = name[: int(w / 7)] if w > 21 else ""
        out.append(
            f"<g><title>{_esc(frame)}: {n} samples, {n / total:.1%}</title>"
            f'<rect x="{x:.1f}" y="{y}" width="{w:.1f}" height="{row_h - 1}" '
            f'fill="hsl({hue},85%,60%)"/>'
            f'<text x="{x + 2:.1f}" y="{y + 12}">{_esc(label)}</text></g>'
        )
    return "\n".join([*out, "</svg>"]) + "\n"


def _esc(text: str) -> str:
    return text.replace("&", "&amp;").replace("<", "&lt;").replace(">", "&gt;")


def _package(frame: str) -> str:
    """``fn (pkg/sub/mod.py:12)`` (py-spy's short file names) → ``pkg/sub``, or ``pkg``
    for a module at the top."""
    path = frame[frame.rfind("(") + 1 : -1] if frame.endswith(")") else frame
    parts = path.rpartition(":")[0].split("/") if ":" in path else path.split("/")
    return "/".join(parts[:2]) if len(parts) > 2 else parts[0]


# ---------------------------------------------------------------------- the measure


async def _turns(agent: Agent, n: int, prompt: str, failures: list[str]) -> int:
    done = 0
    for i in range(n):
        try:
            await agent.turn(f"{prompt} {i}")
            done += 1
        except Exception as err:
            failures.append(f"{type(err).__name__}: {err}"[:300])
    return done


async def _batch(pid: int, run: Callable[[], Any]) -> dict[str, Any]:
    """Run ``run()`` (returns the turns done) and measure the worker's CPU and wall time."""
    (user0, sys0), wall0 = cpu_times(pid), time.perf_counter()
    done = await run()
    (user1, sys1), wall1 = cpu_times(pid), time.perf_counter()
    cpu = user1 - user0 + sys1 - sys0
    return {
        "turns": done,
        "cpu_s": cpu,
        "user_s": user1 - user0,
        "system_s": sys1 - sys0,
        "wall_s": wall1 - wall0,
        "cpu_ms_per_turn": cpu * 1000 / done if done else None,
        "cpu_share": cpu / (wall1 - wall0) if wall1 > wall0 else None,
    }


async def measure_cpu(
    name: str, ctx: Context, profile: Path | None = None, stamp: str = ""
) -> dict[str, Any]:
    """Worker CPU per plain turn of contender ``name`` (its worker in its own process).

    Args:
        name: a contender of :data:`CONTENDERS`.
        ctx: the run's context (``ctx.run_id`` should be unique to this measure).
        profile: a folder for py-spy's flame graph and top entries (None: no profile).
        stamp: the profile files' stem.

    Returns:
        ``{"sequential": batch, "parallel": batch, ...}``, each batch with ``turns``,
        ``cpu_s``, ``wall_s``, ``cpu_ms_per_turn`` and ``cpu_share`` (CPU s per wall s);
        ``profile``: the files written.
    """
    size: Size = ctx.size
    agents_n, per_agent = max(size.throughput)
    failures: list[str] = []
    out: dict[str, Any] = {
        "counts": "utime+stime of the worker process, every thread (/proc/<pid>/stat)"
    }
    async with WorkerProcess(name, ctx) as worker:
        c: Contender = make(name)
        c.attach(ctx)
        one = await c.new_agent("chat", "cpu-seq")
        await _turns(one, size.warmup, "warm-up", failures)
        out["sequential"] = await _batch(
            worker.pid, lambda: _turns(one, size.latency_turns, "hello", failures)
        )
        sem = asyncio.Semaphore(size.spawn_concurrency)

        async def spawn() -> Agent:
            async with sem:
                return await c.new_agent("chat", "cpu-par")

        agents = await asyncio.gather(*(spawn() for _ in range(agents_n)))
        await asyncio.gather(*(_turns(a, 1, "warm-up", failures) for a in agents))

        async def burst() -> int:
            done = await asyncio.gather(*(_turns(a, per_agent, "go", failures) for a in agents))
            return sum(done)

        out["parallel"] = {"agents": agents_n, **await _batch(worker.pid, burst)}
        if profile is not None:
            out["profile"] = await _profile(worker.pid, burst, profile, f"{stamp}-{name}")
            out["profile"]["title"] = (
                f"{name}: worker process, {agents_n} agents x {per_agent} plain turns"
            )
    out["failed_turns"] = len(failures)
    if failures:
        out["errors"] = dict(Counter(failures).most_common(5))
    return out


async def _profile(pid: int, burst: Callable[[], Any], folder: Path, stem: str) -> dict[str, Any]:
    """One more burst recorded by py-spy: ``stem.collapsed.txt`` (py-spy's raw stacks),
    ``stem.svg`` (flame graph of the busy samples) and ``stem-top.txt``."""
    os.makedirs(folder, exist_ok=True)
    raw, svg, top = (folder / f"{stem}{end}" for end in (".collapsed.txt", ".svg", "-top.txt"))
    cpu0 = cpu_seconds(pid)
    async with recording(pid, raw):
        turns = await burst()
    cpu = cpu_seconds(pid) - cpu0
    stacks, dropped = busy_stacks(await asyncio.to_thread(raw.read_text))
    head = f"{stem}: {turns} plain turns, {cpu:.2f} s worker CPU while recorded"
    await asyncio.to_thread(svg.write_text, flame_svg(stacks, head))
    await asyncio.to_thread(top.write_text, head + "\n" + top_entries(stacks, dropped))
    return {"flamegraph": str(svg), "collapsed": str(raw), "top": str(top), "cpu_s": cpu}


def derive(cpu: dict[str, dict[str, Any]]) -> dict[str, Any]:
    """Ratios of each contender's CPU per turn to the floor's, and the issue 28 verdict
    (plain turns, parallel batch: the 100-agent scenario; sequential for reference)."""
    floor = cpu.get("floor") or {}
    out: dict[str, Any] = {}
    for name, m in cpu.items():
        if name == "floor" or "error" in m:
            continue
        entry: dict[str, Any] = {}
        for batch in ("sequential", "parallel"):
            ours = (m.get(batch) or {}).get("cpu_ms_per_turn")
            ref = (floor.get(batch) or {}).get("cpu_ms_per_turn")
            entry[f"{batch}_ratio"] = ours / ref if ours and ref else None
        r = entry["parallel_ratio"]
        entry["target"] = f"worker CPU per plain turn within {CPU_PER_TURN_MAX}x the floor's"
        entry["met"] = None if r is None else r <= CPU_PER_TURN_MAX
        out[name] = entry
    return out


def markdown(results: dict[str, Any]) -> list[str]:
    """The section "Worker CPU per plain turn (issue 28)" of a report (empty: not run)."""
    cpu: dict[str, dict[str, Any]] = {
        n: c["cpu"] for n, c in results.get("contenders", {}).items() if "cpu" in c
    }
    if not cpu:
        return []
    ratios = derive(cpu)
    lines = [
        "## Worker CPU per plain turn (issue 28)",
        "",
        "CPU seconds (user + system, every thread) of the contender's worker process per "
        "plain turn, its worker alone in a process of its own; clients, the Temporal server "
        'and the LLM server are not counted ("of it system": the kernel\'s part, system '
        "calls such as socket I/O and fsync). Ratios are to the floor in the same run.",
        "",
        "| contender | 1 agent: CPU ms / turn | 1 agent: CPU share | parallel: agents | "
        "parallel: CPU ms / turn | parallel: of it system | parallel: CPU share | "
        f"parallel: turns/s | target ≤{CPU_PER_TURN_MAX}× (parallel) |",
        "|---|---|---|---|---|---|---|---|---|",
    ]
    for name, m in cpu.items():
        label = results["contenders"][name].get("label", name)
        if "error" in m:
            lines.append(f"| {label} | {m['error'][:200]} | | | | | | | |")
            continue
        s, p, r = m.get("sequential") or {}, m.get("parallel") or {}, ratios.get(name, {})
        rs = f" ({r['sequential_ratio']:.2f}×)" if r.get("sequential_ratio") else ""
        rp = f" ({r['parallel_ratio']:.2f}×)" if r.get("parallel_ratio") else ""
        verdict = {True: "met", False: "not met", None: "—"}[r.get("met")] if r else ""
        tps = p["turns"] / p["wall_s"] if p.get("wall_s") else None
        lines.append(
            f"| {label} | {_f(s.get('cpu_ms_per_turn'))}{rs} | {_f(s.get('cpu_share'), 2)} | "
            f"{p.get('agents', '—')} | {_f(p.get('cpu_ms_per_turn'))}{rp} | {_sys(p)} | "
            f"{_f(p.get('cpu_share'), 2)} | {_f(tps)} | {verdict} |"
        )
    failed = {n: m.get("failed_turns") for n, m in cpu.items() if m.get("failed_turns")}
    if failed:
        lines += ["", f"Failed turns: {failed}"]
    return [*lines, ""]


def _sys(batch: dict[str, Any]) -> str:
    """The system (kernel) part of a batch's CPU, in ms per turn."""
    if batch.get("system_s") is None or not batch.get("turns"):
        return "—"
    return f"{batch['system_s'] * 1000 / batch['turns']:,.1f}"


def _f(v: Any, digits: int = 1) -> str:
    return "—" if v is None else f"{v:,.{digits}f}"


async def suite_measure(name: str, ctx: Context) -> dict[str, Any] | None:
    """The suite's hook: this measure for a contender of :data:`CONTENDERS` (None for the
    others); a failure is recorded, never raised."""
    if name not in CONTENDERS:
        return None
    sub = Context(**{**ctx.__dict__, "run_id": f"{ctx.run_id}c"})
    t0 = time.perf_counter()
    try:
        out = await asyncio.wait_for(measure_cpu(name, sub), ctx.size.phase_timeout_s)
    except Exception as err:
        out = {"error": f"{type(err).__name__}: {err}"[:2000]}
    out["elapsed_s"] = time.perf_counter() - t0
    return out


# ---------------------------------------------------------------------- standalone


async def run_alone(args: argparse.Namespace) -> dict[str, Any]:
    from bench.llm import LlmProcess
    from bench.suite import dev_server, log, machine_info, temporal_binary

    size = SIZES[args.size]
    stamp = args.stamp or f"{date.today().isoformat()}-cpu-{args.size}"
    names = [n.strip() for n in args.only.split(",") if n.strip()]
    results: dict[str, Any] = {
        "stamp": stamp,
        "started_at": datetime.now(UTC).isoformat(timespec="seconds"),
        "size": size.as_dict(),
        "machine": machine_info(temporal_binary()),
        "contenders": {},
    }
    run_id = os.urandom(4).hex()
    with LlmProcess() as llm, tempfile.TemporaryDirectory(prefix="tnx-bench-") as tmp:
        async with dev_server(None) as (client, address):
            for name in names:
                ctx = Context(
                    client=client,
                    address=address,
                    base_url=llm.base_url,
                    size=size,
                    tmp=Path(tmp),
                    run_id=f"{run_id}-{name}",
                    log=log,
                )
                log(f"{name}: worker CPU")
                try:
                    m = await measure_cpu(name, ctx, args.out if args.profile else None, stamp)
                except Exception as err:
                    m = {"error": f"{type(err).__name__}: {err}"[:2000]}
                log(f"{name}: {json.dumps({k: v for k, v in m.items() if k != 'errors'})}")
                results["contenders"][name] = {"label": make(name).label, "cpu": m}
    results["derived"] = {"cpu": derive({n: c["cpu"] for n, c in results["contenders"].items()})}
    args.out.mkdir(parents=True, exist_ok=True)
    (args.out / f"{stamp}.json").write_text(json.dumps(results, indent=1) + "\n")
    head = [
        f"# Worker CPU per plain turn — {stamp} (size `{size.name}`)",
        "",
        f"Commit {results['machine'].get('commit')}; `python -m bench.cpu`.",
        "",
    ]
    (args.out / f"{stamp}.md").write_text("\n".join(head + markdown(results)))
    return results


def main(argv: list[str] | None = None) -> None:
    parser = argparse.ArgumentParser(prog="python -m bench.cpu", description=__doc__)
    parser.add_argument("mode", nargs="?", choices=["run", "worker"], default="run")
    parser.add_argument("--size", choices=sorted(SIZES), default="small")
    parser.add_argument("--out", type=Path, default=Path("bench/results"))
    parser.add_argument("--stamp", default=None)
    parser.add_argument("--only", default="floor,ours")
    parser.add_argument("--profile", action="store_true", help="py-spy the parallel burst")
    parser.add_argument("--contender", help="worker mode: the contender")
    parser.add_argument("--address", help="worker mode: the dev server")
    parser.add_argument("--base-url", help="worker mode: the scripted LLM")
    parser.add_argument("--run-id", help="worker mode: the run id (task queue)")
    args = parser.parse_args(argv)
    if args.mode == "worker":
        asyncio.run(serve_worker(args))
        return
    results = asyncio.run(run_alone(args))
    print("\n".join(markdown(results)))


if __name__ == "__main__":
    main()
