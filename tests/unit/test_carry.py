"""The rules of carrying a parked turn across continue-as-new (``carry.py``): which turn
may be carried, and that its snapshot survives the carried state's serialization and
restores the turn's counters and rollback point."""

from __future__ import annotations

import pytest

from tests.unit.fakes import handle
from toolnexus_temporal.workflows.contract.models import (
    Message,
    Request,
    RuntimeOptions,
    ToolCall,
    ToolResult,
)
from toolnexus_temporal.workflows.contract.state import AgentInput, HandleState
from toolnexus_temporal.workflows.lifecycle.carry import carry_blocker, snapshot
from toolnexus_temporal.workflows.lifecycle.lifecycle import MIN_RUN
from toolnexus_temporal.workflows.machine import JobBatch, TurnScratch, restore

REQ = Request(id="root/a.1#3", kind="approval", prompt="may I?", data={"path": ["root", "a.1"]})
CALLS = [
    ToolCall(id="c1", name="guarded"),
    ToolCall(id="c2", name="plain"),
    ToolCall(id="c3", name="guarded"),
]


def pending_result() -> ToolResult:
    return ToolResult(metadata={"pending": {"kind": "approval", "prompt": "may I?"}})


def parked_handle(**fields: object) -> tuple[HandleState, TurnScratch]:
    """A handle parked on call 0 of CALLS, with the turn's scratch."""
    s = handle(state="suspended", pending_req=REQ, **fields)
    scratch = TurnScratch()
    scratch.start([Message(role="user", content="go")])
    scratch.llm_calls, scratch.tokens = 2, 17
    scratch.turn_start_len = 4
    scratch.unsent_before = [Message(role="tool", tool_call_id="old", content="x")]
    results = [pending_result(), ToolResult(output="plain ok"), pending_result()]
    scratch.batch = (CALLS, results, 0)
    return s, scratch


def test_a_turn_parked_on_its_own_tool_may_be_carried() -> None:
    s, scratch = parked_handle()
    assert carry_blocker(s, scratch, REQ.id) is None


@pytest.mark.parametrize(
    ("change", "blocker"),
    [
        ({"state": "running"}, "not suspended"),
        ({"state": "idle"}, "not suspended"),
        ({"closing": True}, "closing"),
    ],
)
def test_state_that_blocks_carrying(change: dict[str, object], blocker: str) -> None:
    s, scratch = parked_handle()
    s = s.model_copy(update=change)
    assert carry_blocker(s, scratch, REQ.id) == blocker


def test_an_aborting_or_not_waiting_turn_is_not_carried() -> None:
    s, scratch = parked_handle()
    scratch.interrupt_requested = True
    assert carry_blocker(s, scratch, REQ.id) == "interrupted"
    s, scratch = parked_handle()
    # an interpreter answers inline (nothing waits for an outside Answer)
    assert carry_blocker(s, scratch, None) == "not parked"
    s, scratch = parked_handle()
    assert carry_blocker(s, scratch, "root/a.1#2") == "another request"


def delegating_handle() -> tuple[HandleState, TurnScratch]:
    """A protocol-3 handle whose reply runs three jobs: a plain tool (finished) and two
    ``task`` calls (jobs 1 and 2), parked with their child's Request."""
    s, scratch = parked_handle()
    scratch.batch = None
    calls = [
        ToolCall(id="c1", name="plain"),
        ToolCall(id="c2", name="task", arguments='{"agent": "x", "prompt": "a"}'),
        ToolCall(id="c3", name="task", arguments='{"agent": "x", "prompt": "b"}'),
        ToolCall(id="c4", name="task", arguments='{"agent": "x", "prompt": "a"}'),
    ]
    scratch.jobs = JobBatch(calls, calls[:3], [0, 1, 2, 1])
    scratch.jobs.done[0] = ToolResult(output="plain ok")
    return s, scratch


def test_a_turn_whose_open_jobs_all_wait_on_parked_children_may_be_carried() -> None:
    s, scratch = delegating_handle()
    children = {1: "root/a.1/x.1", 2: "root/a.1/x.2"}
    assert carry_blocker(s, scratch, None, children) is None
    # one task job whose child is not parked (running): its job runs, nothing is carried
    assert carry_blocker(s, scratch, None, {1: "root/a.1/x.1"}) == "tool jobs running"
    # a finished task job needs no parked child
    assert scratch.jobs is not None
    scratch.jobs.done[2] = ToolResult(output="b done")
    assert carry_blocker(s, scratch, None, {1: "root/a.1/x.1"}) is None
    # nothing parked at all: running
    assert carry_blocker(s, scratch, None, {}) == "tool jobs running"


def test_a_delegating_snapshot_carries_finished_jobs_and_the_parked_children() -> None:
    s, scratch = delegating_handle()
    parked = snapshot(s, scratch, {1: "root/a.1/x.1", 2: "root/a.1/x.2"})
    s.approval.parked = parked
    wire = AgentInput(state=s).model_dump_json()
    back = AgentInput.model_validate_json(wire).state.approval.parked
    assert back is not None and back == parked
    assert back.index == -1 and back.call_job == [0, 1, 2, 1]
    assert back.done == {0: ToolResult(output="plain ok")}
    assert back.children == {1: "root/a.1/x.1", 2: "root/a.1/x.2"}
    assert [c.id for c in back.unique] == ["c1", "c2", "c3"] and len(back.calls) == 4


def test_snapshot_survives_the_carried_state_and_restores_the_turn() -> None:
    s, scratch = parked_handle()
    scratch.batch = (CALLS, scratch.batch[1] if scratch.batch else [], 2)
    parked = snapshot(s, scratch)
    carried = s.model_copy(deep=True)
    carried.approval.parked = parked
    wire = AgentInput(state=carried).model_dump_json(by_alias=True)
    back = AgentInput.model_validate_json(wire).state.approval.parked
    assert back is not None and back == parked
    assert (back.index, back.request, back.calls) == (2, REQ, CALLS)
    assert back.results[1].output == "plain ok"
    assert back.results[2].metadata["pending"]["prompt"] == "may I?"
    fresh = TurnScratch()
    fresh.interrupt_requested = False
    fresh.batch = ([], [], 0)
    restore(fresh, back)
    assert (fresh.llm_calls, fresh.tokens, fresh.turn_start_len) == (2, 17, 4)
    assert fresh.unsent_before == scratch.unsent_before
    assert fresh.next_messages == [] and fresh.batch is None and not fresh.wall_fired


def test_snapshot_needs_a_parked_turn() -> None:
    s, scratch = parked_handle()
    scratch.batch = None
    with pytest.raises(ValueError):
        snapshot(s, scratch)


def test_continue_as_new_thresholds_stay_below_temporals_limits() -> None:
    opts = RuntimeOptions()
    assert opts.continue_as_new_signals <= 2_000  # Temporal: 10,000 signals per run
    assert opts.continue_as_new_bytes <= 4 * 2**20  # Temporal: 50 MiB per run
    assert opts.continue_as_new_updates <= 1_000  # Temporal: 2,000 updates per run
    with pytest.raises(ValueError):
        RuntimeOptions(continue_as_new_signals=9_000)
    with pytest.raises(ValueError):
        RuntimeOptions(continue_as_new_bytes=40 * 2**20)


def test_the_shortest_run_is_an_option() -> None:
    """1.2 s by default (Temporal's 1 s minimal interval between runs); 0 for a server whose
    ``history.workflowIdReuseMinimalInterval`` is 0; never negative."""
    assert RuntimeOptions().continue_as_new_min_run_ms == MIN_RUN.total_seconds() * 1000
    assert RuntimeOptions(continue_as_new_min_run_ms=0).continue_as_new_min_run_ms == 0
    with pytest.raises(ValueError):
        RuntimeOptions(continue_as_new_min_run_ms=-1)
