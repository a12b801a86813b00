"""``max_concurrent`` slots as a plain class (CONTRACT §3 wake, §6): admission, FIFO queue,
hand-over to the first live queued wake, stale grants, relay grants."""

from __future__ import annotations

import pytest
from temporalio.exceptions import ApplicationError

from tests.unit.fakes import FakeLog, FakeSignals, parent_with
from toolnexus_temporal.workflows.messages import ChildReport, WakeChildRequest, WakeRequest
from toolnexus_temporal.workflows.slots import SlotBook
from toolnexus_temporal.workflows.state import ChildInfo, HandleState, QueuedWake

A, B, C = "p/a.1", "p/b.2", "p/c.3"


def book(s: HandleState, log: FakeLog, signals: FakeSignals) -> SlotBook:
    return SlotBook(s, log, signals)


def wakes(signals: FakeSignals) -> list[tuple[str, str | None]]:
    """(child, prompt) of every granted ``wake`` signal sent, in order."""
    out = []
    for child, name, arg in signals.sent:
        assert name == "wake"
        assert isinstance(arg, WakeRequest) and arg.granted
        out.append((child, arg.prompt))
    return out


def report(child: str, seq: int, **fields) -> ChildReport:
    base = {"id": child, "seq": seq, "state": "idle", "usage_total": 0, "subtree_tool_calls": 0}
    return ChildReport(**{**base, "result_seq": 0, **fields})


def test_first_wake_takes_the_slot_and_tells_the_child(log, signals):
    s = parent_with(A, B)
    res = book(s, log, signals).admit(A, "go")
    assert (res.outcome, res.state, res.grant) == ("admitted", "running", None)
    assert s.running_children == {A: 0}
    assert s.children_info[A].state == "running"
    assert wakes(signals) == [(A, "go")]


def test_wakes_over_the_cap_queue_fifo_and_once(log, signals):
    s = parent_with(A, B, C)
    slots = book(s, log, signals)
    slots.admit(A, "a")
    assert slots.admit(B, "b").outcome == "queued"
    assert slots.admit(C, "c").outcome == "queued"
    assert slots.admit(B, "b again").outcome == "queued"  # already queued: not twice
    assert s.wake_queue == [QueuedWake(child=B, prompt="b"), QueuedWake(child=C, prompt="c")]
    assert sum("wake QUEUED" in line for line in log.lines) == 2
    assert wakes(signals) == [(A, "a")]


def test_a_settled_child_hands_its_slot_to_the_first_queued_wake(log, signals):
    s = parent_with(A, B, C)
    slots = book(s, log, signals)
    slots.admit(A, "a")
    slots.admit(B, "b")
    slots.admit(C, "c")
    slots.on_report(report(A, 1, result_seq=1), was_parked=False)
    assert s.running_children == {B: 0}
    assert s.wake_queue == [QueuedWake(child=C, prompt="c")]
    assert wakes(signals) == [(A, "a"), (B, "b")]
    assert any(f"DEQUEUED wake {B} (slot from {A})" in line for line in log.lines)


def test_a_closed_child_in_the_queue_is_skipped(log, signals):
    s = parent_with(A, B, C)
    slots = book(s, log, signals)
    slots.admit(A, "a")
    slots.admit(B, "b")
    slots.admit(C, "c")
    s.children_info[B] = ChildInfo(state="closed")
    slots.release(A)
    assert s.running_children == {C: 0}
    assert s.wake_queue == []
    assert wakes(signals) == [(A, "a"), (C, "c")]


def test_release_with_only_closed_children_queued_leaves_the_slot_free(log, signals):
    s = parent_with(A, B)
    slots = book(s, log, signals)
    slots.admit(A, "a")
    slots.admit(B, "b")
    s.children_info[B] = ChildInfo(state="closed")
    slots.release(A)
    assert s.running_children == {}
    assert s.wake_queue == []
    assert slots.admit(A, "again").outcome == "admitted"


@pytest.mark.parametrize(
    ("fields", "releases"),
    [
        ({"state": "idle", "result_seq": 1}, True),  # settled a turn beyond the grant
        ({"state": "idle", "result_seq": 0}, False),  # an old report: still running
        ({"state": "running", "result_seq": 0}, False),
        ({"state": "suspended", "parked": True}, True),  # parked: spends nothing
        ({"state": "suspended", "parked": False}, False),  # an interpreter answers inline
        ({"state": "closed"}, True),
    ],
)
def test_which_reports_free_the_slot(log, signals, fields, releases):
    s = parent_with(A, B)
    slots = book(s, log, signals)
    slots.admit(A, "a")
    slots.admit(B, "b")
    slots.on_report(report(A, 1, **fields), was_parked=False)
    assert (A not in s.running_children) == releases
    assert (B in s.running_children) == releases


def test_a_parked_child_resumed_by_its_answer_runs_again_over_the_cap(log, signals):
    s = parent_with(A, B)
    slots = book(s, log, signals)
    slots.admit(A, "a")
    slots.on_report(report(A, 1, state="suspended", parked=True), was_parked=False)
    slots.admit(B, "b")  # the freed slot
    slots.on_report(report(A, 2, state="running"), was_parked=True)
    assert s.running_children == {B: 0, A: 0}


def test_a_stale_grant_is_freed_by_what_the_caller_saw_settle(log, signals):
    s = parent_with(A, B)
    slots = book(s, log, signals)
    slots.admit(A, "a")  # granted at result_seq 0; its settle report is still on its way
    res = slots.wake_child(WakeChildRequest(child=B, prompt="b", settled={A: 1}))
    assert res.outcome == "admitted"
    assert s.running_children == {B: 0}


def test_a_settled_count_not_beyond_the_grant_frees_nothing(log, signals):
    s = parent_with(A, B)
    slots = book(s, log, signals)
    slots.admit(A, "a")
    res = slots.wake_child(WakeChildRequest(child=B, prompt="b", settled={A: 0}))
    assert res.outcome == "queued"
    assert s.running_children == {A: 0}


def test_rewaking_a_child_whose_turn_settled_unseen_frees_and_retakes_its_slot(log, signals):
    s = parent_with(A, B)
    slots = book(s, log, signals)
    slots.admit(A, "first")
    slots.admit(B, "b")  # queued behind A
    res = slots.admit(A, "second", seen_result_seq=1)
    # A's old slot went to B (FIFO), so A's new wake queues behind it
    assert res.outcome == "queued"
    assert s.running_children == {B: 0}
    assert s.children_info[A].result_seq == 1
    assert s.wake_queue == [QueuedWake(child=A, prompt="second")]


def test_relay_returns_a_grant_instead_of_a_signal_and_the_same_grant_on_retry(log, signals):
    s = parent_with(A, B, max_concurrent=2)
    slots = book(s, log, signals)
    first = slots.admit(A, "a", relay=True)
    assert (first.outcome, first.grant) == ("admitted", 1)
    assert signals.sent == []
    retry = slots.admit(A, "a", relay=True)
    assert (retry.outcome, retry.state, retry.grant) == ("noop", "running", 1)
    assert slots.admit(B, "b", relay=True).grant == 2
    slots.release(A)
    assert A not in s.grants


def test_waking_a_suspended_or_parked_child_is_a_noop_without_a_slot(log, signals):
    s = parent_with(A, B, max_concurrent=None)
    s.children_info[A] = ChildInfo(state="suspended")
    s.children_info[B] = ChildInfo(state="idle", parked=True)
    slots = book(s, log, signals)
    assert slots.admit(A, "x").outcome == "noop"
    assert slots.admit(B, "x").outcome == "noop"
    assert s.running_children == {}


def test_no_cap_admits_every_wake(log, signals):
    s = parent_with(A, B, C, max_concurrent=None)
    slots = book(s, log, signals)
    assert [slots.admit(c, None).outcome for c in (A, B, C)] == ["admitted"] * 3


def test_wake_child_of_an_unknown_child_raises_no_such_child(log, signals):
    slots = book(parent_with(A), log, signals)
    with pytest.raises(ApplicationError) as err:
        slots.wake_child(WakeChildRequest(child="p/zz.9"))
    assert err.value.type == "NoSuchChild"


def test_wake_child_of_a_closed_child_is_rejected_loudly(log, signals):
    s = parent_with(A)
    s.children_info[A] = ChildInfo(state="closed")
    with pytest.raises(ApplicationError) as err:
        book(s, log, signals).wake_child(WakeChildRequest(child=A))
    assert err.value.type == "WakeRejected"
    assert log.rejected == [("wake", f"{A}: handle closed")]


def test_slot_request_for_a_closed_child_is_rejected_and_takes_nothing(log, signals):
    s = parent_with(A)
    s.children_info[A] = ChildInfo(state="closed")
    book(s, log, signals).slot_request(WakeChildRequest(child=A, prompt="x"))
    assert s.running_children == {}
    assert log.rejected and signals.sent == []


def test_a_child_that_ended_frees_its_slot_and_leaves_the_queue(log, signals):
    s = parent_with(A, B, C)
    slots = book(s, log, signals)
    slots.admit(A, "a")
    slots.admit(B, "b")
    slots.admit(C, "c")
    s.children_info[C] = ChildInfo(state="closed")
    slots.child_ended(C)
    assert s.wake_queue == [QueuedWake(child=B, prompt="b")]
    s.children_info[A] = ChildInfo(state="closed")
    slots.child_ended(A)
    assert s.running_children == {B: 0}
    assert s.wake_queue == []


def test_a_child_admits_one_wake_per_fresh_grant(log, signals):
    s = parent_with()
    slots = book(s, log, signals)
    assert slots.consume_grant(None) is False
    assert slots.consume_grant(3) is True
    assert s.consumed_grant == 3
    assert slots.consume_grant(3) is False  # the parent's books are behind: ask it
    assert slots.consume_grant(4) is True
