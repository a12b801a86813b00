"""Each contender, and the spawn floor, measured in a Python process of its own.

Why (measured here on 2026-12-05): a worker process on the dev server runs in one of two
modes. In the fast one the workflow task that follows an activity's completion starts ~1.5 ms
after it is scheduled and a plain turn takes ~17-20 ms; in the slow one it waits 28-33 ms on
the sticky queue and a turn takes ~50 ms. A process switches to the slow mode for good at some
point, and always once a second ``temporalio.worker.Worker`` has been created in it (even on a
fresh client and ``Runtime``, and after that worker stopped). The suite used to run every
contender in one process, the floor first: the floor measured mostly in the fast mode, every
later contender in the slow one, and that alone made ours 2.0x the floor's p50. In processes
of their own both start in the fast mode (ours 19.9 ms, the floor 16.4-19.6 ms, one after the
other on one dev server), though either may still switch mid-run: compare p50 with p95 and
the samples in the JSON. The cause (in the SDK's core or the server) is not found yet.

The parent (the suite) calls :func:`run_contender` or :func:`run_spawn_floor`; the child is
``python -m bench.isolated ARGS_JSON``: it connects to the suite's dev server and scripted
LLM server, runs the one measurement, and writes its JSON result where the parent reads it.
"""

from __future__ import annotations

import asyncio
import json
import os
import sys
import tempfile
from pathlib import Path
from typing import Any

from bench.contender import Context

ROOT = Path(__file__).resolve().parent.parent


async def run_contender(name: str, ctx: Context) -> dict[str, Any]:
    """Every measure of contender ``name`` (``bench.suite.run_contender``), in a child process
    on ``ctx``'s dev server and LLM server.

    Raises:
        RuntimeError: the child process failed before it wrote a result.
    """
    return await _child(
        {
            "kind": "contender",
            "name": name,
            "address": ctx.address,
            "namespace": ctx.client.namespace,
            "base_url": ctx.base_url,
            "size": ctx.size.name,
            "tmp": str(ctx.tmp),
            "run_id": ctx.run_id,
            "evidence_dir": str(ctx.evidence_dir) if ctx.evidence_dir else None,
        }
    )


async def run_spawn_floor(ctx: Context, n: int, task_queue: str) -> dict[str, Any]:
    """``bench.spawn_floor.measure_on`` in a child process on ``ctx``'s dev server.

    Raises:
        RuntimeError: the child process failed before it wrote a result.
    """
    return await _child(
        {
            "kind": "spawn_floor",
            "address": ctx.address,
            "namespace": ctx.client.namespace,
            "n": n,
            "task_queue": task_queue,
        }
    )


async def _child(args: dict[str, Any]) -> dict[str, Any]:
    with tempfile.TemporaryDirectory(prefix="tnx-bench-child-") as tmp:
        out = Path(tmp) / "result.json"
        env = dict(os.environ)
        env["PYTHONPATH"] = os.pathsep.join(p for p in (str(ROOT), env.get("PYTHONPATH", "")) if p)
        proc = await asyncio.create_subprocess_exec(
            sys.executable,
            "-m",
            "bench.isolated",
            json.dumps({**args, "out": str(out)}),
            cwd=ROOT,
            env=env,
        )
        code = await proc.wait()
        if not out.exists():
            raise RuntimeError(f"bench.isolated {args['kind']} exited {code} without a result")
        result: dict[str, Any] = json.loads(out.read_text())
        return result


async def _main(args: dict[str, Any]) -> dict[str, Any]:
    from temporalio.client import Client
    from temporalio.contrib.pydantic import pydantic_data_converter

    from bench import spawn_floor, suite
    from bench.contenders import make
    from bench.llm import LlmProcess
    from bench.sizes import SIZES

    client = await Client.connect(
        args["address"], namespace=args["namespace"], data_converter=pydantic_data_converter
    )
    if args["kind"] == "spawn_floor":
        return await spawn_floor.measure_on(client, args["n"], task_queue=args["task_queue"])
    ctx = Context(
        client=client,
        address=args["address"],
        base_url=args["base_url"],
        size=SIZES[args["size"]],
        tmp=Path(args["tmp"]),
        run_id=args["run_id"],
        log=suite.log,
        evidence_dir=Path(args["evidence_dir"]) if args["evidence_dir"] else None,
    )
    return await suite.run_contender(make(args["name"]), ctx, LlmProcess.attached(ctx.base_url))


def main() -> None:
    """``python -m bench.isolated ARGS_JSON``: run one measurement, write its JSON result."""
    args = json.loads(sys.argv[1])
    result = asyncio.run(_main(args))
    Path(args["out"]).write_text(json.dumps(result))


if __name__ == "__main__":
    main()
