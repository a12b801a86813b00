"""Replay committed histories with the current workflow code: a change that would break
running workflows (non-determinism) fails here.

Histories are recorded by running this file with ``TNX_RECORD_HISTORIES=1``; commit the JSON
files under ``tests/histories/`` only when a change is meant to be incompatible (and then ship
it with workflow versioning)."""

from __future__ import annotations

import os
from pathlib import Path

import pytest
from temporalio.client import WorkflowHistory
from temporalio.contrib.pydantic import pydantic_data_converter
from temporalio.worker import Replayer

from client import AgentDef, Handle, InboxItem
from client.testing import ScriptedLLM, text, tool_calls
from worker import workflow_runner
from workflows.agent import AgentWorkflow

HISTORIES = Path(__file__).parent / "histories"
RECORDED = ("root.json", "agent.json", "delegating.json", "parked_child.json")


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
        assert (await rt.run_turn(h, "second")).text == "two"
        await client.get_workflow_handle(rt.workflow_id(h.id)).signal("wake", {"bad": 1})
        await rt.inspect(h)
        HISTORIES.mkdir(exist_ok=True)
        for name, handle_id in (("root.json", "root"), ("agent.json", h.id)):
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
            ("delegating.json", parent.id),
            ("parked_child.json", f"{parent.id}/asker.1"),
        ):
            history = await client.get_workflow_handle(rt.workflow_id(handle_id)).fetch_history()
            (HISTORIES / name).write_text(history.to_json())


@pytest.mark.parametrize("name", RECORDED)
async def test_replay_committed_history(name: str) -> None:
    path = HISTORIES / name
    assert path.exists(), f"{path} is missing: record with TNX_RECORD_HISTORIES=1"
    history = WorkflowHistory.from_json(name.removesuffix(".json"), path.read_text())
    replayer = Replayer(
        workflows=[AgentWorkflow],
        data_converter=pydantic_data_converter,
        workflow_runner=workflow_runner(),
    )
    await replayer.replay_workflow(history)
