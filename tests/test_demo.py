"""``tnx demo`` looks healthy at its own link, and what it prints can be pasted (issue 24
item 7): the in-process worker leaves no task or timer due behind it (the web UI showed a red
"Workflow Task Timed Out": a usage timer fell due after the worker left), the ids it prints
are the workflow ids the web UI shows, and ``tnx inspect`` takes them as they are."""

from __future__ import annotations

import asyncio
import io
import re
from pathlib import Path

import pytest
from rich.console import Console
from temporalio.api.enums.v1 import EventType
from temporalio.client import Client
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


async def test_the_demo_leaves_nothing_due_and_prints_ids_that_paste(
    client: Client, tmp_path: Path, monkeypatch: pytest.MonkeyPatch
) -> None:
    for name in ("OPENAI_BASE_URL", "TNX_MODEL", "OPENAI_MODEL"):
        monkeypatch.delenv(name, raising=False)
    address = client.service_client.config.target_host
    shown = io.StringIO()
    code = await run_demo(
        prompt="hello demo",
        address=address,
        llm_base_url=None,
        model=None,
        data_dir=tmp_path / "demo",
        console=Console(file=shown, width=300, highlight=False),
    )
    out = shown.getvalue()
    assert code == 0, out
    found = re.search(r"spawned (demo/root/assistant\.\d+) ", out)
    assert found is not None, out
    wid = found.group(1)
    assert f"tnx inspect {wid} --address {address}" in out, out
    assert f"temporal workflow describe -w {wid} --address {address}" in out, out
    assert "/namespaces/default/workflows/" in out  # a server the demo did not start: linked

    # nothing is due on the agent or the root: no task, activity or timer left to a worker
    # that has gone (each would end on its sticky queue as "Workflow Task Timed Out")
    for workflow_id in (wid, DEMO_ROOT):
        assert await _busy_for(client, workflow_id, 60.0) == 0, workflow_id
        history = client.get_workflow_handle(workflow_id).fetch_history_events()
        types = [event.event_type async for event in history]
        assert EventType.EVENT_TYPE_WORKFLOW_TASK_TIMED_OUT not in types, workflow_id

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
    assert f'"id": "{wid.removeprefix("demo/")}"' in result.stdout, result.stdout
