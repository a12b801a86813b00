"""The parking rules of protocol 3 as plain functions (issue 12 items 1 and 3): which Request
a handle parked on its delegated tasks surfaces, and where an Answer sent to a handle goes."""

from __future__ import annotations

import pytest

from tests.unit.fakes import handle
from toolnexus_temporal.workflows.contract.models import Request
from toolnexus_temporal.workflows.contract.state import ChildInfo
from toolnexus_temporal.workflows.rules.approvals import Hop, answer_hop, surfaced_child_request


def req(owner: str, n: int = 1, name: str = "x") -> Request:
    return Request(
        id=f"{owner}#{n}", kind="approval", prompt=f"approve {name}", data={"path": ["a"]}
    )


def parked(owner: str, n: int = 1) -> ChildInfo:
    return ChildInfo(state="suspended", pending_req=req(owner, n), parked=True, report_seq=3)


A, B, C = "root/a.1/asker.1", "root/a.1/asker.2", "root/a.1/asker.3"


@pytest.mark.parametrize(
    ("infos", "expected"),
    [
        ({A: ChildInfo(state="running"), B: ChildInfo(state="running")}, None),
        # only b parked, a still running and never parked: a may park first, nothing yet
        ({A: ChildInfo(state="running"), B: parked(B)}, None),
        ({B: parked(B)}, None),  # a not even reported yet
        ({A: ChildInfo(state="idle"), B: parked(B)}, None),  # a spawned, not started
        ({A: parked(A), B: parked(B)}, A),  # both: the first in call order
        # a parked second (its report came last): still a, whatever the arrival order
        ({B: parked(B), A: parked(A)}, A),
        # an interpreter answers a inline (suspended, not parked): a has not parked, waits
        ({A: ChildInfo(state="suspended", pending_req=req(A)), B: parked(B)}, None),
        # a finished (closed, or idle with its result): b
        ({A: ChildInfo(state="closed"), B: parked(B)}, B),
        ({A: ChildInfo(state="idle", result_seq=1), B: parked(B)}, B),
        # a parked once and took its Answer (its report names it): b at once
        ({A: ChildInfo(state="running", answer_id=f"{A}#1"), B: parked(B)}, B),
        # a rejected an Answer (never parked on it): it still holds b back
        (
            {A: ChildInfo(state="running", answer_id=f"{A}#9", answer_error="no"), B: parked(B)},
            None,
        ),
        ({A: ChildInfo(state="closed"), B: ChildInfo(state="idle", result_seq=1)}, None),
    ],
)
def test_the_first_parked_task_call_in_call_order_is_surfaced(
    infos: dict[str, ChildInfo], expected: str | None
) -> None:
    s = handle(children_info=infos)
    got = surfaced_child_request(s, {0: A, 1: B})
    if expected is None:
        assert got is None
        return
    assert got is not None and got.id == f"{expected}#1"
    assert got.data == {"path": ["root", "a.1"]}  # stamped with the surfacing handle's path


def test_a_report_sent_before_the_child_took_its_answer_is_no_parking() -> None:
    s = handle(children_info={A: parked(A), B: parked(B)})
    got = surfaced_child_request(s, {0: A, 1: B}, answered={f"{A}#1"})
    assert got is not None and got.id == f"{B}#1"
    assert surfaced_child_request(s, {0: A, 1: B}, answered={f"{A}#1", f"{B}#1"}) is None


def test_a_child_seen_parked_in_this_run_no_longer_holds_back_later_calls() -> None:
    s = handle(children_info={A: ChildInfo(state="running"), B: parked(B)})
    assert surfaced_child_request(s, {0: A, 1: B}) is None
    got = surfaced_child_request(s, {0: A, 1: B}, has_parked={A})
    assert got is not None and got.id == f"{B}#1"


def test_call_order_is_the_task_index_not_the_spawn_order() -> None:
    # call 0 spawned its child last (asker.3): call order wins
    s = handle(children_info={B: parked(B), C: parked(C)})
    got = surfaced_child_request(s, {1: B, 0: C})
    assert got is not None and got.id == f"{C}#1"
    assert surfaced_child_request(s, {}) is None  # no task call running: nothing to surface


def test_an_answer_goes_to_the_child_on_the_path_to_its_owner() -> None:
    s = handle(
        id="root",
        defn=None,
        parent=None,
        depth=0,
        children_info={
            "root/a.1": ChildInfo(state="suspended"),
            "root/b.2": ChildInfo(state="closed"),
        },
    )
    assert answer_hop(s, "root/a.1#4") == Hop("root/a.1")
    assert answer_hop(s, "root/a.1/mid.1/asker.2#1") == Hop("root/a.1")
    assert answer_hop(s, "root#1") == Hop("root")
    for bad, why in [
        ("root/b.2#1", "root/b.2 is closed"),
        ("root/b.2/x.1#1", "root/b.2 is closed"),
        ("root/c.3#1", "no handle root/c.3"),
        ("root/a.10#1", "no handle root/a.10"),  # a prefix of the id's text is not a path
        ("other/a.1#1", "not for root or its subtree"),
        ("rootx/a.1#1", "not for root or its subtree"),
        ("root/a.1", "not a request id"),
        ("#1", "not a request id"),
        ("root/a.1#", "not a request id"),
    ]:
        hop = answer_hop(s, bad)
        assert hop.to is None and hop.error is not None and why in hop.error, (bad, hop)
