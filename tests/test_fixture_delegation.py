"""The fan-out, escalation and durable-resume fixtures (tests/fixtures/toolnexus) as
data-driven tests on a real dev server. Durable resume is asserted in our shape
(CONTRACT §9.1: the Answer continues the parked turn; nothing is replayed)."""

from __future__ import annotations

import json
import re
from typing import Any

from tests.fixture_llm import FixtureLLM, fixture_registry, load_fixture
from toolnexus_temporal.client import AgentRuntime, Answer, Handle

STATES = "idle|running|suspended|closed"
ARROW = re.compile(rf"^(?:{STATES})?→(?:{STATES})")


def transitions(lines: list[str], handle_id: str) -> list[str]:
    prefix = f"{handle_id}: "
    out = []
    for line in lines:
        if line.startswith(prefix):
            m = ARROW.match(line.removeprefix(prefix))
            if m:
                out.append(m.group(0))
    return out


def assert_transitions(lines: list[str], expected: dict[str, list[str]]) -> None:
    for handle_id, arrows in expected.items():
        got = transitions(lines, handle_id)
        assert len(got) == len(arrows), (handle_id, got, arrows)
        for have, want in zip(got, arrows, strict=True):
            assert have.endswith(want) if want.startswith("→") else have == want, (
                handle_id,
                got,
            )


async def run_entry(rt: AgentRuntime, fixture: dict[str, Any]) -> tuple[Handle, Any]:
    entry = await rt.spawn(rt.root, fixture["run"]["entry"])
    assert isinstance(entry, Handle), entry
    result = await rt.run_turn(entry, fixture["run"]["prompt"])
    return entry, result


async def test_fanout_fixture(make_runtime) -> None:
    fixture = load_fixture("subagent-fanout")
    llm = FixtureLLM(fixture["mockLLM"])
    expect = fixture["expect"]
    async with make_runtime(fixture_registry(fixture), llm.transport()) as rt:
        entry, result = await run_entry(rt, fixture)
        assert result.status == expect["status"]
        for needle in expect["textContains"]:
            assert needle in result.text
        for needle, count in expect["textOccurrences"].items():
            assert result.text.count(needle) == count
        assert result.turns == expect["parentTurns"]
        entry = await rt.inspect(entry)
        assert entry.children == expect["childIds"]
        assert llm.max_in_flight >= expect["concurrentTurnsObservedAtLeast"]
        assert entry.usage_total == expect["parentUsageTotal"]
        if expect["childrenClosedAfterTask"]:
            for child in entry.children:
                assert (await rt.inspect(child)).state == "closed"
        assert_transitions(await rt.trace_lines(), expect["transitions"])
        # exactly one tool message per task call in the parent's transcript
        final = llm.requests[-1]
        assert final["model"] == "m-coordinator"
        assert sum(1 for m in final["messages"] if m["role"] == "tool") == 2


async def test_escalation_fixture(make_runtime) -> None:
    fixture = load_fixture("subagent-escalation")
    llm = FixtureLLM(fixture["mockLLM"])
    expect = fixture["expect"]
    async with make_runtime(fixture_registry(fixture), llm.transport()) as rt:
        entry, result = await run_entry(rt, fixture)
        assert result.status == expect["status"]
        for needle in expect["textContains"]:
            assert needle in result.text
        lines = await rt.trace_lines()
        child_id = f"{entry.id}/asker.1"
        answered_by = expect["escalation"]["answeredBy"]
        assert any(
            line.startswith(f"{child_id}: escalate → {answered_by} answers") for line in lines
        )
        child_arrows = transitions(lines, child_id)
        for arrow in expect["escalation"]["childTrace"]:
            assert arrow in child_arrows
        assert_transitions(lines, expect["transitions"])


async def test_durable_resume_fixture(make_runtime) -> None:
    fixture = load_fixture("subagent-durable-resume")
    llm = FixtureLLM(fixture["mockLLM"])
    async with make_runtime(fixture_registry(fixture), llm.transport()) as rt:
        # phase 1: no interpreter anywhere, so every level parks
        entry, result = await run_entry(rt, fixture)
        phase1 = fixture["phase1_expect"]
        assert result.status == phase1["status"]
        assert result.pending is not None and result.pending.kind == phase1["pendingKind"]
        path = "/".join((result.pending.data or {})["path"])
        assert path.endswith(phase1["pendingDataPathEndsWithin"])
        tree = await rt.list(entry)
        assert {h.state for h in tree} == {phase1["allHandles"]}
        leaf = tree[-1]
        leaf_usage_before = leaf.usage_total
        calls_before = len(llm.requests)

        # phase 2: resume
        await rt.resume(Answer(id=result.pending.id, **fixture["resume"]["answer"]))
        result = await rt.wait(entry)
        phase2 = fixture["phase2_expect"]
        assert result.status == "done"
        entry = await rt.inspect(entry)
        assert entry.state == phase2["finalParentState"]
        assert entry.children == [leaf.id]  # no duplicate child
        leaf_after = await rt.inspect(leaf.id)
        assert leaf_after.usage_total > leaf_usage_before  # grew, never reset
        # resumed at its checkpoint: one more call each for the leaf and the parent, nothing
        # replayed (the reference replays the parent's turn and "REATTACH"es; we never do)
        assert len(llm.requests) == calls_before + 2
        expected = {
            entry.id: [
                "idle→running",
                "running→suspended",
                "suspended→running",
                "running→idle",
            ],
            leaf.id: [
                "idle→running",
                "running→suspended",
                "suspended→running",
                "running→idle",
                "idle→closed",
            ],
        }
        assert_transitions(await rt.trace_lines(), expected)


async def test_task_children_close_with_their_workflow_result(make_runtime) -> None:
    """A ``task`` child signals no ``child_report`` when its turn settles or it closes (issue
    28, fan-out history): its workflow completes with its closed view, which the parent takes
    as the closed report, so the parent still counts each child's usage and result and sees
    it closed."""
    fixture = load_fixture("subagent-fanout")
    llm = FixtureLLM(fixture["mockLLM"])
    async with make_runtime(fixture_registry(fixture), llm.transport()) as rt:
        entry, result = await run_entry(rt, fixture)
        assert result.status == "done"
        entry = await rt.inspect(entry)
        assert entry.usage_total == fixture["expect"]["parentUsageTotal"]
        for child in entry.children:
            assert (await rt.inspect(child)).state == "closed"
            history = await rt.client.get_workflow_handle(rt.workflow_id(child)).fetch_history()
            # (a report mid-turn, of the usage so far, still goes: the parent's roll-up)
            reports = [
                json.loads(a.input.payloads[0].data)
                for e in history.events
                if e.HasField("signal_external_workflow_execution_initiated_event_attributes")
                and (a := e.signal_external_workflow_execution_initiated_event_attributes)
                and a.signal_name == "child_report"
            ]
            assert [r for r in reports if r["state"] != "running"] == [], (child, reports)
            assert history.events[-1].HasField("workflow_execution_completed_event_attributes")
