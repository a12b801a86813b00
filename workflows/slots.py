"""``max_concurrent`` slots of protocol 1 (CONTRACT §3 wake, §6): a parent runs at most
``max_concurrent`` children at once; further wakes queue FIFO and a settling child hands its
slot to the first queued wake. Trees started before protocol 2 (``names.PROTOCOL_LEASES``)
keep this protocol until they close, and their histories replay it; new trees use leases
(:mod:`~toolnexus_temporal.workflows.leases`).

The slot protocol, told once:

1. **Take.** The parent's books are ``running_children`` (child → its ``result_seq`` when
   the slot was granted) and ``wake_queue``. A wake takes a slot on the parent, atomically
   with the call, in one of three ways:

   * ``wake_child`` update with ``relay`` (the host library's ``wake``): the parent takes
     the slot and returns a ``grant`` id; the caller delivers the wake itself with the
     child's ``turn`` update carrying that grant. No signal races the caller's update. A
     relay caller that retries gets the same grant back.
   * ``wake_child`` without ``relay``, or the ``task`` tool inside the parent: the parent
     takes the slot and signals ``wake`` with ``granted`` to the child.
   * a ``wake`` from outside the parent (a ``wake`` signal, or a ``turn`` update without a
     fresh grant): the child signals ``slot_request`` to its parent, which grants it (a
     ``wake`` signal with ``granted`` back) or queues it.

   A full parent queues the wake (``wake QUEUED``); a suspended or parked child, or one
   already running or queued, is a no-op.
2. **Run.** The child admits one wake per grant id (``consumed_grant``): a ``turn`` update
   that repeats the grant it used last goes through ``slot_request`` instead, because the
   parent's books are behind (that turn's settle report is still on its way).
3. **Release.** The child's ``child_report`` says it settled (a ``result_seq`` beyond the
   one at the grant), parked on a Request (it spends nothing and may wait for days), or
   closed: its slot goes to the first queued wake whose child is not closed (``DEQUEUED
   wake``; signal ``wake`` with ``granted``). A parked child resumed by its Answer runs again
   even if that briefly exceeds the cap. A caller that has seen a result settle says so
   (``seen_result_seq``, ``settled``), which frees the slot before the report arrives, so a
   wake right after a result never queues behind it. A child whose workflow ended without
   a report frees its slot and leaves the queue.

The rules live in :class:`SlotBook`, a plain class over ``HandleState`` whose collaborators
(trace, signals) are passed in: a unit test runs it with fakes. Deterministic; no I/O.
"""

from __future__ import annotations

from temporalio import workflow
from temporalio.exceptions import ApplicationError

from toolnexus_temporal.workflows.outbox import Signals
from toolnexus_temporal.workflows.visibility import Log

with workflow.unsafe.imports_passed_through():
    from toolnexus_temporal.workflows.messages import (
        ChildReport,
        WakeChildRequest,
        WakeChildResult,
        WakeRequest,
    )
    from toolnexus_temporal.workflows.names import SIGNAL_WAKE
    from toolnexus_temporal.workflows.state import ChildInfo, HandleState, QueuedWake


class SlotBook:
    """The parent's ``max_concurrent`` books, and the child's grant check.

    Owns ``running_children``, ``wake_queue``, ``grants``, ``grant_seq`` (parent side) and
    ``consumed_grant`` (child side).

    Args:
        s: the handle's state model.
        log: trace lines and rejections.
        outbox: sends ``wake`` (with ``granted``) to a child that got a slot.
    """

    def __init__(self, s: HandleState, log: Log, outbox: Signals) -> None:
        self.s = s
        self.log = log
        self.outbox = outbox

    def wake_child(self, req: WakeChildRequest) -> WakeChildResult:
        """The ``wake_child`` update: free the slots of siblings the caller saw settle, then
        admit ``req.child``'s wake (see :meth:`admit`).

        Raises:
            ApplicationError: ``NoSuchChild`` (not a child of this handle) or
                ``WakeRejected`` (the child or this handle is closed or closing).
        """
        info = self.s.children_info.get(req.child)
        if info is None:
            raise ApplicationError(
                f"{req.child} is not a child of {self.s.id}", type="NoSuchChild", non_retryable=True
            )
        if info.state == "closed" or self.s.closing or self.s.state == "closed":
            self.log.reject("wake", f"{req.child}: handle closed")
            raise ApplicationError("handle closed", type="WakeRejected", non_retryable=True)
        for sibling, seen in req.settled.items():
            granted_at = self.s.running_children.get(sibling)
            if granted_at is not None and seen > granted_at:
                self.release(sibling)  # its settle report is still on the way
        return self.admit(req.child, req.prompt, req.seen_result_seq, relay=req.relay)

    def slot_request(self, req: WakeChildRequest) -> None:
        """The ``slot_request`` signal: a child asks for a slot for a wake it received from
        outside; the grant goes back as a ``wake`` signal (rejected loudly for a closed or
        unknown child)."""
        info = self.s.children_info.get(req.child)
        if info is None or info.state == "closed" or self.s.closing:
            self.log.reject("wake", f"{req.child}: no slot for a closed or unknown child")
            return
        self.admit(req.child, req.prompt, req.seen_result_seq)

    def admit(
        self, child: str, prompt: str | None, seen_result_seq: int = 0, *, relay: bool = False
    ) -> WakeChildResult:
        """Admit a wake of ``child`` (a known child): take a slot, queue it FIFO, or no-op.

        Args:
            child: the child's handle id (must be in ``children_info``).
            prompt: the wake's prompt (kept with a queued wake).
            seen_result_seq: the child's results the caller has seen settle: beyond the count
                at its grant, the child's slot is freed first (its report is on the way).
            relay: return a grant id for the caller to deliver, instead of signalling.

        Returns:
            ``admitted`` with the grant (relay) or None, ``queued``, or ``noop``.
        """
        s = self.s
        granted_at = s.running_children.get(child)
        if granted_at is not None and seen_result_seq > granted_at:
            self.release(child)  # its settle report is still on the way
        info = s.children_info[child]
        if seen_result_seq > info.result_seq:
            info = info.model_copy(update={"result_seq": seen_result_seq, "state": "idle"})
            s.children_info[child] = info
        if info.state == "suspended" or info.parked:
            # A wake of a suspended handle is a no-op (CONTRACT §3): no slot for it.
            return WakeChildResult(outcome="noop", after_seq=info.result_seq, state="suspended")
        if child in s.running_children:
            # A relay caller that retries gets the same grant back (delivered at most once).
            grant = s.grants.get(child) if relay else None
            return WakeChildResult(
                outcome="noop", after_seq=info.result_seq, state="running", grant=grant
            )
        if any(q.child == child for q in s.wake_queue):
            return WakeChildResult(outcome="queued", after_seq=info.result_seq, state="idle")
        limit = s.budget.max_concurrent
        if limit is not None and len(s.running_children) >= limit:
            s.wake_queue.append(QueuedWake(child=child, prompt=prompt))
            self.log.trace(f"{s.id}: {child} wake QUEUED (max_concurrent {limit})")
            return WakeChildResult(outcome="queued", after_seq=info.result_seq, state="idle")
        self.grant(child, prompt, relay=relay)
        return WakeChildResult(
            outcome="admitted",
            after_seq=info.result_seq,
            state="running",
            grant=s.grants.get(child),
        )

    def grant(self, child: str, prompt: str | None, *, relay: bool = False) -> None:
        """Take a slot for ``child``; tell it to run (signal ``wake`` with ``granted``), or
        (``relay``) record a grant id for the caller to deliver with the ``turn`` update."""
        s = self.s
        info = s.children_info[child]
        s.running_children[child] = info.result_seq
        s.children_info[child] = info.model_copy(update={"state": "running"})
        if relay:
            s.grant_seq += 1
            s.grants[child] = s.grant_seq
        else:
            s.grants.pop(child, None)
            self.outbox.signal_later(child, SIGNAL_WAKE, WakeRequest(prompt=prompt, granted=True))

    def release(self, child: str) -> None:
        """``child`` no longer runs: its slot goes to the first queued wake whose child is not
        closed (slot transfer); queued wakes of closed children are dropped on the way."""
        s = self.s
        s.grants.pop(child, None)
        if s.running_children.pop(child, None) is None:
            return
        while s.wake_queue:
            nxt = s.wake_queue.pop(0)
            if s.children_info.get(nxt.child, ChildInfo()).state == "closed":
                continue
            self.log.trace(f"{s.id}: DEQUEUED wake {nxt.child} (slot from {child})")
            self.grant(nxt.child, nxt.prompt)
            return

    def on_report(self, report: ChildReport, *, was_parked: bool) -> None:
        """Apply a child's (newer) report to the books: a settled, parked or closed child
        frees its slot; a parked child resumed by its Answer (``was_parked``, now
        ``running``) holds one again, even if that briefly exceeds the cap."""
        granted_at = self.s.running_children.get(report.id)
        if granted_at is not None and (
            report.state == "closed"
            or report.parked
            or (report.state == "idle" and report.result_seq > granted_at)
        ):
            # settled, closed, or parked on a Request (a parked child spends nothing and
            # may wait for days: its slot goes to the queue)
            self.release(report.id)
        elif granted_at is None and was_parked and report.state == "running":
            # resumed by its Answer: it runs again, even if that briefly exceeds the cap
            self.s.running_children[report.id] = report.result_seq

    def child_ended(self, child: str) -> None:
        """A child's workflow ended without reporting ``closed``: free its slot and drop its
        queued wakes."""
        if child in self.s.running_children:
            self.release(child)
        self.s.wake_queue = [q for q in self.s.wake_queue if q.child != child]

    def consume_grant(self, grant: int | None) -> bool:
        """Child side: whether a ``turn`` update's ``grant`` admits its wake. A fresh grant id
        is recorded as consumed; no grant, or the one used last (the parent's books are
        behind), does not admit: the handle asks its parent (``slot_request``)."""
        if grant is not None and grant != self.s.consumed_grant:
            self.s.consumed_grant = grant
            return True
        return False
