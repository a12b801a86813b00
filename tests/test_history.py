"""The transcript lives in the conversation store, not in workflow history: the history of a
50-turn conversation grows by a constant number of bytes per turn."""

from __future__ import annotations

import statistics
from itertools import pairwise

from temporalio.client import WorkflowHistory

from tests.conftest import rt_transcript
from toolnexus_temporal.client import AgentDef, Handle
from toolnexus_temporal.client.testing import ScriptedLLM, text

TURNS = 50
MESSAGE = "x" * 1000  # ~1 KB per user message and per reply


def history_bytes(history: WorkflowHistory) -> int:
    return sum(event.ByteSize() for event in history.events)


async def test_history_grows_by_a_constant_per_turn(make_runtime, client, store) -> None:
    llm = ScriptedLLM({"stub-model": [text(MESSAGE)]}, repeat_last=True)
    async with make_runtime({"chat": AgentDef(name="chat")}, llm.transport()) as rt:
        h = await rt.spawn(rt.root, "chat")
        assert isinstance(h, Handle)
        wf = client.get_workflow_handle(rt.workflow_id(h.id))
        sizes = [history_bytes(await wf.fetch_history())]
        events = [len((await wf.fetch_history()).events)]
        for turn in range(TURNS):
            r = await rt.run_turn(h, f"{turn:04d} {MESSAGE}")
            assert r.status == "done"
            history = await wf.fetch_history()
            sizes.append(history_bytes(history))
            events.append(len(history.events))
        stored = await rt_transcript(rt, store, h)
        assert len(stored) == 2 * TURNS

    deltas = [b - a for a, b in pairwise(sizes)][1:]  # the first turn also spawns
    event_deltas = [b - a for a, b in pairwise(events)][1:]
    slope = statistics.linear_regression(range(len(deltas)), deltas).slope
    event_slope = statistics.linear_regression(range(len(event_deltas)), event_deltas).slope
    # The conversation grows by ~2 KB a turn (100 KB over the run). Were the transcript in
    # history, each turn's delta would grow by ~2 KB a turn (slope ~2000 bytes/turn). Here the
    # deltas are flat; they vary only when Temporal batches a turn's events into one workflow
    # task more or less (a task is 3 small events), never with the conversation's length.
    assert abs(slope) < 20, (slope, deltas)
    assert abs(statistics.mean(deltas[:10]) - statistics.mean(deltas[-10:])) < 800, deltas
    assert max(deltas) - min(deltas) < 2_000, deltas
    assert abs(event_slope) < 0.2 and max(event_deltas) <= 30, event_deltas
    # One turn carries the new ~1 KB prompt and the ~1 KB reply a few times over, never the
    # whole transcript.
    assert max(deltas) < 4 * len(MESSAGE) + 6_000, deltas
