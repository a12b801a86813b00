"""The operator's path in a real browser (issue 14 item 2): the Temporal web UI of a dev server,
driven by headless Chromium through playwright.

An agent parks on an approval; the test finds it in the UI with ``AgentState="suspended"``
(with the ``AgentRequest*`` columns), reads the prompt and the Answer JSON on its page (User
Metadata → Current Details), sends a wrong answer through "Send an Update" (``admit_answer``)
and sees the rejection on the page, sends the right one through "Send a Signal" (``answer``),
and sees the agent finish (client side and on the page). A screenshot of each step goes to
``$TNX_SCREENSHOTS`` (``docs/operator/``: the README's operator's path shows them).

Marked ``browser``; skipped with the reason when Chromium (Debian's ``chromium`` package) or
the ``playwright`` package is missing: ``scripts/browser-tests.sh`` installs both and runs
``pytest -m browser``. No browser download: playwright drives the system Chromium.
"""

from __future__ import annotations

import asyncio
import json
import os
import re
import shutil
import subprocess
import sys
import urllib.parse
import uuid
from collections.abc import AsyncIterator
from contextlib import asynccontextmanager
from pathlib import Path
from typing import Any

import pytest
from temporalio.contrib.pydantic import pydantic_data_converter
from temporalio.testing import WorkflowEnvironment

from tests.conftest import MODEL, temporal_binary
from tests.workers import free_port
from toolnexus_temporal.activities import (
    LlmConfig,
    Registry,
    SqliteConversationStore,
    ToolContext,
    define_tool,
    pending,
)
from toolnexus_temporal.cli.queue_cmd import approval_queue_url
from toolnexus_temporal.client import AgentDef, AgentRuntime, ApprovalPolicy, Escalation, Handle
from toolnexus_temporal.client.testing import ScriptedLLM, text, tool_calls
from toolnexus_temporal.worker import create_worker
from toolnexus_temporal.workflows.contract.names import ALL_SEARCH_ATTRIBUTES

pytestmark = [
    pytest.mark.stress,
    pytest.mark.browser,
    pytest.mark.skipif(
        shutil.which("chromium") is None,
        reason="no Chromium on PATH (scripts/browser-tests.sh installs Debian's chromium)",
    ),
]

SHOTS_ENV = "TNX_SCREENSHOTS"
"""A directory for the screenshots (``TNX_SCREENSHOTS=docs/operator`` refreshes the README's:
they are committed); by default they go to the test's temporary directory."""

PROMPT = "Deploy build 42 to production?"
TIMEOUT_MS = 30_000
"""How long a step waits for the UI (ms): the UI polls and renders in its own time."""


async def release(ctx: ToolContext) -> Any:
    """Release a build: needs an operator's approval first."""
    if ctx.answer is None:
        return pending(kind="approval", prompt=PROMPT, data={"build": 42})
    return f"released (approved by {json.dumps(ctx.answer.data or {})})"


REGISTRY = Registry(
    [
        AgentDef(
            name="deployer",
            description="Releases builds to production",
            tools=["release"],
            # A deadline (the queue's AgentRequestExpires) and an early escalation to an
            # operator queue (AgentEscalatedTo) that keeps the Request waiting.
            approval=ApprovalPolicy(
                timeout_ms=3_600_000, escalate=Escalation(queue="ops-oncall", after_ms=500)
            ),
        )
    ],
    tools=[define_tool(release, input_schema={"type": "object", "properties": {}})],
)


@pytest.fixture(scope="module")
async def ui_env() -> AsyncIterator[tuple[WorkflowEnvironment, str]]:
    """A dev server of its own with the web UI on (the session server runs without it)."""
    port = free_port()
    async with await WorkflowEnvironment.start_local(
        dev_server_existing_path=temporal_binary(),
        data_converter=pydantic_data_converter,
        search_attributes=ALL_SEARCH_ATTRIBUTES,
        dev_server_log_level="error",
        ui=True,
        ui_port=port,
    ) as env:
        yield env, f"http://127.0.0.1:{port}"


@pytest.fixture
def shots(tmp_path: Path) -> Path:
    """Where this run's screenshots go (see :data:`SHOTS_ENV`)."""
    where = Path(os.environ.get(SHOTS_ENV) or tmp_path)
    where.mkdir(parents=True, exist_ok=True)
    return where


async def test_an_operator_answers_in_the_web_ui(ui_env, tmp_path: Path, shots: Path) -> None:
    playwright = pytest.importorskip(
        "playwright.async_api", reason="pip install playwright (the `browser` extra)"
    )
    env, ui = ui_env
    scope = f"ui-{uuid.uuid4().hex[:6]}"
    llm = ScriptedLLM({MODEL: [tool_calls(("release", {})), text("Build 42 is live.")]})
    async with (
        create_worker(
            env.client,
            registry=REGISTRY,
            llm=LlmConfig(base_url="http://mock.local/v1", model=MODEL),
            task_queue=f"tq-{scope}",
            store=SqliteConversationStore(tmp_path / "conversations.sqlite"),
            transport=llm.transport(),
        ) as worker,
        worker,
    ):
        rt = await AgentRuntime(env.client, task_queue=f"tq-{scope}", scope=scope).start()
        h = await rt.spawn(rt.root, "deployer")
        assert isinstance(h, Handle)
        await rt.wake(h, "ship build 42")
        parked = await rt.wait(h)
        assert parked.status == "pending" and parked.pending is not None
        wf_id = rt.workflow_id(h.id)
        for _ in range(100):  # the escalation (after 0.5 s) reaches visibility
            row = await rt.queue_row(h)
            if row is not None and row.escalated_to == "ops-oncall":
                break
            await asyncio.sleep(0.1)
        assert row is not None and row.escalated_to == "ops-oncall", row
        assert row.expires_at is not None and parked.pending.expires_at is not None
        queue_link = approval_queue_url(ui, "default", scope)  # what `tnx pending --ui` prints
        async with chromium(playwright, tmp_path) as page:
            # the Request id as tnx prints ids (with the scope): the workflow takes it so
            await operate(page, queue_link, wf_id, rt.workflow_id(parked.pending.id), shots)
            done = await rt.wait(h)
            assert done.status == "done" and done.text == "Build 42 is live.", done
            await agent_page(page, wf_id, reload=True)
            await shown_in_frame(
                page,
                CURRENT_DETAILS,
                lambda f: (
                    f.locator("p")
                    .filter(has_text="last result:")
                    .filter(has_text="Build 42 is live.")
                ),
            )
            # who answered (issue 37 item 9): the agent's latest audit lines
            await shown_in_frame(
                page,
                CURRENT_DETAILS,
                lambda f: f.get_by_text(
                    re.compile(rf"{re.escape(parked.pending.id)}.*approved by ops-alice via signal")
                ),
            )
            await page.screenshot(path=str(shots / "5-answered.png"))
        trace = await rt.trace_lines(h)
        assert any("answer REJECTED" in line for line in trace)
        assert any(f"answer {parked.pending.id} (ok)" in line for line in trace)
    # The worker has stopped: Current Details are blank, and the static details (stored with
    # the start) say what that means and how to start one.
    async with chromium(playwright, tmp_path) as page:
        await page.goto(f"{ui}/namespaces/default/workflows/{urllib.parse.quote(wf_id, safe='')}")
        await agent_page(page, wf_id)
        static = "user-metadata-details"
        await shown_in_frame(
            page, static, lambda f: f.get_by_text("No tnx worker serves task queue").first
        )
        start = f"tnx-worker --task-queue tq-{scope} --registry MODULE:REGISTRY"
        await shown_in_frame(page, static, lambda f: f.get_by_text(start).first)
        await page.screenshot(path=str(shots / "6-no-worker.png"))


@asynccontextmanager
async def chromium(playwright: Any, tmp_path: Path) -> AsyncIterator[Any]:
    """A page of headless Chromium (the system's); a screenshot of the page when the body
    fails (its path printed)."""
    async with playwright.async_playwright() as pw:
        browser = await pw.chromium.launch(
            executable_path=shutil.which("chromium"),
            args=["--no-sandbox", "--disable-gpu", "--disable-dev-shm-usage"],
        )
        try:
            page = await browser.new_page(viewport={"width": 1680, "height": 820})
            page.set_default_timeout(TIMEOUT_MS)
            try:
                yield page
            except Exception:
                await page.screenshot(path=str(tmp_path / "failed.png"))
                print("screenshot of the failure:", tmp_path / "failed.png")
                raise
        finally:
            await browser.close()


async def operate(page: Any, queue_link: str, wf_id: str, request_id: str, shots: Path) -> None:
    """The operator's steps in the UI, one screenshot each."""
    # 1. The approval queue: the link `tnx pending --ui` prints, with the Request's columns.
    await page.goto(queue_link)
    await page.get_by_role("link", name=wf_id).first.wait_for()
    await page.get_by_test_id("workflows-summary-table-configuration-button").click()
    for column in (
        "AgentRequestKind",
        "AgentRequestPrompt",
        "AgentWaitingSince",
        "AgentRequestExpires",
        "AgentEscalatedTo",
    ):
        await page.get_by_test_id(f"orderable-list-item-{column}-add-button").click()
    for column in ("Status", "Run ID", "Type", "Start", "End"):
        remove = page.get_by_test_id(f"orderable-list-item-{column}-remove-button")
        if await remove.count():
            await remove.click()
    drawer_close = page.get_by_role("button", name=re.compile(r"^close", re.I))
    await drawer_close.locator("visible=true").first.click()
    await page.get_by_text("Configure Workflows Table").wait_for(state="hidden")
    await page_text_has(page, PROMPT)
    await page_text_has(page, "ops-oncall")  # AgentEscalatedTo: where it escalated
    header = page.get_by_role("columnheader", name=re.compile("AgentRequestExpires"))
    await header.first.wait_for()
    await page.screenshot(path=str(shots / "1-queue.png"))

    # 2. Its page: User Metadata → Current Details start with the prompt and the answer JSON.
    await page.get_by_role("link", name=wf_id).first.click()
    await agent_page(page, wf_id)
    await shown_in_frame(
        page, CURRENT_DETAILS, lambda f: f.get_by_text(f"Waiting for approval: {PROMPT}")
    )
    answer_line = await shown_in_frame(
        page, CURRENT_DETAILS, lambda f: f.locator("p").filter(has_text="Answer: Signal").first
    )
    to_paste = json.loads(await answer_line.locator("code").nth(1).inner_text())
    assert to_paste == {"id": request_id, "ok": True}
    await page.screenshot(path=str(shots / "2-details.png"))

    # 3. A wrong id through "Send an Update" (admit_answer): the page shows the rejection.
    wrong = {"id": f"{request_id.rpartition('#')[0]}#99", "ok": True}
    await send(page, "Send an Update", "update-select-button", "admit_answer", wrong)
    await agent_page(page, wf_id, reload=True)
    await shown_in_frame(page, CURRENT_DETAILS, lambda f: f.get_by_text("answer rejected:"))
    await page.screenshot(path=str(shots / "3-rejected.png"))

    # 4. The JSON from Current Details through "Send a Signal" (answer), with the
    # operator's name (``by``): the audit lines on the page name them.
    signed = {**to_paste, "by": "ops-alice"}
    await send(
        page, "Send a Signal", "signal-select-button", "answer", signed, shots / "4-signal.png"
    )


async def agent_page(page: Any, wf_id: str, *, reload: bool = False) -> None:
    """Show the agent page's User Metadata tab (Summary, Details, Current Details)."""
    if reload:
        await page.reload()
    await page.get_by_text(wf_id).first.wait_for()
    await (
        page.get_by_role("link", name="User Metadata")
        .or_(page.get_by_role("tab", name="User Metadata"))
        .or_(page.get_by_text("User Metadata", exact=True))
        .first.click()
    )
    await page.get_by_text("Current Details", exact=True).locator("visible=true").first.wait_for()


CURRENT_DETAILS = "user-metadata-current-details"
"""The frame of the Current Details panel: the UI renders markdown in a frame of its own (a
new one after each reload, and when it renders the panel again)."""


async def shown_in_frame(page: Any, name: str, find: Any) -> Any:
    """Wait until ``find(frame)`` (a locator in the frame ``name``) is visible; its locator.

    The UI replaces a markdown panel's frame when it renders the panel again (it polls the
    workflow), so a wait that started in the old frame ends in "Frame was detached": then
    the wait starts again in the frame that replaced it, until :data:`TIMEOUT_MS`."""
    from playwright.async_api import Error as PlaywrightError

    deadline = asyncio.get_running_loop().time() + TIMEOUT_MS / 1000
    while True:
        left_ms = (deadline - asyncio.get_running_loop().time()) * 1000
        locator = find(await frame(page, name))
        try:
            await locator.wait_for(timeout=max(left_ms, 1))
            return locator
        except PlaywrightError as err:
            if "detached" not in str(err) or left_ms <= 0:
                raise


async def frame(page: Any, name: str) -> Any:
    """The frame ``name`` of the page (the UI renders each markdown panel of User Metadata in
    one: ``user-metadata-summary``, ``-details``, ``-current-details``)."""
    for _ in range(TIMEOUT_MS // 100):
        found = page.frame(name=name)
        if found is not None:
            return found
        await page.wait_for_timeout(100)
    raise AssertionError(f"the page shows no frame {name!r}")


async def send(
    page: Any, action: str, select: str, name: str, payload: Any, shot: Path | None = None
) -> None:
    """More Actions → ``action`` → pick handler ``name`` → paste ``payload`` → Submit."""
    await page.get_by_role("button", name="More Actions").locator("visible=true").first.click()
    await page.get_by_text(action).locator("visible=true").first.click()
    dialog = page.locator("dialog[open]").locator("visible=true").first
    await dialog.get_by_test_id(select).click()
    option = page.get_by_role("option").filter(has_text=re.compile(rf"^\s*{name}\b"))
    await option.locator("visible=true").first.click()
    await dialog.locator(".cm-content").fill(json.dumps(payload))
    await dialog.get_by_text("Single JSON payload").click()  # the editor formats on blur
    if shot:
        await page.screenshot(path=str(shot))
    await dialog.get_by_role("button", name="Submit").click()
    toast = "Workflow signaled" if action == "Send a Signal" else "Update successful"
    await page.get_by_text(toast).first.wait_for()


async def page_text_has(page: Any, text: str) -> None:
    """Wait until ``text`` is visible on the page."""
    await page.get_by_text(text, exact=False).locator("visible=true").first.wait_for()


async def test_the_demo_looks_healthy_at_its_own_links(tmp_path: Path, shots: Path) -> None:
    """Issue 24 item 7 in the browser: ``tnx demo --keep-server``, then the links it printed.
    Each agent's page shows a completed workflow (the tour closes what it starts: they were
    left running), none shows a timed-out task (a usage timer fell due after the demo's
    worker left: a red "Workflow Task Timed Out"), and the approval queue link opens."""
    playwright = pytest.importorskip(
        "playwright.async_api", reason="pip install playwright (the `browser` extra)"
    )
    port, ui_port = free_port(), free_port()
    data = tmp_path / "demo"
    tnx = str(Path(sys.executable).parent / "tnx")
    environ = {k: v for k, v in os.environ.items() if not k.startswith(("TEMPORAL_", "TNX_"))}
    environ |= {"COLUMNS": "300", "HOME": str(tmp_path)}
    environ = {k: v for k, v in environ.items() if not k.startswith("OPENAI_")}
    argv = [tnx, "demo", "--keep-server", "--data-dir", str(data)]
    argv += ["--port", str(port), "--ui-port", str(ui_port)]
    try:
        demo = await asyncio.to_thread(
            subprocess.run,
            argv,
            cwd=tmp_path,
            env=environ,
            capture_output=True,
            text=True,
            timeout=180,
        )
        out = demo.stdout + demo.stderr
        assert demo.returncode == 0, out
        ui = f"http://127.0.0.1:{ui_port}"
        links = re.findall(rf"^  (demo/root/\S+): ({re.escape(ui)}/\S+)$", out, re.M)
        assert len(links) >= 4, out
        [queue] = re.findall(rf"approval queue \(tnx pending --ui\): ({re.escape(ui)}/\S+)", out)
        async with chromium(playwright, tmp_path) as page:
            root = f"{ui}/namespaces/default/workflows/{urllib.parse.quote('demo/root', safe='')}"
            for wf_id, link, status in [
                *((w, lnk, "Completed") for w, lnk in links),
                (
                    "demo/root",
                    root,
                    "Running",  # the runtime's root stays for the next run
                ),
            ]:
                await page.goto(link)
                await page.get_by_text(wf_id).first.wait_for()
                await page.get_by_text(status, exact=True).first.wait_for()
                await page.get_by_text("Pending Activities").first.wait_for()
                hits = page.get_by_text(re.compile(r"timed ?out", re.I)).locator("visible=true")
                assert await hits.count() == 0, await hits.all_inner_texts()
                if wf_id.endswith("coordinator.1"):
                    await page.screenshot(path=str(shots / "7-demo-agent.png"))
            await page.goto(queue)  # nothing waits once the tour is done: an empty queue
            await (
                page.get_by_text("No Workflows")
                .or_(page.get_by_text("No Results"))
                .first.wait_for()
            )
    finally:
        await asyncio.to_thread(
            subprocess.run,
            [tnx, "server", "stop", "--data-dir", str(data / "temporal")],
            env=environ,
            capture_output=True,
            timeout=60,
        )
