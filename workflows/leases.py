"""``max_concurrent`` slots as leases (CONTRACT §3 wake, §6): a parent runs at most
``max_concurrent`` children at once, further wakes queue FIFO, and a child that gives its slot
back hands it to the first queued wake.

A slot is a **lease** the child keeps across turns, so a wake of a child that holds one costs
no message to the parent at all. Leases only move when wakes compete:

1. **Grant ahead.** At spawn, while the parent has a free slot and no queue, the child starts
   with a sticky lease in its initial state (no message).
2. **Ask.** A child with no lease that is woken (by the ``turn`` update, the ``wake`` signal, or
   its first wake at spawn) signals ``slot_request`` and shows ``queued``. The parent grants a
   free slot (signal ``wake`` with ``granted`` and the lease id) or queues the wake FIFO
   (``wake QUEUED``) and **recalls** every sticky lease (signal ``slot_recall``, once per lease).
3. **Give back.** A recalled child gives its lease back (signal ``slot_release``) at once when
   no turn of its own runs (idle, or parked on a Request: a parked child spends nothing), else
   when its turn settles or parks. A lease granted while other wakes wait is not sticky: it
   comes back after one turn, so queued wakes take turns in FIFO order. A closed child's last
   report frees its lease; so does the end of its workflow.
4. **Hand over.** A returned lease goes to the first queued wake whose child is not closed
   (``DEQUEUED wake``), sticky only when no other wake waits.

Signals between two workflows are not ordered, so a lease given back is never taken again:
the child remembers the highest lease it returned (``returned_lease``) and ignores a later
grant of it, and tells the parent in its next ``slot_request``, so a parent whose books still
show that lease (the ``slot_release`` is behind the request) takes it as returned instead of
sending its grant again.

Exact: a child runs only while it holds a lease (a parked child resumed by its Answer runs
again even without one), the parent never has more than ``max_concurrent``
leases out, and a lease in flight (granted or given back) counts on the parent's side.
Crash-safe: leases live in both workflows' state and move only by durable signals.

:class:`LeaseBook` is a plain class over ``HandleState`` whose collaborators (trace, signals)
are passed in, so a unit test runs it with fakes. Deterministic; no I/O.
"""

from __future__ import annotations

from temporalio import workflow

from toolnexus_temporal.workflows.outbox import Signals
from toolnexus_temporal.workflows.visibility.visibility import Log

with workflow.unsafe.imports_passed_through():
    from toolnexus_temporal.workflows.contract.messages import (
        SlotRecall,
        SlotRelease,
        SlotRequest,
        WakeRequest,
    )
    from toolnexus_temporal.workflows.contract.names import (
        SIGNAL_SLOT_RECALL,
        SIGNAL_SLOT_RELEASE,
        SIGNAL_SLOT_REQUEST,
        SIGNAL_WAKE,
    )
    from toolnexus_temporal.workflows.contract.state import (
        ChildInfo,
        HandleState,
        Lease,
        QueuedWake,
    )


class LeaseBook:
    """Both sides of the lease protocol for one handle.

    Owns ``HandleState.leases`` (:class:`LeaseState`). Parent side: ``held``, ``wake_queue``
    and ``grant_seq``. Child side: ``lease``, ``lease_sticky``, ``recalled_lease``,
    ``returned_lease``, ``slot_waiting``, ``queued_prompt`` and ``slot_parent`` (set at spawn).

    Args:
        s: the handle's state model.
        log: trace lines and rejections.
        outbox: sends ``wake`` (a grant), ``slot_recall``, ``slot_request`` and
            ``slot_release``.
    """

    def __init__(self, s: HandleState, log: Log, outbox: Signals) -> None:
        self.s = s
        self.log = log
        self.outbox = outbox

    # ------------------------------------------------------------------ parent side

    def at_spawn(self, child: str) -> Lease | None:
        """A sticky lease for a new child when a slot is free and no wake waits (none when
        this handle does not limit ``max_concurrent``)."""
        s = self.s
        limit = s.budget.max_concurrent
        if limit is None or s.leases.wake_queue or len(s.leases.held) >= limit:
            return None
        s.leases.grant_seq += 1
        lease = Lease(id=s.leases.grant_seq, sticky=True)
        s.leases.held[child] = lease
        return lease

    def on_request(self, req: SlotRequest) -> None:
        """The ``slot_request`` signal: grant a free slot, or queue the wake FIFO and recall
        the sticky leases (rejected loudly for a closed or unknown child)."""
        s = self.s
        child = req.child
        info = s.roster.children_info.get(child)
        if info is None or info.state == "closed" or s.closing or s.state == "closed":
            self.log.reject("wake", f"{child}: no slot for a closed or unknown child")
            return
        held = s.leases.held.get(child)
        if held is not None and req.returned >= held.id:
            # The child gave this lease back and asks again: its release is behind this
            # request. Take the lease as returned (the late release is then stale).
            self.log.trace(f"{s.id}: {child} returned lease {held.id} (release on its way)")
            self.release(child)
            held = None
        if held is not None:
            # The child asks although the books say it holds a lease: the grant is still on
            # its way, or was lost with a run of the child. Send it again (idempotent).
            self._send_grant(child, held)
            return
        if any(q.child == child for q in s.leases.wake_queue):
            return
        limit = s.budget.max_concurrent
        if limit is None or (not s.leases.wake_queue and len(s.leases.held) < limit):
            self.grant(child, sticky=True)
            return
        s.leases.wake_queue.append(QueuedWake(child=child))
        recalled = self.recall()
        why = f"; {recalled} lease(s) recalled" if recalled else ""
        self.log.trace(f"{s.id}: {child} wake QUEUED (max_concurrent {limit}{why})")

    def grant(self, child: str, *, sticky: bool) -> None:
        """Give ``child`` a lease and tell it (signal ``wake`` with ``granted``)."""
        s = self.s
        s.leases.grant_seq += 1
        lease = Lease(id=s.leases.grant_seq, sticky=sticky)
        s.leases.held[child] = lease
        self._send_grant(child, lease)

    def _send_grant(self, child: str, lease: Lease) -> None:
        grant = WakeRequest(
            granted=True, lease=lease.id, sticky=lease.sticky, nonce=self._nonce(child)
        )
        self.outbox.signal_later(child, SIGNAL_WAKE, grant)

    def _nonce(self, child: str) -> str | None:
        """The nonce of ``child``."""
        return self.s.roster.children_info.get(child, ChildInfo()).nonce

    def recall(self) -> int:
        """Ask every holder of a sticky lease to give it back once no turn of its own runs.

        Returns:
            How many leases were recalled.
        """
        s = self.s
        recalled = 0
        for child, lease in list(s.leases.held.items()):
            if lease.sticky:
                s.leases.held[child] = Lease(id=lease.id, sticky=False)
                recall = SlotRecall(lease=lease.id, nonce=self._nonce(child))
                self.outbox.signal_later(child, SIGNAL_SLOT_RECALL, recall)
                recalled += 1
        return recalled

    def on_release(self, rel: SlotRelease) -> None:
        """The ``slot_release`` signal: the child gave lease ``rel.lease`` back."""
        held = self.s.leases.held.get(rel.child)
        if held is not None and held.id == rel.lease:
            self.release(rel.child)

    def release(self, child: str) -> None:
        """``child`` holds no lease any more: hand the slot to the first queued wake whose
        child is not closed (queued wakes of closed children are dropped on the way)."""
        s = self.s
        if s.leases.held.pop(child, None) is None:
            return
        while s.leases.wake_queue:
            nxt = s.leases.wake_queue.pop(0)
            if s.roster.children_info.get(nxt.child, ChildInfo()).state == "closed":
                continue
            self.log.trace(f"{s.id}: DEQUEUED wake {nxt.child} (slot from {child})")
            self.grant(nxt.child, sticky=not s.leases.wake_queue)
            return

    def child_closed(self, child: str) -> None:
        """``child`` closed (its last report) or its workflow ended: free its lease and drop
        its queued wake."""
        self.release(child)
        self.s.leases.wake_queue = [q for q in self.s.leases.wake_queue if q.child != child]

    # ------------------------------------------------------------------ child side

    def needs_slot(self) -> bool:
        """A wake of this handle must first get a slot from its parent."""
        s = self.s
        return s.parent is not None and s.leases.slot_parent and s.leases.lease is None

    def ask(self, prompt: str | None) -> None:
        """Wait for a slot: signal ``slot_request`` (once; a further wake while queued is a
        no-op, as on a running handle)."""
        s = self.s
        if s.parent is None:
            return
        if s.leases.slot_waiting:
            self.log.trace(f"{s.id}: wake while queued: no-op")
            return
        s.leases.slot_waiting = True
        s.leases.queued_prompt = prompt
        self.log.trace(f"{s.id}: wake asks {s.parent} for a slot")
        self.outbox.signal_later(
            s.parent,
            SIGNAL_SLOT_REQUEST,
            SlotRequest(child=s.id, returned=s.leases.returned_lease, nonce=s.nonce),
        )

    def take_queued(self) -> str | None:
        """The prompt of a wake that travelled with the spawn (kept in ``queued_prompt``),
        consumed."""
        prompt, self.s.leases.queued_prompt = self.s.leases.queued_prompt, None
        return prompt

    def drop_queued(self) -> None:
        """The handle closes: a wake queued for a slot ends here."""
        self.s.leases.slot_waiting, self.s.leases.queued_prompt = False, None

    def take_grant(self, req: WakeRequest) -> tuple[bool, str | None]:
        """A grant from the parent (``wake`` with ``granted`` and ``lease``).

        Returns:
            (True, the queued prompt) when the waiting wake may now be admitted; else
            (False, None): no wake waits (the lease is kept when sticky, else given back) or
            the handle is closing (given back).
        """
        s = self.s
        if req.lease is None or s.leases.lease == req.lease:
            return False, None  # a repeated grant
        if req.lease <= s.leases.returned_lease:
            # given back already: the parent re-sent it before our release reached it
            self.log.trace(f"{s.id}: late grant of lease {req.lease} ignored (given back)")
            return False, None
        s.leases.lease = req.lease
        # A recall can overtake the grant it recalls (two signals): it was kept aside.
        s.leases.lease_sticky = req.sticky and req.lease > s.leases.recalled_lease
        if s.closing or s.state == "closed":
            self.give_back()
            return False, None
        if s.leases.slot_waiting:
            s.leases.slot_waiting = False
            prompt, s.leases.queued_prompt = s.leases.queued_prompt, None
            if s.state == "idle":
                return True, prompt
        if not s.leases.lease_sticky and s.state == "idle":
            self.give_back()
        return False, None

    def on_recall(self, rec: SlotRecall, *, busy: bool) -> None:
        """The parent recalls lease ``rec.lease``: give it back now unless a turn runs
        (``busy``), else when the turn settles or parks."""
        s = self.s
        if s.leases.lease != rec.lease:
            if s.leases.lease is None or rec.lease > s.leases.lease:
                # the grant of that lease is still on its way: it arrives recalled
                s.leases.recalled_lease = max(s.leases.recalled_lease, rec.lease)
            return  # else already given back
        s.leases.lease_sticky = False
        if not busy:
            self.give_back()

    def after_transition(self, to: str, *, parked: bool) -> None:
        """Give a non-sticky lease back when the turn settled or parked."""
        s = self.s
        if s.leases.lease is None or s.leases.lease_sticky:
            return
        if to == "idle" or (to == "suspended" and parked):
            self.give_back()

    def give_back(self) -> None:
        """Return the held lease to the parent (signal ``slot_release``)."""
        s = self.s
        lease, s.leases.lease, s.leases.lease_sticky = s.leases.lease, None, False
        if lease is not None:
            s.leases.returned_lease = max(s.leases.returned_lease, lease)
        if lease is not None and s.parent is not None:
            self.outbox.signal_later(
                s.parent, SIGNAL_SLOT_RELEASE, SlotRelease(child=s.id, lease=lease, nonce=s.nonce)
            )
