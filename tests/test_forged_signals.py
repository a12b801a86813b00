"""Forged runtime-internal signals (issue 12 item 9): anyone who can signal a workflow can
send ``pool_floor``, ``child_report``, ``budget_reply``, ``slot_release``, ``slot_recall`` or a
``wake`` carrying a grant. Each forgery, sent with a raw Temporal client signal and with
``temporal workflow signal``, is rejected loudly (a REJECTED trace line and ``last_error``)
and changes nothing: later turns and spawns work, slots and usage are as before."""

from __future__ import annotations

import asyncio
import json
import os
from typing import Any

import pytest
from temporalio.client import Client
from temporalio.testing import WorkflowEnvironment

from tests.conftest import temporal_binary
from tests.helpers import eventually, replay_every_run, spawn
from toolnexus_temporal.client import AgentDef, AgentRuntime, Budget, Handle
from toolnexus_temporal.client.testing import ScriptedLLM, text
from toolnexus_temporal.workflows.agent import AgentWorkflow
from toolnexus_temporal.workflows.contract.state import HandleState

SENDERS = ("client", "temporal")


async def send(
    env: WorkflowEnvironment, rt: AgentRuntime, how: str, hid: str, name: str, payload: Any
) -> None:
    """Signal ``name`` with JSON ``payload`` to handle ``hid``: through the Python client, or
    the ``temporal workflow signal`` command line."""
    if how == "client":
        await env.client.get_workflow_handle(rt.workflow_id(hid)).signal(name, payload)
        return
    environ = {k: v for k, v in os.environ.items() if not k.startswith(("TEMPORAL_", "TNX_"))}
    proc = await asyncio.create_subprocess_exec(
        temporal_binary(), "workflow", "signal",
        "--address", env.client.service_client.config.target_host,
        "--namespace", env.client.namespace,
        "--workflow-id", rt.workflow_id(hid),
        "--name", name,
        "--input", json.dumps(payload),
        env=environ, stdout=asyncio.subprocess.PIPE, stderr=asyncio.subprocess.PIPE,
    )  # fmt: skip
    out, err = await asyncio.wait_for(proc.communicate(), 120)
    assert proc.returncode == 0, f"{out.decode()}\n{err.decode()}"


async def state(client: Client, rt: AgentRuntime, hid: str) -> HandleState:
    wf = client.get_workflow_handle_for(AgentWorkflow.run, rt.workflow_id(hid))
    return await wf.query(AgentWorkflow.state)


def books(s: HandleState) -> dict[str, Any]:
    """What a forgery must not change (trace and last_error aside)."""
    return s.model_dump(exclude={"trace", "trace_seq", "last_error"})


async def rejected(rt: AgentRuntime, hid: str, verb: str, before: int) -> None:
    """A ``{verb} REJECTED`` trace line newer than trace seq ``before``, and last_error."""

    async def seen() -> bool:
        lines = await rt.trace(hid)
        return any(f"{verb} REJECTED" in t.line and t.seq > before for t in lines)

    await eventually(seen)
    assert (await rt.inspect(hid)).last_error.startswith(f"{verb} rejected")  # type: ignore[union-attr]


async def forge(env, client, rt, how, hid, name, payload) -> None:  # type: ignore[no-untyped-def]
    """Send one forgery; it is rejected loudly and the handle's books do not change."""
    before = await state(client, rt, hid)
    await send(env, rt, how, hid, name, payload)
    await rejected(rt, hid, name if name != "wake" else "wake", before.trace_seq)
    assert books(await state(client, rt, hid)) == books(before), (name, payload)


@pytest.mark.parametrize("how", SENDERS)
async def test_forged_internal_signals_are_rejected_and_change_nothing(
    make_runtime, client, env, how
) -> None:
    llm = ScriptedLLM({"stub-model": [text(f"turn {i}") for i in range(6)]})
    async with make_runtime(
        {"w": AgentDef(name="w")}, llm.transport(), budget=Budget(max_concurrent=1)
    ) as rt:
        a = await spawn(rt, rt.root, "w")  # holds the root's only slot (a lease granted ahead)
        b = await spawn(rt, rt.root, "w")  # has none: its wakes ask the root
        assert (await rt.run_turn(a, "first")).text == "turn 0"

        async def rolled_up() -> bool:
            return (await rt.inspect(rt.root)).usage_total == 5

        await eventually(rolled_up)
        a_st = await state(client, rt, a.id)
        assert a_st.leases.lease is not None and getattr(a_st, "nonce", None) is None  # hidden
        lease = a_st.leases.lease

        # the root has no parent: pool_floor, budget_reply and slot_recall are never its
        await forge(env, client, rt, how, "root", "pool_floor", {"tokens": 0, "tool_calls": 0})
        await forge(env, client, rt, how, "root", "budget_reply", {"seq": 1, "tokens": 0})
        await forge(env, client, rt, how, "root", "slot_recall", {"lease": lease})
        # reports from "a child" without its nonce: closed, or any usage
        report = {"id": a.id, "seq": 99, "state": "closed", "usage_total": 10**9,
                  "subtree_tool_calls": 10**6, "result_seq": 7}  # fmt: skip
        await forge(env, client, rt, how, "root", "child_report", report)
        await forge(env, client, rt, how, "root", "child_report", {**report, "state": "idle"})
        # a child's slot given back, or asked for, by someone else
        await forge(env, client, rt, how, "root", "slot_release", {"child": a.id, "lease": lease})
        await forge(env, client, rt, how, "root", "slot_request", {"child": b.id})
        await forge(
            env, client, rt, how, "root", "budget_ask",
            {"child": a.id, "seq": 1, "usage_total": 10**9, "subtree_tool_calls": 0},
        )  # fmt: skip
        # to a child: a floor, a budget reply, a recall of its lease, a grant of a lease
        await forge(env, client, rt, how, a.id, "pool_floor", {"tokens": 0})
        await forge(env, client, rt, how, a.id, "budget_reply", {"seq": 1, "tokens": 0})
        await forge(env, client, rt, how, a.id, "slot_recall", {"lease": lease})
        grant = {"granted": True, "lease": lease + 5, "sticky": True}
        await forge(env, client, rt, how, b.id, "wake", grant)
        await forge(env, client, rt, how, b.id, "wake", {"granted": True})

        # nothing changed: a keeps the slot, b's wake queues behind it, then runs in turn
        assert (await rt.inspect(rt.root)).usage_total == 5
        assert (await rt.run_turn(a, "second")).text == "turn 1"
        await rt.wake(b, "queued")
        assert (await rt.inspect(b)).queued or (await rt.inspect(b)).state != "idle"
        assert (await rt.wait(b)).text == "turn 2"
        c = await rt.spawn(rt.root, "w")
        assert isinstance(c, Handle)
        # the root's close still closes every child (no forged "closed" report hid one)
        await rt.close(rt.root)
        for h in (a, b, c):
            assert (await rt.inspect(h)).state == "closed"
        await replay_every_run(client, rt, "root", a.id, b.id)
