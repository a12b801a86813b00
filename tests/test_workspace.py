"""Tools that keep to one worker (issue 27, item 5; docs/guide/workspaces.md): a workspace
tool's calls all run on the one worker of three that holds the handle's workspace, across a
continue-as-new of the handle; when that worker stops, the next call runs on another worker
and the model, the trace and the state say the workspace was lost and a new one started."""

from __future__ import annotations

import asyncio
import json
import sys
import uuid
from pathlib import Path
from typing import Any

import pytest
from temporalio.client import Client
from temporalio.testing import WorkflowEnvironment

from tests.conftest import MODEL
from tests.helpers import eventually, spawn
from tests.workers import start_tnx_worker, start_worker_process, stop_worker
from tests.workspace_worker import registry
from toolnexus_temporal.activities import LlmConfig
from toolnexus_temporal.activities.workspace import workspace_dir_name
from toolnexus_temporal.client import AgentRuntime, RuntimeOptions
from toolnexus_temporal.client.testing import ScriptedLLM, ScriptedLLMServer, text, tool_calls
from toolnexus_temporal.worker import create_worker
from toolnexus_temporal.workflows.contract.names import QUERY_STATE
from toolnexus_temporal.workflows.contract.state import HandleState


def tool_outputs(llm: ScriptedLLM) -> list[str]:
    """Every tool result the model was sent so far, in order (the last request carries the
    whole transcript)."""
    return [m["content"] for m in llm.requests[-1]["messages"] if m.get("role") == "tool"]


def result(output: str) -> dict[str, Any]:
    """The JSON the tool returned (after a note, when the workspace was lost)."""
    return json.loads(output.splitlines()[-1])


async def start_worker(
    address: str, queue: str, base_url: str, store: Path, root: Path, identity: str
) -> asyncio.subprocess.Process:
    """A worker process (``tests/workspace_worker.py``) that polls once it returns."""
    with (root.parent / f"{identity}.log").open("wb") as log:
        return await start_worker_process(
            sys.executable,
            *("-m", "tests.workspace_worker", address, queue, base_url),
            *(str(store), str(root), identity),
            ready=b"ready",
            stderr=log,
        )


async def test_workspace_calls_keep_to_one_worker_and_move_when_it_is_killed(
    client: Client, env: WorkflowEnvironment, tmp_path: Path
) -> None:
    # the first reply's two calls run at once: they must share one claim
    script: list[Any] = [
        tool_calls(("step", {"name": "t0a"}), ("step", {"name": "t0b"})),
        text("done 0"),
    ]
    for turn in range(1, 6):
        script += [
            tool_calls(("step", {"name": f"t{turn}a"})),
            tool_calls(("step", {"name": f"t{turn}b"})),
            text(f"done {turn}"),
        ]
    # after the kill, two calls at once find the worker gone: one loss, one new claim
    script += [tool_calls(("step", {"name": "after"}), ("step", {"name": "again"})), text("moved")]
    llm = ScriptedLLM({MODEL: script})
    scope = f"t-{uuid.uuid4().hex[:10]}"
    queue = f"tq-{scope}"
    address = env.client.service_client.config.target_host
    roots = [tmp_path / f"w{i}" for i in range(3)]
    procs: list[asyncio.subprocess.Process] = []
    with ScriptedLLMServer(llm) as server:
        try:
            for i, root in enumerate(roots):
                procs.append(
                    await start_worker(
                        address, queue, server.base_url, tmp_path / "conv.sqlite", root, f"w{i}"
                    )
                )
            options = RuntimeOptions(workspace_lost_ms=2_000, continue_as_new_updates=3)
            rt = AgentRuntime(client, task_queue=queue, scope=scope, options=options)
            rt = await rt.start()
            h = await spawn(rt, rt.root, "dev")
            wf = client.get_workflow_handle(rt.workflow_id(h.id))
            first_run = (await wf.describe()).run_id
            for turn in range(3):
                r = await rt.run_turn(h, f"turn {turn}")
                assert (r.status, r.text) == ("done", f"done {turn}")
            outputs = [result(o) for o in tool_outputs(llm)]
            dirs = {o["dir"] for o in outputs}
            assert len(outputs) == 6 and len(dirs) == 1, dirs  # every call, one directory...
            [workspace] = dirs
            holder = roots.index(Path(workspace).parent)
            assert Path(workspace).name == workspace_dir_name(rt.workflow_id(h.id))
            # ... holding what the earlier calls left there
            assert outputs[-1]["files"] == sorted(f"t{t}{x}" for t in range(3) for x in "ab")
            state = await wf.query(QUERY_STATE, result_type=HandleState)
            assert (state.workspace.worker, state.workspace.claims) == (f"w{holder}", 1)
            assert (state.workspace.task_queue or "").startswith(f"{queue}.ws.")

            # the pin survives a continue-as-new of the handle (it is in the carried state)
            async def continued() -> bool:
                return (await wf.describe()).run_id != first_run

            await eventually(continued, tries=300)
            for turn in range(3, 6):
                r = await rt.run_turn(h, f"turn {turn}")
                assert (r.status, r.text) == ("done", f"done {turn}")
            outputs = [result(o) for o in tool_outputs(llm)]
            assert len(outputs) == 12 and {o["dir"] for o in outputs} == {workspace}
            assert len(outputs[-1]["files"]) == 12
            state = await wf.query(QUERY_STATE, result_type=HandleState)
            assert (state.workspace.claims, state.workspace.lost) == (1, 0)

            # kill -9 the holding worker: the next call runs on another, and all are told
            procs[holder].kill()
            await asyncio.wait_for(procs[holder].wait(), 30)
            r = await rt.run_turn(h, "after the loss")
            assert (r.status, r.text) == ("done", "moved")
            both = tool_outputs(llm)[-2:]
            moved = [result(o) for o in both]
            assert moved[0]["dir"] == moved[1]["dir"]
            other = roots.index(Path(moved[0]["dir"]).parent)
            assert other != holder
            for last in both:  # each result tells the model
                assert last.startswith(f"[workspace lost: the worker w{holder} that held")
                assert f"A new, empty workspace was started on worker w{other}, and" in last
            # a new workspace: nothing of the earlier calls' files
            assert set(moved[0]["files"]) | set(moved[1]["files"]) == {"after", "again"}
            state = await wf.query(QUERY_STATE, result_type=HandleState)
            assert (state.workspace.claims, state.workspace.lost) == (2, 1)
            assert (state.workspace.worker, state.workspace.path) == (f"w{other}", moved[0]["dir"])
            lines = await rt.trace_lines(h)
            lost = f"workspace lost: worker w{holder} did not start tool step"
            assert any(lost in line for line in lines), lines
            assert any(line.endswith(f"workspace 2 on worker w{other}") for line in lines)
            await rt.close(h)
        finally:
            for proc in procs:
                if proc.returncode is None:
                    proc.kill()
                    await proc.wait()


async def test_a_temporary_workspace_root_goes_with_its_worker(client: Client, store: Any) -> None:
    llm = ScriptedLLM({MODEL: [tool_calls(("step", {"name": "x"})), text("ok")]})
    scope = f"t-{uuid.uuid4().hex[:10]}"
    queue = f"tq-{scope}"
    async with create_worker(
        client,
        registry=registry(),
        llm=LlmConfig(base_url="http://mock.local/v1", model=MODEL),
        task_queue=queue,
        store=store,
        transport=llm.transport(),
    ) as worker:
        async with worker:
            rt = await AgentRuntime(client, task_queue=queue, scope=scope).start()
            h = await spawn(rt, rt.root, "dev")
            r = await rt.run_turn(h, "go")
            assert (r.status, r.text) == ("done", "ok")
            workspace = Path(result(tool_outputs(llm)[0])["dir"])
            assert (workspace / "x").read_text() == "x"
            await rt.close(h)
    assert not workspace.parent.exists()  # the root it made is removed when it stops


async def test_a_closed_handles_workspace_is_removed_by_the_sweep(
    client: Client, store: Any, tmp_path: Path, monkeypatch: pytest.MonkeyPatch
) -> None:
    """A worker that lives for weeks must not keep every closed handle's directory: the
    sweep removes a closed handle's (its workflow completed) and keeps a live one's. They
    were all kept until the worker stopped."""
    from toolnexus_temporal.activities import workspace as ws

    monkeypatch.setattr(ws, "WORKSPACE_SWEEP_S", 0.5)
    llm = ScriptedLLM(
        {
            MODEL: [
                tool_calls(("step", {"name": "a"})),
                text("ok a"),
                tool_calls(("step", {"name": "b"})),
                text("ok b"),
            ]
        }
    )
    scope = f"t-{uuid.uuid4().hex[:10]}"
    queue = f"tq-{scope}"
    root = tmp_path / "root"
    async with create_worker(
        client,
        registry=registry(),
        llm=LlmConfig(base_url="http://mock.local/v1", model=MODEL),
        task_queue=queue,
        store=store,
        transport=llm.transport(),
        workspace_root=root,
    ) as worker:
        async with worker:
            rt = await AgentRuntime(client, task_queue=queue, scope=scope).start()
            closing = await spawn(rt, rt.root, "dev")
            assert (await rt.run_turn(closing, "go")).text == "ok a"
            living = await spawn(rt, rt.root, "dev")
            assert (await rt.run_turn(living, "go")).text == "ok b"
            gone = root / workspace_dir_name(rt.workflow_id(closing.id))
            kept = root / workspace_dir_name(rt.workflow_id(living.id))
            assert (gone / "a").exists() and (kept / "b").exists()
            await rt.close(closing)
            await eventually(lambda: not gone.exists(), within_s=30, what="the sweep")
            assert (kept / "b").read_text() == "b"  # a live handle's directory stays
    assert (kept / "b").exists()  # a given root is kept when the worker stops


async def test_tnx_worker_keeps_a_given_root_and_a_new_claim_starts_it_empty(
    client: Client, env: WorkflowEnvironment, tmp_path: Path
) -> None:
    llm = ScriptedLLM(
        {
            MODEL: [
                tool_calls(("step", {"name": "x"})),
                text("one"),
                tool_calls(("step", {"name": "y"})),
                text("two"),
            ]
        }
    )
    scope = f"t-{uuid.uuid4().hex[:10]}"
    queue = f"tq-{scope}"
    address = env.client.service_client.config.target_host
    root = tmp_path / "root"

    async def tnx_worker() -> asyncio.subprocess.Process:
        return await start_tnx_worker(
            address,
            queue,
            server.base_url,
            tmp_path / "conv.sqlite",
            "tests.workspace_worker:REGISTRY",
            model=MODEL,
            args=("--workspace-root", str(root)),
        )

    with ScriptedLLMServer(llm) as server:
        first = await tnx_worker()
        try:
            options = RuntimeOptions(workspace_lost_ms=1_000)
            rt = await AgentRuntime(client, task_queue=queue, scope=scope, options=options).start()
            h = await spawn(rt, rt.root, "dev")
            assert (await rt.run_turn(h, "one")).text == "one"
            workspace = root / workspace_dir_name(rt.workflow_id(h.id))
            assert result(tool_outputs(llm)[0]) == {"dir": str(workspace), "files": ["x"]}
        finally:
            await stop_worker(first)
        assert (workspace / "x").read_text() == "x"  # a given root is kept
        second = await tnx_worker()  # on the same root: the stopped worker's queue is gone
        try:
            assert (await rt.run_turn(h, "two")).text == "two"
            last = tool_outputs(llm)[-1]
            assert last.startswith("[workspace lost: the worker ")
            # the claim started the directory empty: x, left by the first worker, is gone
            assert result(last) == {"dir": str(workspace), "files": ["y"]}
            await rt.close(h)
        finally:
            await stop_worker(second)


@pytest.mark.stress  # a worker killed mid-call: Temporal's 30 s heartbeat timeout finds it
async def test_a_worker_killed_mid_call_loses_the_workspace_and_the_call_is_not_run_again(
    client: Client, env: WorkflowEnvironment, tmp_path: Path
) -> None:
    llm = ScriptedLLM(
        {
            MODEL: [
                tool_calls(("step", {"name": "hang"})),
                tool_calls(("step", {"name": "after"})),
                text("recovered"),
            ]
        }
    )
    scope = f"t-{uuid.uuid4().hex[:10]}"
    queue = f"tq-{scope}"
    address = env.client.service_client.config.target_host
    roots = [tmp_path / f"w{i}" for i in range(2)]
    procs: list[asyncio.subprocess.Process] = []
    with ScriptedLLMServer(llm) as server:
        try:
            for i, root in enumerate(roots):
                procs.append(
                    await start_worker(
                        address, queue, server.base_url, tmp_path / "conv.sqlite", root, f"w{i}"
                    )
                )
            rt = await AgentRuntime(client, task_queue=queue, scope=scope).start()
            h = await spawn(rt, rt.root, "dev")
            await rt.wake(h, "go")
            name = workspace_dir_name(rt.workflow_id(h.id))

            def hanging() -> bool:
                return any((root / name / "hang").exists() for root in roots)

            await eventually(hanging, within_s=30, what="the tool call started")
            holder = next(i for i, root in enumerate(roots) if (root / name / "hang").exists())
            other = 1 - holder
            procs[holder].kill()
            await asyncio.wait_for(procs[holder].wait(), 30)
            r = await rt.wait(h)
            assert (r.status, r.text) == ("done", "recovered")
            died, after = tool_outputs(llm)
            assert died.startswith(f"[workspace lost: the worker w{holder} that held")
            assert f"started on worker w{other}; call again.]" in died
            assert f"error: the worker w{holder} holding this agent's workspace stopped" in died
            moved = result(after)  # the next call ran in the new workspace, with no note
            assert moved == {"dir": str(roots[other] / name), "files": ["after"]}
            wf = client.get_workflow_handle(rt.workflow_id(h.id))
            state = await wf.query(QUERY_STATE, result_type=HandleState)
            assert (state.workspace.claims, state.workspace.lost) == (2, 1)
            assert state.workspace.worker == f"w{other}"
            lines = await rt.trace_lines(h)
            assert any(
                f"workspace lost: worker w{holder} stopped heartbeating during tool step" in line
                for line in lines
            ), lines
            await rt.close(h)
        finally:
            for proc in procs:
                if proc.returncode is None:
                    proc.kill()
                    await proc.wait()
