"""Replay the committed histories (``tests/histories/``, written by the recorders in
``tests/test_record_histories.py``) with the current workflow code: a change that would
break running workflows (non-determinism) fails here. Until 1.0 a behaviour change re-records
the histories it changes instead of adding a gate (``workflows/contract/versions.py``)."""

from __future__ import annotations

import asyncio
from pathlib import Path

import pytest
from temporalio import activity
from temporalio.client import WorkflowHistory
from temporalio.contrib.pydantic import pydantic_data_converter
from temporalio.worker import Replayer

from tests.recorded import HISTORIES, SCENARIOS
from toolnexus_temporal import worker
from toolnexus_temporal.activities.registry import RegistryActivities
from toolnexus_temporal.client import AgentDef, Handle
from toolnexus_temporal.client.testing import ScriptedLLM
from toolnexus_temporal.worker import workflow_runner
from toolnexus_temporal.workflows.agent import AgentWorkflow
from toolnexus_temporal.workflows.contract.messages import ResolveAgentInput, ResolveAgentResult
from toolnexus_temporal.workflows.contract.names import RESOLVE_AGENT_ACTIVITY

RECORDED = sorted(HISTORIES.glob("*.json"))
"""Every committed history (the recorders' output)."""


def _replayer() -> Replayer:
    return Replayer(
        workflows=[AgentWorkflow],
        data_converter=pydantic_data_converter,
        workflow_runner=workflow_runner(sandboxed=True),
    )


def _load(path: Path) -> WorkflowHistory:
    return WorkflowHistory.from_json(path.stem, path.read_text())


@pytest.mark.parametrize("path", RECORDED, ids=lambda p: p.name)
async def test_replay_committed_history(path: Path) -> None:
    await _replayer().replay_workflow(_load(path))


@pytest.mark.parametrize("scenario", SCENARIOS)
def test_every_scenario_is_recorded(scenario: str) -> None:
    found = [p.name for p in RECORDED if p.name.startswith(f"{scenario}_")]
    assert found, f"no {scenario}_*.json in {HISTORIES}: record with TNX_RECORD_HISTORIES=1"


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
