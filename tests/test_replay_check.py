"""``tnx replay-check``: the running agent workflows replayed against the local code, before a
deploy. Agents run on the session dev server with the scripted LLM; a deliberately changed
workflow (``tests/replay_variants.py``) stands for a deploy that would break them."""

from __future__ import annotations

import asyncio
import os
import sys
from pathlib import Path
from types import SimpleNamespace
from typing import Any, cast

import pytest
from temporalio.client import Client

from tests.helpers import eventually
from tests.replay_variants import RaisingAgentWorkflow, TimerFirstAgentWorkflow
from toolnexus_temporal.cli.replaycheck import ReplayReport, replay_check, visibility_query
from toolnexus_temporal.client import AgentDef, AgentRuntime, Handle
from toolnexus_temporal.client.testing import ScriptedLLM, text, tool_calls
from toolnexus_temporal.workflows.contract.names import (
    PROTOCOL,
    UNSUPPORTED_PROTOCOL,
    WORKFLOW_TYPE,
)

REPO = Path(__file__).resolve().parent.parent
REGISTRY = {"worker": AgentDef(name="worker", system_prompt="be brief")}


async def start_agents(rt: AgentRuntime, n: int = 3) -> list[Handle]:
    """``n`` agents that each ran one turn (plus the root): n + 1 running workflows."""
    handles = []
    for i in range(n):
        h = await rt.spawn(rt.root, "worker")
        assert isinstance(h, Handle)
        assert (await rt.run_turn(h, f"turn {i}")).status == "done"
        handles.append(h)
    return handles


def ids(report: ReplayReport) -> set[str]:
    return {o.workflow_id for o in report.outcomes}


async def test_all_running_agents_replay_then_a_changed_workflow_is_caught(
    make_runtime, client: Client
) -> None:
    llm = ScriptedLLM({"stub-model": [text("ok")]}, repeat_last=True)
    async with make_runtime(REGISTRY, llm.transport()) as rt:
        handles = await start_agents(rt)
        expected = {rt.workflow_id("root"), *(rt.workflow_id(h.id) for h in handles)}

        report = await replay_check(client, scope=rt.scope)
        assert ids(report) == expected, report
        assert [o.status for o in report.outcomes] == ["ok"] * 4, report.outcomes
        assert report.total == 4 and report.exit_code == 0
        assert "4 running workflow(s): 4 OK" in report.summary()
        assert "safe to deploy" in report.summary()

        broken = await replay_check(client, scope=rt.scope, workflows=(TimerFirstAgentWorkflow,))
        assert ids(broken) == expected
        assert {o.status for o in broken.outcomes} == {"nondeterministic"}, broken.outcomes
        for o in broken.outcomes:
            assert o.label == "NONDETERMINISTIC"
            assert o.detail.startswith("[TMPRL1100] Nondeterminism error:"), o.detail
        assert broken.exit_code == 1
        assert "4 NONDETERMINISTIC" in broken.summary()
        assert "would break" in broken.summary()

        raising = await replay_check(client, scope=rt.scope, workflows=(RaisingAgentWorkflow,))
        assert {o.status for o in raising.outcomes} == {"failed"}, raising.outcomes
        assert {o.label for o in raising.outcomes} == {"REPLAY FAILED"}
        for o in raising.outcomes:
            assert "bug in the new code" in o.detail and "second line" not in o.detail, o.detail
        assert raising.exit_code == 1 and "4 REPLAY FAILED" in raising.summary()


async def test_query_limit_and_a_history_that_cannot_be_fetched(
    make_runtime, client: Client, monkeypatch: pytest.MonkeyPatch
) -> None:
    llm = ScriptedLLM({"stub-model": [text("ok")]}, repeat_last=True)
    async with make_runtime(REGISTRY, llm.transport()) as rt:
        handles = await start_agents(rt)
        workers = {rt.workflow_id(h.id) for h in handles}

        narrowed = await replay_check(client, scope=rt.scope, query='AgentName="worker"')
        assert ids(narrowed) == workers and narrowed.exit_code == 0

        limited = await replay_check(client, scope=rt.scope, limit=2)
        assert len(limited.outcomes) == 2 and limited.total == 4
        assert "2 more running, not listed" in limited.summary()

        lost = rt.workflow_id(handles[1].id)
        real = client.get_workflow_handle

        def flaky_handle(workflow_id: str, **kw: Any) -> Any:
            handle = real(workflow_id, **kw)
            if workflow_id == lost:

                async def refuse(**_: Any) -> Any:
                    raise RuntimeError("history service unavailable\nsecond line")

                monkeypatch.setattr(handle, "fetch_history", refuse)
            return handle

        monkeypatch.setattr(client, "get_workflow_handle", flaky_handle)
        partial = await replay_check(client, scope=rt.scope, fetch_ahead=2)
        by_id = {o.workflow_id: o for o in partial.outcomes}
        assert by_id[lost].status == "fetch_failed"
        assert by_id[lost].detail == "history service unavailable"
        assert [o.status for i, o in by_id.items() if i != lost] == ["ok"] * 3
        assert partial.exit_code == 2 and "incomplete" in partial.summary()


RETIRED_INPUT = REPO / "tests" / "fixtures" / "retired" / "protocol2_lead_input.json"


async def start_retired_agent(client: Client, rt: AgentRuntime) -> str:
    """An agent of a retired generation: the start input recorded by a protocol-2 build,
    started in ``rt``'s scope on a task queue no worker polls (as an agent of an older build
    waits for its workers), so it stays running."""
    import json

    inp = json.loads(RETIRED_INPUT.read_text())["input"]
    inp["state"]["scope"] = rt.scope
    workflow_id = rt.workflow_id("root/lead.1")
    await client.start_workflow(
        WORKFLOW_TYPE, inp, id=workflow_id, task_queue=f"{rt.task_queue}-retired"
    )
    return workflow_id


async def test_replay_check_names_the_generations_in_use_and_refuses_a_retired_one(
    make_runtime, client: Client, env
) -> None:
    llm = ScriptedLLM({"stub-model": [text("ok")]}, repeat_last=True)
    async with make_runtime(REGISTRY, llm.transport()) as rt:
        await start_agents(rt, 1)
        report = await replay_check(client, scope=rt.scope)
        assert report.protocols() == {PROTOCOL: 2} and report.patches() == {}
        assert report.exit_code == 0
        retired = await start_retired_agent(client, rt)

        async def listed() -> bool:  # visibility lists a new workflow a moment later
            return (await client.count_workflows(visibility_query(scope=rt.scope))).count == 3

        await eventually(listed, within_s=30)
        report = await replay_check(client, scope=rt.scope)
        by_id = {o.workflow_id: o for o in report.outcomes}
        assert by_id[retired].status == "unsupported" and by_id[retired].protocol == 2
        assert "protocol 2 (pre-release" in by_id[retired].detail
        assert "drain or terminate" in by_id[retired].detail
        assert report.protocols() == {2: 1, PROTOCOL: 2}
        assert report.exit_code == 1 and "1 UNSUPPORTED PROTOCOL" in report.summary()
        assert report.versions_line("default") == (
            f"namespace default: protocol 2: 1 agent(s) (not this build's), "
            f"protocol {PROTOCOL}: 2 agent(s); patch ids: none"
        )

        code, out = await run_cli(env, rt)
        assert code == 1, out
        lines = [line for line in out.splitlines() if line.startswith("UNSUPPORTED PROTOCOL")]
        assert len(lines) == 1 and retired in lines[0], out
        assert "protocol 2: 1 agent(s) (not this build's)" in out
        await client.get_workflow_handle(retired).terminate("test over")


def test_visibility_query() -> None:
    base = 'WorkflowType="AgentWorkflow" AND ExecutionStatus="Running"'
    assert visibility_query() == base
    assert visibility_query(scope="prod", query=' AgentState="parked" ') == (
        f'{base} AND WorkflowId STARTS_WITH "prod/" AND (AgentState="parked")'
    )
    with pytest.raises(ValueError, match="cannot go into a visibility query"):
        visibility_query(scope='a"b')


async def run_cli(env: Any, rt: AgentRuntime, *args: str, broken: bool = False) -> tuple[int, str]:
    """``tnx replay-check`` as a subprocess (the real executable, or ``tnx`` with the changed
    workflow installed); returns the exit code and stdout + stderr."""
    environ = {k: v for k, v in os.environ.items() if not k.startswith(("TEMPORAL_", "TNX_"))}
    environ |= {
        "TEMPORAL_ADDRESS": env.client.service_client.config.target_host,
        "TNX_SCOPE": rt.scope or "",
        "COLUMNS": "200",
    }
    if broken:
        code = "import tests.replay_variants as v; v.install(); v.tnx()"
        argv = [sys.executable, "-c", code, "replay-check", *args]
    else:
        argv = [str(Path(sys.executable).parent / "tnx"), "replay-check", *args]
    proc = await asyncio.create_subprocess_exec(
        *argv,
        cwd=REPO,
        env=environ,
        stdout=asyncio.subprocess.PIPE,
        stderr=asyncio.subprocess.STDOUT,
    )
    out, _ = await asyncio.wait_for(proc.communicate(), 120)
    assert proc.returncode is not None
    return proc.returncode, out.decode()


async def test_the_cli_reports_each_workflow_and_exits_1_on_a_break(make_runtime, env) -> None:
    llm = ScriptedLLM({"stub-model": [text("ok")]}, repeat_last=True)
    async with make_runtime(REGISTRY, llm.transport()) as rt:
        handles = await start_agents(rt, 2)

        code, out = await run_cli(env, rt)
        assert code == 0, out
        for h in handles:
            assert f"{'OK':<20} {rt.workflow_id(h.id)}" in out, out
        assert "replay-check: 3 running workflow(s): 3 OK" in out
        assert f"namespace default: protocol {PROTOCOL}: 3 agent(s); patch ids: none" in out

        code, out = await run_cli(env, rt, "--json")
        assert code == 0, out
        assert '"status": "OK"' in out and '"exit_code": 0' in out

        code, out = await run_cli(env, rt, broken=True)
        assert code == 1, out
        assert out.count("NONDETERMINISTIC ") == 3, out
        assert "3 NONDETERMINISTIC" in out and "would break" in out

        code, out = await run_cli(env, rt, "--query", "AgentName=")
        assert code == 2 and "error:" in out and "answered INVALID_ARGUMENT" in out, out


async def test_a_parked_delegation_tree_replays(make_runtime, client: Client) -> None:
    """Agents mid-work: a parent waiting in a `task` call on a child parked on an approval."""
    from tests.registries import APPROVALS

    llm = ScriptedLLM(
        {
            "m-parent": [tool_calls(("task", {"agent": "asker", "prompt": "get it"}))],
            "stub-model": [tool_calls(("check_secret", {}))],
        }
    )
    async with make_runtime(APPROVALS, llm.transport()) as rt:
        parent = await rt.spawn(rt.root, "parent")
        assert isinstance(parent, Handle)
        assert (await rt.run_turn(parent, "go")).status == "pending"
        report = await replay_check(client, scope=rt.scope)
        assert ids(report) == {
            rt.workflow_id("root"),
            rt.workflow_id(parent.id),
            rt.workflow_id(f"{parent.id}/asker.1"),
        }
        assert [o.status for o in report.outcomes] == ["ok"] * 3, report.outcomes
        broken = await replay_check(client, scope=rt.scope, workflows=(TimerFirstAgentWorkflow,))
        assert [o.status for o in broken.outcomes] == ["nondeterministic"] * 3


async def test_an_agent_of_a_retired_generation_fails_at_once_on_this_build(
    make_runtime, client: Client
) -> None:
    """The same recorded protocol-2 input on a task queue this build's worker polls: the
    workflow fails at once with ``UnsupportedProtocol`` and says what to do (never a task
    that retries forever)."""
    import json

    from temporalio.client import WorkflowFailureError
    from temporalio.exceptions import ApplicationError

    llm = ScriptedLLM({"stub-model": [text("ok")]}, repeat_last=True)
    async with make_runtime(REGISTRY, llm.transport()) as rt:
        inp = json.loads(RETIRED_INPUT.read_text())["input"]
        inp["state"]["scope"] = rt.scope
        handle = await client.start_workflow(
            WORKFLOW_TYPE, inp, id=rt.workflow_id("root/old.9"), task_queue=rt.task_queue
        )
        with pytest.raises(WorkflowFailureError) as err:
            await asyncio.wait_for(handle.result(), 30)
        cause = err.value.cause
        assert isinstance(cause, ApplicationError) and cause.type == UNSUPPORTED_PROTOCOL
        assert "protocol 2 (pre-release" in cause.message and "drain or terminate" in cause.message


async def test_the_cli_refuses_a_scope_no_query_can_carry(env) -> None:
    """Issue 23 item 7: ``--scope`` is checked as every other verb checks it (it was an
    "unexpected ValueError" here), before any query is sent."""
    no_scope = cast(AgentRuntime, SimpleNamespace(scope=None))
    for scope in ['x"', 'x" OR WorkflowId STARTS_WITH "oe']:
        code, out = await run_cli(env, no_scope, "--scope", scope)
        assert code == 2, out
        assert out.startswith(f"error: invalid --scope: scope {scope!r}: a scope is"), out
        assert "unexpected" not in out and "Traceback" not in out, out


async def test_a_host_verb_refuses_a_scope_or_task_queue_no_query_can_carry(env) -> None:
    """Issue 23 item 7: ``--scope`` and ``--task-queue`` go into visibility queries
    (``WorkflowId STARTS_WITH``; ``TaskQueue="..."``, the worker check); one holding a quote
    is refused by name (it was an "unexpected ValueError"), before anything is sent."""
    environ = {k: v for k, v in os.environ.items() if not k.startswith(("TEMPORAL_", "TNX_"))}
    environ |= {"TEMPORAL_ADDRESS": env.client.service_client.config.target_host}
    tnx = str(Path(sys.executable).parent / "tnx")
    for verb in (["spawn", "root", "w"], ["pending"], ["replay-check"]):
        proc = await asyncio.create_subprocess_exec(
            tnx, *verb, "--task-queue", 'a"b', env=environ,
            stdout=asyncio.subprocess.PIPE, stderr=asyncio.subprocess.PIPE,
        )  # fmt: skip
        out, err = await asyncio.wait_for(proc.communicate(), 60)
        assert proc.returncode == 2, (verb, out, err)
        assert err.decode().startswith("error: invalid --task-queue: 'a\"b' cannot go"), err
        assert b"unexpected" not in err and b"Traceback" not in err, err
        proc = await asyncio.create_subprocess_exec(
            tnx, *verb, "--scope", 'x" OR WorkflowId STARTS_WITH "oe', env=environ,
            stdout=asyncio.subprocess.PIPE, stderr=asyncio.subprocess.PIPE,
        )  # fmt: skip
        out, err = await asyncio.wait_for(proc.communicate(), 60)
        assert proc.returncode == 2, (verb, out, err)
        assert err.decode().startswith("error: invalid --scope: "), err


async def test_the_cli_names_a_registry_it_cannot_load(env) -> None:
    """Issue 23 item 5: ``--registry`` that does not load is a usage error naming it (it was
    "unexpected BadParameter"), before anything is sent."""
    no_scope = cast(AgentRuntime, SimpleNamespace(scope=None))
    for spec, why in [
        ("nomodule:X", "cannot import 'nomodule'"),
        ("tests.registries:NOPE", "has no attribute 'NOPE'"),
    ]:
        code, out = await run_cli(env, no_scope, "--registry", spec)
        assert code == 2, out
        assert out.startswith("error: invalid --registry: ") and why in out, out
        assert "unexpected" not in out and "Traceback" not in out, out
