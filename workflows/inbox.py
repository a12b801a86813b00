"""The inbox and wake admission (CONTRACT §3 post, wake; §4 turn input).

``post`` appends to a bounded inbox and never changes state; a wake of an idle handle drains
the inbox into the turn and flips the handle to ``running`` in one step. The turn's input
(the wake prompt, then the drained inbox as one block) is rendered by
:mod:`~toolnexus_temporal.workflows.rules.render`, a pure module the sandbox passes through.

The rules are plain functions over ``HandleState`` (:func:`post_error`, :func:`wake_error`,
:func:`drain`, :func:`take_turn_input`, :func:`restore_drained`); :class:`Inbox` applies
them from workflow code. Deterministic; no I/O.
"""

from __future__ import annotations

from temporalio import workflow

from toolnexus_temporal.workflows.leases import LeaseBook
from toolnexus_temporal.workflows.machine import Machine, TurnScratch
from toolnexus_temporal.workflows.rules.background import take_waiting
from toolnexus_temporal.workflows.visibility.visibility import Visibility

with workflow.unsafe.imports_passed_through():
    from toolnexus_temporal.workflows.contract.limits import INBOX_BYTES, text_bytes
    from toolnexus_temporal.workflows.contract.messages import WakeRequest
    from toolnexus_temporal.workflows.contract.models import InboxItem
    from toolnexus_temporal.workflows.contract.names import HISTORY_FULL as HISTORY_FULL
    from toolnexus_temporal.workflows.contract.state import HandleState
    from toolnexus_temporal.workflows.rules.render import coalesce_ticks, render_turn_input


def post_error(s: HandleState, item: InboxItem) -> str | None:
    """Why ``item`` may not be posted (CONTRACT §3 post), or None.

    Returns:
        ``the root has no inbox: ...``, ``inbox closed`` (closed or closing),
        ``inbox full (N)`` at ``options.inbox_cap`` items, or ``inbox full (524,288
        bytes)`` when the item would take the inbox's text past
        :data:`~toolnexus_temporal.workflows.contract.limits.INBOX_BYTES` (the inbox travels
        in the carried state, one payload of at most 2 MB).
    """
    if s.defn is None:
        return "the root has no inbox: post to a spawned handle"
    if s.state == "closed" or s.closing:
        return "inbox closed"
    # The one coalesced tick item takes no place: ticks never fill the inbox (``ticks.py``).
    ticks = any(i.from_ == "clock" and i.channel == "timer" for i in s.intake.items)
    if len(s.intake.items) - ticks >= s.options.inbox_cap:
        return f"inbox full ({s.options.inbox_cap})"
    held = sum(text_bytes(i.text) for i in s.intake.items)
    if held + text_bytes(item.text) > INBOX_BYTES:
        return f"inbox full ({INBOX_BYTES:,} bytes)"
    return None


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
    """Admit a wake: keep its prompt, move the inbox into the turn (the posts, then the
    background children's items, when any wait: ``children/background.py``), mark the turn
    pending."""
    s.intake.wake_prompt = prompt
    waiting = take_waiting(s) if s.background.waiting else []
    s.intake.turn_inbox = s.intake.items + waiting
    s.intake.items = []
    s.intake.turn_pending = True


def turn_started(s: HandleState) -> str:
    """The admitted turn starts: it is no longer pending; returns its user message
    (:func:`take_turn_input`)."""
    s.intake.turn_pending = False
    return take_turn_input(s)


def turn_ended(s: HandleState) -> None:
    """The turn settled: the items drained into it are done with."""
    s.intake.turn_inbox = []


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

    def wake_error(self) -> str | None:
        """See :func:`wake_error`."""
        return wake_error(self.s)

    def wake_signal(self, req: WakeRequest) -> None:
        """The ``wake`` signal: rejected loudly for the root or a closed handle, else a wake
        from outside (``granted`` when the parent sent it with a slot)."""
        if req.granted:  # a lease from the parent (``trust.grant`` checked it)
            admit, prompt = self.leases.take_grant(req)
            if admit:
                self.admit_wake(prompt)
            return
        error = self.wake_error()
        if error is not None:
            self.vis.reject("wake", error)
            return
        self.wake_from_outside(req.prompt)

    def wake_from_outside(self, prompt: str | None) -> None:
        """Admit a wake at once, or (under a parent that limits ``max_concurrent``) get a slot
        first: admitted at once with a held lease, else the parent is asked
        (:mod:`~toolnexus_temporal.workflows.leases`)."""
        s = self.s
        if s.pause.paused:  # no turn starts while paused: the latest wake is kept (pause.py)
            self.hold_wake(prompt, "wake while paused")
            return
        if s.state in ("running", "suspended"):
            if self.scratch.interrupt_requested:
                # The wake came after an interrupt that is still stopping the turn: it runs
                # once the handle is idle (``admit_held_wake``), not a silent no-op.
                s.intake.held_wake, s.intake.held_prompt = True, prompt
                self.vis.trace(f"{s.id}: wake held until the interrupt finished")
            else:
                self.vis.trace(f"{s.id}: wake ignored ({s.state}: a no-op, posts buffer)")
            return
        if not self.leases.needs_slot():
            self.admit_wake(prompt)
        elif s.state == "idle":
            self.leases.ask(prompt)
            self.vis.publish()

    def hold_wake(self, prompt: str | None, why: str) -> None:
        """Keep one wake (the latest) for later: :meth:`admit_held_wake` admits it."""
        s = self.s
        s.intake.held_wake, s.intake.held_prompt = True, prompt
        self.vis.trace(f"{s.id}: {why}: wake held")
        self.vis.publish()

    def take_start_wake(self) -> tuple[bool, str | None]:
        """At a run's start: whether the handle was spawned with a wake (consumed), and its
        prompt (kept by the lease book until now)."""
        if not self.s.intake.start_wake:
            return False, None
        self.s.intake.start_wake = False
        return True, self.leases.take_queued()

    def admit_held_wake(self) -> None:
        """After a turn ended, or on unpause: admit the wake held while an interrupt stopped
        the turn or while the handle was paused, unless the handle closed, is busy or is
        (still) paused."""
        s = self.s
        if not s.intake.held_wake or s.state != "idle" or s.pause.paused:
            return
        prompt = s.intake.held_prompt
        s.intake.held_wake, s.intake.held_prompt = False, None
        if self.wake_error() is None:
            self.wake_from_outside(prompt)

    def admit_wake(self, prompt: str | None) -> None:
        """idle→running with the inbox drained (CONTRACT §3 wake); a no-op when running or
        suspended (posts buffer meanwhile)."""
        if self.s.state != "idle":
            return  # running or suspended: a no-op (CONTRACT §3); posts buffer meanwhile
        drain(self.s, prompt)
        self.machine.transition("running", "wake")
