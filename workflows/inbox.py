"""The inbox and wake admission (CONTRACT §3 post, wake; §4 turn input).

``post`` appends to a bounded inbox and never changes state; a wake of an idle handle drains
the inbox into the turn and flips the handle to ``running`` in one step. The turn's input
(the wake prompt, then the drained inbox as one block) is rendered by
:mod:`~toolnexus_temporal.workflows.rules.render`, a pure module the sandbox passes through.

The rules are plain functions over ``HandleState`` (``post_error``, from the contract
(``contract/posts.py``: the host library checks it too), :func:`wake_error`,
:func:`drain`, :func:`take_turn_input`, :func:`restore_drained`); :class:`Inbox` applies
them from workflow code. Deterministic; no I/O.
"""

from __future__ import annotations

import asyncio
from datetime import timedelta
from typing import Final, Literal

from temporalio import workflow

from toolnexus_temporal.workflows.leases import LeaseBook
from toolnexus_temporal.workflows.machine import Machine, TurnScratch
from toolnexus_temporal.workflows.rules.background import take_waiting
from toolnexus_temporal.workflows.visibility.visibility import Visibility, status_of

with workflow.unsafe.imports_passed_through():
    from toolnexus_temporal.workflows.contract.clock import now_ms
    from toolnexus_temporal.workflows.contract.messages import MessageOutcome, WakeRequest
    from toolnexus_temporal.workflows.contract.models import InboxItem, TaskResult
    from toolnexus_temporal.workflows.contract.names import CHILD_CHANNEL
    from toolnexus_temporal.workflows.contract.names import HISTORY_FULL as HISTORY_FULL
    from toolnexus_temporal.workflows.contract.names import POST_REFUSED as POST_REFUSED
    from toolnexus_temporal.workflows.contract.policy import DEFAULT_POLICY, parse_policy
    from toolnexus_temporal.workflows.contract.posts import post_error as post_error
    from toolnexus_temporal.workflows.contract.state import (
        RECORD_BYTES,
        RECORDS_MAX,
        AnsweredResult,
        HandleState,
        MessageRecord,
        MessageRecordStatus,
        WakeMessage,
    )
    from toolnexus_temporal.workflows.rules.render import coalesce_ticks, render_turn_input


POST_HISTORY_BYTES = 16 * 2**20
"""History bytes of one run past which the ``admit_post`` update is refused by its validator
(nothing reaches history) until the run continues as new: a flood of posts through the client
can no longer grow a run that cannot continue as new yet (a turn in flight, a run younger than
its shortest length) towards Temporal's 50 MiB. The client reads the refusal (type
``names.HISTORY_FULL``) as ``PostResult(ok=False)``, after retrying it for a while."""


def post_history_error(history_bytes: int) -> str | None:
    """Why a post through the ``admit_post`` update is refused for the run's history size
    (``history_bytes``, bytes), or None."""
    if history_bytes < POST_HISTORY_BYTES:
        return None
    return (
        f"history full ({history_bytes / 2**20:.1f} MiB in this run, {POST_HISTORY_BYTES // 2**20}"
        " MiB admitted): retry once it has continued as new"
    )


def wake_error(s: HandleState) -> str | None:
    """Why this handle may not be woken (the root; closed or closing), or None."""
    if s.defn is None:
        return "the root handle never runs an LLM: wake a spawned handle"
    if s.state == "closed" or s.closing:
        return "handle closed"
    return None


def drain(s: HandleState, prompt: str | None) -> None:
    """Admit a wake: the turn holds the waiting messages (in arrival order), then
    ``prompt``; move the inbox into the turn (the posts, then the background children's
    items, when any wait: ``children/background.py``); mark the turn pending."""
    i = s.intake
    messages, i.wakes, i.due_ms = i.wakes, [], None
    i.turn_wakes = messages
    if messages:
        i.drained_seq, i.drained_after = messages[-1].seq, s.result_seq
        if i.records:
            mark_records(s, {m.seq for m in messages}, "waiting", "taken")
    i.wake_prompt = join_prompts([*(m.prompt for m in messages), prompt])
    waiting = take_waiting(s) if s.background.waiting else []
    i.turn_inbox = i.items + waiting
    i.items = []
    i.turn_pending = True


def join_prompts(prompts: list[str | None]) -> str | None:
    """The prompts of the messages one turn holds, oldest first, one paragraph each (None
    when none has text)."""
    texts = [p for p in prompts if p]
    return "\n\n".join(texts) if texts else None


def answered_after(s: HandleState, seq: int) -> int | None:
    """For message ``seq``: the ``result_seq`` a turn holding it started after (its answer is
    the first result past it); None while the message still waits."""
    i = s.intake
    if i.drained_seq < seq or any(m.seq == seq for m in i.wakes):
        return None
    return i.drained_after


SELF_VIAS: Final = frozenset({"tick", "internal", "held"})
"""The ``WakeMessage.via`` of wakes no host or parent sent (a tick's, a background child's,
one held by an older build): a turn holding only these was driven by the handle itself."""

TurnTrigger = Literal["message", "tick", "background"]
"""What drove a turn (:func:`turn_trigger`)."""


def turn_trigger(s: HandleState) -> TurnTrigger:
    """What drove the admitted turn of ``s`` (its drained messages and inbox): ``message``
    when it holds a message a host or parent sent (``wake``, ``turn``, a spawn's prompt),
    else ``tick`` when it holds the tick item, ``background`` when it holds a background
    child's report, else ``message``. The turn's trace follows it
    (``workflows/turn/observe.py``): a ``message`` turn continues its sender's trace; a
    ``tick`` or ``background`` turn is the root of its own."""
    i = s.intake
    if any(m.via not in SELF_VIAS for m in i.turn_wakes):
        return "message"
    if any(item.from_ == "clock" and item.channel == "timer" for item in i.turn_inbox):
        return "tick"
    if any(item.channel == CHILD_CHANNEL for item in i.turn_inbox):
        return "background"
    return "message"


def turn_started(s: HandleState) -> str:
    """The admitted turn starts: it is no longer pending; returns its user message
    (:func:`take_turn_input`)."""
    s.intake.turn_pending = False
    return take_turn_input(s)


def turn_ended(s: HandleState) -> None:
    """The turn settled: the items and messages drained into it are done with."""
    s.intake.turn_inbox = []
    s.intake.turn_wakes = []
    s.intake.restore_wakes = False


def take_turn_input(s: HandleState) -> str:
    """The user message of the admitted turn (CONTRACT §4); the wake prompt is consumed."""
    user_text = render_turn_input(s.intake.wake_prompt, s.intake.turn_inbox)
    s.intake.wake_prompt = None
    return user_text


def restore_drained(s: HandleState) -> None:
    """An interrupted or failed turn: its drained items return to the front of the inbox
    (background children's items too: the next turn reads them, past ``inbox_cap`` if it
    must, since they are never refused; ticks coalesce again into one item)."""
    s.intake.items = coalesce_ticks(s.intake.turn_inbox + s.intake.items)
    if s.intake.restore_wakes:  # the ``interrupt`` policy: the stopped turn's messages too
        if s.intake.records:  # not answered by the stopped turn: they wait for the next one
            mark_records(s, {m.seq for m in s.intake.turn_wakes}, "taken", "waiting")
        s.intake.wakes = s.intake.turn_wakes + s.intake.wakes
        s.intake.turn_wakes, s.intake.restore_wakes = [], False


# ---- the message records (issue 34: what the client's signal fallback reads back)


def find_record(s: HandleState, message_id: str) -> MessageRecord | None:
    """The record of ``message_id``, or None (never recorded, or evicted)."""
    return next((r for r in s.intake.records if r.id == message_id), None)


def add_record(
    s: HandleState,
    message_id: str,
    seq: int,
    status: MessageRecordStatus = "waiting",
    error: str | None = None,
) -> None:
    """Record a message a host named: ``waiting`` (message number ``seq``), or refused
    (``busy``, ``refused``, with ``error``); the oldest records go past the bounds
    (:func:`trim_records`)."""
    s.intake.records.append(MessageRecord(id=message_id, seq=seq, status=status, error=error))
    trim_records(s)


def mark_records(
    s: HandleState, seqs: set[int], before: MessageRecordStatus, after: MessageRecordStatus
) -> None:
    """The records of messages ``seqs`` that are ``before`` become ``after`` (a turn took
    them: ``waiting`` → ``taken``; the ``interrupt`` policy sent them on: back)."""
    for r in s.intake.records:
        if r.status == before and r.seq in seqs:
            r.status = after


def record_answer(s: HandleState, result: TaskResult) -> None:
    """``result`` was published (``result_seq`` is its number): it answers every ``taken``
    message (the first result after the turn that took them started: the rule of the
    ``turn`` update's ``answer_of``). Kept once, with its size."""
    i = s.intake
    taken = [r for r in i.records if r.status == "taken"]
    if not taken:
        return
    for r in taken:
        r.status, r.answer_seq = "answered", s.result_seq
    size = len(result.model_dump_json())
    i.answers.append(AnsweredResult(result_seq=s.result_seq, result=result, size=size))
    trim_records(s)


def trim_records(s: HandleState) -> None:
    """Keep at most :data:`RECORDS_MAX` records (the oldest go) and :data:`RECORD_BYTES` of
    answering results (the oldest answered records go, but never the newest result's); a
    result no record names is dropped."""
    i = s.intake
    while True:
        over_bytes = len(i.answers) > 1 and sum(a.size for a in i.answers) > RECORD_BYTES
        if len(i.records) > RECORDS_MAX:
            i.records.pop(0)
        elif over_bytes:
            oldest = i.answers[0].result_seq
            i.records = [
                r for r in i.records if not (r.status == "answered" and r.answer_seq == oldest)
            ]
        else:
            break
        named = {r.answer_seq for r in i.records if r.status == "answered"}
        i.answers = [a for a in i.answers if a.result_seq in named]


def message_outcome(s: HandleState, message_id: str) -> MessageOutcome:
    """What became of ``message_id`` (the ``message`` query): its record's status, with the
    answering result; ``closed`` when the handle closed before a turn answered it;
    ``unknown`` without a record (never sent with that id, or evicted)."""
    r = find_record(s, message_id)
    handle = status_of(s)
    if r is None:
        return MessageOutcome(id=message_id, status="unknown", handle=handle)
    if r.status in ("waiting", "taken") and s.state == "closed":
        return MessageOutcome(id=message_id, status="closed", handle=handle)
    result = None
    if r.status == "answered":
        result = next((a.result for a in s.intake.answers if a.result_seq == r.answer_seq), None)
    return MessageOutcome(
        id=message_id, status=r.status, result=result, error=r.error, handle=handle
    )


class Inbox:
    """Posts and wake admission of one handle.

    Owns ``HandleState.intake`` (:class:`InboxState`: ``items``, ``wake_prompt``,
    ``turn_inbox``, ``turn_pending``, ``held_wake``/``held_prompt`` and ``start_wake``).

    Args:
        s: the handle's state model.
        vis: trace, publish and rejections.
        machine: the idle→running transition.
        leases: the slot this handle holds or asks for.
        scratch: the running turn (whether an interrupt is stopping it).
    """

    def __init__(
        self,
        s: HandleState,
        vis: Visibility,
        machine: Machine,
        leases: LeaseBook,
        scratch: TurnScratch,
    ):
        self.s = s
        self.vis = vis
        self.machine = machine
        self.leases = leases
        self.scratch = scratch
        self._timers: set[int] = set()
        """The ends of the debounce windows a timer runs for (:meth:`_debounce_timer`)."""
        machine.on_publish.append(self._published)

    def _published(self, result: TaskResult) -> None:
        """A result was published: it answers the recorded messages a turn took."""
        if self.s.intake.records:
            record_answer(self.s, result)

    def post(self, item: InboxItem) -> str | None:
        """Append ``item`` to the inbox (CONTRACT §3 post).

        Returns:
            None, or the rejection (see :func:`post_error`), also recorded loudly.
        """
        error = post_error(self.s, item)
        if error is None:
            self.s.intake.items.append(item)
            self.vis.publish()
            return None
        self.vis.reject("post", f"{error}; from={item.from_} channel={item.channel}")
        return error

    def post_error(self, item: InboxItem) -> str | None:
        """See :func:`post_error` (changes nothing: the ``admit_post`` validator's check)."""
        return post_error(self.s, item)

    def wake_error(self) -> str | None:
        """See :func:`wake_error`."""
        return wake_error(self.s)

    def wake_signal(self, req: WakeRequest) -> None:
        """The ``wake`` signal: rejected loudly for the root or a closed handle, and under the
        ``reject`` policy when busy; else a wake from outside (``granted`` when the parent
        sent it with a slot)."""
        if req.granted:  # a lease from the parent (``trust.grant`` checked it)
            admit, prompt = self.leases.take_grant(req)
            if admit:
                self.admit_wake(prompt)
            return
        mid = req.message_id
        if mid is not None and find_record(self.s, mid) is not None:
            self.vis.trace(f"{self.s.id}: wake of message {mid!r} again: ignored (recorded)")
            return
        busy = None if self.wake_error() is not None else self.busy_error(req.policy)
        error = self.wake_error() or busy
        if error is not None:
            self.vis.reject("wake", error)
            if mid is not None:
                add_record(self.s, mid, 0, "busy" if busy else "refused", error)
            return
        self.receive(req.prompt, "signal", req.policy, mid)

    # ---- double texting (contract/policy.py)

    def busy(self) -> str | None:
        """Why a wake now would not start a turn at once (None: it would)."""
        s = self.s
        if s.state in ("running", "suspended"):
            return f"a turn is {s.state}"
        if s.intake.turn_pending or s.leases.slot_waiting:
            return "a turn is admitted"
        if self.scratch.interrupt_requested:
            return "an interrupt is stopping the turn"
        if s.pause.paused:
            return "paused"
        if s.intake.wakes:
            return f"{len(s.intake.wakes)} message(s) waiting"
        return None

    def policy_of(self, policy: str | None) -> str:
        """The policy a wake follows: its own, else its agent's ``double_texting``."""
        if policy is not None:
            return policy
        return self.s.defn.double_texting if self.s.defn is not None else DEFAULT_POLICY

    def busy_error(self, policy: str | None) -> str | None:
        """The ``AgentBusy`` refusal of a wake under the ``reject`` policy when busy, or
        None."""
        why = self.busy()
        if why is None or self.policy_of(policy) != "reject":
            return None
        return f"{self.s.id} is busy ({why}): the reject policy refused the message"

    def receive(
        self, prompt: str | None, via: str, policy: str | None, message_id: str | None = None
    ) -> int:
        """A wake from a host (the ``turn`` update, the ``wake`` signal): kept as a message,
        numbered in arrival order, and admitted now when the handle is free; when busy it
        waits (``enqueue``), stops the turn in flight (``interrupt``) or opens a window
        (``debounce``). A ``reject`` was refused before (:meth:`busy_error`). An
        ``interrupt`` message also ends a debounce window that holds messages: one turn
        holds them all now.
        ``message_id``: the sender's id, recorded (:func:`message_outcome`).

        Returns:
            The message's number (:func:`answered_after` tells when a turn took it).
        """
        s, i = self.s, self.s.intake
        applied = self.policy_of(policy)
        kind, window_ms = parse_policy(applied)
        why = self.busy()
        i.wake_seq += 1
        i.wakes.append(
            WakeMessage(seq=i.wake_seq, prompt=prompt, via=via, policy=applied, at_ms=now_ms())
        )
        if message_id is not None:
            add_record(s, message_id, i.wake_seq)
        if why is not None or kind == "debounce":
            self.vis.trace(
                f"{s.id}: message #{i.wake_seq} via {via} kept ({applied}: {why or 'idle'})"
            )
        if kind == "interrupt" and why is not None:
            self.stop_turn(applied)
            if i.due_ms is not None:  # no window holds an interrupt back
                self.vis.trace(f"{s.id}: {applied}: the debounce window ends early")
                i.due_ms = None
        elif kind == "debounce" and i.due_ms is None:
            i.due_ms = now_ms() + window_ms
        self.admit_waiting()
        if i.wakes:
            self.vis.publish()
        return i.wake_seq

    def stop_turn(self, policy: str) -> None:
        """The ``interrupt`` policy: stop the running or parked turn as ``interrupt`` does;
        its messages go back in front of the waiting ones (:func:`restore_drained`)."""
        s = self.s
        if s.state not in ("running", "suspended") or self.scratch.interrupt_requested:
            return
        self.vis.trace(f"{s.id}: {policy}: the turn in flight stops for the new message")
        s.intake.restore_wakes = True
        self.scratch.interrupt_requested = True
        if self.scratch.task is not None:
            self.scratch.task.cancel()

    def admit_waiting(self) -> None:
        """Start the turn that holds every waiting message, once the handle is free (idle,
        no turn admitted, not paused, no interrupt under way, not closing) and any
        ``debounce`` window is over (a timer admits them then). Called after each turn, on
        unpause, at a run's start and on every new message."""
        s, i = self.s, self.s.intake
        if i.held_wake:  # held by a run of an older build: a message like any other
            i.wake_seq += 1
            i.wakes.append(WakeMessage(seq=i.wake_seq, prompt=i.held_prompt, via="held"))
            i.held_wake, i.held_prompt = False, None
        if not i.wakes or self.wake_error() is not None:
            return
        if i.due_ms is not None and i.due_ms > now_ms():
            self._debounce_timer(i.due_ms)
            return
        if (
            s.state != "idle"
            or i.turn_pending
            or s.leases.slot_waiting
            or s.pause.paused
            or self.scratch.interrupt_requested
        ):
            return
        if len(i.wakes) > 1 or i.due_ms is not None or i.wakes[0].at_ms < now_ms():
            held = ", ".join(f"#{m.seq}" for m in i.wakes)
            self.vis.trace(f"{s.id}: one turn holds message(s) {held}")
        self._admit(None)

    def _debounce_timer(self, due_ms: int) -> None:
        """One durable timer to ``due_ms``, then :meth:`admit_waiting` (one per window end:
        a window an ``interrupt`` ended early leaves its timer running, harmless, and the
        next window gets its own)."""
        if due_ms in self._timers:
            return
        self._timers.add(due_ms)

        async def fire() -> None:
            await workflow.sleep(
                timedelta(milliseconds=max(due_ms - now_ms(), 1)), summary="debounce window"
            )
            self._timers.discard(due_ms)
            self.admit_waiting()

        asyncio.create_task(fire())  # noqa: RUF006 (a continue-as-new carries due_ms)

    def wake_from_outside(self, prompt: str | None) -> None:
        """Admit a wake at once (a tick's, a background child's, a spawn's, the messages'),
        or (under a parent that limits ``max_concurrent``) get a slot first: admitted at once
        with a held lease, else the parent is asked (:mod:`~toolnexus_temporal.workflows.leases`).
        A handle that is not free keeps the wake as a message (never a silent no-op)."""
        s = self.s
        if self.busy() is not None and not (s.intake.wakes and self.busy_only_by_messages()):
            self.hold_wake(prompt, "wake while busy")
            return
        self._admit(prompt)

    def window_open(self) -> bool:
        """A debounce window holds the waiting messages until a time still ahead."""
        due = self.s.intake.due_ms
        return due is not None and due > now_ms()

    def busy_only_by_messages(self) -> bool:
        """Free but for messages waiting (their turn takes this wake along)."""
        s = self.s
        return (
            s.state == "idle"
            and not s.intake.turn_pending
            and not s.leases.slot_waiting
            and not s.pause.paused
            and not self.scratch.interrupt_requested
            and not (s.intake.due_ms is not None and s.intake.due_ms > now_ms())
        )

    def _admit(self, prompt: str | None) -> None:
        """Admit now, or ask the parent for a slot (the messages wait in ``wakes``)."""
        if not self.leases.needs_slot():
            self.admit_wake(prompt)
        elif self.s.state == "idle":
            self.leases.ask(prompt)
            self.vis.publish()

    def hold_wake(self, prompt: str | None, why: str) -> None:
        """Keep a wake that cannot start a turn now as a message (a tick's while paused,
        one that finds the handle busy): :meth:`admit_waiting` admits it."""
        s, i = self.s, self.s.intake
        i.wake_seq += 1
        via = "tick" if s.pause.paused else "internal"
        i.wakes.append(WakeMessage(seq=i.wake_seq, prompt=prompt, via=via, at_ms=now_ms()))
        self.vis.trace(f"{s.id}: {why}: wake held (message #{i.wake_seq})")
        self.vis.publish()

    def take_start_wake(self) -> tuple[bool, str | None]:
        """At a run's start: whether the handle was spawned with a wake (consumed), and its
        prompt (kept by the lease book until now)."""
        if not self.s.intake.start_wake:
            return False, None
        self.s.intake.start_wake = False
        return True, self.leases.take_queued()

    def admit_wake(self, prompt: str | None) -> None:
        """idle→running with the inbox and the waiting messages drained (CONTRACT §3 wake);
        a no-op when running or suspended (the messages keep waiting)."""
        if self.s.state != "idle":
            return
        drain(self.s, prompt)
        self.machine.transition("running", "wake")
