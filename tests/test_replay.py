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
from temporalio.client import Client, WorkflowHistory
from temporalio.contrib.pydantic import pydantic_data_converter
from temporalio.worker import Replayer

from toolnexus_temporal import worker
from toolnexus_temporal.activities.registry import RegistryActivities
from toolnexus_temporal.client import AgentDef, Handle, InboxItem
from toolnexus_temporal.client.testing import ScriptedLLM, text, tool_calls
from toolnexus_temporal.worker import workflow_runner
from toolnexus_temporal.workflows.agent import AgentWorkflow
from toolnexus_temporal.workflows.messages import ResolveAgentInput, ResolveAgentResult
from toolnexus_temporal.workflows.names import PROTOCOL_OPERATOR, RESOLVE_AGENT_ACTIVITY

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
    # recorded 2026-11-30 on bd6cb24, before the restructure (issue 10): pools, slots, wake and
    # answer signals, interrupt, close cascade
    "protocol_root_v3.json",
    "protocol_lead_v3.json",
    "protocol_lead_child_v3.json",
    "protocol_slow_v3.json",
    "protocol_asker_v3.json",
    # protocol 2 (issue 11): leases granted ahead, recalled and handed over, coalesced and
    # immediate reports, one-shot task children, a spawn that carries its first wake
    "protocol2_root.json",
    "protocol2_lead.json",
    "protocol2_lead_child.json",
    "protocol2_slow.json",
    "protocol2_asker.json",
    "protocol2_eager.json",
    # protocol 3 (issue 12), recorded 2026-12-01 on 6e9eec9 by the same scenario: nonces on
    # every internal message, Answers that change state at once, WAIT_CANCELLATION_COMPLETED
    # activities, the wall deadline in the LLM input, one-shot children's closed report signal
    "protocol3_root.json",
    "protocol3_lead.json",
    "protocol3_lead_child.json",
    "protocol3_slow.json",
    "protocol3_asker.json",
    "protocol3_eager.json",
    # protocol 3 (issue 12), recorded 2026-12-01 by test_record_hardened_histories: a parked
    # handle continuing as new twice with its parked turn, answered in the last run; a child
    # terminated and reflected in the root; a cancellation request closing a parked tree
    "hardened_parked_run1.json",
    "hardened_parked_run2.json",
    "hardened_parked_run3.json",
    "hardened_cancel_root_run1.json",
    "hardened_cancel_parent_run1.json",
    "hardened_cancel_asker_run1.json",
    # protocol 4 (issue 14), recorded 2026-12-01 by the protocol scenario: the pending
    # Request's search attributes upserted and unset, static details on child starts
    "protocol4_root.json",
    "protocol4_lead.json",
    "protocol4_lead_child.json",
    "protocol4_slow.json",
    "protocol4_asker.json",
    "protocol4_eager.json",
    # protocol 4, by test_record_operator_histories: a task child parking (its parent
    # surfaces the Request), a wrong answer rejected, the Answer routed down from the parent
    "operator_parent.json",
    "operator_child.json",
)
SUFFIX = "_v2"
"""Suffix of the histories the recorders write now."""


def _replayer() -> Replayer:
    return Replayer(
        workflows=[AgentWorkflow],
        data_converter=pydantic_data_converter,
        workflow_runner=workflow_runner(sandboxed=True),
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
    from tests.registries import APPROVALS
    from toolnexus_temporal.client import Answer

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


PRE_RESTRUCTURE = sorted((HISTORIES / "pre_restructure").glob("*.json"))
"""Recorded 2026-11-30 on bd6cb24 (before the restructure of issue 10) by a review's scenarios
for the paths the histories above do not cover: inline interpreters (approve, decline, the
tool re-run), hooks, wait timeouts, the wall-clock watchdog, the close grace timer,
continue-as-new (``*_run1``, ``*_run2``), shared and interrupted ``task`` calls, nested pools
and a budget stop, a terminated child freeing its slot, and a close racing an interpreter."""


@pytest.mark.parametrize("path", PRE_RESTRUCTURE, ids=lambda p: p.name)
async def test_replay_pre_restructure_history(path: Path) -> None:
    await _replayer().replay_workflow(_load(path))


def _load(path: Path) -> WorkflowHistory:
    return WorkflowHistory.from_json(path.stem, path.read_text())


def test_pre_restructure_histories_are_there() -> None:
    assert len(PRE_RESTRUCTURE) >= 20


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


@pytest.mark.skipif(not os.environ.get("TNX_RECORD_HISTORIES"), reason="recording is opt-in")
async def test_record_protocol_histories(make_runtime, client) -> None:
    """Finite pools (budget_ask, pool_floor), root slots queued and handed over, a wake
    signal asking for a slot, an interrupt, post and answer as signals, a spawn with its first
    wake, and a close cascade. Writes ``protocol4_*.json`` (the current protocol; the
    ``protocol2_*.json`` files were recorded by it on a5f0ad8, ``protocol3_*.json`` on
    6e9eec9); the
    ``protocol_*_v3.json`` files were recorded by this scenario on bd6cb24 (protocol 1),
    before the restructure (issue 10)."""
    from tests.registries import check_secret_tool, lookup_tool
    from toolnexus_temporal.activities import Registry
    from toolnexus_temporal.client import Answer, Budget

    reg = Registry(
        [
            AgentDef(
                name="lead",
                team=["helper"],
                model="m-lead",
                budget=Budget(max_tokens=10_000, max_concurrent=1),
            ),
            AgentDef(name="helper", tools=["lookup"], model="m-helper"),
            AgentDef(name="slow", model="m-slow"),
            AgentDef(name="asker", tools=["check_secret"], model="m-asker"),
        ],
        tools=[lookup_tool(), check_secret_tool()],
    )
    llm = ScriptedLLM(
        {
            "m-lead": [
                tool_calls(
                    ("task", {"agent": "helper", "prompt": "one"}),
                    ("task", {"agent": "helper", "prompt": "two"}),
                ),
                text("lead done"),
            ],
            "m-helper": [tool_calls(("lookup", {"q": "x"})), text("helped")],
            "m-slow": [text("s" * 400)],
            "m-asker": [tool_calls(("check_secret", {})), text("asked")],
        },
        repeat_last=True,
        chunk_delay_s=0.02,
    )
    async with make_runtime(reg, llm.transport(), budget=Budget(max_concurrent=1)) as rt:
        lead = await rt.spawn(rt.root, "lead")
        slow = await rt.spawn(rt.root, "slow")
        asker = await rt.spawn(rt.root, "asker")
        assert isinstance(lead, Handle) and isinstance(slow, Handle)
        assert isinstance(asker, Handle)
        assert (await rt.run_turn(lead, "fan out")).text == "lead done"
        await rt.wake(slow, "first")
        await rt.wake(asker, "queued behind slow")
        assert (await rt.wait(slow)).status == "done"
        parked = await rt.wait(asker)
        assert parked.status == "pending" and parked.pending is not None
        asker_wf = client.get_workflow_handle(rt.workflow_id(asker.id))
        await asker_wf.signal("answer", Answer(id=parked.pending.id, ok=True))
        for _ in range(100):  # a wait right after the signal may still see the Request
            if (await rt.wait(asker)).text == "asked":
                break
            await asyncio.sleep(0.1)
        slow_wf = client.get_workflow_handle(rt.workflow_id(slow.id))
        await slow_wf.signal("post", "from a shell")
        await slow_wf.signal("wake", "by signal")
        await asyncio.sleep(0.3)
        await rt.interrupt(slow)
        assert (await rt.run_turn(slow, "again")).status == "done"
        eager = await rt.spawn(rt.root, "slow", prompt="with the spawn")
        assert isinstance(eager, Handle)
        assert (await rt.wait(eager)).status == "done"
        await client.get_workflow_handle(rt.workflow_id(lead.id)).signal("close", None)
        await rt.close(rt.root)
        names = {
            "root": "root",
            "lead": lead.id,
            "lead_child": f"{lead.id}/helper.1",
            "slow": slow.id,
            "asker": asker.id,
            "eager": eager.id,
        }
        for name, handle_id in names.items():
            history = await client.get_workflow_handle(rt.workflow_id(handle_id)).fetch_history()
            (HISTORIES / f"protocol{PROTOCOL_OPERATOR}_{name}.json").write_text(history.to_json())


@pytest.mark.skipif(not os.environ.get("TNX_RECORD_HISTORIES"), reason="recording is opt-in")
async def test_record_operator_histories(make_runtime, client) -> None:
    """Protocol 4's approval queue: a ``task`` child parks (both it and its parent upsert
    the Request's search attributes), a wrong answer is rejected, the Answer sent to the
    parent is routed down, both unset the attributes. Writes ``operator_*.json``."""
    from tests.test_approvals import registry
    from tests.test_operator_queue import WORKER

    boss = AgentDef(name="boss", description="delegates", team=["worker"])
    llm = ScriptedLLM(
        {
            "stub-model": [
                tool_calls(("task", {"agent": "worker", "prompt": "deploy"})),
                tool_calls(("ask_approval", {})),
                text("deployed"),
                text("boss done"),
            ]
        }
    )
    async with make_runtime(registry(boss, WORKER), llm.transport()) as rt:
        b = await rt.spawn(rt.root, "boss")
        assert isinstance(b, Handle)
        r = await rt.run_turn(b, "go")
        assert r.status == "pending" and r.pending is not None
        parent_wf = client.get_workflow_handle(rt.workflow_id(b.id))
        await parent_wf.signal("answer", {"id": f"{b.id}/worker.1#9", "ok": True})
        await parent_wf.signal("answer", {"id": r.pending.id, "ok": True})
        assert (await rt.wait(b)).text == "boss done"
        await rt.close(b)
        for name, handle_id in (("parent", b.id), ("child", f"{b.id}/worker.1")):
            history = await client.get_workflow_handle(rt.workflow_id(handle_id)).fetch_history()
            (HISTORIES / f"operator_{name}.json").write_text(history.to_json())


async def _record_every_run(client: Client, workflow_id: str, name: str) -> None:
    """Write each run of one workflow, newest last: ``{name}_run{i}.json``."""
    runs: list[WorkflowHistory] = []
    run: str | None = None
    while True:
        history = await client.get_workflow_handle(workflow_id, run_id=run).fetch_history()
        runs.append(history)
        started = history.events[0].workflow_execution_started_event_attributes
        run = started.continued_execution_run_id or None
        if run is None:
            break
    for i, history in enumerate(reversed(runs), start=1):
        (HISTORIES / f"{name}_run{i}.json").write_text(history.to_json())


@pytest.mark.skipif(not os.environ.get("TNX_RECORD_HISTORIES"), reason="recording is opt-in")
async def test_record_hardened_histories(make_runtime, client) -> None:
    """Issue 12's paths the protocol scenario misses: a parked handle that continues as new
    (carrying its parked turn) and is answered in the new run; a cancellation request on the
    root of a parked tree (a graceful close); a child terminated and reflected in its parent.
    Writes ``hardened_*.json`` (every run of each workflow)."""
    from tests.helpers import eventually
    from tests.test_cancellation import registry as cancel_registry
    from tests.test_parked_history import REGISTRY as PARKED_REGISTRY
    from tests.test_parked_history import continue_as_new_by_rejections, park
    from tests.test_parked_history import script as parked_script
    from toolnexus_temporal.client import Answer, RuntimeOptions

    HISTORIES.mkdir(exist_ok=True)
    options = RuntimeOptions(continue_as_new_events=100)
    async with make_runtime(PARKED_REGISTRY, parked_script().transport(), options=options) as rt:
        h = await park(rt)
        wf = client.get_workflow_handle(rt.workflow_id(h.id))
        await continue_as_new_by_rejections(wf)
        assert h.pending_req is not None
        first = h.pending_req.id  # (the Handle object is refreshed by every verb)
        await rt.resume(Answer(id=first, ok=True, data={"n": 1}))
        r = await rt.wait(h)
        while r.status == "pending" and r.pending is not None and r.pending.id == first:
            r = await rt.wait(h, timeout_ms=1000)
        assert r.status == "pending" and r.pending is not None
        await rt.resume(Answer(id=r.pending.id, ok=True))
        r = await rt.wait(h)
        while r.status != "done":
            r = await rt.wait(h, timeout_ms=1000)
        await _record_every_run(client, rt.workflow_id(h.id), "hardened_parked")

    closed: list[str] = []
    llm = ScriptedLLM(
        {
            "m-parent": [tool_calls(("task", {"agent": "asker", "prompt": "x"}))],
            "stub-model": [tool_calls(("check_secret", {})), text("idle one")],
        }
    )
    async with make_runtime(cancel_registry(closed), llm.transport()) as rt:
        parent = await rt.spawn(rt.root, "parent")
        chat = await rt.spawn(rt.root, "chat")
        assert isinstance(parent, Handle) and isinstance(chat, Handle)
        assert (await rt.run_turn(parent, "go")).status == "pending"
        await client.get_workflow_handle(rt.workflow_id(chat.id)).terminate("recorded")

        async def reflected() -> bool:
            return any("ended abnormally" in line for line in await rt.trace_lines(rt.root))

        await eventually(reflected, tries=300)
        await client.get_workflow_handle(rt.workflow_id("root")).cancel()
        ids = {"root": "root", "parent": parent.id, "asker": f"{parent.id}/asker.1"}
        for hid in ids.values():
            wf = client.get_workflow_handle(rt.workflow_id(hid))
            await wf.result()
        for name, hid in ids.items():
            await _record_every_run(client, rt.workflow_id(hid), f"hardened_cancel_{name}")
