"""Tools, suspension, escalation, answers and delegation on a real dev server
(CONTRACT §1 tools, §4 task tool, §5, §9.1, §9.2)."""

from __future__ import annotations

import asyncio
import json
import re

import pytest

from tests.approving import approvals_registry, lookup
from tests.conftest import temporal_binary
from tests.helpers import eventually, spawn
from toolnexus_temporal.activities import Registry, define_tool
from toolnexus_temporal.client import AgentDef, Answer, AnswerRejectedError
from toolnexus_temporal.client.testing import ScriptedLLM, text, tool_calls

STATES = ("idle", "running", "suspended", "closed")
ARROW = re.compile(rf"^({'|'.join(STATES)})→({'|'.join(STATES)})\b")


def arrows(lines: list[str], handle_id: str) -> list[str]:
    """The state transitions of one handle, in order (CONTRACT §7)."""
    prefix = f"{handle_id}: "
    found = (ARROW.match(line.removeprefix(prefix)) for line in lines if line.startswith(prefix))
    return [m.group(0) for m in found if m]


# ---------------------------------------------------------------- tools


def test_define_tool_derives_schemas() -> None:
    def search(query: str, limit: int = 5) -> str:
        """Search the index.

        More text."""
        return query * limit

    tool = define_tool(search)
    assert tool.description == "Search the index."
    assert tool.input_schema == {
        "type": "object",
        "properties": {
            "query": {"type": "string"},
            "limit": {"type": "integer", "default": 5},
        },
        "required": ["query"],
        "additionalProperties": False,
    }
    model_tool = define_tool(lookup)
    assert model_tool.input_schema["properties"] == {"q": {"type": "string"}}
    with pytest.raises(ValueError, match="no type hint"):
        define_tool(lambda x: x, name="bad")


async def test_tool_calls_run_as_activities_concurrently_in_call_order(make_runtime) -> None:
    started: list[str] = []
    both_running = asyncio.Event()

    async def slow_echo(word: str) -> str:
        """Echo a word slowly."""
        started.append(word)
        if len(started) == 2:
            both_running.set()
        await asyncio.wait_for(both_running.wait(), 10)  # only passes if calls overlap
        return word.upper()

    def broken(x: int) -> str:
        """Always fails."""
        raise RuntimeError(f"broken tool got {x}")

    reg = Registry(
        [AgentDef(name="worker", tools=["slow_echo", "broken"])],
        tools=[define_tool(slow_echo), define_tool(broken, max_attempts=2, initial_retry_ms=50)],
    )
    llm = ScriptedLLM(
        {
            "stub-model": [
                tool_calls(
                    ("slow_echo", {"word": "a"}),
                    ("slow_echo", {"word": "b"}),
                    ("broken", {"x": 1}),
                    ("slow_echo", {"nope": 1}),
                ),
                text("all done"),
            ]
        }
    )
    async with make_runtime(reg, llm.transport()) as rt:
        h = await spawn(rt, rt.root, "worker")
        r = await rt.run_turn(h, "go")
        assert (r.status, r.text, r.turns) == ("done", "all done", 2)
        assert h.tool_calls_total == 4
        tool_msgs = [m for m in llm.requests[1]["messages"] if m["role"] == "tool"]
        assert [m["tool_call_id"] for m in tool_msgs] == ["c1", "c2", "c3", "c4"]
        assert tool_msgs[0]["content"] == "A" and tool_msgs[1]["content"] == "B"
        assert tool_msgs[2]["content"] == "error: broken tool got 1"  # an is_error result
        assert tool_msgs[3]["content"].startswith("error: invalid arguments for slow_echo")
        # the model saw the schemas
        names = [t["function"]["name"] for t in llm.requests[0]["tools"]]
        assert names == ["slow_echo", "broken"]


# ---------------------------------------------------------------- the seed's examples


async def test_seed_002_example_2_inline_approval(make_runtime) -> None:
    worker = AgentDef(
        name="worker", description="does risky work", tools=["ask_approval"], wait_for="approve"
    )
    llm = ScriptedLLM(
        {"stub-model": [tool_calls(("ask_approval", {})), text("done, approved inline")]}
    )
    async with make_runtime(approvals_registry(worker), llm.transport()) as rt:
        h = await spawn(rt, rt.root, "worker")
        await rt.wake(h, "do the risky thing")
        r = await rt.wait(h)
        assert r.status == "done"  # resolved inline, never surfaced as pending
        assert r.text == "done, approved inline"
        assert h.state == "idle"
        lines = await rt.trace_lines(h)
        assert arrows(lines, h.id) == [
            "idle→running",
            "running→suspended",
            "suspended→running",
            "running→idle",
        ]
        assert f"{h.id}: escalate → {h.id} answers (approve)" in lines
        tool_msg = llm.requests[1]["messages"][-1]
        assert tool_msg["content"] == 'approved: {"by": "interpreter"}'


async def test_seed_002_example_3_durable_approval_then_resume(make_runtime) -> None:
    worker = AgentDef(name="worker", description="does risky work", tools=["ask_approval"])
    llm = ScriptedLLM({"stub-model": [tool_calls(("ask_approval", {})), text("done, approved")]})
    async with make_runtime(approvals_registry(worker), llm.transport()) as rt:
        h = await spawn(rt, rt.root, "worker")
        await rt.wake(h, "do the risky thing")
        r = await rt.wait(h)
        assert r.status == "pending"  # loud, never a silent done
        assert h.state == "suspended"
        assert h.pending_req is not None and h.pending_req.kind == "approval"
        req = h.pending_req
        assert req.id == f"{h.id}#1"  # deterministic
        assert req.data == {"path": ["root", "worker.1"]}
        assert r.pending == req
        assert (await rt.wait(h)).status == "pending"  # settled: at once

        resumed = await rt.resume(Answer(id=req.id, ok=True))
        assert resumed.state in ("running", "idle")
        r = await rt.wait(h)
        assert h.state == "idle"
        assert h.pending_req is None
        assert (r.status, r.text) == ("done", "done, approved")
        assert h.last_result == r
        assert llm.calls() == 2  # the parked turn continued: no LLM call was replayed
        assert arrows(await rt.trace_lines(h), h.id) == [
            "idle→running",
            "running→suspended",
            "suspended→running",  # CONTRACT §9.1: the Answer continues the parked turn
            "running→idle",
        ]


async def test_declined_answer_reaches_the_model_as_an_error(make_runtime) -> None:
    worker = AgentDef(name="worker", tools=["ask_approval"], wait_for="decline")
    llm = ScriptedLLM({"stub-model": [tool_calls(("ask_approval", {})), text("ok, not doing it")]})
    async with make_runtime(approvals_registry(worker), llm.transport()) as rt:
        h = await spawn(rt, rt.root, "worker")
        r = await rt.run_turn(h, "go")
        assert r.text == "ok, not doing it"
        assert llm.requests[1]["messages"][-1]["content"] == "declined: need approval to proceed"


async def test_wrong_answer_id_is_rejected_and_changes_nothing(make_runtime, client) -> None:
    worker = AgentDef(name="worker", tools=["ask_approval"])
    llm = ScriptedLLM({"stub-model": [tool_calls(("ask_approval", {})), text("done")]})
    async with make_runtime(approvals_registry(worker), llm.transport()) as rt:
        h = await spawn(rt, rt.root, "worker")
        assert (await rt.run_turn(h, "go")).status == "pending"
        req = h.pending_req
        assert req is not None
        with pytest.raises(AnswerRejectedError, match="matches no pending request"):
            await rt.answer(h, Answer(id=f"{h.id}#99", ok=True))
        with pytest.raises(AnswerRejectedError):
            await rt.resume(Answer(id=f"{h.id}#99", ok=True))
        with pytest.raises(AnswerRejectedError):
            await rt.resume(Answer(id="not-a-request", ok=True))
        # a bad answer by signal: a trace line, nothing else
        await client.get_workflow_handle(rt.workflow_id(h.id)).signal(
            "answer", {"id": "bogus#1", "ok": True}
        )
        h = await rt.inspect(h)
        assert h.state == "suspended" and h.pending_req == req
        assert any("answer REJECTED" in line for line in await rt.trace_lines(h))
        assert llm.calls() == 1
        await rt.resume(Answer(id=req.id, ok=True))
        assert (await rt.wait(h)).text == "done"


async def test_interrupt_cancels_a_parked_request(make_runtime) -> None:
    worker = AgentDef(name="worker", tools=["ask_approval"])
    llm = ScriptedLLM({"stub-model": [tool_calls(("ask_approval", {})), text("later")]})
    async with make_runtime(approvals_registry(worker), llm.transport()) as rt:
        h = await spawn(rt, rt.root, "worker")
        await rt.post(h, "keep me")
        assert (await rt.run_turn(h, "go")).status == "pending"
        await rt.interrupt(h)
        assert h.state == "idle" and h.pending_req is None and h.inbox_count == 1
        assert (await rt.wait(h)).status == "interrupted"  # CONTRACT §9.4, not a stale pending
        assert h.transcript_len == 0


async def test_two_tools_suspending_in_one_response_are_answered_in_turn(make_runtime) -> None:
    worker = AgentDef(name="worker", tools=["ask_approval"])
    llm = ScriptedLLM(
        {
            "stub-model": [
                tool_calls(("ask_approval", {}), ("ask_approval", {})),
                text("both approved"),
            ]
        }
    )
    async with make_runtime(approvals_registry(worker), llm.transport()) as rt:
        h = await spawn(rt, rt.root, "worker")
        assert (await rt.run_turn(h, "go")).status == "pending"
        first = h.pending_req
        assert first is not None and first.id == f"{h.id}#1"
        await rt.resume(Answer(id=first.id, ok=True, data={"n": 1}))
        r = await rt.wait(h)
        assert r.status == "pending"
        second = h.pending_req
        assert second is not None and second.id == f"{h.id}#2"
        await rt.resume(Answer(id=second.id, ok=True, data={"n": 2}))
        r = await rt.wait(h)
        assert (r.status, r.text) == ("done", "both approved")
        tool_msgs = [m["content"] for m in llm.requests[1]["messages"] if m["role"] == "tool"]
        assert tool_msgs == ['approved: {"n": 1}', 'approved: {"n": 2}']
        assert llm.calls() == 2


async def test_an_approval_answered_with_the_temporal_cli(make_runtime, env) -> None:
    worker = AgentDef(name="worker", tools=["ask_approval"])
    llm = ScriptedLLM({"stub-model": [tool_calls(("ask_approval", {})), text("cli approved")]})
    async with make_runtime(approvals_registry(worker), llm.transport()) as rt:
        h = await spawn(rt, rt.root, "worker")
        assert (await rt.run_turn(h, "go")).status == "pending"
        assert h.pending_req is not None
        answer = json.dumps({"id": h.pending_req.id, "ok": True, "data": {"by": "cli"}})
        proc = await asyncio.create_subprocess_exec(
            temporal_binary(),
            "workflow",
            "signal",
            "--workflow-id",
            rt.workflow_id(h.id),
            "--name",
            "answer",
            "--input",
            answer,
            "--address",
            env.client.service_client.config.target_host,
            stderr=asyncio.subprocess.PIPE,
        )
        _, err = await asyncio.wait_for(proc.communicate(), 30)
        assert proc.returncode == 0, err
        for _ in range(100):
            r = await rt.wait(h, timeout_ms=1000)
            if r.status == "done":
                break
        assert (r.status, r.text) == ("done", "cli approved")
        assert llm.requests[1]["messages"][-1]["content"] == 'approved: {"by": "cli"}'


# ---------------------------------------------------------------- chains and delegation


async def test_escalation_through_a_three_level_chain_names_the_grandparent(make_runtime) -> None:
    reg = approvals_registry(
        AgentDef(name="boss", wait_for="approve"),
        AgentDef(name="lead"),
        AgentDef(name="leaf", tools=["ask_approval"]),
    )
    llm = ScriptedLLM({"stub-model": [tool_calls(("ask_approval", {})), text("leaf done")]})
    async with make_runtime(reg, llm.transport()) as rt:
        boss = await spawn(rt, rt.root, "boss")
        lead = await spawn(rt, boss, "lead")
        leaf = await spawn(rt, lead, "leaf")
        r = await rt.run_turn(leaf, "go")
        assert (r.status, r.text) == ("done", "leaf done")
        lines = await rt.trace_lines(leaf)
        assert f"{leaf.id}: escalate → {boss.id} answers (approve)" in lines


async def test_task_fan_out_rolls_usage_up_and_closes_children(make_runtime) -> None:
    reg = approvals_registry(
        AgentDef(name="coordinator", description="splits", team=["explore"]),
        AgentDef(name="explore", description="read-only research", tools=["lookup"]),
    )
    llm = ScriptedLLM(
        {
            "coord": [
                tool_calls(
                    ("task", {"agent": "explore", "prompt": "find A"}),
                    ("task", {"agent": "explore", "prompt": "find A"}),  # identical: shared
                    ("task", {"agent": "ghost", "prompt": "x"}),
                ),
                text("synthesis"),
            ],
            "stub-model": [tool_calls(("lookup", {"q": "x"})), text("found:data(x)")],
        }
    )
    reg.agents["coordinator"] = reg.agents["coordinator"].model_copy(update={"model": "coord"})
    async with make_runtime(reg, llm.transport()) as rt:
        coord = await spawn(rt, rt.root, "coordinator")
        r = await rt.run_turn(coord, "go")
        assert (r.status, r.text) == ("done", "synthesis")
        tool_msgs = [m["content"] for m in llm.requests[-1]["messages"] if m["role"] == "tool"]
        assert tool_msgs[:2] == ["found:data(x)", "found:data(x)"]
        assert tool_msgs[2] == "error: agent 'ghost' is not in the team (team: explore)"
        coord = await rt.inspect(coord)
        assert coord.children == [f"{coord.id}/explore.1"]  # one child for identical calls
        child = await rt.inspect(coord.children[0])
        assert child.state == "closed" and child.usage_total == 7 + 5  # tool call + reply
        assert coord.usage_total == 7 + 5 + 12

        async def rolled_up() -> bool:  # the coordinator's report coalesces (live_usage_ms)
            return (await rt.inspect(rt.root)).usage_total == 24

        await eventually(rolled_up)
        # the task tool's description lists the team
        task_tool = next(t for t in llm.requests[0]["tools"] if t["function"]["name"] == "task")
        assert "explore: read-only research" in task_tool["function"]["description"]
        # the child started a fresh transcript: its first request has only its prompt
        child_first = next(q for q in llm.requests if q["model"] == "stub-model")
        assert [m["content"] for m in child_first["messages"]] == ["find A"]


async def test_durable_approval_through_task_parks_every_level(make_runtime) -> None:
    reg = approvals_registry(
        AgentDef(name="parent", team=["asker"], model="m-parent"),
        AgentDef(name="asker", description="needs approvals", tools=["ask_approval"]),
    )
    llm = ScriptedLLM(
        {
            "m-parent": [
                tool_calls(("task", {"agent": "asker", "prompt": "get it"})),
                text("parent done"),
            ],
            "stub-model": [tool_calls(("ask_approval", {})), text("asker done")],
        }
    )
    async with make_runtime(reg, llm.transport()) as rt:
        parent = await spawn(rt, rt.root, "parent")
        r = await rt.run_turn(parent, "go")
        assert r.status == "pending"
        assert r.pending is not None and r.pending.data is not None
        assert r.pending.data["path"] == ["root", "parent.1"]
        child_id = f"{parent.id}/asker.1"
        child = await rt.inspect(child_id)
        assert child.state == "suspended" and parent.state == "suspended"
        assert child.pending_req is not None and child.pending_req.id == r.pending.id
        assert child.pending_req.data == {"path": ["root", "parent.1", "asker.1"]}
        assert (await rt.wait(child_id)).status == "pending"
        waiting = await rt.pending()
        assert [h.id for h in waiting] in ([parent.id, child_id], [])  # visibility may lag

        await rt.resume(Answer(id=r.pending.id, ok=True))
        r = await rt.wait(parent)
        assert (r.status, r.text) == ("done", "parent done")
        child = await rt.inspect(child_id)
        assert child.state == "closed" and child.last_result is not None
        assert child.last_result.text == "asker done"
        assert llm.calls("m-parent") == 2 and llm.calls("stub-model") == 2
        lines = await rt.trace_lines()
        assert arrows(lines, parent.id) == [
            "idle→running",
            "running→suspended",
            "suspended→running",
            "running→idle",
        ]
        assert arrows(lines, child_id) == [
            "idle→running",
            "running→suspended",
            "suspended→running",
            "running→idle",
            "idle→closed",
        ]
