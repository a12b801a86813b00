"""Follow a handle's turn live (issue 14 item 4; resumable: issue 27 item 4):
``AgentRuntime.stream(h)`` and ``AgentRuntime.stream(h, after=SEQ)``.

Three Temporal-native sources, none of which adds a byte to workflow history nor sends an
update (so any number of hosts can follow one agent):

* **text**: the heartbeat details of the running ``tnx.llm_call`` activity (a
  :class:`~toolnexus_temporal.workflows.contract.messages.LiveOutput`: the end of the text so
  far and its offset), read with ``DescribeWorkflowExecution`` every ``POLL_S`` while an LLM
  call is in flight, and only then. The followers of one run in one process share one such
  poll (:class:`_DescribePoll`);
* **structure**: the workflow's history, followed with a long poll (``GetWorkflowExecutionHistory``
  with ``wait_new_event``): an LLM call scheduled, started (its attempt) or answered (its
  result gives the rest of its text, its tool calls and its usage), a tool activity ended,
  the ``AgentState`` search attribute upserted (``suspended`` or ``closed`` end the turn), a
  continue-as-new (the stream follows the new run);
* **the end**: a turn that ends idle writes no search attribute (``AgentState`` records
  durable states only, issue 35 item 2), so the stream asks the ``view`` query whenever the
  history it has read is quiet (a workflow task completed, no activity open, no event
  waiting): the turn ended when the handle is no longer running (nor queued) or has settled
  a result since the stream started. That query also gives the turn's result (the handle's
  last result). A parked or closed turn ends on its ``AgentState`` upsert, as before.

Events are :data:`LiveEvent` models; the last one is always :class:`TurnEnd`. A fresh stream
reports what happens after it starts, except the text the call in flight has already
streamed (its whole tail). A fresh stream on a handle that is not running (idle, suspended,
closed) ends at once with its last result; it never waits for a next wake.

**Cursors.** Every event carries ``seq``, a :class:`Cursor` as a string: a position made of
what the stream is derived from, i.e. the run id, the id of the last history event the stream
had read, and, while an LLM call is in flight, its attempt, the characters of its text shown
and its tool calls announced, plus the turn's token count shown. ``rt.stream(h, after=seq)``
rebuilds that state from the run's history and continues with the events after it: a host
that disconnects and resumes sees every event once (text: every character once, possibly cut
into other deltas), across continue-as-new (a cursor names its run; the stream follows the
runs that continued it). Text after the cursor comes from the heartbeat details while the
call runs, else from the answered call's result in history. Resuming after a ``TurnEnd``
waits for the next turn when the handle is running (or queued for a slot), else ends at once
with the last result again.

The text of one LLM call, concatenated over its :class:`TextDelta` events, is the call's
whole reply. A retried call (a later ``attempt``) starts over: its first delta has
``restart`` set, and replaces the call's text shown so far (the broken partial text); a host
that fell more than ``LIVE_TAIL_MAX_CHARS`` characters behind a fast model is told how many
it did not see (``skipped``).

Limits: a turn's result is the handle's last result when the stream reads it, so a stream
resumed after that turn and a later one ended gives the later one's result. A reply held
while the conversation store was down (``LiveOutput.reply``) and answered by a later attempt
after the host resumed shows once more, as a restart.
"""

from __future__ import annotations

import asyncio
import contextlib
from collections.abc import AsyncIterator, Awaitable, Callable
from dataclasses import dataclass, field
from typing import Any, ClassVar, Literal

from pydantic import BaseModel
from temporalio.api.enums.v1 import EventType
from temporalio.api.history.v1 import HistoryEvent
from temporalio.client import Client, WorkflowExecutionDescription
from temporalio.converter import PayloadConverter
from temporalio.service import RPCError, RPCStatusCode

from toolnexus_temporal.client.errors import InvalidCursorError
from toolnexus_temporal.client.handle import Handle
from toolnexus_temporal.client.rpc import rpc_error
from toolnexus_temporal.workflows.contract.messages import LiveOutput, LlmCallResult, ToolCallInput
from toolnexus_temporal.workflows.contract.models import TaskResult, ToolResult
from toolnexus_temporal.workflows.contract.names import (
    AGENT_STATE,
    LLM_CALL_ACTIVITY,
    SIGNAL_WAKE,
    TOOL_CALL_ACTIVITY,
    UPDATE_TURN,
)

POLL_S = 0.2
"""Seconds between two reads of the LLM call's heartbeat details while it runs. The worker
sends them to the server at most once a second (its heartbeat throttle), the first at once."""


@dataclass(frozen=True)
class Cursor:
    """A position in a handle's live output (the ``seq`` of every event), written
    ``RUN.EVENT.ATTEMPT.CHARS.CALLS.TOKENS`` (:meth:`__str__`, :meth:`parse`).

    Within a run cursors grow with the stream (``EVENT``, then the in-flight call's
    ``CHARS``); a later run's cursors come after every cursor of the run it continued.

    Attributes:
        run_id: the workflow run the position is in.
        event: the last history event of that run the stream had read (its event id).
        attempt: the attempt of the LLM call in flight whose text was shown (0: none).
        chars: characters of that call's text shown.
        calls: tool calls that call announced that were shown.
        tokens: the turn's token count last shown (``TokenCount``).
    """

    run_id: str
    event: int
    attempt: int = 0
    chars: int = 0
    calls: int = 0
    tokens: int = 0

    def __str__(self) -> str:
        numbers = (self.event, self.attempt, self.chars, self.calls, self.tokens)
        return ".".join([self.run_id, *map(str, numbers)])

    @classmethod
    def parse(cls, text: str) -> Cursor:
        """The cursor ``text`` (an event's ``seq``) stands for.

        Raises:
            InvalidCursorError: not a cursor.
        """
        parts = text.strip().rsplit(".", 5)
        if len(parts) != 6 or not parts[0] or not all(p.isdigit() for p in parts[1:]):
            raise InvalidCursorError(text, "expected RUN.EVENT.ATTEMPT.CHARS.CALLS.TOKENS")
        event, attempt, chars, calls, tokens = map(int, parts[1:])
        return cls(parts[0], event, attempt, chars, calls, tokens)


class TextDelta(BaseModel):
    """Text the model wrote since the last delta of the same LLM call.

    Attributes:
        text: the new characters.
        call: the LLM call's activity id (one per model round trip of the run).
        attempt: the activity attempt streaming it (a retried call streams its text again).
        skipped: characters of this call not shown before ``text`` (the host fell behind).
        restart: this attempt starts the call's text over: ``text`` replaces what was shown
            of the call (a retry's text, not a continuation of the broken partial text).
        seq: the stream's position after this event (:class:`Cursor`).
    """

    kind: Literal["text"] = "text"
    text: str
    call: str
    attempt: int = 1
    skipped: int = 0
    restart: bool = False
    seq: str = ""


class ToolCallStart(BaseModel):
    """The model called a tool: announced in its stream, or at the latest with its answered
    reply, before the tool's result is back.

    Attributes:
        call_id: the model's tool call id.
        name: the tool's name (``task`` for a delegation).
        seq: the stream's position after this event (:class:`Cursor`).
    """

    kind: Literal["tool_start"] = "tool_start"
    call_id: str
    name: str
    seq: str = ""


class ToolCallEnd(BaseModel):
    """A tool activity ended (delegations through ``task`` have none).

    Attributes:
        call_id: the model's tool call id.
        name: the tool's name.
        is_error: the tool failed or returned an error result.
        seq: the stream's position after this event (:class:`Cursor`).
    """

    kind: Literal["tool_end"] = "tool_end"
    call_id: str
    name: str
    is_error: bool = False
    seq: str = ""


class TokenCount(BaseModel):
    """Tokens of the turn so far: the usage of its answered LLM calls, plus the stream events
    of the call in flight (about one token each; the call's usage replaces them once it is
    answered, and a retried call counts its own).

    Attributes:
        tokens: the count.
        seq: the stream's position after this event (:class:`Cursor`).
    """

    kind: Literal["tokens"] = "tokens"
    tokens: int
    seq: str = ""


class TurnEnd(BaseModel):
    """The turn ended (the last event of a stream).

    Attributes:
        result: the turn's result, as :meth:`AgentRuntime.wait` gives it; for a handle that
            was not running, its last result (None when it never ran a turn).
        seq: the stream's position after this event (:class:`Cursor`): resuming after it
            follows the next turn.
    """

    kind: Literal["end"] = "end"
    result: TaskResult | None
    seq: str = ""


LiveEvent = TextDelta | ToolCallStart | ToolCallEnd | TokenCount | TurnEnd
"""One event of :meth:`AgentRuntime.stream`."""


@dataclass
class _Call:
    """What this stream has shown of one LLM call."""

    attempt: int = 0
    upto: int = 0
    started: int = 0
    """Tool calls of this call shown (a prefix of its calls, in stream order)."""
    chunks: int = 0
    held: bool = False
    """The last details carried a held reply (an attempt that returns it does not restart)."""
    done: bool = False


@dataclass
class _Scheduled:
    """An activity scheduled in the followed run."""

    activity_id: str
    kind: Literal["llm", "tool", "other"]
    tool: ToolCallInput | None = None
    attempt: int = 1


_CLOSED = {
    EventType.EVENT_TYPE_ACTIVITY_TASK_COMPLETED: "activity_task_completed_event_attributes",
    EventType.EVENT_TYPE_ACTIVITY_TASK_FAILED: "activity_task_failed_event_attributes",
    EventType.EVENT_TYPE_ACTIVITY_TASK_TIMED_OUT: "activity_task_timed_out_event_attributes",
    EventType.EVENT_TYPE_ACTIVITY_TASK_CANCELED: "activity_task_canceled_event_attributes",
}
_RUN_ENDS = {
    EventType.EVENT_TYPE_WORKFLOW_EXECUTION_COMPLETED,
    EventType.EVENT_TYPE_WORKFLOW_EXECUTION_FAILED,
    EventType.EVENT_TYPE_WORKFLOW_EXECUTION_TIMED_OUT,
    EventType.EVENT_TYPE_WORKFLOW_EXECUTION_TERMINATED,
    EventType.EVENT_TYPE_WORKFLOW_EXECUTION_CANCELED,
}
_QUIET = {  # after these, the turn may have ended idle: the view query tells
    EventType.EVENT_TYPE_WORKFLOW_TASK_COMPLETED,
    EventType.EVENT_TYPE_WORKFLOW_EXECUTION_UPDATE_COMPLETED,
}
_KEYWORDS = PayloadConverter.default


@dataclass
class _Follow:
    """The consumer's state: every observation goes through it in the order it is yielded,
    so that :meth:`cursor` is the position of the last event yielded."""

    run_id: str
    silent: bool = False
    """Rebuilding the state up to a start position: no events."""
    last_event: int = 0
    state: str | None = None
    """The ``AgentState`` (durable state) the history last set."""
    in_turn: bool = True
    """A turn is followed (False once the history ended it: parked, closed, run ended)."""
    quiet: bool = False
    """A workflow task or an update completed since the last :meth:`settled` check: the turn
    may have ended idle (no history event says so)."""
    ended: bool = False
    """The last history event ended the turn (or the workflow)."""
    next_run: str | None = None
    """The last history event continued the run as new, as this run."""
    scheduled: dict[int, _Scheduled] = field(default_factory=dict)
    calls: dict[str, _Call] = field(default_factory=dict)
    open_llm: str | None = None
    """The activity id of the LLM call in flight (per the history read)."""
    tokens_done: int = 0
    tokens_shown: int = 0
    unread: list[Any] = field(default_factory=list)
    """Results (payloads) of this turn's LLM calls answered while :attr:`silent`, not yet
    decoded: :meth:`wake` adds their usage."""

    def cursor(self, event: int | None = None) -> Cursor:
        """The position after the events yielded so far (``event``: another history event)."""
        call = self.calls.get(self.open_llm) if self.open_llm is not None else None
        return Cursor(
            run_id=self.run_id,
            event=self.last_event if event is None else event,
            attempt=call.attempt if call else 0,
            chars=call.upto if call else 0,
            calls=call.started if call else 0,
            tokens=self.tokens_shown,
        )

    async def wake(self, converter: Any) -> None:
        """Stop rebuilding: count the usage of the turn's calls answered so far."""
        self.silent = False
        for payloads in self.unread:
            with contextlib.suppress(Exception):
                [result] = await converter.decode(payloads, [LlmCallResult])
                self.tokens_done += result.usage.total_tokens
        self.unread = []

    def restore(self, at: Cursor) -> None:
        """Take what the stream had shown at ``at`` (after rebuilding its history part)."""
        self.tokens_shown = at.tokens
        if self.open_llm is not None:
            call = self.calls[self.open_llm]
            call.attempt, call.upto, call.started = at.attempt, at.chars, at.calls
            call.chunks = max(at.tokens - self.tokens_done, 0)

    def new_run(self, run_id: str) -> None:
        """Follow ``run_id``, which continued the run followed (its event ids start over)."""
        self.run_id, self.last_event, self.next_run = run_id, 0, None
        self.scheduled, self.calls, self.open_llm = {}, {}, None

    def _stamp(self, events: list[LiveEvent], event: int | None = None) -> list[LiveEvent]:
        seq = str(self.cursor(event))
        for ev in events:
            ev.seq = seq
        return events

    def live(self, activity_id: str, out: LiveOutput) -> list[LiveEvent]:
        """Events for the heartbeat details ``out`` of the LLM call ``activity_id``."""
        if self.silent or activity_id != self.open_llm:
            return []
        call = self.calls[activity_id]
        if call.done or out.attempt < call.attempt:
            return []
        call.held = out.reply is not None
        events: list[LiveEvent] = []
        restart = False
        chunks = max(call.chunks, out.chunks)  # details read before: not fewer
        if out.attempt != call.attempt:
            restart = call.attempt > 0 and call.upto > 0
            call.attempt, call.upto, chunks = out.attempt, 0, out.chunks
        if out.length > call.upto or restart:
            skipped = max(out.offset - call.upto, 0)
            text = out.tail[max(call.upto - out.offset, 0) :]
            call.upto = max(out.length, call.upto)
            delta = TextDelta(
                text=text, call=activity_id, attempt=out.attempt, skipped=skipped, restart=restart
            )
            events += self._stamp([delta])
        for announced in out.calls[call.started :]:
            call.started += 1
            events += self._stamp([ToolCallStart(call_id=announced.id, name=announced.name)])
        call.chunks = chunks
        return events + self._tokens()

    def answered(
        self, activity_id: str, result: LlmCallResult, attempt: int, event: int
    ) -> list[LiveEvent]:
        """Events for the LLM call ``activity_id`` answered by ``attempt`` at history event
        ``event``: the rest of its text, its tool calls, its usage. Their cursors stay before
        ``event`` (the call still in flight, with what they showed): resumed there, the answer
        gives only what is left."""
        call = self.calls.setdefault(activity_id, _Call())
        self.tokens_done += result.usage.total_tokens
        call.done, call.chunks = True, 0
        if self.silent:
            return []
        events: list[LiveEvent] = []
        content = result.message.content or ""
        at = event - 1
        if attempt != call.attempt and call.upto > 0 and not call.held:
            call.attempt, call.upto = attempt, len(content)
            events += self._stamp(
                [TextDelta(text=content, call=activity_id, attempt=attempt, restart=True)], at
            )
        elif len(content) > call.upto:
            text = content[call.upto :]
            call.attempt, call.upto = attempt, len(content)
            events += self._stamp([TextDelta(text=text, call=activity_id, attempt=attempt)], at)
        for tc in (result.message.tool_calls or [])[call.started :]:
            call.started += 1
            events += self._stamp([ToolCallStart(call_id=tc.id, name=tc.name)], at)
        return events + self._tokens(at)

    def _tokens(self, event: int | None = None) -> list[LiveEvent]:
        total = self.tokens_done + sum(c.chunks for c in self.calls.values() if not c.done)
        if total == self.tokens_shown:
            return []
        self.tokens_shown = total
        return self._stamp([TokenCount(tokens=total)], event)

    def set_state(self, value: str | None) -> None:
        """The history set ``AgentState`` to ``value``: a change to ``suspended`` or
        ``closed`` ends the turn followed (a turn that ends idle writes none: ``_Ends.settled``;
        a continued run that starts as its parked predecessor ended changes nothing).
        ``running`` (the histories of earlier builds) starts a turn's token count."""
        if value is None:
            return
        before, self.state = self.state, value
        if value == "running" or (value == "idle" and before == "suspended"):
            # a turn starts (earlier builds) or resumes: its token count starts over
            self.tokens_done, self.tokens_shown, self.unread = 0, 0, []
        elif value in ("suspended", "closed") and value != before and not self.silent:
            self.in_turn, self.ended = False, True

    def turn_begins(self, event: HistoryEvent) -> None:
        """While rebuilding, a ``turn`` update accepted or a ``wake`` signal with no activity
        open starts a turn: its token count starts (a turn that starts idle writes no
        history event that says so; a tick's turn is counted from the last such event)."""
        if not self.silent or self.scheduled:
            return
        kind = event.event_type
        if kind == EventType.EVENT_TYPE_WORKFLOW_EXECUTION_UPDATE_ACCEPTED:
            accepted = event.workflow_execution_update_accepted_event_attributes
            starts = accepted.accepted_request.input.name == UPDATE_TURN
        else:
            starts = event.workflow_execution_signaled_event_attributes.signal_name == SIGNAL_WAKE
        if starts:
            self.tokens_done, self.tokens_shown, self.unread = 0, 0, []

    async def observe(self, converter: Any, event: HistoryEvent) -> list[LiveEvent]:
        """Record one history event of the followed run; the events it makes (none while
        :attr:`silent`)."""
        self.last_event = event.event_id
        kind = event.event_type
        if kind == EventType.EVENT_TYPE_WORKFLOW_EXECUTION_STARTED:
            begun = event.workflow_execution_started_event_attributes
            self.set_state(_agent_state(begun.search_attributes.indexed_fields))
            return []
        if kind == EventType.EVENT_TYPE_UPSERT_WORKFLOW_SEARCH_ATTRIBUTES:
            upsert = event.upsert_workflow_search_attributes_event_attributes
            self.set_state(_agent_state(upsert.search_attributes.indexed_fields))
            return []
        if kind in (
            EventType.EVENT_TYPE_WORKFLOW_EXECUTION_UPDATE_ACCEPTED,
            EventType.EVENT_TYPE_WORKFLOW_EXECUTION_SIGNALED,
        ):
            self.turn_begins(event)
            return []
        if kind in _QUIET:
            self.quiet = not self.silent
            return []
        if kind == EventType.EVENT_TYPE_WORKFLOW_EXECUTION_CONTINUED_AS_NEW:
            self.next_run = (
                event.workflow_execution_continued_as_new_event_attributes.new_execution_run_id
            )
            return []
        if kind in _RUN_ENDS:
            self.in_turn, self.ended = False, not self.silent
            return []
        if kind == EventType.EVENT_TYPE_ACTIVITY_TASK_SCHEDULED:
            self.quiet = False  # the task that completed goes on with an activity
            attrs = event.activity_task_scheduled_event_attributes
            name = attrs.activity_type.name
            if name == LLM_CALL_ACTIVITY:
                self.scheduled[event.event_id] = _Scheduled(attrs.activity_id, "llm")
                self.calls[attrs.activity_id] = _Call()
                self.open_llm = attrs.activity_id
            elif name == TOOL_CALL_ACTIVITY:
                tool: ToolCallInput | None = None
                if not self.silent:
                    with contextlib.suppress(Exception):
                        [tool] = await converter.decode(attrs.input.payloads, [ToolCallInput])
                self.scheduled[event.event_id] = _Scheduled(attrs.activity_id, "tool", tool)
            return []
        if kind == EventType.EVENT_TYPE_ACTIVITY_TASK_STARTED:
            started = event.activity_task_started_event_attributes
            sched = self.scheduled.get(started.scheduled_event_id)
            if sched is not None:
                sched.attempt = max(started.attempt, 1)
            return []
        attr_name = _CLOSED.get(kind)
        if attr_name is None:
            return []
        attrs = getattr(event, attr_name)
        sched = self.scheduled.pop(attrs.scheduled_event_id, None)
        if sched is None:
            return []
        completed = kind == EventType.EVENT_TYPE_ACTIVITY_TASK_COMPLETED
        if sched.kind == "llm":
            events: list[LiveEvent] = []
            if completed and self.silent:  # only its usage counts: read when needed
                self.calls.setdefault(sched.activity_id, _Call()).done = True
                self.unread.append(attrs.result.payloads)
            elif completed:
                [result] = await converter.decode(attrs.result.payloads, [LlmCallResult])
                events = self.answered(sched.activity_id, result, sched.attempt, event.event_id)
            else:
                self.calls.setdefault(sched.activity_id, _Call()).done = True
            if self.open_llm == sched.activity_id:
                self.open_llm = None
            return events
        if self.silent or sched.tool is None:
            return []
        is_error = True
        if completed:
            with contextlib.suppress(Exception):
                [out] = await converter.decode(attrs.result.payloads, [ToolResult])
                is_error = out.is_error
        end = ToolCallEnd(call_id=sched.tool.call_id, name=sched.tool.tool, is_error=is_error)
        return self._stamp([end])


def _agent_state(fields: Any) -> str | None:
    """The ``AgentState`` value among search attribute ``fields`` (None: not set there)."""
    payload = fields.get(AGENT_STATE.name) if AGENT_STATE.name in fields else None
    if payload is None:
        return None
    with contextlib.suppress(Exception):
        [value] = _KEYWORDS.from_payloads([payload])
        if isinstance(value, list):
            value = value[0] if value else None
        return value if isinstance(value, str) else None
    return None


async def _details(converter: Any, raw: Any) -> list[tuple[str, LiveOutput]]:
    """The live output of each ``tnx.llm_call`` pending in the description ``raw``."""
    found: list[tuple[str, LiveOutput]] = []
    for pa in raw.pending_activities:
        if pa.activity_type.name != LLM_CALL_ACTIVITY or not pa.heartbeat_details.payloads:
            continue
        with contextlib.suppress(Exception):  # details of another shape: no live text
            [out] = await converter.decode(pa.heartbeat_details.payloads, [LiveOutput])
            found.append((pa.activity_id, out))
    return found


Deliver = Callable[[str, list[tuple[str, LiveOutput]]], None]


class _DescribePoll:
    """The one ``DescribeWorkflowExecution`` poll of a workflow shared by its followers in
    this process (one event loop, one client): it reads the current run every ``poll_s`` s
    while any follower has an LLM call in flight, and hands each follower the run id and the
    heartbeat details. It stops when its last follower leaves.

    Attributes:
        polls: the describes it made (tests count them).
    """

    _shared: ClassVar[dict[tuple[int, int, str], _DescribePoll]] = {}

    def __init__(self, key: tuple[int, int, str], client: Client, workflow_id: str) -> None:
        self._key = key
        self._client = client
        self._workflow_id = workflow_id
        self._followers: dict[int, Deliver] = {}
        self._wanting: set[int] = set()
        self._wanted = asyncio.Event()
        self._next = 0
        self.poll_s = POLL_S
        self.polls = 0
        self._task: asyncio.Task[None] | None = None

    @classmethod
    def join(
        cls, client: Client, workflow_id: str, poll_s: float, deliver: Deliver
    ) -> tuple[_DescribePoll, int]:
        """Follow ``workflow_id``'s live output: ``deliver`` is called with each read.

        Returns:
            The shared poll and the follower's key (for :meth:`want` and :meth:`leave`).
        """
        key = (id(asyncio.get_running_loop()), id(client), workflow_id)
        poll = cls._shared.get(key)
        if poll is None:
            poll = cls._shared[key] = cls(key, client, workflow_id)
            poll.poll_s = poll_s
            poll._task = asyncio.create_task(poll._run())
        poll._next += 1
        poll._followers[poll._next] = deliver
        poll.poll_s = min(poll.poll_s, poll_s)
        return poll, poll._next

    def want(self, follower: int, on: bool) -> None:
        """Whether ``follower`` needs the details (an LLM call is in flight for it)."""
        if on:
            self._wanting.add(follower)
        else:
            self._wanting.discard(follower)
        if self._wanting:
            self._wanted.set()
        else:
            self._wanted.clear()

    def leave(self, follower: int) -> None:
        """``follower`` stopped; the last one stops the poll."""
        self._followers.pop(follower, None)
        self.want(follower, False)
        if not self._followers:
            if self._shared.get(self._key) is self:
                del self._shared[self._key]
            if self._task is not None:
                self._task.cancel()

    async def _run(self) -> None:
        handle = self._client.get_workflow_handle(self._workflow_id)
        while True:
            await self._wanted.wait()
            with contextlib.suppress(RPCError):
                desc = await handle.describe()
                self.polls += 1
                found = await _details(self._client.data_converter, desc.raw_description)
                for deliver in list(self._followers.values()):
                    deliver(desc.run_id, found)
            await asyncio.sleep(self.poll_s)


async def follow_turn(
    client: Client,
    handle_id: str,
    workflow_id: str,
    inspect: Callable[[], Awaitable[Handle]],
    *,
    after: str | None = None,
    timeout_ms: int | None = None,
    poll_s: float = POLL_S,
) -> AsyncIterator[LiveEvent]:
    """The events of the handle's turn (see the module docstring).

    Args:
        client: the runtime's client (its data converter decodes details and results).
        handle_id: the handle id (for errors).
        workflow_id: its workflow id.
        inspect: the runtime's ``inspect`` of the handle: not running (nor queued for a
            slot), a fresh stream ends at once with its last result; the turn's result.
        after: a cursor (an event's ``seq``): continue after it. None: from now.
        timeout_ms: end with a ``timeout`` result after this many ms (the turn keeps running).
        poll_s: seconds between two reads of the heartbeat details of the call in flight.

    Raises:
        HandleNotFoundError: no such handle.
        InvalidCursorError: ``after`` is not a cursor of this handle.
    """
    start_at = Cursor.parse(after) if after is not None else None
    h = await inspect()
    desc = await _describe(client, handle_id, workflow_id)
    latest_run = desc.run_id
    latest_len = desc.raw_description.workflow_execution_info.history_length
    start = start_at if start_at is not None else Cursor(run_id=latest_run, event=latest_len)
    if start_at is None and h.state != "running" and not h.queued:
        yield TurnEnd(result=h.last_result, seq=str(start))
        return
    queued = h.queued
    converter = client.data_converter
    inbox: asyncio.Queue[tuple[str, Any, Any]] = asyncio.Queue()
    state = _Follow(run_id=start.run_id, silent=True, in_turn=h.state == "running" or queued)
    poll, me = _DescribePoll.join(
        client, workflow_id, poll_s, lambda run, found: inbox.put_nowait(("live", run, found))
    )

    ends = _Ends(state, start, inspect, h.result_seq)
    position, ending, settled = ends.position, ends.ending, ends.settled

    if start_at is None:
        inbox.put_nowait(("live", latest_run, await _details(converter, desc.raw_description)))
    history = _read_history(client, workflow_id, start.run_id, inbox, poll, me)
    tasks = [asyncio.create_task(history), asyncio.create_task(_time_out(timeout_ms, inbox))]
    latest_live: tuple[str, list[tuple[str, LiveOutput]]] = ("", [])
    caught_up = False
    try:
        while True:
            kind, run_id, value = await _next(inbox, tasks)
            if kind == "error":
                raise InvalidCursorError(str(start), f"no run {run_id} of {handle_id}: {value}")
            if kind in ("timeout", "history_end"):
                yield _timed_out(timeout_ms, position()) if kind == "timeout" else await ending()
                return
            if kind == "live":
                latest_live = (run_id, value)
                for ev in _live(state, value) if run_id == state.run_id else []:
                    yield ev
                continue
            if run_id != state.run_id:
                continue
            event: HistoryEvent = value
            for ev in await _observe(state, converter, event, start, start_at):
                yield ev
            if state.ended:
                yield await ending()
                return
            if state.next_run is not None:
                state.new_run(state.next_run)
                continue
            if state.silent:
                continue
            if not caught_up and run_id == latest_run and event.event_id >= latest_len:
                caught_up = True
                if not state.in_turn and not queued:
                    yield await ending()
                    return
                state.quiet = True  # it may have ended before the stream read its history
            if caught_up and state.quiet and not state.scheduled and inbox.empty():
                if (end := await settled()) is not None:
                    yield end
                    return
            if latest_live[0] == state.run_id:  # details read before this event: news now?
                for ev in _live(state, latest_live[1]):
                    yield ev
    finally:
        poll.leave(me)
        for t in tasks:
            t.cancel()
        await asyncio.gather(*tasks, return_exceptions=True)


@dataclass
class _Ends:
    """How a stream ends: the turn's result from the ``view`` query (``inspect``), stamped
    with the stream's position."""

    state: _Follow
    start: Cursor
    inspect: Callable[[], Awaitable[Handle]]
    settled_before: int
    """The handle's ``result_seq`` when the stream started."""

    def position(self) -> str:
        """The cursor now (the start while the stream is still rebuilding its state)."""
        return str(self.start if self.state.silent else self.state.cursor())

    async def ending(self) -> TurnEnd:
        """The end now, with the handle's last result."""
        h = await self.inspect()
        return TurnEnd(result=h.last_result, seq=self.position())

    async def settled(self) -> TurnEnd | None:
        """The turn's end when the handle is no longer running (nor queued) or has settled a
        result since the stream started (the ``view`` query: a turn that ends idle writes
        no history event that says so); None while it runs."""
        self.state.quiet = False
        h = await self.inspect()
        if (h.state == "running" or h.queued) and h.result_seq <= self.settled_before:
            return None
        return TurnEnd(result=h.last_result, seq=self.position())


async def _describe(
    client: Client, handle_id: str, workflow_id: str
) -> WorkflowExecutionDescription:
    """The workflow's description (its current run).

    Raises:
        HandleNotFoundError: no such workflow.
    """
    try:
        return await client.get_workflow_handle(workflow_id).describe()
    except RPCError as err:
        raise rpc_error(handle_id, err) from err


async def _observe(
    state: _Follow, converter: Any, event: HistoryEvent, start: Cursor, start_at: Cursor | None
) -> list[LiveEvent]:
    """Record one history event of the followed run; the events it makes. Rebuilding the
    state (silent) stops at the start position, where a resumed stream takes what it had
    shown at ``start_at``."""
    events = await state.observe(converter, event)
    if state.silent and (state.run_id != start.run_id or event.event_id >= start.event):
        await state.wake(converter)
        if start_at is not None:
            state.restore(start_at)
    return events


def _live(state: _Follow, found: list[tuple[str, LiveOutput]]) -> list[LiveEvent]:
    """The events of the heartbeat details ``found`` (activity id, live output) of a run."""
    return [ev for activity_id, out in found for ev in state.live(activity_id, out)]


def _timed_out(timeout_ms: int | None, seq: str) -> TurnEnd:
    """The end of a stream whose ``timeout_ms`` passed (the turn keeps running)."""
    text = f"no result within {timeout_ms} ms; the turn keeps running"
    return TurnEnd(result=TaskResult(status="timeout", is_error=True, text=text), seq=seq)


async def _time_out(timeout_ms: int | None, inbox: asyncio.Queue[tuple[str, Any, Any]]) -> None:
    """Put ``("timeout", ...)`` in ``inbox`` after ``timeout_ms`` (never without one)."""
    if timeout_ms is not None:
        await asyncio.sleep(timeout_ms / 1000)
        await inbox.put(("timeout", None, None))


async def _read_history(
    client: Client,
    workflow_id: str,
    run_id: str | None,
    inbox: asyncio.Queue[tuple[str, Any, Any]],
    poll: _DescribePoll,
    me: int,
) -> None:
    """Put each history event of ``run_id`` and of the runs it continued as in ``inbox``
    (``("event", run id, event)``), then ``("history_end", ...)``; ``("error", run id,
    err)`` when the first run cannot be read. Tells ``poll`` whether an LLM call is open."""
    first = True
    while run_id is not None:
        run = client.get_workflow_handle(workflow_id, run_id=run_id)
        following, run_id = run_id, None
        open_llm: set[int] = set()
        try:
            async for event in run.fetch_history_events(wait_new_event=True):
                kind = event.event_type
                if kind == EventType.EVENT_TYPE_ACTIVITY_TASK_SCHEDULED:
                    attrs = event.activity_task_scheduled_event_attributes
                    if attrs.activity_type.name == LLM_CALL_ACTIVITY:
                        open_llm.add(event.event_id)
                elif kind in _CLOSED:
                    open_llm.discard(getattr(event, _CLOSED[kind]).scheduled_event_id)
                elif kind == EventType.EVENT_TYPE_WORKFLOW_EXECUTION_CONTINUED_AS_NEW:
                    cont = event.workflow_execution_continued_as_new_event_attributes
                    run_id = cont.new_execution_run_id
                poll.want(me, bool(open_llm))
                await inbox.put(("event", following, event))
        except RPCError as err:
            refused = (RPCStatusCode.NOT_FOUND, RPCStatusCode.INVALID_ARGUMENT)
            if first and err.status in refused:
                await inbox.put(("error", following, err))
                return
            break  # the stream still ends with the turn; only the history's events are lost
        finally:
            poll.want(me, False)
        first = False
    await inbox.put(("history_end", None, None))


async def _next(
    inbox: asyncio.Queue[tuple[str, Any, Any]], tasks: list[asyncio.Task[None]]
) -> tuple[str, Any, Any]:
    """The next observation; a task's exception as soon as it failed."""
    if not inbox.empty():
        return inbox.get_nowait()
    getter = asyncio.ensure_future(inbox.get())
    running = [t for t in tasks if not t.done()]
    try:
        await asyncio.wait([getter, *running], return_when=asyncio.FIRST_COMPLETED)
    finally:
        if not getter.done():
            getter.cancel()
    if getter.done() and not getter.cancelled():
        return getter.result()
    for t in tasks:
        failure = t.exception() if t.done() else None
        if failure is not None:
            raise failure
    return await _next(inbox, [t for t in tasks if not t.done()])
