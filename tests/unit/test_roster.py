"""What a parent carries of its children (issue 12 item 8, second half): a parent that has
spawned, run and closed 10,000 children continues as new with a carried state under 100 KB,
and its view still lists every child in spawn order, with usage and ``max_children`` intact.

Driven through the real ``Children`` component (reports, closes) with fakes for its
collaborators; spawns use ``record_spawn`` as ``Children.start`` does, continue-as-new uses
``compact`` as the run loop does, and trace lines go into the state as in a workflow."""

from __future__ import annotations

from typing import Any

from tests.unit.fakes import FakeSignals, handle
from toolnexus_temporal.workflows.budgets import BudgetLedger, drop_floors
from toolnexus_temporal.workflows.children.children import Children, spawn_check
from toolnexus_temporal.workflows.contract.messages import ChildReport, ResolveAgentResult
from toolnexus_temporal.workflows.contract.models import AgentDef, Budget, TaskResult
from toolnexus_temporal.workflows.contract.state import AgentInput, HandleState
from toolnexus_temporal.workflows.leases import LeaseBook
from toolnexus_temporal.workflows.rules.roster import (
    all_children,
    children_count,
    compact,
    record_spawn,
    was_child,
)
from toolnexus_temporal.workflows.visibility.visibility import append_trace, view_of

N = 10_000
LIMIT = 100_000


class StateLog:
    """A log that writes trace lines into the state, as ``Visibility`` does."""

    def __init__(self, s: HandleState) -> None:
        self.s = s

    def trace(self, line: str) -> None:
        append_trace(self.s, line, 1_764_550_000_000 + self.s.trace_seq)

    def reject(self, verb: str, error: str) -> None:
        raise AssertionError(f"{verb} rejected: {error}")


class FakeMachine:
    def __init__(self) -> None:
        self.reports = 0

    def report(self, **_: Any) -> None:
        self.reports += 1


def children_of(s: HandleState) -> Children:
    log = StateLog(s)
    signals = FakeSignals()
    return Children(
        s,
        log,  # type: ignore[arg-type]
        FakeMachine(),  # type: ignore[arg-type]
        BudgetLedger(s, signals),
        LeaseBook(s, log, signals),
    )


def carried_bytes(s: HandleState) -> int:
    """The continue-as-new input as the data converter writes it (JSON)."""
    return len(AgentInput(state=s).model_dump_json().encode())


def run_children(n: int = N) -> HandleState:
    """A root that spawns ``n`` children (three agent names in turn: the worst order for a
    run-length list), each runs one turn (5 tokens, 1 tool call) and closes; it continues as
    new every 1,000 children."""
    s = handle(id="root", defn=None, parent=None, depth=0)
    s.budget = Budget(max_concurrent=8, max_children=n + 1)
    children = children_of(s)
    for i in range(n):
        name = ("writer", "researcher", "reviewer")[i % 3]
        nonce = f"{i:08d}-0000-4000-8000-000000000000"
        child = record_spawn(s, name, nonce)
        children.vis.trace(f"{s.id}: spawn {child}")
        result = TaskResult(status="done", text="x" * 200, turns=1, total_tokens=5)
        for seq, state in ((1, "idle"), (2, "closed")):
            children.on_report(
                ChildReport(
                    id=child, seq=seq, state=state, usage_total=5, subtree_tool_calls=1,
                    result_seq=1, last_result=result,
                )
            )  # fmt: skip
        if (i + 1) % 1_000 == 0:
            drop_floors(s, compact(s))  # the run loop's continue-as-new
    return s


def test_a_parent_of_10000_closed_children_carries_under_100_kb():
    s = run_children()
    size = carried_bytes(s)
    assert size < LIMIT, size
    assert s.roster.children_info == {} and s.roster.children == [] and s.usage.pushed_floors == {}
    # usage rolled up, ids and max_children intact
    assert (s.usage.usage_total, s.usage.subtree_tool_calls, s.roster.spawn_count) == (5 * N, N, N)
    view = view_of(s)
    assert len(view.children) == N == children_count(s)
    assert view.children[:4] == [
        "root/writer.1", "root/researcher.2", "root/reviewer.3", "root/writer.4"
    ]  # fmt: skip
    assert view.children[-1] == f"root/writer.{N}"  # 10,000 = 3 * 3,333 + 1
    assert was_child(s, "root/researcher.101") and not was_child(s, "root/writer.101")
    assert not was_child(s, "root/writer.10001") and not was_child(s, "other/writer.1")
    defn = ResolveAgentResult(defn=AgentDef(name="writer"))
    assert spawn_check(s, "writer", defn, 0) is None
    record_spawn(s, "writer")
    assert spawn_check(s, "writer", defn, 0) == f"children over max_children {N + 1}"
    assert all_children(s)[-1] == f"root/writer.{N + 1}"


def test_compact_keeps_live_children_and_the_newest_trace():
    s = handle(id="p", defn=None, parent=None)
    children = children_of(s)
    live = record_spawn(s, "w", "n1")
    done = record_spawn(s, "w", "n2")
    children.on_report(ChildReport(id=done, seq=1, state="closed", usage_total=7,
                                   subtree_tool_calls=2, result_seq=0))  # fmt: skip
    for i in range(2_000):
        children.vis.trace(f"p: line {i} " + "y" * 60)
    compact(s)
    assert s.roster.children == [live] and list(s.roster.children_info) == [live]
    assert s.roster.children_info[live].nonce == "n1"
    assert (s.roster.closed_usage_total, s.roster.closed_tool_calls, s.usage.usage_total) == (
        7,
        2,
        7,
    )
    assert view_of(s).children == [live, done]
    assert s.trace[-1].line.startswith("p: line 1999") and 100 < len(s.trace) < 2_000
    assert s.trace_seq == 2_000 + 1  # the closed line counted too; seqs keep counting


def test_more_agent_names_than_one_character_codes():
    s = handle(id="p", defn=None, parent=None)
    ids = [record_spawn(s, f"agent{i}") for i in range(100)]
    assert all_children(s) == ids and children_count(s) == 100
    assert was_child(s, "p/agent99.100") and not was_child(s, "p/agent98.100")


def test_a_trace_reads_the_open_children_and_the_newest_closed_ones():
    """Issue 38: ``children_read`` (the host's rule of which children a trace reads) takes
    from the parent's state which children are closed: reported closed (still carried) or
    dropped at continue-as-new (``compact``); a live child is read however old it is."""
    from toolnexus_temporal.client.reads import children_read

    s = handle(id="p", defn=None, parent=None)
    children = children_of(s)
    ids = [record_spawn(s, "w", f"n{i}") for i in range(6)]
    old_live, gone1, gone2, carried, newest, young_live = ids

    def close(child: str) -> None:
        children.on_report(
            ChildReport(
                id=child, seq=1, state="closed", usage_total=0, subtree_tool_calls=0, result_seq=0
            )
        )

    close(gone1)
    close(gone2)
    compact(s)  # gone1, gone2 leave children_info
    close(carried)
    close(newest)
    view = view_of(s)
    assert view.children == ids
    assert children_read(view, s, None) == (ids, [])
    assert children_read(view, None, 1) == (ids, [])  # no state: every child
    assert children_read(view, s, 2) == ([old_live, carried, newest, young_live], [gone1, gone2])
    assert children_read(view, s, 1) == ([old_live, newest, young_live], [gone1, gone2, carried])
    assert children_read(view, s, 0) == ([old_live, young_live], [gone1, gone2, carried, newest])
    assert children_read(view, s, 9) == (ids, [])
