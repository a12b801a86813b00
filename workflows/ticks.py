"""Ticks: a handle that acts on its own, on a schedule (issue 25 item 1; CONTRACT §4 renders
them as ``[from=clock channel=timer] tick (xN coalesced)``).

A handle's schedule (``AgentDef.tick``, or ``rt.schedule`` / the ``schedule`` update at run
time) is a :class:`~toolnexus_temporal.workflows.contract.models.TickSpec`: an interval or a
cron expression, a prompt, and whether a tick wakes the handle or only lands in its inbox. The
timer is a durable timer in the handle's own workflow (``workflow.wait_condition`` with a
timeout), never a Temporal Schedule: a Schedule starts a *new* workflow execution on each
fire, while a tick must reach the running agent, its inbox and its transcript; and a timer in
the workflow is carried across continue-as-new with the rest of ``HandleState``
(``TickState.next_ms``).

The rules, as plain functions over numbers and the inbox:

* :func:`first_fire_ms` / :func:`catch_up`: the next fire time, computed from workflow time
  (``workflow.now()``, ms since the epoch; cron in UTC through croniter). A timer that fires
  late (a worker outage of an hour) counts every fire time it missed and yields ONE tick
  standing for them all, never a flood; the next fire time is the first one after now, on
  the schedule's grid (``start + k * every_ms``: an outage never shifts it).
* :func:`min_gap_ms`: no two tick-driven turns closer than half the interval. An outage that
  ends just before a fire time gives one catch-up turn; the tick that fires moments later
  only coalesces, and the next tick's turn takes it (``tick (x2 coalesced)``).
* :func:`add_ticks`: ticks land in the inbox as one ``from=clock channel=timer`` item whose
  ``count`` grows, so they never fill the bounded inbox (``contract.posts.post_error`` does
  not count that item against the cap).
* A tick that finds the handle idle (not paused, no wake queued) wakes it, with the
  schedule's prompt; its turn's input is the prompt, then the inbox block with the tick line.
  Ticks that fire while it runs, is parked (suspended) or waits for a slot only coalesce; so
  do ticks of a ``wake: false`` schedule. A paused handle holds one wake for a tick (unless a
  wake is already held): it runs on unpause, like the one catch-up wake after an outage.

The next fire time is the ``AgentNextTick`` search attribute (``tnx ls``, the web UI).

:func:`start_input` is the input check of a workflow started from outside with input it
cannot use (``temporal schedule create --type AgentWorkflow``): the run fails at once, with a
message that says how to schedule an agent instead. Deterministic; no I/O.
"""

from __future__ import annotations

from datetime import timedelta
from typing import Any, Final, TypeVar

from temporalio import workflow
from temporalio.exceptions import ApplicationError

from toolnexus_temporal.workflows.inbox import Inbox
from toolnexus_temporal.workflows.visibility.visibility import Visibility, short_error

with workflow.unsafe.imports_passed_through():
    from pydantic import BaseModel, ValidationError

    from toolnexus_temporal.workflows.contract.clock import format_duration, now_ms
    from toolnexus_temporal.workflows.contract.cron import next_cron_ms
    from toolnexus_temporal.workflows.contract.models import InboxItem, TickSpec
    from toolnexus_temporal.workflows.contract.names import AGENT_NEXT_TICK
    from toolnexus_temporal.workflows.contract.state import AgentInput, HandleState

_M = TypeVar("_M", bound="BaseModel")

TICK_FROM: Final = "clock"
"""The sender of a tick item (CONTRACT §4)."""
TICK_CHANNEL: Final = "timer"
"""The channel of a tick item (CONTRACT §4)."""

CATCH_UP_SCAN: Final = 10_000
"""Cron fire times counted one by one after a late timer; past this many the count stops
there and the next fire time is the first after now (an outage of a week of minutely
ticks still costs one tick)."""


def is_tick(item: InboxItem) -> bool:
    """Whether ``item`` is the coalesced tick item (``from=clock channel=timer``)."""
    return item.from_ == TICK_FROM and item.channel == TICK_CHANNEL


def add_ticks(items: list[InboxItem], count: int) -> None:
    """Add ``count`` ticks to the inbox ``items``: the tick item's ``count`` grows, or one
    tick item is appended (only ever one)."""
    for i, item in enumerate(items):
        if is_tick(item):
            items[i] = item.model_copy(update={"count": (item.count or 1) + count})
            return
    items.append(InboxItem(from_=TICK_FROM, channel=TICK_CHANNEL, text="tick", count=count or None))


def first_fire_ms(spec: TickSpec, now_ms: int) -> int:
    """The first fire time of ``spec`` after ``now_ms`` (ms since the epoch): ``now +
    every_ms``, or the cron expression's next time (UTC)."""
    if spec.every_ms is not None:
        return now_ms + spec.every_ms
    assert spec.cron is not None  # TickSpec's validator: exactly one
    return next_cron_ms(spec.cron, now_ms)


def catch_up(spec: TickSpec, due_ms: int, now_ms: int) -> tuple[int, int]:
    """A timer due at ``due_ms`` fired at ``now_ms`` (ms since the epoch; late after an
    outage): how many fire times it stands for, and the next fire time (after ``now_ms``).

    Returns:
        ``(count, next_ms)``: ``count`` >= 1 (fire times in ``[due_ms, now_ms]``; a cron
        count stops at :data:`CATCH_UP_SCAN`).
    """
    now_ms = max(now_ms, due_ms)
    if spec.every_ms is not None:
        count = (now_ms - due_ms) // spec.every_ms + 1
        return count, due_ms + count * spec.every_ms
    assert spec.cron is not None
    count, at = 1, next_cron_ms(spec.cron, due_ms)
    while at <= now_ms:
        count += 1
        if count >= CATCH_UP_SCAN:
            return count, next_cron_ms(spec.cron, now_ms)
        at = next_cron_ms(spec.cron, at)
    return count, at


def min_gap_ms(spec: TickSpec, next_ms: int) -> int:
    """The least time between two tick-driven turns, ms: half the interval (``every_ms / 2``;
    a cron schedule: half the gap from ``next_ms``, its next fire time, to the one after).

    A tick that fires closer than this to the last tick's wake (the catch-up tick after an
    outage that ended just before a fire time) only coalesces: the next tick's turn takes it.
    """
    if spec.every_ms is not None:
        return spec.every_ms // 2
    assert spec.cron is not None
    return (next_cron_ms(spec.cron, next_ms) - next_ms) // 2


def describe(spec: TickSpec) -> str:
    """``every 5s`` / ``cron "0 * * * *"``, plus `` (inbox only)`` for ``wake: false``."""
    every = spec.every_ms
    rule = f"every {format_duration(every)}" if every is not None else f'cron "{spec.cron}"'
    return rule if spec.wake else f"{rule} (inbox only)"


def parse_payload(model: type[_M], raw: Any, rejected: str) -> _M:
    """An update's input as ``model``, validated in the handler's validator so a bad payload
    is refused with its reason (a typed handler parameter would fail it as "Failed decoding
    arguments", with no reason) and nothing reaches history.

    Raises:
        ApplicationError: type ``rejected``, ``bad payload: field: message``.
    """
    try:
        return model.model_validate(raw if raw is not None else {})
    except ValidationError as err:
        raise ApplicationError(
            f"bad payload: {short_error(err)}", type=rejected, non_retryable=True
        ) from None


def start_input(inp: Any) -> AgentInput | str:
    """The workflow's input as an ``AgentInput``, or why it is not one.

    An ``AgentWorkflow`` is started by the host library (the root) or by its parent (every
    other handle); one started from outside (a Temporal Schedule, ``temporal workflow
    start``) has no usable input.

    Returns:
        The input, or the error message, which says how to schedule an agent instead.
    """
    if isinstance(inp, AgentInput):
        return inp
    why = "no input" if inp is None else "input that is not an AgentInput"
    try:
        if inp is not None:
            return AgentInput.model_validate(inp)
    except ValidationError as err:
        why = f"{why} ({err.errors()[0].get('msg', 'invalid')})"
    return (
        f"AgentWorkflow was started with {why}: agent workflows are started by the runtime"
        " (AgentRuntime.spawn, tnx spawn), not by a Temporal Schedule or `temporal workflow"
        " start`. To run an agent on a schedule, give its definition a tick (AgentDef.tick ="
        ' TickSpec(every_ms=..., cron="...", prompt="...")) or schedule a spawned handle:'
        ' rt.schedule(h, every=..., cron="...", prompt="...") or `tnx schedule ID --every 1h`'
        ' / `tnx schedule ID --cron "0 * * * *"`.'
    )


class Ticks:
    """The tick schedule of one handle and its timer loop.

    Owns ``HandleState.ticks`` (:class:`TickState`); per run, the schedule's version (a
    change restarts the timer) and the ``AgentNextTick`` value last upserted.

    Args:
        s: the handle's state model.
        vis: trace, publish and rejections.
        inbox: the tick item goes into the inbox; a tick's wake is admitted there.
    """

    def __init__(self, s: HandleState, vis: Visibility, inbox: Inbox) -> None:
        self.s = s
        self.vis = vis
        self.inbox = inbox
        self.version = 0
        """Bumped by every schedule change: the timer loop starts over."""
        published = workflow.info().typed_search_attributes.get(AGENT_NEXT_TICK)
        self.published_ms: int | None = (
            None if published is None else int(published.timestamp() * 1000)
        )
        """The ``AgentNextTick`` shown (a continued run carries it)."""

    # ---- the schedule

    def schedule_error(self) -> str | None:
        """Why this handle takes no schedule (the root; closed or closing), or None."""
        s = self.s
        if s.defn is None:
            return "the root handle never runs an LLM: schedule a spawned handle"
        if s.state == "closed" or s.closing:
            return "handle closed"
        return None

    def set(self, spec: TickSpec | None) -> None:
        """Put ``spec`` in force (None: remove the schedule); the next fire time is counted
        from now. Already-coalesced ticks stay in the inbox."""
        s = self.s
        t = s.ticks
        t.started = True
        t.spec = spec
        t.next_ms = None if spec is None else first_fire_ms(spec, now_ms())
        self.version += 1
        self.vis.trace(f"{s.id}: tick schedule " + (describe(spec) if spec else "removed"))
        self._publish()
        self.vis.publish()

    # ---- the timer loop

    def begin(self) -> bool:
        """Start this run's schedule: the first run takes the definition's (``AgentDef.tick``).

        Returns:
            Whether the timer loop has work now: a schedule, or an ``AgentNextTick`` shown
            that must be unset. Without either, the run loop starts :meth:`run` only once a
            schedule is set or the handle closes (``lifecycle/runloop.py``), so a handle
            without a schedule runs no tick code while it serves wakes.
        """
        s = self.s
        t = s.ticks
        if not t.started:  # the first run: the definition's schedule
            t.started = True
            if s.defn is not None and s.defn.tick is not None:
                t.spec = s.defn.tick
                t.next_ms = first_fire_ms(t.spec, now_ms())
        return t.spec is not None or self.published_ms is not None

    async def run(self) -> None:
        """The timer loop of this run (after :meth:`begin`): sleep (a durable timer) until
        the next fire time, fire, repeat; a schedule change starts it over. Ends when the
        handle closes."""
        s = self.s
        t = s.ticks
        while not self._closed():
            version = self.version

            def changed(version: int = version) -> bool:
                return self.version != version or self._closed()

            spec = t.spec
            if spec is None:
                self._publish()
                await workflow.wait_condition(changed)
                continue
            if t.next_ms is None:
                t.next_ms = first_fire_ms(spec, now_ms())
            self._publish()
            delay = t.next_ms - now_ms()
            if delay > 0:
                try:
                    await workflow.wait_condition(
                        changed, timeout=timedelta(milliseconds=delay), timeout_summary="tick"
                    )
                    continue  # the schedule changed (or the handle closes)
                except TimeoutError:
                    pass
            self.fire(spec, t.next_ms)
        self._publish()

    def fire(self, spec: TickSpec, due_ms: int) -> None:
        """The timer due at ``due_ms`` fired: one tick standing for every fire time missed,
        into the inbox; a wake when it finds the handle idle (see the module docstring)."""
        s = self.s
        t = s.ticks
        count, t.next_ms = catch_up(spec, due_ms, now_ms())
        t.fired += count
        add_ticks(s.intake.items, count)
        late = f" (x{count}: fire times missed meanwhile)" if count > 1 else ""
        if s.pause.paused:
            if spec.wake and not any(m.via == "tick" for m in s.intake.wakes):
                self.inbox.hold_wake(spec.prompt, f"tick{late} while paused")
        elif (
            spec.wake
            and s.state == "idle"
            and not s.intake.turn_pending
            and not s.leases.slot_waiting
        ):
            gap = min_gap_ms(spec, t.next_ms)
            since = now_ms() - t.woke_at_ms
            if t.woke_at_ms and since < gap:
                self.vis.trace(
                    f"{s.id}: tick{late} coalesces: a tick woke the handle {since} ms ago"
                    f" (less than half the interval, {gap} ms)"
                )
            else:
                ticks = next((item.count or 1 for item in s.intake.items if is_tick(item)), count)
                t.woke += ticks
                t.woke_at_ms = now_ms()
                self.vis.trace(f"{s.id}: tick wakes{late}")
                self.inbox.wake_from_outside(spec.prompt)
        self._publish()
        self.vis.publish()

    # ---- visibility

    def _closed(self) -> bool:
        return self.s.state == "closed" or self.s.closing

    def _publish(self) -> None:
        """Upsert ``AgentNextTick`` when the next fire time changed (unset without one),
        and refresh the current details."""
        s = self.s
        shown = None if self._closed() or s.ticks.spec is None else s.ticks.next_ms
        if shown == self.published_ms:
            return
        if shown is None:
            workflow.upsert_search_attributes([AGENT_NEXT_TICK.value_unset()])
        else:
            when = workflow.now() + timedelta(milliseconds=shown - now_ms())
            workflow.upsert_search_attributes([AGENT_NEXT_TICK.value_set(when)])
        self.published_ms = shown
