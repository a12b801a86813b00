"""Follow a handle's running turn live (issue 14, item 4): ``AgentRuntime.stream(h)``.

Three Temporal-native sources, none of which adds a byte to workflow history:

* **text**: the heartbeat details of the running ``tnx.llm_call`` activity (a
  :class:`~toolnexus_temporal.workflows.contract.messages.LiveOutput`: the end of the text so
  far and its offset), read with ``DescribeWorkflowExecution`` every ``POLL_S`` while an LLM call is
  in flight, and only then;
* **structure**: the workflow's history, followed with a long poll (``GetWorkflowExecutionHistory``
  with ``wait_new_event``): an LLM call scheduled or answered (its result gives the rest of
  its text, its tool calls and its usage), a tool activity ended;
* **the end**: :meth:`AgentRuntime.wait` (the wake's ``turn`` update, else ``wait``).

Events are :data:`LiveEvent` models; the last one is always :class:`TurnEnd`. Only what
happens after the stream starts is reported, except the text the call in flight has already
streamed (its whole tail). A stream on a handle that is not running (idle, suspended, closed)
ends at once with its last result (``wait`` would wait for the next one); it never waits for
a next wake.

The stream follows the run the handle had when it began: a turn that continues as new while
parked still ends the stream with its result, without the new run's text.

The text of one LLM call, concatenated over its :class:`TextDelta` events, is the call's
whole reply: the host catches up from the answered call's result when it missed the last
heartbeats. It differs only when the call was retried (``attempt`` > 1: the text starts
again) or when the host fell more than ``LIVE_TAIL_MAX_CHARS`` characters behind a fast model
(``skipped`` counts the characters it did not see).
"""

from __future__ import annotations

import asyncio
import contextlib
from collections.abc import AsyncIterator, Awaitable, Callable
from dataclasses import dataclass, field
from typing import Any, Literal

from pydantic import BaseModel
from temporalio.api.enums.v1 import EventType
from temporalio.api.history.v1 import HistoryEvent
from temporalio.client import Client
from temporalio.service import RPCError

from toolnexus_temporal.client.handle import Handle
from toolnexus_temporal.client.rpc import rpc_error
from toolnexus_temporal.workflows.contract.messages import LiveOutput, LlmCallResult, ToolCallInput
from toolnexus_temporal.workflows.contract.models import TaskResult, ToolResult
from toolnexus_temporal.workflows.contract.names import LLM_CALL_ACTIVITY, TOOL_CALL_ACTIVITY

POLL_S = 0.2
"""Seconds between two reads of the LLM call's heartbeat details while it runs. The worker
sends them to the server at most once a second (its heartbeat throttle), the first at once."""


class TextDelta(BaseModel):
    """Text the model wrote since the last delta of the same LLM call.

    Attributes:
        text: the new characters.
        call: the LLM call's activity id (one per model round trip of the turn).
        attempt: the activity attempt streaming it (a retried call streams its text again).
        skipped: characters of this call not shown before ``text`` (the host fell behind).
    """

    kind: Literal["text"] = "text"
    text: str
    call: str
    attempt: int = 1
    skipped: int = 0


class ToolCallStart(BaseModel):
    """The model called a tool: announced in its stream, or at the latest with its answered
    reply, before the tool's result is back.

    Attributes:
        call_id: the model's tool call id.
        name: the tool's name (``task`` for a delegation).
    """

    kind: Literal["tool_start"] = "tool_start"
    call_id: str
    name: str


class ToolCallEnd(BaseModel):
    """A tool activity ended (delegations through ``task`` have none).

    Attributes:
        call_id: the model's tool call id.
        name: the tool's name.
        is_error: the tool failed or returned an error result.
    """

    kind: Literal["tool_end"] = "tool_end"
    call_id: str
    name: str
    is_error: bool = False


class TokenCount(BaseModel):
    """Tokens of the turn seen so far: the usage of the LLM calls answered since the stream
    began, plus the stream events of the call in flight (about one token each).

    Attributes:
        tokens: the count.
    """

    kind: Literal["tokens"] = "tokens"
    tokens: int


class TurnEnd(BaseModel):
    """The turn ended (the last event of a stream).

    Attributes:
        result: the turn's result, as :meth:`AgentRuntime.wait` gives it; for a handle that
            was not running, its last result (None when it never ran a turn).
    """

    kind: Literal["end"] = "end"
    result: TaskResult | None


LiveEvent = TextDelta | ToolCallStart | ToolCallEnd | TokenCount | TurnEnd
"""One event of :meth:`AgentRuntime.stream`."""


@dataclass
class _Call:
    """What this stream has shown of one LLM call."""

    attempt: int = 0
    upto: int = 0
    chunks: int = 0
    done: bool = False


@dataclass
class _Scheduled:
    """An activity scheduled in the followed run."""

    activity_id: str
    kind: Literal["llm", "tool", "other"]
    tool: ToolCallInput | None = None


@dataclass
class _Follow:
    """The consumer's state: every observation goes through :meth:`take` in arrival order."""

    start_len: int
    calls: dict[str, _Call] = field(default_factory=dict)
    started: set[str] = field(default_factory=set)
    scheduled: dict[int, _Scheduled] = field(default_factory=dict)
    tokens_done: int = 0
    tokens_shown: int = 0
    last_event: int = 0
    """The last history event whose events the consumer has yielded."""

    def live(self, activity_id: str, out: LiveOutput) -> list[LiveEvent]:
        """Events for the heartbeat details ``out`` of the LLM call ``activity_id``."""
        call = self.calls.setdefault(activity_id, _Call())
        if call.done:
            return []
        events: list[LiveEvent] = []
        if out.attempt != call.attempt:
            call.attempt, call.upto = out.attempt, 0
        if out.length > call.upto:
            skipped = max(out.offset - call.upto, 0)
            text = out.tail[max(call.upto - out.offset, 0) :]
            events.append(
                TextDelta(text=text, call=activity_id, attempt=out.attempt, skipped=skipped)
            )
            call.upto = out.length
        for announced in out.calls:
            events.extend(self._start(announced.id, announced.name))
        call.chunks = out.chunks
        return events + self._tokens()

    def answered(self, activity_id: str, result: LlmCallResult) -> list[LiveEvent]:
        """Events for the answered LLM call ``activity_id``: the rest of its text, its tool
        calls, its usage."""
        call = self.calls.setdefault(activity_id, _Call())
        events: list[LiveEvent] = []
        content = result.message.content or ""
        if len(content) > call.upto:
            attempt = max(call.attempt, 1)
            events.append(TextDelta(text=content[call.upto :], call=activity_id, attempt=attempt))
        for tc in result.message.tool_calls or []:
            events.extend(self._start(tc.id, tc.name))
        call.done, call.chunks = True, 0
        self.tokens_done += result.usage.total_tokens
        return events + self._tokens()

    def _start(self, call_id: str, name: str) -> list[LiveEvent]:
        if call_id in self.started:
            return []
        self.started.add(call_id)
        return [ToolCallStart(call_id=call_id, name=name)]

    def _tokens(self) -> list[LiveEvent]:
        total = self.tokens_done + sum(c.chunks for c in self.calls.values() if not c.done)
        if total == self.tokens_shown:
            return []
        self.tokens_shown = total
        return [TokenCount(tokens=total)]


_CLOSED = {
    EventType.EVENT_TYPE_ACTIVITY_TASK_COMPLETED: "activity_task_completed_event_attributes",
    EventType.EVENT_TYPE_ACTIVITY_TASK_FAILED: "activity_task_failed_event_attributes",
    EventType.EVENT_TYPE_ACTIVITY_TASK_TIMED_OUT: "activity_task_timed_out_event_attributes",
    EventType.EVENT_TYPE_ACTIVITY_TASK_CANCELED: "activity_task_canceled_event_attributes",
}


async def follow_turn(
    client: Client,
    handle_id: str,
    workflow_id: str,
    wait: Callable[[], Awaitable[TaskResult]],
    inspect: Callable[[], Awaitable[Handle]],
    *,
    poll_s: float = POLL_S,
) -> AsyncIterator[LiveEvent]:
    """The events of the handle's running turn (see the module docstring).

    Args:
        client: the runtime's client (its data converter decodes details and results).
        handle_id: the handle id (for errors).
        workflow_id: its workflow id.
        wait: the runtime's ``wait`` on the handle; its result ends the stream.
        inspect: the runtime's ``inspect`` of the handle: not running (nor queued for a
            slot), the stream ends at once with its last result.
        poll_s: seconds between two reads of the heartbeat details of the call in flight.

    Raises:
        HandleNotFoundError: no such handle.
    """
    h = await inspect()
    if h.state != "running" and not h.queued:
        yield TurnEnd(result=h.last_result)
        return
    try:
        desc = await client.get_workflow_handle(workflow_id).describe()
    except RPCError as err:
        raise rpc_error(handle_id, err) from err
    run = client.get_workflow_handle(workflow_id, run_id=desc.run_id)
    state = _Follow(start_len=desc.raw_description.workflow_execution_info.history_length)
    inbox: asyncio.Queue[tuple[str, Any]] = asyncio.Queue()
    llm_busy = asyncio.Event()
    converter = client.data_converter

    async def details(raw: Any) -> list[tuple[str, LiveOutput]]:
        found: list[tuple[str, LiveOutput]] = []
        for pa in raw.pending_activities:
            if pa.activity_type.name != LLM_CALL_ACTIVITY or not pa.heartbeat_details.payloads:
                continue
            with contextlib.suppress(Exception):  # details of another shape: no live text
                [out] = await converter.decode(pa.heartbeat_details.payloads, [LiveOutput])
                found.append((pa.activity_id, out))
        return found

    async def poll_text() -> None:
        while True:
            await llm_busy.wait()
            with contextlib.suppress(RPCError):
                raw = (await run.describe()).raw_description
                await inbox.put(("live", await details(raw)))
            await asyncio.sleep(poll_s)

    async def read_history() -> None:
        try:
            async for event in run.fetch_history_events(wait_new_event=True):
                events = await _observe(converter, state, event, llm_busy)
                await inbox.put(("event", (event.event_id, events)))
        except RPCError:
            pass  # the stream still ends with the turn; only the history's events are lost
        finally:
            await inbox.put(("history_end", None))

    async def await_end() -> None:
        result = await wait()
        target = 0
        with contextlib.suppress(RPCError):
            now = await run.describe()
            target = now.raw_description.workflow_execution_info.history_length
        await inbox.put(("end", (result, target)))

    pending = desc.raw_description.pending_activities
    if any(pa.activity_type.name == LLM_CALL_ACTIVITY for pa in pending):
        llm_busy.set()
    await inbox.put(("live", await details(desc.raw_description)))
    tasks = [asyncio.create_task(t()) for t in (poll_text, read_history, await_end)]
    ending: tuple[TaskResult, int] | None = None
    history_open = True
    try:
        while True:
            if ending is not None and (not history_open or state.last_event >= ending[1]):
                yield TurnEnd(result=ending[0])
                return
            done = [t for t in tasks if t.done() and t.exception() is not None]
            if done:
                raise done[0].exception()  # type: ignore[misc]
            kind, value = await _next(inbox, tasks)
            if kind == "live":
                for activity_id, out in value:
                    for ev in state.live(activity_id, out):
                        yield ev
            elif kind == "event":
                event_id, events = value
                for ev in events:
                    yield ev
                state.last_event = event_id
            elif kind == "history_end":
                history_open = False
            elif kind == "end":
                ending = value
                if ending is not None and ending[1] <= state.start_len:
                    history_open = False  # nothing happened since the stream began
    finally:
        for t in tasks:
            t.cancel()
        await asyncio.gather(*tasks, return_exceptions=True)


async def _next(
    inbox: asyncio.Queue[tuple[str, Any]], tasks: list[asyncio.Task[None]]
) -> tuple[str, Any]:
    """The next observation, or ``("failed", None)`` as soon as a task failed."""
    getter = asyncio.ensure_future(inbox.get())
    running = [t for t in tasks if not t.done()]
    try:
        await asyncio.wait([getter, *running], return_when=asyncio.FIRST_COMPLETED)
    finally:
        if not getter.done():
            getter.cancel()
    if getter.done() and not getter.cancelled():
        return getter.result()
    return ("failed", None)


async def _observe(
    converter: Any, state: _Follow, event: HistoryEvent, llm_busy: asyncio.Event
) -> list[LiveEvent]:
    """Record one history event; the events it makes (none for the past before the stream
    began)."""
    new = event.event_id > state.start_len
    if event.event_type == EventType.EVENT_TYPE_ACTIVITY_TASK_SCHEDULED:
        attrs = event.activity_task_scheduled_event_attributes
        name = attrs.activity_type.name
        if name == LLM_CALL_ACTIVITY:
            state.scheduled[event.event_id] = _Scheduled(attrs.activity_id, "llm")
            llm_busy.set()
        elif name == TOOL_CALL_ACTIVITY:
            tool: ToolCallInput | None = None
            with contextlib.suppress(Exception):
                [tool] = await converter.decode(attrs.input.payloads, [ToolCallInput])
            state.scheduled[event.event_id] = _Scheduled(attrs.activity_id, "tool", tool)
        return []
    attr_name = _CLOSED.get(event.event_type)
    if attr_name is None:
        return []
    attrs = getattr(event, attr_name)
    sched = state.scheduled.pop(attrs.scheduled_event_id, None)
    if sched is None:
        return []
    completed = event.event_type == EventType.EVENT_TYPE_ACTIVITY_TASK_COMPLETED
    if sched.kind == "llm":
        llm_busy.clear()
        call = state.calls.setdefault(sched.activity_id, _Call())
        if not new or not completed:
            call.done = True
            return []
        [result] = await converter.decode(attrs.result.payloads, [LlmCallResult])
        return state.answered(sched.activity_id, result)
    if not new or sched.tool is None:
        return []
    is_error = True
    if completed:
        with contextlib.suppress(Exception):
            [out] = await converter.decode(attrs.result.payloads, [ToolResult])
            is_error = out.is_error
    return [ToolCallEnd(call_id=sched.tool.call_id, name=sched.tool.tool, is_error=is_error)]
