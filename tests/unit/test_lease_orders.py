"""The lease protocol under every delivery order (issue 12 item 3's kind of fault: a race).

Temporal does not order signals between two workflows: two signals one workflow sends another
can arrive in either order. This runs one parent :class:`LeaseBook` and its children's books
against a network that delivers whatever is in flight in a random order, while wakes from
outside arrive and turns settle at random moments, and checks after every step:

* never more children running than ``max_concurrent`` (the cap);
* once everything in flight is delivered and every turn has settled, every accepted wake has
  run exactly one turn and no child still waits for a slot (no wake lost).

It failed on the code before the fix (a child that gave its lease back and asked again
received the parent's re-sent grant of that same lease: three running under a cap of two,
as CI saw once in ``test_slot_sources[rounds]``).
"""

from __future__ import annotations

import random
from dataclasses import dataclass, field

import pytest

from tests.unit.fakes import FakeLog, FakeSignals, handle, parent_with
from toolnexus_temporal.workflows.leases import LeaseBook
from toolnexus_temporal.workflows.messages import (
    SlotRecall,
    SlotRelease,
    WakeChildRequest,
    WakeRequest,
)
from toolnexus_temporal.workflows.state import HandleState

PARENT = "p"


@dataclass
class Kid:
    """One child: its state, its book, and what the simulation counts."""

    s: HandleState
    book: LeaseBook
    accepted: int = 0
    turns: int = 0


@dataclass
class Net:
    """The parent and its children, and the signals in flight (any order)."""

    parent: HandleState
    pbook: LeaseBook
    kids: dict[str, Kid]
    out: FakeSignals
    in_flight: list[tuple[str, str, object]] = field(default_factory=list)

    def collect(self) -> None:
        self.in_flight.extend(self.out.sent)
        self.out.sent.clear()

    def running(self) -> int:
        return sum(k.s.state == "running" for k in self.kids.values())


def build(n: int, limit: int) -> Net:
    ids = [f"{PARENT}/w.{i}" for i in range(1, n + 1)]
    parent = parent_with(*ids, max_concurrent=limit)
    out, log = FakeSignals(), FakeLog()
    pbook = LeaseBook(parent, log, out)
    kids = {}
    for cid in ids:
        lease = pbook.at_spawn(cid)  # granted ahead, in the child's initial state
        s = handle(id=cid, parent=PARENT, slot_parent=True)
        if lease is not None:
            s.lease, s.lease_sticky = lease.id, lease.sticky
        kids[cid] = Kid(s, LeaseBook(s, log, out))
    return Net(parent, pbook, kids, out)


def start(kid: Kid) -> None:
    kid.s.state = "running"
    kid.turns += 1


def wake(kid: Kid) -> None:
    """A wake from outside (``Inbox.wake_from_outside`` under protocol 2)."""
    s = kid.s
    if s.state != "idle" or s.slot_waiting:
        return  # a no-op: running, or already queued
    kid.accepted += 1
    if kid.book.needs_slot():
        kid.book.ask(None)
    else:
        start(kid)


def settle(kid: Kid) -> None:
    kid.s.state = "idle"
    kid.book.after_transition("idle", parked=False)


def deliver(net: Net, msg: tuple[str, str, object]) -> None:
    to, name, arg = msg
    if to == PARENT:
        if name == "slot_request":
            assert isinstance(arg, WakeChildRequest)
            net.pbook.on_request(arg)
        elif name == "slot_release":
            assert isinstance(arg, SlotRelease)
            net.pbook.on_release(arg)
        else:
            raise AssertionError(name)
        return
    kid = net.kids[to]
    if name == "wake":
        assert isinstance(arg, WakeRequest)
        admit, _ = kid.book.take_grant(arg)
        if admit and kid.s.state == "idle":
            start(kid)
    elif name == "slot_recall":
        assert isinstance(arg, SlotRecall)
        kid.book.on_recall(arg, busy=kid.s.state == "running")
    else:
        raise AssertionError(name)


def run(seed: int, *, n: int = 5, limit: int = 2, wakes: int = 40) -> None:
    rng = random.Random(seed)
    net = build(n, limit)
    ids = list(net.kids)
    left = wakes
    for step in range(100_000):
        net.collect()
        running = [k for k in net.kids.values() if k.s.state == "running"]
        choices = ["deliver"] * bool(net.in_flight) + ["settle"] * bool(running)
        choices += ["wake"] * bool(left)
        if not choices:
            break
        what = rng.choice(choices)
        if what == "deliver":
            deliver(net, net.in_flight.pop(rng.randrange(len(net.in_flight))))
        elif what == "settle":
            settle(rng.choice(running))
        else:
            left -= 1
            wake(net.kids[rng.choice(ids)])
        net.collect()
        assert net.running() <= limit, (seed, step, net.parent.leases)
    waiting = [cid for cid, k in net.kids.items() if k.s.slot_waiting]
    assert waiting == [], (seed, "wakes lost", waiting, net.parent.wake_queue)
    assert [k.turns for k in net.kids.values()] == [k.accepted for k in net.kids.values()]
    assert len(net.parent.leases) <= limit


@pytest.mark.parametrize("block", range(10))
def test_the_cap_holds_and_no_wake_is_lost_in_any_delivery_order(block: int) -> None:
    for seed in range(block * 300, (block + 1) * 300):
        run(seed)
