"""Trust between handles as plain rules (issue 12 item 9): a message from a child must name a
current child and carry its nonce, one from the parent the receiver's nonce; the root takes
none of a parent's messages; a budget reply answers an ask that waits; nonces never show."""

from __future__ import annotations

from tests.unit.fakes import FakeLog, FakeSignals, handle, parent_with
from toolnexus_temporal.workflows.budgets import BudgetLedger
from toolnexus_temporal.workflows.contract.messages import BudgetReply, WakeRequest
from toolnexus_temporal.workflows.contract.state import ChildInfo
from toolnexus_temporal.workflows.rules.roster import compact, record_spawn
from toolnexus_temporal.workflows.trust import (
    CLOSED_CHILD,
    Trust,
    child_message_error,
    grant_error,
    masked,
    parent_message_error,
)

A = "p/a.1"


def test_a_child_message_needs_a_current_child_and_its_nonce():
    s = parent_with(A)
    s.roster.children_info[A] = ChildInfo(nonce="n-a")
    assert child_message_error(s, A, "n-a") is None
    assert child_message_error(s, A, None) == f"not sent by {A} (wrong nonce)"
    assert child_message_error(s, A, "n-b") == f"not sent by {A} (wrong nonce)"
    assert child_message_error(s, "p/z.9", "n-a") == "p/z.9 is not a child of p"


def test_a_closed_child_dropped_at_continue_as_new_is_known_as_closed():
    s = handle(id="p", defn=None, parent=None)
    child = record_spawn(s, "w", "n-1")
    s.roster.children_info[child] = ChildInfo(state="closed", nonce="n-1")
    compact(s)
    assert child_message_error(s, child, "n-1") == CLOSED_CHILD
    log = FakeLog()
    assert not Trust(s, log).from_child("slot_release", child, "n-1")
    assert log.rejected == [] and "from closed child" in log.lines[0]


def test_the_root_takes_no_parent_message():
    root = handle(id="root", defn=None, parent=None)
    assert parent_message_error(root, None) == "the root has no parent"
    assert grant_error(root, WakeRequest(granted=True, lease=1)) == "the root has no parent"


def test_a_parent_message_needs_the_childs_own_nonce():
    child = handle(nonce="n-1")
    assert parent_message_error(child, "n-1") is None
    assert parent_message_error(child, "n-2") == "not sent by root (wrong nonce)"
    assert grant_error(child, WakeRequest(granted=True, lease=3, nonce="n-1")) is None
    no_lease = WakeRequest(granted=True, nonce="n-1")
    assert grant_error(child, no_lease) == "a grant without a lease"
    assert parent_message_error(handle(), None) == "not sent by root (wrong nonce)"


def test_trust_rejects_loudly():
    child = handle(nonce="n-1")
    log = FakeLog()
    trust = Trust(child, log)
    assert not trust.from_parent("pool_floor", None)
    assert not trust.grant(WakeRequest(granted=True, lease=2))
    assert trust.from_parent("pool_floor", "n-1")
    assert [verb for verb, _ in log.rejected] == ["pool_floor", "wake"]


def test_a_budget_reply_must_answer_an_ask_that_waits():
    s = handle(nonce="n-1")
    ledger = BudgetLedger(s, FakeSignals())
    assert ledger.on_reply(BudgetReply(seq=1, tokens=0)) == "no budget_ask 1 was sent"
    ledger.ask_seq, ledger.waiting = 2, {2}
    assert ledger.on_reply(BudgetReply(seq=1, tokens=0)) is None  # an abandoned ask: dropped
    assert ledger.replies == {}
    assert ledger.on_reply(BudgetReply(seq=2, tokens=0)) is None
    assert list(ledger.replies) == [2]


def test_the_state_query_shows_no_nonce():
    s = parent_with(A, nonce="mine")
    s.roster.children_info[A] = ChildInfo(nonce="n-a")
    shown = masked(s)
    assert shown.nonce is None and shown.roster.children_info[A].nonce is None
    assert s.nonce == "mine" and s.roster.children_info[A].nonce == "n-a"  # the books keep them
