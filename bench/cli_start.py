"""How long ``tnx --version`` (and ``tnx --help``) takes to start, end to end.

``python -m bench.cli_start [--runs N] [--args=--help]`` runs the installed ``tnx`` (the
one next to this interpreter, else on PATH) ``N`` times (default 21) as a fresh process each,
and prints the median, the fastest and the slowest wall time and the median CPU time (user +
system), in seconds, and the target of issue 33 (under 0.3 s for ``--version``). Not a timed
test: ``tests/test_layout.py`` checks what these commands load, this script how long they
take on the machine at hand. The suite calls :func:`suite_measure` for ``tnx --version``
and ``tnx ls`` against its own server (issue 35).
"""

from __future__ import annotations

import argparse
import asyncio
import resource
import shlex
import shutil
import statistics
import subprocess
import sys
import time
from pathlib import Path
from typing import Any, Final

from temporalio.client import Client

from toolnexus_temporal.client.queries import prefix_clause

TARGET_S: Final = 0.3
"""Issue 33's target for ``tnx --version``, in seconds."""


def tnx_path() -> str:
    """The ``tnx`` entry point of this interpreter's environment, else the one on PATH."""
    beside = Path(sys.executable).with_name("tnx")
    if beside.exists():
        return str(beside)
    found = shutil.which("tnx")
    if found is None:
        raise SystemExit("tnx is not installed (pip install -e .)")
    return found


def _children_cpu_s() -> float:
    usage = resource.getrusage(resource.RUSAGE_CHILDREN)
    return usage.ru_utime + usage.ru_stime


def time_runs(argv: list[str], runs: int) -> tuple[list[float], list[float]]:
    """Wall seconds and CPU seconds (user + system) of ``runs`` fresh runs of ``argv`` (one
    warm-up run first, not counted). The CPU time hardly moves with the machine's load, the
    wall time does."""
    subprocess.run(argv, capture_output=True, check=True)
    wall: list[float] = []
    cpu: list[float] = []
    for _ in range(runs):
        start, cpu_start = time.perf_counter(), _children_cpu_s()
        subprocess.run(argv, capture_output=True, check=True)
        wall.append(time.perf_counter() - start)
        cpu.append(_children_cpu_s() - cpu_start)
    return wall, cpu


def spread(values: list[float]) -> dict[str, Any]:
    """p50, fastest, slowest and count of a list of seconds."""
    return {
        "p50_s": statistics.median(values),
        "min_s": min(values),
        "max_s": max(values),
        "runs": len(values),
        "samples_s": values,
    }


async def suite_measure(client: Client, address: str, scope: str, runs: int) -> dict[str, Any]:
    """The suite's ``tnx`` wall times (issue 35), against its own server while our worker
    runs: ``tnx --version``; ``tnx ls --scope SCOPE`` (the scope's tree, as an operator lists
    it); and the visibility query of that scope's workflows alone, through ``client``
    (``WorkflowId STARTS_WITH "SCOPE/"``), each ``runs`` times after one warm-up. The
    processes run in a thread so the worker in this process goes on answering.

    Returns:
        ``version``, ``ls``, ``visibility_query``: each :func:`spread` (the processes' also
        ``cpu_p50_s``); ``scope``.

    Raises:
        subprocess.CalledProcessError: a ``tnx`` run failed.
    """
    tnx = tnx_path()
    out: dict[str, Any] = {"scope": scope}
    for key, argv in (
        ("version", [tnx, "--version"]),
        ("ls", [tnx, "ls", "--address", address, "--scope", scope]),
    ):
        wall, cpu = await asyncio.to_thread(time_runs, argv, runs)
        out[key] = {**spread(wall), "cpu_p50_s": statistics.median(cpu)}
    query = prefix_clause(scope + "/")
    times: list[float] = []
    for i in range(runs + 1):
        start = time.perf_counter()
        _ = [wf async for wf in client.list_workflows(query)]
        if i:  # the first is the warm-up
            times.append(time.perf_counter() - start)
    out["visibility_query"] = {**spread(times), "query": query}
    return out


def main() -> None:
    """Parse the options, time the runs, print one line."""
    parser = argparse.ArgumentParser(description=__doc__.splitlines()[0])
    parser.add_argument("--runs", type=int, default=21, help="runs to time (default 21)")
    parser.add_argument("--args", default="--version", help="tnx's arguments (default --version)")
    opts = parser.parse_args()
    argv = [tnx_path(), *shlex.split(opts.args)]
    times, cpu = time_runs(argv, opts.runs)
    median = statistics.median(times)
    print(
        f"tnx {opts.args}: median {median:.3f} s over {opts.runs} runs "
        f"(fastest {min(times):.3f}, slowest {max(times):.3f}; CPU median "
        f"{statistics.median(cpu):.3f} s; target {TARGET_S} s: "
        f"{'met' if median < TARGET_S else 'missed'})"
    )


if __name__ == "__main__":
    main()
