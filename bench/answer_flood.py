"""Issue 36 item 8, the trial: a flood of ``answer`` signals to an agent parked on a Request
with approvers, and how long a query (``inspect``'s ``view``) takes meanwhile.

The agent's worker runs in this process; the senders (``--senders`` concurrent signal loops
of the Temporal client) and the prober (one ``view`` query every ``--every`` seconds, timed)
run in two processes of their own, so neither shares the worker's event loop, as a host's
``tnx inspect`` would not. After the flood it prints the runs the agent went through, then
alice (the listed approver) answers and the turn must finish.

Run it (about 40 s; it starts its own dev server)::

    .venv/bin/python -m bench.answer_flood --senders 16 --seconds 20

Nothing here is asserted on time; ``tests/test_answer_flood.py`` is the test (untimed).
"""

from __future__ import annotations

import argparse
import asyncio
import json
import multiprocessing
import statistics
import time
from pathlib import Path
from typing import Any

from temporalio.client import Client
from temporalio.contrib.pydantic import pydantic_data_converter
from temporalio.testing import WorkflowEnvironment

from toolnexus_temporal.activities import Registry, ToolContext, define_tool, pending
from toolnexus_temporal.client import AgentDef, AgentRuntime, Answer, Handle
from toolnexus_temporal.client.testing import ScriptedLLM, text, tool_calls
from toolnexus_temporal.worker import create_worker
from toolnexus_temporal.workflows.contract.models import ApprovalPolicy
from toolnexus_temporal.workflows.contract.names import ALL_SEARCH_ATTRIBUTES


async def slow(ctx: ToolContext) -> Any:
    """Needs an approval only alice may give."""
    if ctx.answer is None:
        return pending(kind="approval", prompt="delete?")
    return "deleted " + json.dumps(ctx.answer.data or {})


REGISTRY = Registry(
    [
        AgentDef(
            name="w", tools=["slow"], approval=ApprovalPolicy(approvers={"approval": ["alice"]})
        )
    ],
    tools=[define_tool(slow, input_schema={"type": "object", "properties": {}})],
)


def _senders(target: str, wid: str, req_id: str, n: int, seconds: float, out: Any) -> None:
    """Process: ``n`` concurrent loops signalling bob's Answer for ``seconds``."""

    async def main() -> int:
        client = await Client.connect(target, data_converter=pydantic_data_converter)
        wf = client.get_workflow_handle(wid)
        stop = time.monotonic() + seconds
        sent = 0

        async def one() -> None:
            nonlocal sent
            while time.monotonic() < stop:
                try:
                    await wf.signal("answer", {"id": req_id, "ok": True, "by": "bob"})
                    sent += 1
                except Exception:  # refused in the instant of a continue-as-new
                    await asyncio.sleep(0.01)

        await asyncio.gather(*[one() for _ in range(n)])
        return sent

    out.put(asyncio.run(main()))


def _prober(target: str, wid: str, seconds: float, every: float, out: Any) -> None:
    """Process: a ``view`` query every ``every`` s for ``seconds``; puts the latencies (s)."""

    async def main() -> list[float]:
        client = await Client.connect(target, data_converter=pydantic_data_converter)
        wf = client.get_workflow_handle(wid)
        stop = time.monotonic() + seconds
        took: list[float] = []
        while time.monotonic() < stop:
            t0 = time.monotonic()
            await wf.query("view")
            took.append(time.monotonic() - t0)
            if took[-1] > 1:
                print(f"slow query: {took[-1]:.1f} s at {t0 - (stop - seconds):.1f} s", flush=True)
            await asyncio.sleep(max(0.0, every - took[-1]))
        return took

    out.put(asyncio.run(main()))


async def runs_of(client: Client, wid: str) -> list[Any]:
    """Every run of ``wid`` (descriptions), newest first: from the current run back along
    the chain of continue-as-new (a visibility list lags behind it)."""
    runs: list[Any] = []
    run_id: str | None = None
    while True:
        d = await client.get_workflow_handle(wid, run_id=run_id).describe()
        runs.append(d)
        events = client.get_workflow_handle(wid, run_id=d.run_id).fetch_history_events()
        first = await anext(aiter(events))
        run_id = first.workflow_execution_started_event_attributes.continued_execution_run_id
        if not run_id:
            return runs


async def trial(
    senders: int,
    seconds: float,
    every: float,
    history: str | None = None,
    bogus: bool = False,
) -> dict[str, Any]:
    """Run the trial once on a dev server of its own; returns its figures."""
    from tests.conftest import temporal_binary  # the same binary the tests use

    llm = ScriptedLLM({"stub-model": [tool_calls(("slow", {})), text("done")]})
    async with await WorkflowEnvironment.start_local(
        dev_server_existing_path=temporal_binary(),
        data_converter=pydantic_data_converter,
        search_attributes=ALL_SEARCH_ATTRIBUTES,
        dev_server_log_level="error",
    ) as env:
        client = env.client
        from toolnexus_temporal.activities import LlmConfig

        async with (
            create_worker(
                client,
                registry=REGISTRY,
                llm=LlmConfig(base_url="http://mock.local/v1", model="stub-model"),
                task_queue="flood",
                transport=llm.transport(),
            ) as worker,
            worker,
        ):
            rt = await AgentRuntime(client, task_queue="flood", scope="flood").start()
            h = await rt.spawn(rt.root, "w")
            assert isinstance(h, Handle)
            r = await rt.run_turn(h, "go")
            req = r.pending
            assert req is not None
            wid = rt.workflow_id(h.id)
            target = client.service_client.config.target_host
            ctx = multiprocessing.get_context("spawn")
            q_send, q_probe = ctx.Queue(), ctx.Queue()
            procs = [
                ctx.Process(
                    target=_senders,
                    args=(target, wid, req.id + "0" * bogus, senders, seconds, q_send),
                ),
                ctx.Process(target=_prober, args=(target, wid, seconds, every, q_probe)),
            ]
            for p in procs:
                p.start()
            loop = asyncio.get_running_loop()
            sent = await loop.run_in_executor(None, q_send.get)
            lat = await loop.run_in_executor(None, q_probe.get)
            for p in procs:
                p.join()
            runs = await runs_of(client, wid)
            t0 = time.monotonic()
            await rt.answer(h, Answer(id=req.id, ok=True, by="alice", data={"a": 1}))
            while True:
                done = await rt.wait(h, timeout_ms=2_000)
                if done.status not in ("pending", "timeout"):
                    break
            after = time.monotonic() - t0
            audit = await rt.audit(h)
            if history is not None:  # every run's, oldest first, for a replay (a profile)
                for i, run in enumerate(reversed(runs)):
                    one = client.get_workflow_handle(wid, run_id=run.run_id)
                    text_ = (await one.fetch_history()).to_json()
                    Path(f"{history}.{i}.json").write_text(text_)  # noqa: ASYNC240
            return {
                "senders": senders,
                "seconds": seconds,
                "sent": sent,
                "rate": sent / seconds,
                "runs": len(runs),
                "queries": len(lat),
                "query_median_s": statistics.median(lat),
                "query_max_s": max(lat),
                "query_over_2s": sum(1 for x in lat if x > 2),
                "result": (done.status, done.text),
                "answered_in_s": after,
                "audit": [(a.by, a.ok) for a in audit],
            }


def main() -> None:
    p = argparse.ArgumentParser(description=__doc__.splitlines()[0])
    p.add_argument("--senders", type=int, default=16)
    p.add_argument("--seconds", type=float, default=20)
    p.add_argument("--every", type=float, default=0.5)
    p.add_argument("--history", help="write the first run's history (JSON) here")
    p.add_argument("--bogus", action="store_true", help="flood Answers to an unknown id")
    a = p.parse_args()
    figures = asyncio.run(trial(a.senders, a.seconds, a.every, a.history, a.bogus))
    print(json.dumps(figures, indent=1))


if __name__ == "__main__":
    main()
