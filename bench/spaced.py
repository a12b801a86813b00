"""Billable actions of turns spaced apart, as a fleet sees them (issue 38's sizing guide).

The suite's plain and tool turns are the median of turns run back to back, where the usage
report to the parent (``RuntimeOptions.live_usage_ms``, 1 s) is shared by ~20 turns. An agent
talked to a few times a day, or ticking hourly, shares nothing: each turn carries its own
report (a coalescing timer and a signal). This measures those turns on a dev server of its
own, with a scripted model (zero latency: heartbeats, which a slow model adds and which Temporal
Cloud bills too, are not in history and not counted here; ``docs/guide/sizing.md`` adds them
from the worker's heartbeat settings):

* a chat turn (``rt.run_turn``) with no other turn within ``live_usage_ms``;
* a turn with one tool call, spaced the same way;
* a tick turn, ticks 4 s apart (nothing coalesces, as with hourly ticks).

Each is counted over the agent's and its parent's histories (``bench.actions``: a
workflow-to-workflow signal is one action, charged where it is received), per turn, after
a first turn that warms up. Run: ``python -m bench.spaced [OUT.json]`` (about 40 s).
"""

from __future__ import annotations

import asyncio
from collections import Counter
from datetime import UTC, datetime
from pathlib import Path
from typing import Any

from temporalio.api.enums.v1 import EventType
from temporalio.client import Client
from temporalio.contrib.pydantic import pydantic_data_converter
from temporalio.testing import WorkflowEnvironment

from bench.actions import count_actions
from bench.stamped import emit
from toolnexus_temporal.activities import (
    LlmConfig,
    Registry,
    SqliteConversationStore,
    define_tool,
)
from toolnexus_temporal.cli.temporal_cli import temporal_binary
from toolnexus_temporal.client import AgentDef, AgentRuntime, Handle, TickSpec
from toolnexus_temporal.client.testing import ScriptedLLM, text, tool_calls
from toolnexus_temporal.worker import create_worker
from toolnexus_temporal.workflows.contract.names import ALL_SEARCH_ATTRIBUTES

MODEL = "stub-model"
TURNS = 4
"""Turns counted per shape (after one warm-up turn)."""
SPACING_S = 2.5
"""Seconds between two turns: over ``live_usage_ms`` (1 s), so no report is shared."""
TICK_EVERY_MS = 4_000


def lookup(q: str) -> str:
    """Look something up."""
    return f"found {q}"


async def _events(client: Client, workflow_id: str) -> list[Any]:
    return [e async for e in client.get_workflow_handle(workflow_id).fetch_history_events()]


async def _per_turn(
    client: Client, rt: AgentRuntime, h: Handle, drive: Any, turns: int, settle_s: float
) -> dict[str, Any]:
    """Actions per turn of ``turns`` turns driven by ``drive()`` (each followed by
    ``settle_s`` seconds), over the agent and its parent (the root), counted as the
    difference of their histories."""
    wids = [rt.workflow_id(h.id), rt.workflow_id("root")]
    await drive()  # warm-up: the spawn and the first turn are not counted
    await asyncio.sleep(settle_s)
    before = {w: len(await _events(client, w)) for w in wids}
    for _ in range(turns):
        await drive()
        await asyncio.sleep(settle_s)
    kinds: Counter[str] = Counter()
    events = size = 0
    for w in wids:
        new = (await _events(client, w))[before[w] :]
        kinds += count_actions(new)
        events += len(new)
        size += sum(e.ByteSize() for e in new)
    return {
        "turns": turns,
        "actions_per_turn": round(sum(kinds.values()) / turns, 2),
        "kinds_per_turn": {k: round(v / turns, 2) for k, v in sorted(kinds.items())},
        "events_per_turn_agent_and_parent": round(events / turns, 1),
        "history_bytes_per_turn_agent_and_parent": round(size / turns),
    }


async def measure() -> dict[str, Any]:
    """Run the three shapes; their figures."""
    script = [text(f"reply {n}") for n in range(40)]
    tool_script = [
        m for n in range(20) for m in (tool_calls(("lookup", {"q": str(n)})), text("ok"))
    ]
    llm = ScriptedLLM({MODEL: script, "tool-model": tool_script, "tick-model": list(script)})
    registry = Registry(
        [
            AgentDef(name="chat", model=MODEL),
            AgentDef(name="tooled", model="tool-model", tools=["lookup"]),
            AgentDef(
                name="ticker",
                model="tick-model",
                tick=TickSpec(every_ms=TICK_EVERY_MS, prompt="look"),
            ),
        ],
        tools=[define_tool(lookup)],
    )
    async with await WorkflowEnvironment.start_local(
        dev_server_existing_path=temporal_binary(),
        data_converter=pydantic_data_converter,
        search_attributes=ALL_SEARCH_ATTRIBUTES,
        dev_server_log_level="error",
    ) as env:
        client = env.client
        store = SqliteConversationStore(Path("/tmp") / f"spaced-{datetime.now(UTC):%H%M%S}.db")
        async with (
            create_worker(
                client,
                registry=registry,
                llm=LlmConfig(base_url="http://mock.local/v1", model=MODEL),
                task_queue="spaced",
                store=store,
                transport=llm.transport(),
            ) as worker,
            worker,
        ):
            rt = await AgentRuntime(client, task_queue="spaced", scope="spaced").start()
            chat = await rt.spawn(rt.root, "chat")
            tooled = await rt.spawn(rt.root, "tooled")
            assert isinstance(chat, Handle) and isinstance(tooled, Handle)
            out = {
                "chat_turn": await _per_turn(
                    client, rt, chat, lambda: rt.run_turn(chat, "hi"), TURNS, SPACING_S
                ),
                "tool_turn": await _per_turn(
                    client, rt, tooled, lambda: rt.run_turn(tooled, "look it up"), TURNS, SPACING_S
                ),
            }
            ticker = await rt.spawn(rt.root, "ticker")
            assert isinstance(ticker, Handle)

            root_wid = rt.workflow_id("root")

            async def reports() -> int:
                signaled = EventType.EVENT_TYPE_WORKFLOW_EXECUTION_SIGNALED
                return sum(1 for e in await _events(client, root_wid) if e.event_type == signaled)

            async def one_tick() -> None:
                # a window from one tick's report (the last action of a tick turn) to another's
                # holds whole tick turns only
                seen = await reports()
                while await reports() == seen:  # noqa: ASYNC110 (polls the server)
                    await asyncio.sleep(0.05)

            out["tick_turn"] = await _per_turn(client, rt, ticker, one_tick, TURNS, 0.0)
            await rt.close(rt.root, force=True)
    return out


def main() -> None:
    """``python -m bench.spaced [OUT.json]``: print the figures (and write them)."""
    emit(
        "billable actions per turn, turns spaced over live_usage_ms (bench/spaced.py)",
        "bench.spaced",
        asyncio.run(measure()),
    )


if __name__ == "__main__":
    main()
