"""Parked handles for the dev-server tests: the agent ``worker`` whose ``guarded`` tool parks
its turn on an approval (``REGISTRY``, ``script``, ``park``), the operator's ways to answer or
flood it with the ``temporal`` CLI (``cli_answer``, ``cli_flood``), and the ways to make it
continue as new and look at its runs (``continue_as_new_by_rejections``, ``runs_of``,
``history_of``, ``next_result``). Shared by ``test_parked_history`` and the tests that park an
agent the same way."""

from __future__ import annotations

import asyncio
import json
from collections.abc import Callable
from pathlib import Path
from typing import Any

from temporalio.client import Client, WorkflowHandle

from tests.conftest import temporal_binary
from toolnexus_temporal.activities import Registry, ToolContext, define_tool, pending
from toolnexus_temporal.client import AgentDef, Handle
from toolnexus_temporal.client.testing import ScriptedLLM, text, tool_calls


async def guarded(ctx: ToolContext) -> Any:
    """Do the guarded thing once approved."""
    if ctx.answer is None:
        return pending(kind="approval", prompt="may I?")
    return "did it: " + json.dumps(ctx.answer.data or {})


def plain(ctx: ToolContext) -> str:
    """A tool that never suspends."""
    return "plain ok"


TOOLS = [
    define_tool(guarded, input_schema={"type": "object", "properties": {}}),
    define_tool(plain, input_schema={"type": "object", "properties": {}}),
]


REGISTRY = Registry([AgentDef(name="worker", tools=["guarded", "plain"])], tools=TOOLS)


async def cli_answer(client: Client, workflow_id: str, answer: dict[str, Any]) -> None:
    """Send the Answer as an operator would: ``temporal workflow signal --name answer``."""
    proc = await asyncio.create_subprocess_exec(
        temporal_binary(),
        "workflow",
        "signal",
        "--workflow-id",
        workflow_id,
        "--name",
        "answer",
        "--input",
        json.dumps(answer),
        "--address",
        client.service_client.config.target_host,
        stderr=asyncio.subprocess.PIPE,
    )
    _, err = await asyncio.wait_for(proc.communicate(), 60)
    assert proc.returncode == 0, err


async def runs_of(client: Client, workflow_id: str) -> list[Any]:
    """Every run of a workflow id, newest first, once visibility lists the current run.

    Visibility is eventually consistent: right after a continue-as-new it can list the run that
    ended before the run that replaced it. Waits (polling) until the newest listed
    run is the one ``describe`` names now, then returns the list (60 s at most). The current
    run is read again each time: a flooded workflow still works off buffered signals after
    the flood and may continue as new again meanwhile (test_flood_tuned failed 2 of 6 times
    here comparing with the run read once)."""
    handle = client.get_workflow_handle(workflow_id)
    current = ""
    for _ in range(600):
        current = (await handle.describe()).run_id
        runs = [wf async for wf in client.list_workflows(f'WorkflowId = "{workflow_id}"')]
        if runs and runs[0].run_id == current:
            return runs
        await asyncio.sleep(0.1)
    raise AssertionError(f"visibility never listed the current run {current} of {workflow_id}")


async def continue_as_new_by_rejections(wf: WorkflowHandle[Any, Any]) -> None:
    """Send rejected small signals until the workflow's run has changed."""
    run = (await wf.describe()).run_id
    for batch in range(100):
        for i in range(50):
            await wf.signal("answer", {"id": f"nope#{batch}.{i}", "ok": True})
        if (await wf.describe()).run_id != run:
            return
    raise AssertionError("the run never continued as new")


async def park(rt: Any) -> Handle:
    h = await rt.spawn(rt.root, "worker")
    assert isinstance(h, Handle)
    r = await rt.run_turn(h, "go")
    assert r.status == "pending" and r.pending is not None
    return h


async def next_result(rt: Any, h: Handle, new: Callable[[Any], bool]) -> Any:
    """The first result ``new`` accepts (a wait right after an Answer signal may still see
    the answered Request: that is issue 12 item 2, another lane's)."""
    for _ in range(120):
        r = await rt.wait(h, timeout_ms=1000)
        if r.status != "timeout" and new(r):
            return r
    raise AssertionError(f"no new result; last: {r}")


def script() -> ScriptedLLM:
    # one reply calls the guarded tool twice around a plain one: the first suspension parks,
    # the second parks after the first is answered (call order), then the model finishes.
    return ScriptedLLM(
        {
            "stub-model": [
                tool_calls(("guarded", {}), ("plain", {}), ("guarded", {})),
                text("all done"),
            ]
        }
    )


async def history_of(client: Client, workflow_id: str, run_id: str) -> tuple[int, int]:
    """(events, bytes) of one run's history."""
    events = 0
    size = 0
    async for event in client.get_workflow_handle(
        workflow_id, run_id=run_id
    ).fetch_history_events():
        events += 1
        size += event.ByteSize()
    return events, size


async def cli_flood(client: Client, workflow_id: str, input_file: Path, until: float) -> int:
    """``temporal workflow signal --name post --input-file`` one after the other until the
    loop's clock passes ``until`` or the workflow is gone (terminated); returns how many
    were accepted. A signal refused in the instant of a continue-as-new, refused by the
    server as "Workflow is busy" (its back-pressure while a run's workflow tasks fail under
    the flood), or not stored because one write would pass the server's 4 MiB transaction
    limit, is sent again."""
    loop = asyncio.get_running_loop()
    sent = 0
    while loop.time() < until:
        proc = await asyncio.create_subprocess_exec(
            temporal_binary(),
            *("workflow", "signal", "--workflow-id", workflow_id, "--name", "post"),
            *("--input-file", str(input_file)),
            *("--address", client.service_client.config.target_host),
            stdout=asyncio.subprocess.DEVNULL,
            stderr=asyncio.subprocess.PIPE,
        )
        _, err = await asyncio.wait_for(proc.communicate(), 60)
        if proc.returncode == 0:
            sent += 1
        elif b"transaction size" in err:  # not stored: more than 4 MiB in one write (a
            continue  # server whose buffered events may pass 2 MiB): not delivered
        elif b"exceeds limit" in err or b"already completed" in err:
            return sent  # the server terminated the run
        else:  # refused in the instant of a continue-as-new, or the server's back-pressure
            assert b"closing" in err or b"Workflow is busy" in err, err
    return sent
