"""Live output (issue 14, item 4): ``rt.stream(h)`` follows a running turn against a scripted
model that streams over real loopback HTTP (``ScriptedLLMServer``), its pieces 0.3 s apart;
the streamed tokens never reach workflow history."""

from __future__ import annotations

import asyncio
import json
import os
import pty
import threading
import time
from collections.abc import Awaitable, Callable
from typing import Any, TypeVar

from temporalio.api.enums.v1 import EventType
from temporalio.client import Client

from tests.cli_support import TNX, Cli
from tests.conftest import MODEL
from tests.helpers import accepted_updates, eventually, spawn
from tests.streaming import LONG_REPLY, REPLY, cursor_now, held, stream_config
from toolnexus_temporal.activities import LlmConfig, Registry, define_tool
from toolnexus_temporal.client import AgentDef, AgentRuntime, Handle
from toolnexus_temporal.client.stream import (
    LiveEvent,
    TextDelta,
    TokenCount,
    ToolCallEnd,
    ToolCallStart,
    TurnEnd,
)
from toolnexus_temporal.client.testing import ScriptedLLM, ScriptedLLMServer, text, tool_calls

DELAY_S = 0.3
T = TypeVar("T")


async def _collect(rt: AgentRuntime, h: Handle) -> list[LiveEvent]:
    return [ev async for ev in rt.stream(h)]


async def test_stream_yields_the_text_deltas_in_order_and_ends_with_the_turn(
    make_runtime,
) -> None:
    llm = ScriptedLLM({MODEL: [text(REPLY, completion_tokens=12)]}, chunk_delay_s=DELAY_S)
    with ScriptedLLMServer(llm) as server:
        async with make_runtime(
            {"chat": AgentDef(name="chat")}, None, llm=stream_config(server)
        ) as rt:
            h = await spawn(rt, rt.root, "chat")
            await rt.wake(h, "talk")
            events = await _collect(rt, h)
    end = events[-1]
    assert isinstance(end, TurnEnd) and end.result.status == "done", events
    assert end.result.text == REPLY
    deltas = [ev for ev in events if isinstance(ev, TextDelta)]
    assert "".join(d.text for d in deltas) == REPLY, deltas
    assert len(deltas) >= 2, deltas  # live pieces, not only the catch-up from the result
    assert all(d.skipped == 0 and d.attempt == 1 for d in deltas)
    assert len({d.call for d in deltas}) == 1
    tokens = [ev.tokens for ev in events if isinstance(ev, TokenCount)]
    assert tokens and tokens[-1] == end.result.total_tokens
    assert sum(isinstance(ev, TurnEnd) for ev in events) == 1


GATE: dict[str, asyncio.Event] = {}


async def gated(q: str) -> str:
    """Waits until the test saw this tool call start (at most 30 s)."""
    try:
        await asyncio.wait_for(GATE["lookup"].wait(), 30)
    except TimeoutError:
        return "the stream never announced the call"
    return f"found {q}"


async def test_tool_call_starts_come_before_the_tool_ends(make_runtime) -> None:
    """The tool does not return before the host saw its start event: it waits for it."""
    GATE["lookup"] = asyncio.Event()
    llm = ScriptedLLM(
        {MODEL: [tool_calls(("gated", {"q": "x" * 40})), text(REPLY)]}, chunk_delay_s=DELAY_S
    )
    registry = Registry([AgentDef(name="chat", tools=["gated"])], tools=[define_tool(gated)])
    events: list[LiveEvent] = []
    with ScriptedLLMServer(llm) as server:
        async with make_runtime(registry, None, llm=stream_config(server)) as rt:
            h = await spawn(rt, rt.root, "chat")
            await rt.wake(h, "look it up")
            async for ev in rt.stream(h):
                events.append(ev)
                if isinstance(ev, ToolCallStart):
                    GATE["lookup"].set()
    kinds = [(type(ev).__name__, getattr(ev, "call_id", "")) for ev in events]
    start = kinds.index(("ToolCallStart", "c1"))
    end = kinds.index(("ToolCallEnd", "c1"))
    first_text = next(i for i, ev in enumerate(events) if isinstance(ev, TextDelta))
    assert start < end < first_text, kinds
    tool_end = events[end]
    assert isinstance(tool_end, ToolCallEnd) and tool_end.name == "gated"
    assert not tool_end.is_error
    tool_message = llm.requests[1]["messages"][-1]
    assert tool_message["content"] == f"found {'x' * 40}", tool_message
    final = events[-1]
    assert isinstance(final, TurnEnd) and final.result.text == REPLY
    assert "".join(ev.text for ev in events if isinstance(ev, TextDelta)) == REPLY


async def test_a_stream_on_a_handle_that_is_not_running_ends_at_once(make_runtime) -> None:
    llm = ScriptedLLM({MODEL: [text("hello")]})
    async with make_runtime({"chat": AgentDef(name="chat")}, llm.transport()) as rt:
        h = await spawn(rt, rt.root, "chat")
        never_woken = await _collect(rt, h)
        assert len(never_woken) == 1 and isinstance(never_woken[0], TurnEnd)
        done = await rt.run_turn(h, "hi")
        after = await _collect(rt, h)
        assert len(after) == 1 and isinstance(after[0], TurnEnd)
        assert after[0].result == done


WORKFLOW_TASK_EVENTS = {
    EventType.EVENT_TYPE_WORKFLOW_TASK_SCHEDULED,
    EventType.EVENT_TYPE_WORKFLOW_TASK_STARTED,
    EventType.EVENT_TYPE_WORKFLOW_TASK_COMPLETED,
}


def _payload_bytes(events: Any) -> int:
    """Bytes of the events other than workflow-task bookkeeping (how many workflow tasks a
    turn takes depends on how Temporal batches its events, not on what they carry)."""
    return sum(e.ByteSize() for e in events if e.event_type not in WORKFLOW_TASK_EVENTS)


def _count(events: Any) -> int:
    return sum(1 for e in events if e.event_type not in WORKFLOW_TASK_EVENTS)


def _after(seconds: float, reply: dict[str, Any]) -> Any:
    """A script entry answering ``reply`` whole after ``seconds`` (as long as the streamed
    one takes: a turn's usage-report timers depend on its length, not on streaming)."""

    def answer(_request: dict[str, Any]) -> dict[str, Any]:
        time.sleep(seconds)
        return reply

    return answer


async def _turn_history(
    make_runtime: Any, client: Client, llm_config: LlmConfig
) -> tuple[int, int, str]:
    """History bytes and events one turn adds (spawn excluded), and its text."""
    async with make_runtime({"chat": AgentDef(name="chat")}, None, llm=llm_config) as rt:
        h = await spawn(rt, rt.root, "chat")
        wf = client.get_workflow_handle(rt.workflow_id(h.id))
        before = (await wf.fetch_history()).events
        result = await rt.run_turn(h, "talk")
        after = (await wf.fetch_history()).events
    added = (_payload_bytes(after) - _payload_bytes(before), _count(after) - _count(before))
    return added[0], added[1], result.text


async def test_history_per_turn_is_no_larger_with_streaming(make_runtime, client) -> None:
    """Same reply, one turn streamed live over ~4 s (heartbeats with text), one not streamed
    at all (sent whole after as long): the same events (workflow-task bookkeeping aside),
    their bytes equal within a few bytes of varint-encoded timestamps."""
    streamed_llm = ScriptedLLM({MODEL: [text(REPLY)]}, chunk_delay_s=DELAY_S)
    plain_llm = ScriptedLLM({MODEL: [_after(DELAY_S * 14, text(REPLY))]})
    with ScriptedLLMServer(streamed_llm) as a, ScriptedLLMServer(plain_llm) as b:
        streamed = await _turn_history(make_runtime, client, stream_config(a))
        plain = await _turn_history(make_runtime, client, stream_config(b, stream=False))
    assert streamed[2] == plain[2] == REPLY
    assert streamed[1] == plain[1], (streamed, plain)
    assert abs(streamed[0] - plain[0]) <= 32, (streamed, plain)
    assert len(streamed_llm.frames_sent) >= 10  # it did stream, piece by piece


FOLLOW_DELAY_S = 0.1


def held_long_replies(n: int) -> tuple[ScriptedLLM, list[threading.Event]]:
    """A script of ``n`` LONG_REPLY turns, each held until its event is set."""
    releases = [threading.Event() for _ in range(n)]
    entries = [held(text(LONG_REPLY), release) for release in releases]
    return ScriptedLLM({MODEL: entries}, chunk_delay_s=FOLLOW_DELAY_S), releases


async def once_following(
    client: Client, rt: AgentRuntime, h: Handle, release: threading.Event, cli: Awaitable[T]
) -> T:
    """Run ``cli`` (a ``tnx`` wait on ``h``'s running turn) and set ``release`` once it
    follows the turn (its ``wait`` update was accepted): a ``tnx`` process takes seconds to
    start, and the reply must stream while it follows."""
    wid = rt.workflow_id(h.id)
    before = await accepted_updates(client, wid)
    task = asyncio.ensure_future(cli)

    async def following() -> bool:
        return task.done() or await accepted_updates(client, wid) > before

    try:
        await eventually(following, within_s=90, what="tnx to follow the turn")
    finally:
        release.set()
    return await task


async def test_tnx_wait_follow_prints_the_text_as_it_streams(make_runtime, env, client) -> None:
    """``tnx`` takes seconds to start and sends no update while it follows (nothing on the
    server says it is following): it follows from a cursor taken while the reply is held,
    so it prints the whole text however late it started."""
    llm, (first, second) = held_long_replies(2)
    with ScriptedLLMServer(llm) as server:
        async with make_runtime(
            {"chat": AgentDef(name="chat")}, None, llm=stream_config(server)
        ) as rt:
            h = await spawn(rt, rt.root, "chat")
            tnx = Cli(env, rt)
            await rt.wake(h, "talk")
            seq = await cursor_now(rt, h)
            first.set()
            run = await tnx("wait", h.id, "--follow", "--after", seq)
            assert run.code == 0, run
            # the text streamed first, then the result line (the text not printed again)
            assert run.out.index(LONG_REPLY.rstrip()) < run.out.index("done · "), run
            assert run.out.count("piece39") == 1, run
            assert "resume with" not in run.out, run  # an uninterrupted follow: as before
            await rt.wake(h, "again")
            seq = await cursor_now(rt, h)
            second.set()
            jsonl = await tnx("wait", h.id, "--follow", "--json", "--after", seq)
            assert jsonl.code == 0, jsonl
            events = [json.loads(line) for line in jsonl.out.splitlines()]
            assert events[-1]["kind"] == "end" and events[-1]["result"]["status"] == "done"
            texts = [e["text"] for e in events if e["kind"] == "text"]
            assert "".join(texts) == LONG_REPLY, jsonl
            assert all(e["seq"] for e in events), jsonl


async def test_tnx_wait_shows_a_status_line_on_a_terminal_only(make_runtime, env, client) -> None:
    llm, (first, second) = held_long_replies(2)
    with ScriptedLLMServer(llm) as server:
        async with make_runtime(
            {"chat": AgentDef(name="chat")}, None, llm=stream_config(server)
        ) as rt:
            h = await spawn(rt, rt.root, "chat")
            tnx = Cli(env, rt)
            await rt.wake(h, "talk")
            piped = await once_following(client, rt, h, first, tnx("wait", h.id))
            assert piped.code == 0 and "running ·" not in piped.out, piped
            assert piped.out.startswith("done · "), piped
            await rt.wake(h, "again")
            # the status line is up before the stream begins: the reply goes once it shows
            shown = await _on_a_terminal(
                tnx, "wait", h.id, on_output=lambda out: b"running" in out and second.set()
            )
    assert "running · " in shown and "tokens" in shown, shown
    assert "done · turns 1" in shown, shown


async def _on_a_terminal(
    tnx: Cli, *args: str, on_output: Callable[[bytes], object] | None = None
) -> str:
    """Run ``tnx`` with its stdout on a pseudo-terminal; everything it wrote there
    (``on_output`` sees what it wrote so far, after each read)."""
    leader, follower = pty.openpty()
    proc = await asyncio.create_subprocess_exec(
        str(TNX), *args, env=tnx.environ, stdout=follower, stderr=asyncio.subprocess.PIPE
    )
    os.close(follower)
    chunks: list[bytes] = []
    loop = asyncio.get_running_loop()
    while True:
        try:
            chunk = await loop.run_in_executor(None, os.read, leader, 4096)
        except OSError:  # EIO: the terminal closed with the process
            break
        if not chunk:
            break
        chunks.append(chunk)
        if on_output is not None:
            on_output(b"".join(chunks))
    await asyncio.wait_for(proc.wait(), 90)
    os.close(leader)
    return b"".join(chunks).decode(errors="replace")
