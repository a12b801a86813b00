"""``tnx demo`` tours the product (issue 26 item 4) and looks healthy at its own links (issue
24 item 7): every step of the tour prints what it showed (delegation through ``task``, the
tree, the approval with the commands that answer it, approved with edited arguments the tool
runs with, the trace and the audit of the answer and its edit, usage, budgets and cost, a
ticking monitor, a background child, the web UI links) and the whole tour finishes well under
a minute; the in-process worker leaves no task or timer due behind
it (the web UI showed a red "Workflow Task Timed Out": a usage timer fell due after the
worker left), the ids it prints are the workflow ids the web UI shows, and ``tnx inspect``
takes them as they are; the tour closes the agents it started (closed, they stay readable)."""

from __future__ import annotations

import asyncio
import io
import json
import re
import time
from pathlib import Path

import pytest
from rich.console import Console
from temporalio.api.enums.v1 import EventType
from temporalio.client import Client, WorkflowExecutionStatus
from typer.testing import CliRunner

from toolnexus_temporal.activities import LlmConfig, SqliteConversationStore
from toolnexus_temporal.cli.app import app
from toolnexus_temporal.cli.demo import (
    DEMO_ROOT,
    DEMO_TASK_QUEUE,
    REGISTRY,
    _busy_for,
    run_demo,
)
from toolnexus_temporal.cli.demo_setup import SCRIPTED_MODEL, demo_script
from toolnexus_temporal.client.testing import ScriptedLLMServer
from toolnexus_temporal.worker import create_worker


def _step(out: str, n: int) -> str:
    """The text of step ``n`` of the tour (from its heading to the next one)."""
    found = re.search(rf"\n{n}\. (.*?)(?=\n\d\. |\ntour: )", out, re.S)
    assert found is not None, f"no step {n} in:\n{out}"
    return found.group(1)


async def test_the_demo_tours_leaves_nothing_due_and_prints_ids_that_paste(
    client: Client, tmp_path: Path, monkeypatch: pytest.MonkeyPatch
) -> None:
    for name in ("OPENAI_BASE_URL", "TNX_MODEL", "OPENAI_MODEL"):
        monkeypatch.delenv(name, raising=False)
    address = client.service_client.config.target_host
    shown = io.StringIO()
    began = time.monotonic()
    code = await run_demo(
        prompt="hello demo",
        address=address,
        llm_base_url=None,
        model=None,
        data_dir=tmp_path / "demo",
        console=Console(file=shown, width=300, highlight=False),
    )
    took = time.monotonic() - began
    out = shown.getvalue()
    assert code == 0, out
    assert took < 60, (took, out)
    assert re.search(r"\ntour: done in \d+\.\d s\n", out), out
    found = re.search(r"spawned (demo/root/coordinator\.\d+) ", out)
    assert found is not None, out
    wid = found.group(1)
    hid = wid.removeprefix("demo/")
    deployer = re.search(rf"{re.escape(wid)}/(deployer\.\d+)  suspended", out)
    assert deployer is not None, out
    deployer_id = f"{hid}/{deployer.group(1)}"
    request = f"{deployer_id}#1"

    # each step printed, and said what it showed
    for n in range(1, 9):
        assert "  → " in _step(out, n), (n, out)
    delegation = _step(out, 1)
    assert "wait → status pending: deploy billing to production?" in delegation, out
    assert "one model reply started 2 child agent(s)" in delegation, out
    tree = _step(out, 2)
    assert re.search(rf"  {re.escape(wid)}  suspended\n", tree), out
    assert re.search(rf"    {re.escape(wid)}/researcher\.\d+  closed\n", tree), out
    assert f"{wid} and {wid}/deployer." in tree, out  # workflow ids in the text too
    approval = _step(out, 3)
    # the Request as tnx prints ids, with the scope (issue 37 item 1), in the signal's JSON
    # too (the workflow takes it), and in the search attribute the web UI's queue shows
    assert f"Request demo/{request}  kind approval: deploy billing to production?" in approval
    assert f"AgentRequestId demo/{request}  AgentRequestKind approval" in approval, out
    # `tnx pending` with no scope lists the default runtime's queue, not the demo's
    assert f"    tnx pending --scope demo --address {address}\n" in approval, out
    assert f"    tnx answer {wid} --approve --address {address}\n" in approval, out
    edit = '{"service": "billing", "environment": "staging"}'
    assert f"    tnx answer {wid} --edit '{edit}' --address {address}\n" in approval, out
    signal = re.search(
        rf"    temporal workflow signal --workflow-id '{re.escape(wid)}' --name answer --input "
        rf"'(.*)' --address {re.escape(address)}\n",
        approval,
    )
    assert signal is not None, out
    assert json.loads(signal.group(1)) == {
        "id": f"demo/{request}",
        "ok": True,
        "edited_args": {"service": "billing", "environment": "staging"},
    }, out
    # the tool ran with the edited arguments, and the model read the note naming the edit
    assert (
        "deployer → status done: [scripted LLM] [the reviewer changed this call's arguments; "
        'it ran with {"service":"billing","environment":"staging"}] deployed billing to staging'
    ) in approval, out
    assert "coordinator → status done: [scripted LLM] both workers reported: " in approval
    assert "deployed billing to production" not in out, out
    trace = _step(out, 4)
    assert f"{deployer_id}: running→suspended (deploy needs approval" in trace, out
    # trace lines print ids as tnx prints them: with the demo's scope, so they paste back
    assert f"{wid}: answer demo/{request} (ok) via update → demo/{deployer_id}" in trace, out
    assert f"the audit (tnx audit {wid} --subtree):" in trace, out
    assert re.search(
        rf"  demo/{re.escape(request)}: approved with an edit by \S+ via update at 20", trace
    ), out
    assert f'the model called deploy with {{"service": "billing"}}; it ran with {edit}' in trace, (
        out
    )
    assert "Temporal identity: " in trace and "unverified" in trace, out
    usage = _step(out, 5)
    assert re.search(rf"{re.escape(hid)}: \d+ tokens .* token pool \d+ left of 40000", usage)
    assert re.search(rf"{re.escape(deployer_id)}: \d+ tokens .* 1 tool call\(s\)", usage)
    assert re.search(rf"{re.escape(deployer_id)}: .* · \$0\.\d+\n", usage), out  # its cost
    ticks = _step(out, 6)
    assert ticks.count(": tick wakes") >= 2 and "tick schedule removed" in ticks, out
    assert "2 turn(s) started by a durable timer" in ticks, out
    background = _step(out, 7)
    assert "reporter → status done: [scripted LLM] release note" in background, out
    assert "coordinator, woken by the report → done" in background, out
    links = _step(out, 8)
    assert f"/namespaces/default/workflows/{wid.replace('/', '%2F')}\n" in links, out
    assert f"\n  {wid}: http://" in links, out  # labelled as the UI shows it, as it pastes
    assert f"  {wid}: " in _step(out, 5), out
    assert "approval queue (tnx pending --ui): " in links, out
    assert "empty now: the demo answered its one Request" in links, out
    assert "/namespaces/default/workflows?query=AgentState%3D%22suspended%22" in links, out

    assert f"tnx inspect {wid} --address {address}" in out, out
    assert f"temporal workflow describe -w {wid} --address {address}" in out, out
    monitor = re.search(r"spawned (demo/root/monitor\.\d+):", out)
    reporter = re.search(rf"spawned ({re.escape(wid)}/reporter\.\d+) ", out)
    assert monitor is not None and reporter is not None, out

    # the demo closes what it starts (it left 3 agents running per run): only its root runs
    assert f"closed what the tour started: {wid}, {monitor.group(1)}" in out, out
    for workflow_id in (wid, monitor.group(1), reporter.group(1)):
        desc = await client.get_workflow_handle(workflow_id).describe()
        assert desc.status == WorkflowExecutionStatus.COMPLETED, (workflow_id, desc.status)
    root = await client.get_workflow_handle(DEMO_ROOT).describe()
    assert root.status == WorkflowExecutionStatus.RUNNING

    # nothing is due on the agents or the root: no task, activity or timer left to a worker
    # that has gone (each would end on its sticky queue as "Workflow Task Timed Out")
    for workflow_id in (wid, monitor.group(1), reporter.group(1), DEMO_ROOT):
        assert await _busy_for(client, workflow_id, 60.0) == 0, workflow_id
        history = client.get_workflow_handle(workflow_id).fetch_history_events()
        types = [event.event_type async for event in history]
        assert EventType.EVENT_TYPE_WORKFLOW_TASK_TIMED_OUT not in types, workflow_id

    # the next lines read with no worker (the demo's worker has gone): each runs as printed
    assert f"tnx trace {wid} --address {address}" in out, out
    assert f"tnx audit demo/root --subtree --address {address}" in out, out
    for line in (f"trace {wid}", "audit demo/root --subtree"):
        argv = [*line.split(), "--address", address]
        env0 = {"TEMPORAL_ADDRESS": None, "TNX_SCOPE": None, "COLUMNS": "200"}
        ran = await asyncio.to_thread(CliRunner().invoke, app, argv, env=env0)
        assert ran.exit_code == 0, (line, ran.output)
        assert "no worker running" in ran.stderr, (line, ran.stderr)
        # a budget signal that raced a child's close is not a fault: logged, not traced
        assert "not delivered" not in ran.stdout, (line, ran.stdout)
    audit_out = ran.stdout
    assert "approved" in audit_out or " ok " in audit_out, audit_out
    assert f"  demo/{request}  ok  via update" in audit_out, audit_out  # as tnx trace has it
    # answering an agent the demo closed says so (walk 5: it said "no worker polls")
    closed = [*f"answer {wid} --approve".split(), "--address", address]
    ran = await asyncio.to_thread(CliRunner().invoke, app, closed, env=env0)
    assert ran.exit_code == 1, ran.output
    assert f"{wid} has ended (closed): nothing to answer" in ran.stderr, ran.stderr
    # the coordinator's own audit is empty (the Request was its child's): it says where to look
    own = [*f"audit {wid}".split(), "--address", address]
    ran = await asyncio.to_thread(CliRunner().invoke, app, own, env=env0)
    assert "no answered requests (its children's: add --subtree)" in ran.stdout, ran.output

    # pasted as printed, with a worker running: tnx takes the workflow id (scope `demo`)
    with ScriptedLLMServer(demo_script()) as llm:
        async with (
            create_worker(
                client,
                registry=REGISTRY,
                llm=LlmConfig(base_url=llm.base_url, model=SCRIPTED_MODEL),
                task_queue=DEMO_TASK_QUEUE,
                store=SqliteConversationStore(tmp_path / "demo" / "conversations.sqlite"),
            ) as worker,
            worker,
        ):
            env = {"TEMPORAL_ADDRESS": None, "TNX_SCOPE": None, "COLUMNS": "200"}

            def inspect() -> object:
                return CliRunner().invoke(
                    app, ["inspect", wid, "--address", address, "--json"], env=env
                )

            result = await asyncio.to_thread(inspect)
    assert result.exit_code == 0, result.output
    assert f'"id": "{wid}"' in result.stdout, result.stdout  # as tnx prints ids (walk 8)
