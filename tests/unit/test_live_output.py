"""Live output of the LLM activity (issue 14, item 4): the streamed reply rides on the
heartbeat details as a bounded tail plus an offset, and tool calls are announced as they
stream. No server: the feed alone, the activity in an ``ActivityEnvironment``, and the host's
bookkeeping of ``client/stream.py``."""

from __future__ import annotations

import json
from pathlib import Path
from typing import Any

from temporalio.testing import ActivityEnvironment

from toolnexus_temporal.activities import LlmConfig, SqliteConversationStore, wire
from toolnexus_temporal.activities.heartbeat import Beat
from toolnexus_temporal.activities.live import TAIL_MAX_CHARS, LiveFeed
from toolnexus_temporal.activities.llm import LlmActivities
from toolnexus_temporal.client.stream import TextDelta, TokenCount, ToolCallStart, _Follow
from toolnexus_temporal.client.testing import ScriptedLLM, text, tool_calls
from toolnexus_temporal.workflows.contract.messages import (
    LiveCall,
    LiveOutput,
    LlmCallInput,
    LlmCallResult,
)
from toolnexus_temporal.workflows.contract.models import Message, ToolCall, Usage


def _chunk(delta: dict[str, Any]) -> str:
    return json.dumps({"choices": [{"index": 0, "delta": delta}]})


def _consistent(final: str, out: LiveOutput) -> bool:
    """``out`` is a window of ``final``: its tail sits at its offset."""
    return final[out.offset : out.offset + len(out.tail)] == out.tail


async def test_the_feed_keeps_a_bounded_tail_at_its_offset_and_names_tool_calls() -> None:
    beat = Beat()
    feed = LiveFeed(beat, attempt=2)
    assembler = wire.StreamAssembler("openai")
    pieces = [f"{i:05d}-" + "y" * 94 for i in range(60)]  # 6,000 characters
    outs = []
    for piece in pieces:
        assembler.feed(_chunk({"content": piece}))
        feed.update(assembler)
        outs.append(feed.snapshot())
    final = "".join(pieces)
    assert all(_consistent(final, o) and len(o.tail) <= TAIL_MAX_CHARS for o in outs)
    assert outs[-1].length == len(final) and outs[-1].offset == len(final) - TAIL_MAX_CHARS
    assert outs[-1].attempt == 2 and outs[-1].chunks == 60 and outs[-1].calls == []
    assert beat.source is not None and beat.source() == outs[-1]
    call = {"index": 0, "id": "c9", "function": {"name": "lookup", "arguments": ""}}
    assembler.feed(_chunk({"tool_calls": [call]}))
    feed.update(assembler)
    assert [(c.id, c.name) for c in feed.snapshot().calls] == [("c9", "lookup")]
    # The serialized details stay small whatever the reply's length.
    assert len(feed.snapshot().model_dump_json()) < TAIL_MAX_CHARS + 300


def _acts(tmp_path: Path, llm: ScriptedLLM) -> LlmActivities:
    return LlmActivities(
        LlmConfig(base_url="http://mock.local/v1", model="m"),
        SqliteConversationStore(tmp_path / "s.sqlite"),
        transport=llm.transport(),
    )


def _input() -> LlmCallInput:
    return LlmCallInput(
        conv_id="c", base_len=0, fence=1, new_messages=[Message(role="user", content="hello")]
    )


async def test_the_activity_publishes_the_streamed_text_on_its_heartbeats(
    tmp_path: Path,
) -> None:
    reply = "".join(f"word{i:02d} " for i in range(12))  # 12 stream pieces of 8 characters
    llm = ScriptedLLM({"m": [text(reply)]}, chunk_delay_s=0.1)
    beats: list[tuple[Any, ...]] = []
    env = ActivityEnvironment()
    env.on_heartbeat = lambda *details: beats.append(details)
    result = await env.run(_acts(tmp_path, llm).llm_call, _input())
    assert result.message.content == reply
    outs = [LiveOutput.model_validate(d[0]) for d in beats if d]
    assert len({o.length for o in outs}) >= 2, beats  # text went out while it streamed
    assert all(_consistent(reply, o) for o in outs)
    lengths = [o.length for o in outs]
    assert lengths == sorted(lengths) and 0 < lengths[-1] <= len(reply)


async def test_the_activity_announces_tool_calls_while_their_arguments_stream(
    tmp_path: Path,
) -> None:
    reply = tool_calls(("lookup", {"q": "x" * 80}))
    llm = ScriptedLLM({"m": [reply]}, chunk_delay_s=0.1)
    beats: list[tuple[Any, ...]] = []
    env = ActivityEnvironment()
    env.on_heartbeat = lambda *details: beats.append(details)
    result = await env.run(_acts(tmp_path, llm).llm_call, _input())
    assert result.message.tool_calls and result.message.tool_calls[0].name == "lookup"
    outs = [LiveOutput.model_validate(d[0]) for d in beats if d]
    assert any([(c.id, c.name) for c in o.calls] == [("c1", "lookup")] for o in outs), beats


def test_the_host_rebuilds_deltas_from_tails_and_catches_up_from_the_answer() -> None:
    """``client/stream.py``'s bookkeeping: new text only, skipped characters counted, a retry
    streams again, tool calls announced once, the answered reply completes the text."""
    follow = _Follow(start_len=0)

    def texts(events: list[Any]) -> list[tuple[str, int, int]]:
        return [(e.text, e.skipped, e.attempt) for e in events if isinstance(e, TextDelta)]

    assert texts(follow.live("7", LiveOutput(tail="abc"))) == [("abc", 0, 1)]
    assert texts(follow.live("7", LiveOutput(tail="abcdef"))) == [("def", 0, 1)]
    assert follow.live("7", LiveOutput(tail="abcdef")) == []  # nothing new: no event
    far = LiveOutput(offset=3000, tail="xyz", calls=[LiveCall(id="c1", name="lookup")])
    events = follow.live("7", far)
    assert texts(events) == [("xyz", 2994, 1)]
    assert [e.call_id for e in events if isinstance(e, ToolCallStart)] == ["c1"]
    content = "a" * 3003 + "tail!"
    answer = LlmCallResult(
        message=Message(
            role="assistant",
            content=content,
            tool_calls=[ToolCall(id="c1", name="lookup", arguments="{}")],
        ),
        usage=Usage(prompt_tokens=5, completion_tokens=7, total_tokens=12),
        stored_len=2,
    )
    done = follow.answered("7", answer)
    assert texts(done) == [("tail!", 0, 1)]
    assert not any(isinstance(e, ToolCallStart) for e in done)  # announced already
    assert [e.tokens for e in done if isinstance(e, TokenCount)] == [12]
    assert follow.live("7", LiveOutput(tail="late")) == []  # the call is answered
    assert texts(follow.live("9", LiveOutput(tail="one"))) == [("one", 0, 1)]
    assert texts(follow.live("9", LiveOutput(attempt=2, tail="on"))) == [("on", 0, 2)]
