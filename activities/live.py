"""Live output of an LLM call (issue 14, item 4): the streamed reply, published through the
``tnx.llm_call`` activity's heartbeat details while the model writes.

Heartbeat details are kept by the server with the pending activity (``DescribeWorkflowExecution``
shows them) and are not workflow history: the streamed tokens never add a byte to history.
Only when the call times out does the server copy the last details into the failure, once;
they are small by construction (a tail of at most ``TAIL_MAX_CHARS`` characters, plus the
announced tool calls), except while a received reply waits for the conversation store to
come back (:meth:`LiveFeed.hold`, at most ``HEARTBEAT_DETAILS_BYTES``). The host side
(``client/stream.py``) rebuilds the deltas from ``offset`` and ``tail``: what it has shown up
to ``offset + len(tail)``.
"""

from __future__ import annotations

from toolnexus_temporal.activities import wire
from toolnexus_temporal.activities.heartbeat import Beat
from toolnexus_temporal.workflows.contract.limits import HEARTBEAT_DETAILS_BYTES
from toolnexus_temporal.workflows.contract.messages import (
    LIVE_TAIL_MAX_CHARS,
    LiveCall,
    LiveOutput,
    LlmCallResult,
)

TAIL_MAX_CHARS = LIVE_TAIL_MAX_CHARS
"""Most characters of the reply's text one heartbeat carries (``LiveOutput.tail``)."""

CALLS_MAX = 64
"""Most announced tool calls one heartbeat carries (the first ones)."""


class LiveFeed:
    """Follows a :class:`~toolnexus_temporal.activities.wire.StreamAssembler` and publishes
    its progress through a :class:`~toolnexus_temporal.activities.heartbeat.Beat`.

    Call :meth:`update` after each fed event: it takes the new text pieces and named tool
    calls and pokes the beat when there is new text or a new call (an event without either
    would spend the SDK's heartbeat throttle window that the first text then waits out);
    the heartbeat loop builds the :class:`LiveOutput` (:meth:`snapshot`) only when a
    heartbeat goes out.

    Args:
        beat: the activity's heartbeat.
        attempt: the activity attempt (``activity.info().attempt``).
    """

    def __init__(self, beat: Beat, attempt: int) -> None:
        self._beat = beat
        self._attempt = attempt
        self._pieces = 0
        self._length = 0
        self._tail = ""
        self._calls: dict[int, LiveCall] = {}
        self._chunks = 0
        self._held: tuple[LlmCallResult, int] | None = None
        self._carried: LiveOutput | None = None
        beat.source = self.snapshot

    def update(self, assembler: wire.StreamAssembler) -> None:
        """Take what ``assembler`` received since the last update; poke the beat on news."""
        changed = False
        self._chunks = assembler.events
        if len(assembler.text) > self._pieces:
            new = "".join(assembler.text[self._pieces :])
            self._pieces = len(assembler.text)
            if new:
                self._length += len(new)
                self._tail = (self._tail + new)[-TAIL_MAX_CHARS:]
                changed = True
        for index, slot in assembler.calls.items():
            if index not in self._calls and slot["name"] and len(self._calls) < CALLS_MAX:
                self._calls[index] = LiveCall(id=slot["id"] or f"call_{index}", name=slot["name"])
                changed = True
        if changed:  # not for events without text (a role, usage): the first text goes at once
            self._beat.poke()

    def hold(self, result: LlmCallResult, fence: int) -> bool:
        """Carry the received reply ``result`` of call ``fence`` on every later heartbeat, and
        send one now (the store is down: a retried attempt takes the reply from there).

        Returns:
            Whether it is held: False when the details with it would be over
            ``HEARTBEAT_DETAILS_BYTES`` (JSON bytes).
        """
        self._held = (result, fence)
        if len(self.snapshot().model_dump_json().encode()) > HEARTBEAT_DETAILS_BYTES:
            self._held = None
            return False
        self._beat.send()
        return True

    def carry(self, previous: LiveOutput) -> None:
        """Publish ``previous`` (the details an earlier attempt left, its held reply with them)
        as this attempt's heartbeat details, unchanged: a host following the call sees no
        restart, and the held reply stays on the server until it is stored."""
        self._carried = previous

    def snapshot(self) -> LiveOutput:
        """The details of the next heartbeat."""
        if self._carried is not None:
            return self._carried
        reply, fence = self._held if self._held is not None else (None, None)
        return LiveOutput(
            attempt=self._attempt,
            offset=self._length - len(self._tail),
            tail=self._tail,
            calls=[self._calls[i] for i in sorted(self._calls)],
            chunks=self._chunks,
            reply=reply,
            fence=fence,
        )
