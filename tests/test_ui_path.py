"""The web UI path (issue 24 item 10), checked without a browser (tests/test_browser.py walks
it in Chromium): ``tnx pending --ui`` prints the UI's link to the approval queue, the static
details say what a blank Current Details means and how to start a worker, and the ``trace``
query's times are readable."""

from __future__ import annotations

import asyncio
import json
import re
import uuid
from pathlib import Path
from urllib.parse import parse_qs, urlparse

from temporalio.client import Client
from typer.testing import CliRunner

from tests.cli_support import cli_env
from tests.conftest import temporal_binary
from tests.workers import worker_on
from toolnexus_temporal.cli.app import app
from toolnexus_temporal.cli.queue_cmd import DEFAULT_UI, approval_queue_url
from toolnexus_temporal.client import AgentRuntime, Handle
from toolnexus_temporal.client.roots import approval_queue_query
from toolnexus_temporal.client.testing import ScriptedLLM, text, tool_calls

ISO_UTC = re.compile(r"^\d{4}-\d\d-\d\dT\d\d:\d\d:\d\d\.\d{3}Z$")


def test_pending_ui_prints_the_queue_link_for_the_scope() -> None:
    env = {"TNX_SCOPE": None, "TNX_UI_URL": None, "TEMPORAL_NAMESPACE": None}
    result = CliRunner().invoke(
        app,
        ["pending", "--ui", "--scope", "my-app", "--ui-url", "http://ui.example:8080/"],
        env=env,
    )
    assert result.exit_code == 0, result.output
    link = urlparse(result.stdout.strip())
    assert (link.scheme, link.netloc) == ("http", "ui.example:8080")
    assert link.path == "/namespaces/default/workflows"
    [query] = parse_qs(link.query)["query"]
    assert query == approval_queue_query("my-app")
    assert 'ExecutionStatus="Running"' in query and 'STARTS_WITH "my-app/"' in query
    assert "AgentRequestPrompt" in result.stderr  # the columns to add


async def test_static_details_explain_a_blank_current_details_and_times_read(
    client: Client, tmp_path: Path
) -> None:
    scope = f"t-{uuid.uuid4().hex[:10]}"
    task_queue = f"tq-{scope}"
    llm = ScriptedLLM({"stub-model": [tool_calls(("check_secret", {})), text("done")]})
    async with worker_on(client, task_queue, llm, tmp_path / "conversations.sqlite"):
        rt = await AgentRuntime(client, task_queue=task_queue, scope=scope).start()
        asker = await rt.spawn(rt.root, "asker")
        assert isinstance(asker, Handle)
        assert (await rt.run_turn(asker, "go")).status == "pending"
        # the trace query as the temporal CLI (and the web UI's Queries tab) shows it
        proc = await asyncio.create_subprocess_exec(
            temporal_binary(),
            *("workflow", "query", "--workflow-id", rt.workflow_id(asker.id)),
            *("--name", "trace", "--output", "json"),
            *("--address", client.service_client.config.target_host),
            stdout=asyncio.subprocess.PIPE,
            stderr=asyncio.subprocess.PIPE,
        )
        out, err = await proc.communicate()
        assert proc.returncode == 0, err
    [lines] = json.loads(out)["queryResult"]
    assert lines and all(ISO_UTC.match(line["at"]) for line in lines), lines
    assert all(isinstance(line["at_ms"], int) for line in lines)
    # no worker now: the static details (stored with the start) say what to do
    hint = f"No tnx worker serves task queue `{task_queue}`: start one with `tnx-worker"
    for hid in (asker.id, "root"):
        desc = await client.get_workflow_handle(rt.workflow_id(hid)).describe()
        details = await desc.static_details()
        assert details is not None and hint in details, (hid, details)
    # and the CLI's pending link opens that queue (its scope) on this runtime
    result = CliRunner().invoke(app, ["pending", "--ui"], env=cli_env(client, scope, task_queue))
    assert result.exit_code == 0 and urlparse(result.stdout.strip()).query, result.output


def test_the_operators_guide_links_straight_to_the_queue() -> None:
    """The docs give the link too (issue 24 item 10: "printed by ``tnx pending --ui`` and in
    the docs"): the dev server's queue, as ``tnx pending --ui`` prints it with no scope."""
    guide = (Path(__file__).parents[1] / "docs" / "guide" / "operator.md").read_text()
    assert f"<{approval_queue_url(DEFAULT_UI, 'default', None)}>" in guide
