"""``max_concurrent`` slots as leases (CONTRACT §3 wake, §6), as a plain class:
leases granted ahead at spawn, asks, FIFO queue with recall, give-back, hand-over, closes."""

from __future__ import annotations

from tests.unit.fakes import FakeSignals, handle, parent_with
from toolnexus_temporal.workflows.contract.messages import (
    SlotRecall,
    SlotRelease,
    SlotRequest,
    WakeRequest,
)
from toolnexus_temporal.workflows.contract.state import ChildInfo, HandleState, Lease, QueuedWake
from toolnexus_temporal.workflows.leases import LeaseBook

A, B, C, D = "p/a.1", "p/b.2", "p/c.3", "p/d.4"


def names(signals: FakeSignals) -> list[tuple[str, str]]:
    return [(to, name) for to, name, _ in signals.sent]


def ask(book: LeaseBook, child: str) -> None:
    book.on_request(SlotRequest(child=child))


def test_leases_are_granted_ahead_at_spawn_up_to_the_cap(log, signals):
    s = parent_with(A, B, C, max_concurrent=2)
    book = LeaseBook(s, log, signals)
    assert book.at_spawn(A) == Lease(id=1, sticky=True)
    assert book.at_spawn(B) == Lease(id=2, sticky=True)
    assert book.at_spawn(C) is None  # cap reached: C asks when woken
    assert signals.sent == []  # granted ahead: no message at all
    unlimited = parent_with(A, max_concurrent=None)
    assert LeaseBook(unlimited, log, signals).at_spawn(A) is None


def test_an_ask_with_a_free_slot_is_granted_sticky(log, signals):
    s = parent_with(A, B, max_concurrent=2)
    book = LeaseBook(s, log, signals)
    ask(book, A)
    assert s.leases.held == {A: Lease(id=1, sticky=True)}
    ((to, name, arg),) = signals.sent
    assert (to, name) == (A, "wake")
    assert isinstance(arg, WakeRequest) and arg.granted and arg.lease == 1 and arg.sticky


def test_a_full_parent_queues_fifo_once_and_recalls_sticky_leases_once(log, signals):
    s = parent_with(A, B, C, D, max_concurrent=2)
    book = LeaseBook(s, log, signals)
    book.at_spawn(A)
    book.at_spawn(B)
    ask(book, C)
    ask(book, D)
    ask(book, C)  # already queued: not twice
    assert s.leases.wake_queue == [QueuedWake(child=C), QueuedWake(child=D)]
    assert sum("wake QUEUED" in line for line in log.lines) == 2
    # each sticky lease is recalled once, and is then marked non-sticky
    assert names(signals) == [(A, "slot_recall"), (B, "slot_recall")]
    assert all(not lease.sticky for lease in s.leases.held.values())


def test_a_returned_lease_goes_to_the_first_queued_wake(log, signals):
    s = parent_with(A, B, C, max_concurrent=1)
    book = LeaseBook(s, log, signals)
    book.at_spawn(A)
    ask(book, B)
    ask(book, C)
    signals.sent.clear()
    book.on_release(SlotRelease(child=A, lease=1))
    assert list(s.leases.held) == [B]
    assert not s.leases.held[B].sticky  # C still waits: B gives it back after one turn
    assert any("DEQUEUED wake p/b.2" in line for line in log.lines)
    book.on_release(SlotRelease(child=B, lease=s.leases.held[B].id))
    assert list(s.leases.held) == [C] and s.leases.held[C].sticky  # nobody waits behind C
    assert [to for to, _ in names(signals)] == [B, C]


def test_a_stale_release_is_ignored(log, signals):
    s = parent_with(A, B, max_concurrent=1)
    book = LeaseBook(s, log, signals)
    book.at_spawn(A)
    book.on_release(SlotRelease(child=A, lease=7))  # not the lease A holds
    assert list(s.leases.held) == [A]


def test_a_closed_child_frees_its_lease_and_leaves_the_queue(log, signals):
    s = parent_with(A, B, C, max_concurrent=1)
    book = LeaseBook(s, log, signals)
    book.at_spawn(A)
    ask(book, B)
    ask(book, C)
    s.roster.children_info[B] = ChildInfo(state="closed")
    book.child_closed(B)
    assert s.leases.wake_queue == [QueuedWake(child=C)]
    book.child_closed(A)
    assert list(s.leases.held) == [C]


def test_a_queued_wake_of_a_closed_child_is_skipped_at_hand_over(log, signals):
    s = parent_with(A, B, C, max_concurrent=1)
    book = LeaseBook(s, log, signals)
    book.at_spawn(A)
    ask(book, B)
    ask(book, C)
    s.roster.children_info[B] = ChildInfo(state="closed")  # its closed report not yet applied
    book.on_release(SlotRelease(child=A, lease=1))
    assert list(s.leases.held) == [C]


def test_asks_for_closed_or_unknown_children_are_rejected_loudly(log, signals):
    s = parent_with(A, max_concurrent=1)
    s.roster.children_info[A] = ChildInfo(state="closed")
    book = LeaseBook(s, log, signals)
    ask(book, A)
    ask(book, "p/ghost.9")
    assert len(log.rejected) == 2 and signals.sent == [] and s.leases.held == {}


def test_an_ask_from_a_holder_repeats_its_grant(log, signals):
    s = parent_with(A, max_concurrent=1)
    book = LeaseBook(s, log, signals)
    book.at_spawn(A)
    ask(book, A)
    ((to, name, arg),) = signals.sent
    assert (to, name) == (A, "wake") and isinstance(arg, WakeRequest) and arg.lease == 1
    assert len(s.leases.held) == 1


# ---------------------------------------------------------------- child side


def child(**fields) -> HandleState:
    return handle(**{"id": "p/a.1", "parent": "p", "slot_parent": True, **fields})


def test_a_child_with_a_lease_needs_no_slot(log, signals):
    assert not LeaseBook(child(lease=3), log, signals).needs_slot()
    assert LeaseBook(child(), log, signals).needs_slot()
    assert not LeaseBook(child(slot_parent=False), log, signals).needs_slot()


def test_a_child_asks_once_and_is_queued(log, signals):
    s = child()
    book = LeaseBook(s, log, signals)
    book.ask("go")
    book.ask("again")  # a wake while queued is a no-op
    assert s.leases.slot_waiting and s.leases.queued_prompt == "go"
    assert names(signals) == [("p", "slot_request")]


def test_a_grant_admits_the_queued_wake_once(log, signals):
    s = child()
    book = LeaseBook(s, log, signals)
    book.ask("go")
    assert book.take_grant(WakeRequest(granted=True, lease=4, sticky=False)) == (True, "go")
    assert (s.leases.lease, s.leases.lease_sticky, s.leases.slot_waiting) == (4, False, False)
    assert book.take_grant(WakeRequest(granted=True, lease=4)) == (False, None)  # repeated


def test_a_grant_nobody_waits_for_is_given_back_unless_sticky(log, signals):
    s = child()
    book = LeaseBook(s, log, signals)
    assert book.take_grant(WakeRequest(granted=True, lease=2, sticky=False)) == (False, None)
    assert s.leases.lease is None
    assert names(signals) == [("p", "slot_release")]
    s2 = child()
    assert LeaseBook(s2, log, signals).take_grant(WakeRequest(granted=True, lease=5, sticky=True))
    assert s2.leases.lease == 5


def test_a_closing_child_gives_a_grant_back(log, signals):
    s = child(closing=True, slot_waiting=True)
    book = LeaseBook(s, log, signals)
    assert book.take_grant(WakeRequest(granted=True, lease=2, sticky=True)) == (False, None)
    assert s.leases.lease is None and names(signals) == [("p", "slot_release")]


def test_a_recall_gives_back_now_when_idle_else_at_settle(log, signals):
    s = child(lease=3, lease_sticky=True)
    book = LeaseBook(s, log, signals)
    book.on_recall(SlotRecall(lease=3), busy=True)
    assert s.leases.lease == 3 and not s.leases.lease_sticky and signals.sent == []
    book.after_transition("idle", parked=False)
    assert s.leases.lease is None
    ((_, _, arg),) = signals.sent
    assert isinstance(arg, SlotRelease) and arg.lease == 3
    s2 = child(lease=8, lease_sticky=True)
    LeaseBook(s2, log, signals).on_recall(SlotRecall(lease=8), busy=False)
    assert s2.leases.lease is None


def test_a_sticky_lease_survives_settles_and_a_stale_recall(log, signals):
    s = child(lease=3, lease_sticky=True)
    book = LeaseBook(s, log, signals)
    book.after_transition("idle", parked=False)
    book.on_recall(SlotRecall(lease=1), busy=False)  # an older lease
    assert s.leases.lease == 3 and signals.sent == []


def test_a_non_sticky_lease_comes_back_when_parked_not_when_answered_inline(log, signals):
    s = child(lease=3, lease_sticky=False)
    book = LeaseBook(s, log, signals)
    book.after_transition("suspended", parked=False)  # an interpreter answers inline
    assert s.leases.lease == 3
    book.after_transition("suspended", parked=True)
    assert s.leases.lease is None


def test_a_recall_that_overtakes_its_grant_still_takes_effect(log, signals):
    """The recall of lease 4 arrives before the (sticky) grant of lease 4: the lease then
    comes back after the queued wake's turn, not never."""
    s = child()
    book = LeaseBook(s, log, signals)
    book.ask("go")
    book.on_recall(SlotRecall(lease=4), busy=False)  # nothing held yet: kept aside
    assert s.leases.recalled_lease == 4 and signals.sent == [
        ("p", "slot_request", signals.sent[0][2])
    ]
    assert book.take_grant(WakeRequest(granted=True, lease=4, sticky=True)) == (True, "go")
    assert not s.leases.lease_sticky
    book.after_transition("idle", parked=False)
    assert s.leases.lease is None and names(signals)[-1] == ("p", "slot_release")
