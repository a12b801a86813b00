"""The cost of OpenTelemetry tracing (issue 27, item 1; docs/guide/tracing.md): our runtime's
turn latency with tracing on versus off, in one run.

Run as ``python -m bench.tracing [--turns N] [--rounds N]`` (about a minute): an embedded dev
server, the suite's scripted LLM server (``bench/llm.py``, real HTTP) and two in-process
workers of ours, each with its own runtime, one plain and one traced (the tracing interceptor
on client and worker, the SDK's ``BatchSpanProcessor`` and an exporter that drops the spans:
what is measured is the instrumentation, not a collector). Rounds alternate: ``--turns``
plain turns and as many tool turns (LLM → tool → LLM) off, then on, so both see the same
machine. Prints and writes ``bench/results/<date>-tracing.{json,md}`` (``--out``,
``--stamp``): p50/p95 per side and the on/off ratio of each. Not a test.
"""

from __future__ import annotations

import argparse
import asyncio
import contextlib
import json
import shutil
import tempfile
import time
import uuid
from collections.abc import AsyncIterator, Sequence
from datetime import UTC, datetime
from pathlib import Path
from typing import Any

from opentelemetry.sdk.trace import ReadableSpan, TracerProvider
from opentelemetry.sdk.trace.export import BatchSpanProcessor, SpanExporter, SpanExportResult
from temporalio.client import Client

from bench import llm
from bench.ours import registry
from bench.suite import dev_server, percentile
from toolnexus_temporal.activities import LlmConfig, SqliteConversationStore
from toolnexus_temporal.client import AgentRuntime, Handle
from toolnexus_temporal.observability.otel import TnxTracingInterceptor
from toolnexus_temporal.worker import create_worker


class _Dropped(SpanExporter):
    """Counts the spans and drops them."""

    def __init__(self) -> None:
        self.spans = 0

    def export(self, spans: Sequence[ReadableSpan]) -> SpanExportResult:
        self.spans += len(spans)
        return SpanExportResult.SUCCESS


@contextlib.asynccontextmanager
async def _side(
    client: Client, base_url: str, tmp: Path, name: str
) -> AsyncIterator[tuple[AgentRuntime, Handle, Handle]]:
    task_queue = f"bench-tracing-{name}-{uuid.uuid4().hex[:8]}"
    async with (
        create_worker(
            client,
            registry=registry(1),
            llm=LlmConfig(base_url=base_url, model=llm.MODEL_CHAT),
            task_queue=task_queue,
            store=SqliteConversationStore(tmp / f"{task_queue}.sqlite"),
        ) as worker,
        worker,
    ):
        rt = await AgentRuntime(client, task_queue=task_queue, scope=task_queue).start()
        chat, tool = await rt.spawn(rt.root, "chat"), await rt.spawn(rt.root, "tooler")
        assert isinstance(chat, Handle) and isinstance(tool, Handle), (chat, tool)
        yield rt, chat, tool


async def _turns(rt: AgentRuntime, h: Handle, n: int, out: list[float]) -> None:
    for i in range(n):
        start = time.perf_counter()
        result = await rt.run_turn(h, f"turn {i}")
        out.append((time.perf_counter() - start) * 1000)
        if result.status != "done":
            raise RuntimeError(f"{h.id}: {result.status}: {result.text}")


async def run(args: argparse.Namespace) -> dict[str, Any]:
    """Both sides, rounds alternating (module docstring); the figures as a dict."""
    exporter = _Dropped()
    provider = TracerProvider()
    provider.add_span_processor(BatchSpanProcessor(exporter))
    interceptor = TnxTracingInterceptor(provider.get_tracer("bench"))
    tmp = Path(tempfile.mkdtemp(prefix="bench-tracing-"))
    ms: dict[str, dict[str, list[float]]] = {
        side: {"plain": [], "tool": []} for side in ("off", "on")
    }
    with llm.LlmProcess() as server:
        async with dev_server(None) as (client, _address):
            traced = Client(**{**client.config(), "interceptors": [interceptor]})
            async with (
                _side(client, server.base_url, tmp, "off") as off,
                _side(traced, server.base_url, tmp, "on") as on,
            ):
                for side in (off, on):  # warm-up, not recorded
                    await _turns(side[0], side[1], 5, [])
                    await _turns(side[0], side[2], 5, [])
                for _ in range(args.rounds):
                    for key, (rt, chat, tool) in (("off", off), ("on", on)):
                        await _turns(rt, chat, args.turns, ms[key]["plain"])
                        await _turns(rt, tool, args.turns, ms[key]["tool"])
    provider.shutdown()
    shutil.rmtree(tmp, ignore_errors=True)
    figures: dict[str, Any] = {"turns_per_side_and_kind": args.rounds * args.turns}
    for kind in ("plain", "tool"):
        row: dict[str, Any] = {}
        for q in (50, 95):
            off_q = percentile(ms["off"][kind], q)
            on_q = percentile(ms["on"][kind], q)
            assert off_q is not None and on_q is not None
            row[f"p{q}_off_ms"], row[f"p{q}_on_ms"] = round(off_q, 2), round(on_q, 2)
            row[f"p{q}_ratio"] = round(on_q / off_q, 3)
        figures[kind] = row
    figures["spans_exported"] = exporter.spans
    return figures


def _markdown(figures: dict[str, Any], stamp: str) -> str:
    lines = [
        f"# Tracing on vs off ({stamp})",
        "",
        f"{figures['turns_per_side_and_kind']} turns per side and kind, rounds alternating; "
        f"{figures['spans_exported']} spans made on the traced side.",
        "",
        "| turn | p50 off (ms) | p50 on (ms) | p50 on/off "
        "| p95 off (ms) | p95 on (ms) | p95 on/off |",
        "|---|---|---|---|---|---|---|",
    ]
    for kind in ("plain", "tool"):
        r = figures[kind]
        lines.append(
            f"| {kind} | {r['p50_off_ms']} | {r['p50_on_ms']} | {r['p50_ratio']}x | "
            f"{r['p95_off_ms']} | {r['p95_on_ms']} | {r['p95_ratio']}x |"
        )
    return "\n".join(lines) + "\n"


def main() -> None:
    """``python -m bench.tracing``."""
    parser = argparse.ArgumentParser(description=__doc__.splitlines()[0])
    parser.add_argument("--turns", type=int, default=20, help="turns per kind, side and round")
    parser.add_argument("--rounds", type=int, default=5)
    parser.add_argument("--out", default="bench/results")
    parser.add_argument("--stamp", default=datetime.now(UTC).strftime("%Y-%m-%d") + "-tracing")
    args = parser.parse_args()
    figures = asyncio.run(run(args))
    out = Path(args.out)
    (out / f"{args.stamp}.json").write_text(json.dumps(figures, indent=2) + "\n")
    (out / f"{args.stamp}.md").write_text(_markdown(figures, args.stamp))
    print(_markdown(figures, args.stamp))


if __name__ == "__main__":
    main()
