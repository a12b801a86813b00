"""Replay committed histories with the current workflow code: a change that would break
running workflows (non-determinism) fails here.

Histories are recorded by running this file with ``TNX_RECORD_HISTORIES=1``; commit the JSON
files under ``tests/histories/`` only when a change is meant to be incompatible (and then ship
it with workflow versioning)."""

from __future__ import annotations

import asyncio
import os
from pathlib import Path

import pytest
from temporalio import activity
from temporalio.client import WorkflowHistory
from temporalio.contrib.pydantic import pydantic_data_converter
from temporalio.worker import Replayer

import worker
from activities.registry import RegistryActivities
from client import AgentDef, Handle, InboxItem
from client.testing import ScriptedLLM, text, tool_calls
from worker import workflow_runner
from workflows.agent import RESOLVE_AGENT_ACTIVITY, AgentWorkflow
from workflows.models import ResolveAgentInput, ResolveAgentResult

HISTORIES = Path(__file__).parent / "histories"
RECORDED = (
    # recorded 2026-11-29 (before the `turn` update, relay grants and settle-only reports):
    # still replay through workflow.patched and the optional state fields
    "root.json",
    "agent.json",
    "delegating.json",
    "parked_child.json",
    # recorded 2026-11-30: the `turn` update with a relayed slot grant, and 12 concurrent spawns
    "root_v2.json",
    "agent_v2.json",
    "delegating_v2.json",
    "parked_child_v2.json",
)
SUFFIX = "_v2"
"""Suffix of the histories the recorders write now."""


def _replayer() -> Replayer:
    return Replayer(
        workflows=[AgentWorkflow],
        data_converter=pydantic_data_converter,
        workflow_runner=workflow_runner(),
    )


@pytest.mark.skipif(not os.environ.get("TNX_RECORD_HISTORIES"), reason="recording is opt-in")
async def test_record_histories(make_runtime, client) -> None:
    llm = ScriptedLLM(
        {"stub-model": [text("one"), tool_calls(("lookup", {"q": "x"})), text("two")]}
    )
    registry = {"worker": AgentDef(name="worker", system_prompt="be brief")}
    async with make_runtime(registry, llm.transport()) as rt:
        h = await rt.spawn(rt.root, "worker")
        assert isinstance(h, Handle)
        assert (await rt.spawn(rt.root, "nope")) is not None
        await rt.post(h, InboxItem(from_="external", channel="webhook", text="hello"))
        assert (await rt.run_turn(h, "first")).text == "one"
        await rt.wake(h, "second")
        assert (await rt.wait(h)).text == "two"
        await client.get_workflow_handle(rt.workflow_id(h.id)).signal("wake", {"bad": 1})
        spawned = await asyncio.gather(*(rt.spawn(rt.root, "worker") for _ in range(12)))
        assert all(isinstance(s, Handle) for s in spawned)
        await rt.inspect(h)
        HISTORIES.mkdir(exist_ok=True)
        for name, handle_id in ((f"root{SUFFIX}.json", "root"), (f"agent{SUFFIX}.json", h.id)):
            history = await client.get_workflow_handle(rt.workflow_id(handle_id)).fetch_history()
            (HISTORIES / name).write_text(history.to_json())


@pytest.mark.skipif(not os.environ.get("TNX_RECORD_HISTORIES"), reason="recording is opt-in")
async def test_record_delegation_histories(make_runtime, client) -> None:
    """A parent delegating through `task` to a child that parks on an approval, answered."""
    from client import Answer
    from tests.registries import APPROVALS

    llm = ScriptedLLM(
        {
            "m-parent": [
                tool_calls(("task", {"agent": "asker", "prompt": "get it"})),
                text("parent done"),
            ],
            "stub-model": [tool_calls(("check_secret", {})), text("asker done")],
        }
    )
    async with make_runtime(APPROVALS, llm.transport()) as rt:
        parent = await rt.spawn(rt.root, "parent")
        assert isinstance(parent, Handle)
        result = await rt.run_turn(parent, "go")
        assert result.status == "pending" and result.pending is not None
        await rt.resume(Answer(id=result.pending.id, ok=True))
        assert (await rt.wait(parent)).text == "parent done"
        await rt.close(parent)
        for name, handle_id in (
            (f"delegating{SUFFIX}.json", parent.id),
            (f"parked_child{SUFFIX}.json", f"{parent.id}/asker.1"),
        ):
            history = await client.get_workflow_handle(rt.workflow_id(handle_id)).fetch_history()
            (HISTORIES / name).write_text(history.to_json())


@pytest.mark.parametrize("name", RECORDED)
async def test_replay_committed_history(name: str) -> None:
    path = HISTORIES / name
    assert path.exists(), f"{path} is missing: record with TNX_RECORD_HISTORIES=1"
    history = WorkflowHistory.from_json(name.removesuffix(".json"), path.read_text())
    await _replayer().replay_workflow(history)


class _UnevenRegistryActivities(RegistryActivities):
    """``tnx.resolve_agent`` with "helper" slower than the rest."""

    @activity.defn(name=RESOLVE_AGENT_ACTIVITY)
    async def resolve_agent(self, inp: ResolveAgentInput) -> ResolveAgentResult:
        if inp.name == "helper":
            await asyncio.sleep(0.05)
        return await super().resolve_agent(inp)


async def test_concurrent_spawns_replay(make_runtime, client, monkeypatch) -> None:
    """Many `spawn` updates in flight on one parent: each resolves its agent with a local
    activity, and concurrent local activities resolved out of order used to make the root's
    history non-deterministic (sdk-python#1578; bench/results/2026-11-30-evidence). Here
    "helper" resolves slower than "worker", so unserialised lookups would finish out of
    order. The history this run writes must replay."""
    monkeypatch.setattr(worker, "RegistryActivities", _UnevenRegistryActivities)
    registry = {"worker": AgentDef(name="worker"), "helper": AgentDef(name="helper")}
    async with make_runtime(registry, ScriptedLLM({}).transport()) as rt:
        names = ["worker", "helper"] * 12
        spawned = await asyncio.gather(*(rt.spawn(rt.root, name) for name in names))
        assert all(isinstance(s, Handle) for s in spawned)
        ids = sorted(s.id for s in spawned if isinstance(s, Handle))
        assert len(set(ids)) == 24
        assert len((await rt.inspect(rt.root)).children) == 24
        history = await client.get_workflow_handle(rt.workflow_id("root")).fetch_history()
    await _replayer().replay_workflow(history)
