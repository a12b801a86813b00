"""Live output of the LLM activity (issue 14, item 4): the streamed reply rides on the
heartbeat details as a bounded tail plus an offset, and tool calls are announced as they
stream. No server: the feed alone, the activity in an ``ActivityEnvironment``, and the host's
bookkeeping of ``client/stream.py``."""

from __future__ import annotations

import json
from pathlib import Path
from typing import Any

import pytest
from temporalio.testing import ActivityEnvironment

from toolnexus_temporal.activities import LlmConfig, SqliteConversationStore, wire
from toolnexus_temporal.activities.heartbeat import Beat
from toolnexus_temporal.activities.live import TAIL_MAX_CHARS, LiveFeed
from toolnexus_temporal.activities.llm import LlmActivities
from toolnexus_temporal.client.errors import InvalidCursorError
from toolnexus_temporal.client.stream import (
    Cursor,
    TextDelta,
    TokenCount,
    ToolCallStart,
    _Call,
    _Follow,
)
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


def _following(activity_id: str) -> _Follow:
    """A consumer whose history shows the LLM call ``activity_id`` in flight."""
    follow = _Follow(run_id="run-1", last_event=5)
    follow.calls[activity_id] = _Call()
    follow.open_llm = activity_id
    return follow


def _answer(content: str, *calls: str) -> LlmCallResult:
    return LlmCallResult(
        message=Message(
            role="assistant",
            content=content,
            tool_calls=[ToolCall(id=c, name="lookup", arguments="{}") for c in calls],
        ),
        usage=Usage(prompt_tokens=5, completion_tokens=7, total_tokens=12),
        stored_len=2,
    )


def texts(events: list[Any]) -> list[tuple[str, int, int, bool]]:
    return [(e.text, e.skipped, e.attempt, e.restart) for e in events if isinstance(e, TextDelta)]


def test_the_host_rebuilds_deltas_from_tails_and_catches_up_from_the_answer() -> None:
    """``client/stream.py``'s bookkeeping: new text only, skipped characters counted, tool
    calls announced once, the answered reply completes the text."""
    follow = _following("7")
    assert texts(follow.live("7", LiveOutput(tail="abc"))) == [("abc", 0, 1, False)]
    assert texts(follow.live("7", LiveOutput(tail="abcdef"))) == [("def", 0, 1, False)]
    assert follow.live("7", LiveOutput(tail="abcdef")) == []  # nothing new: no event
    assert follow.live("8", LiveOutput(tail="other")) == []  # not the call in flight
    far = LiveOutput(offset=3000, tail="xyz", calls=[LiveCall(id="c1", name="lookup")])
    events = follow.live("7", far)
    assert texts(events) == [("xyz", 2994, 1, False)]
    assert [e.call_id for e in events if isinstance(e, ToolCallStart)] == ["c1"]
    done = follow.answered("7", _answer("a" * 3003 + "tail!", "c1"), 1, 9)
    assert texts(done) == [("tail!", 0, 1, False)]
    assert not any(isinstance(e, ToolCallStart) for e in done)  # announced already
    assert [e.tokens for e in done if isinstance(e, TokenCount)] == [12]
    follow.open_llm = None
    assert follow.live("7", LiveOutput(tail="late")) == []  # the call is answered


def test_a_retry_restarts_the_text_instead_of_following_it() -> None:
    """A later attempt's first delta has ``restart`` (the consumer replaces the partial text),
    from the heartbeats or, when they were missed, from the answer of that attempt."""
    follow = _following("9")
    assert texts(follow.live("9", LiveOutput(tail="broken par"))) == [("broken par", 0, 1, False)]
    assert texts(follow.live("9", LiveOutput(attempt=2, tail="wh"))) == [("wh", 0, 2, True)]
    assert texts(follow.live("9", LiveOutput(attempt=2, tail="whole"))) == [("ole", 0, 2, False)]
    assert follow.live("9", LiveOutput(attempt=1, tail="broken partial")) == []  # stale
    missed = _following("4")
    missed.live("4", LiveOutput(tail="broken"))
    done = missed.answered("4", _answer("whole reply"), 3, 12)
    assert texts(done) == [("whole reply", 0, 3, True)]
    held = _following("5")  # the held reply, answered by the next attempt: the same text
    held.live("5", LiveOutput(tail="whole", reply=_answer("whole reply"), fence=1))
    assert texts(held.answered("5", _answer("whole reply"), 2, 12)) == [(" reply", 0, 2, False)]


def test_a_cursor_round_trips_and_bad_ones_are_refused() -> None:
    cursor = Cursor(run_id="0193a1b2-c3d4-7e5f-8a9b-0c1d2e3f4a5b", event=17, attempt=2, chars=40)
    assert Cursor.parse(str(cursor)) == cursor
    for bad in ("", "17", "run.1.2.3", "run.a.0.0.0.0", ".1.0.0.0.0", "run.1.0.0.0.-1"):
        with pytest.raises(InvalidCursorError):
            Cursor.parse(bad)


def test_a_consumer_resumed_at_any_event_shows_each_event_once() -> None:
    """Cut one stream after each of its events; a consumer rebuilt at that event's cursor
    (what the history gives, then :meth:`_Follow.restore`) and fed the same observations
    again yields exactly the events that came after it."""
    feed = [
        ("live", LiveOutput(tail="Let me ")),
        ("live", LiveOutput(tail="Let me look", chunks=3)),
        ("live", LiveOutput(tail="Let me look", calls=[LiveCall(id="c1", name="lookup")])),
        ("answer", _answer("Let me look it up", "c1", "c2")),
    ]

    def run(follow: _Follow, skip_live: int = 0) -> list[Any]:
        out: list[Any] = []
        for kind, value in feed:
            if kind == "live":
                assert isinstance(value, LiveOutput)
                out += follow.live("7", value)
            else:
                assert isinstance(value, LlmCallResult)
                out += follow.answered("7", value, 1, 9)
        return out

    whole = run(_following("7"))
    assert [type(e).__name__ for e in whole].count("ToolCallStart") == 2
    for cut in range(len(whole)):
        at = Cursor.parse(whole[cut].seq)
        resumed = _following("7")
        resumed.last_event = at.event
        resumed.restore(at)
        rest = run(resumed)

        def key(events: list[Any]) -> list[Any]:
            return [
                (type(e).__name__, getattr(e, "call_id", ""), getattr(e, "tokens", 0))
                for e in events
                if not isinstance(e, TextDelta)
            ]

        assert key(whole[cut + 1 :]) == key(rest), cut
        shown = "".join(e.text for e in whole[: cut + 1] if isinstance(e, TextDelta))
        assert shown + "".join(e.text for e in rest if isinstance(e, TextDelta)) == (
            "Let me look it up"
        ), cut
