"""``tnx demo``: a tour of the runtime, end to end, on a real Temporal server.

The demo starts the embedded Temporal dev server
(:class:`~toolnexus_temporal.cli.devserver.DevServer`, SQLite data under ``{data_dir}/temporal``)
unless a server address is configured (``--address``, or Temporal's client configuration:
``TEMPORAL_ADDRESS`` or the address of the config file's profile, with its TLS and API key:
:class:`~toolnexus_temporal.client.cluster.ClusterConfig`), runs an in-process worker with
:data:`REGISTRY` and runs the tour of :mod:`~toolnexus_temporal.cli.demo_tour` (delegation,
the tree, an approval with edited arguments, the trace, usage, budgets and cost, ticks, a
background child, the web UI links); then it waits until nothing is due (:func:`quiesce`) and
the worker leaves.

The LLM is a real OpenAI-compatible endpoint when ``--llm-base-url`` or ``OPENAI_BASE_URL`` is
set (model from ``--model``, ``TNX_MODEL`` or ``OPENAI_MODEL``; the key from
``OPENAI_API_KEY``, read by the activity). Otherwise a scripted OpenAI-compatible server
(:class:`~toolnexus_temporal.client.testing.ScriptedLLMServer`) answers on loopback over real
HTTP with the tour's script (:func:`~toolnexus_temporal.cli.demo_setup.demo_script`), and says
so in every reply.

The root workflow lives in the server's SQLite database, so it survives between demo runs: the
spawned handle ids count up (``root/coordinator.1``, ``root/monitor.2``, ...).

This module holds the demo's constants and :data:`REGISTRY`, :func:`run_demo` and its
output; the connection and the LLM it sets up (and :class:`DemoError`) are in
:mod:`~toolnexus_temporal.cli.demo_setup`.
"""

from __future__ import annotations

import asyncio
import contextlib
import logging
import os
import time
from collections.abc import Iterator
from contextlib import AsyncExitStack
from datetime import UTC, datetime
from pathlib import Path
from typing import Final
from urllib.parse import quote

from rich.console import Console
from rich.markup import escape
from temporalio.client import (
    Client,
    WorkflowExecutionStatus,
    WorkflowUpdateRPCTimeoutOrCancelledError,
)
from temporalio.service import RPCError

from toolnexus_temporal.activities.llm import LlmConfig
from toolnexus_temporal.activities.registry import Registry
from toolnexus_temporal.activities.store import SqliteConversationStore
from toolnexus_temporal.cli.demo_setup import (
    SCRIPTED_MODEL,
    SCRIPTED_PRICES,
    DemoError,
    check_root,
    connect_client,
    demo_script,
    start_local_model,
)
from toolnexus_temporal.cli.demo_tour import TOUR_AGENTS, TOUR_TOOLS, Tour, run_tour
from toolnexus_temporal.cli.devserver import DevServer, DevServerError, ensure_search_attributes
from toolnexus_temporal.cli.options import DEFAULT_ADDRESS as DEFAULT_ADDRESS
from toolnexus_temporal.cli.options import DEFAULT_DATA_DIR as DEFAULT_DATA_DIR
from toolnexus_temporal.cli.options import DEFAULT_PROMPT as DEFAULT_PROMPT
from toolnexus_temporal.cli.queue_cmd import approval_queue_url
from toolnexus_temporal.client.cluster import ClusterConfig
from toolnexus_temporal.client.errors import ClusterConfigError, TnxError
from toolnexus_temporal.client.runtime import AgentRuntime
from toolnexus_temporal.client.testing import ScriptedLLMServer
from toolnexus_temporal.worker import create_worker
from toolnexus_temporal.workflows.contract.models import (
    AgentDef,
    Budget,
    RuntimeOptions,
)
from toolnexus_temporal.workflows.contract.names import ROOT_ID, workflow_id_for

DEMO_AGENT: Final = "assistant"
"""A plain agent with no tools (the scripted model echoes to it), for ``tnx-worker`` and
tests; the tour's agents are :data:`~toolnexus_temporal.cli.demo_tour.TOUR_AGENTS`."""

DEMO_TASK_QUEUE: Final = "tnx-demo"
"""The task queue of the demo's worker and runtime."""

DEMO_REGISTRY: Final = "toolnexus_temporal.cli.demo:REGISTRY"
"""The ``--registry`` of a ``tnx-worker`` that runs the demo's agents (:data:`REGISTRY`)."""

DEMO_SCOPE: Final = "demo"
"""The demo's runtime scope: its workflows are ``demo/root``, ``demo/root/assistant.1``, ...,
so they never collide with a runtime on the default scope (``root``) of the same server."""

DEMO_ROOT: Final = workflow_id_for(DEMO_SCOPE, ROOT_ID)
"""The demo root's workflow id."""

DEFAULT_UI_URL: Final = "http://localhost:8233"
"""The usual web UI location of a Temporal dev server, used for external addresses."""

REGISTRY: Final = Registry(
    [
        AgentDef(
            name=DEMO_AGENT,
            description="A friendly general-purpose assistant that answers in a few sentences.",
            system_prompt=(
                "You are a concise, friendly assistant. Answer the user's message in at most "
                "three sentences. You have no tools."
            ),
            budget=Budget(max_turns=3),
        ),
        *TOUR_AGENTS,
    ],
    tools=TOUR_TOOLS,
)
"""The demo's agent registry: ``toolnexus_temporal.cli.demo:REGISTRY`` (also usable with
``tnx-worker``): ``assistant`` and the tour's agents, with the ``deploy`` tool."""


# ---------------------------------------------------------------------------- helpers


@contextlib.contextmanager
def _quiet_sdk_logs() -> Iterator[None]:
    """Hide the SDK's warnings (an LLM attempt failing logs a traceback) for the demo's run.

    The demo reports failures through the TaskResult instead; errors still get through.
    """
    logger = logging.getLogger("temporalio")
    before = logger.level
    logger.setLevel(logging.ERROR)
    try:
        yield
    finally:
        logger.setLevel(before)


def default_workflow_url(workflow_id: str, namespace: str = "default") -> str:
    """The web UI link of a workflow at the default dev-server UI location.

    Args:
        workflow_id: the workflow id (every reserved character, ``/`` included, is quoted).
        namespace: the namespace.

    Returns:
        ``http://localhost:8233/namespaces/{namespace}/workflows/{quoted id}``.
    """
    return (
        f"{DEFAULT_UI_URL}/namespaces/{quote(namespace, safe='')}"
        f"/workflows/{quote(workflow_id, safe='')}"
    )


# ---------------------------------------------------------------------------- the demo


async def run_demo(
    *,
    prompt: str,
    address: str | None,
    llm_base_url: str | None,
    model: str | None,
    data_dir: Path,
    console: Console,
    keep_server: bool = False,
    port: int | None = None,
    ui_port: int | None = None,
    local_model: bool = False,
) -> int:
    """Run the tour end to end and print what each step showed.

    Args:
        prompt: the coordinator's wake prompt.
        address: a Temporal frontend ``host:port`` to use (else ``TEMPORAL_ADDRESS``, else the
            profile's address; TLS and API key from the same configuration); when none is
            set, the embedded dev server is started (or reused when it already runs
            from ``data_dir/temporal``).
        llm_base_url: an OpenAI-compatible base URL (else ``OPENAI_BASE_URL``); when neither is
            set, a scripted OpenAI-compatible server on 127.0.0.1 answers.
        model: the model for a real endpoint (else ``TNX_MODEL``, ``OPENAI_MODEL``,
            ``gpt-4o-mini``); ignored in scripted mode.
        data_dir: the demo's state directory (``temporal/`` and ``conversations.sqlite``).
        console: where to print.
        keep_server: leave a dev server this call started running (stop it with
            ``tnx server stop``); by default it is stopped at the end.
        port: frontend port of the embedded dev server (default: the port the server of
            ``data_dir/temporal`` was started with, e.g. by ``tnx server start`` in this
            directory, else 7233).
        ui_port: web UI port of the embedded dev server (default: likewise, else 8233).
        local_model: answer with a real model on loopback: llama.cpp's ``llama-server``
            serving SmolLM2-135M-Instruct (built by ``scripts/build-llama-server.sh``).

    Returns:
        The process exit code: 0 when the coordinator's last result is ``done``, 1 otherwise
        (including expected failures, which are printed as one readable message).
    """
    data_dir = _absolute(data_dir)
    server: DevServer | None = None
    started = False
    try:
        with _quiet_sdk_logs():
            try:
                cluster = ClusterConfig.load(address=address, via="flag")
            except ClusterConfigError as err:
                raise DemoError(str(err)) from err
            if not cluster.address_given:
                server = DevServer.at(data_dir / "temporal", port=port, ui_port=ui_port)
                if server.is_running():
                    console.print(
                        f"[bold]Temporal[/bold]: reusing the embedded dev server at "
                        f"{server.address} (pid {server.pid()}, "
                        f"data {escape(str(server.db_file))}); it stays running"
                    )
                else:
                    console.print(
                        f"[bold]Temporal[/bold]: starting the embedded dev server at "
                        f"{server.address} (data {escape(str(server.db_file))}) ..."
                    )
                    _start_server(server)
                    started = True
                    console.print(f"  ready (pid {server.pid()}, web UI {server.ui_url})")
                cluster = ClusterConfig.local(server.address)
            else:
                console.print(f"[bold]Temporal[/bold]: connecting to {escape(cluster.describe())}")
            return await _run(
                console,
                prompt=prompt,
                cluster=cluster,
                server=server,
                llm_base_url=llm_base_url,
                local_model=local_model,
                model=model,
                data_dir=data_dir,
                link=server is None or keep_server or not started,
            )
    except DemoError as err:
        console.print(f"[bold red]error[/bold red]: {escape(str(err))}")
        return 1
    except WorkflowUpdateRPCTimeoutOrCancelledError as err:
        task = asyncio.current_task()
        if task is not None and task.cancelling():
            # Ctrl-C while a verb was in flight: the SDK turned the cancellation into this
            # error; let it be a cancellation again (asyncio.run then raises KeyboardInterrupt).
            raise asyncio.CancelledError from err
        console.print(
            f"[bold red]error[/bold red]: no answer from the agent's workflow: {escape(str(err))}"
        )
        return 1
    finally:
        if server is not None and started:
            _finish_server(console, server, keep=keep_server)


def _absolute(path: Path) -> Path:
    """``path`` with ``~`` expanded, made absolute against the current directory."""
    return path.expanduser().absolute()


def _start_server(server: DevServer) -> None:
    try:
        server.start()
    except DevServerError as err:
        hint = ""
        if "already served by another process" in str(err):
            hint = (
                "\nhint: if that is a Temporal server you want to use, pass "
                f"--address {server.address}; otherwise stop it, or choose other ports with "
                "--port / --ui-port"
            )
        raise DemoError(f"the embedded Temporal dev server did not start: {err}{hint}") from err


def _finish_server(console: Console, server: DevServer, *, keep: bool) -> None:
    if keep:
        console.print(
            f"[bold]Temporal[/bold]: the dev server keeps running at {server.address} "
            f"(pid {server.pid()}, web UI {server.ui_url}); stop it with "
            f"[bold]tnx server stop --data-dir {escape(str(server.data_dir))}[/bold]"
        )
        return
    try:
        server.stop()
    except DevServerError as err:
        console.print(f"[bold red]error[/bold red]: stopping the dev server: {escape(str(err))}")
        return
    console.print(
        "[bold]Temporal[/bold]: dev server stopped (its data stays in "
        f"{escape(str(server.db_file))}); pass --keep-server to keep it running and open the links"
    )


async def _run(
    console: Console,
    *,
    prompt: str,
    cluster: ClusterConfig,
    server: DevServer | None,
    llm_base_url: str | None,
    model: str | None,
    data_dir: Path,
    local_model: bool = False,
    link: bool = True,
) -> int:
    client = await connect_client(cluster)
    address = cluster.address.value
    try:
        await ensure_search_attributes(client)
    except (DevServerError, RPCError) as err:
        raise DemoError(f"cannot register the search attributes on {address}: {err}") from err
    await check_root(client, DEMO_ROOT, DEMO_TASK_QUEUE)

    async with AsyncExitStack() as stack:
        llm = _demo_llm(stack, console, llm_base_url, model, local_model)
        store_path = data_dir / "conversations.sqlite"
        worker = await stack.enter_async_context(
            create_worker(
                client,
                registry=REGISTRY,
                llm=llm,
                task_queue=DEMO_TASK_QUEUE,
                store=SqliteConversationStore(store_path),
            )
        )
        await stack.enter_async_context(worker)
        console.print(
            f"[bold]worker[/bold]: in-process on task queue {DEMO_TASK_QUEUE} "
            f"(conversations in {escape(str(store_path))})"
        )
        # A new demo root reports usage at each settle (no usage timer left due when the
        # in-process worker leaves: the web UI would show it as "Workflow Task Timed Out").
        options = RuntimeOptions(live_usage_ms=None)
        rt = AgentRuntime(client, task_queue=DEMO_TASK_QUEUE, scope=DEMO_SCOPE, options=options)
        ui = server.ui_url if server is not None else DEFAULT_UI_URL
        namespace = cluster.namespace.value
        tour = Tour(
            rt=rt,
            console=console,
            flag=_address_flag(cluster),
            workflow_url=lambda wid: (
                server.workflow_url(wid, namespace)
                if server is not None
                else default_workflow_url(wid, namespace)
            ),
            queue_url=approval_queue_url(ui, namespace, DEMO_SCOPE),
        )
        began = time.monotonic()
        try:
            await rt.start()
            result, workflow_id = await run_tour(tour, prompt)
            started = await _tour_workflows(rt, tour.ids)
            await until_completed(client, started)  # closed: each completes at its next task
            await quiesce(client, [*started, DEMO_ROOT])
        except (TnxError, RPCError) as err:
            raise DemoError(str(err)) from err
        took = time.monotonic() - began

    console.print(f"\n[bold]tour[/bold]: done in {took:.1f} s")
    _print_web_ui(console, link=link, own_server=server is not None)
    _print_next(console, workflow_id, cluster, server_left=link, data_dir=data_dir)
    return 0 if result.status == "done" else 1


def _demo_llm(
    stack: AsyncExitStack,
    console: Console,
    llm_base_url: str | None,
    model: str | None,
    local_model: bool,
) -> LlmConfig:
    """The demo's LLM, said on ``console``: the local model (``--local-model``), the
    endpoint of ``--llm-base-url`` or the environment, else the scripted server (both
    started on ``stack``).

    Raises:
        DemoError: the scripted server (or the local model) cannot start.
    """
    if local_model:
        return start_local_model(stack, console)
    llm = LlmConfig.from_env(base_url=llm_base_url, model=model)
    if llm is None:
        try:
            scripted = stack.enter_context(ScriptedLLMServer(demo_script()))
        except OSError as err:
            raise DemoError(f"cannot start the scripted LLM server: {err}") from err
        llm = LlmConfig(base_url=scripted.base_url, model=SCRIPTED_MODEL, prices=SCRIPTED_PRICES)
        console.print(
            f"[bold]LLM[/bold]: scripted OpenAI-compatible server on {llm.base_url} "
            "[yellow](no OPENAI_BASE_URL set; replies are scripted, not a model)[/yellow]"
        )
        if model:
            console.print(f"  (--model {escape(model)} ignored: no LLM endpoint is set)")
        return llm
    key = "set" if os.environ.get(llm.api_key_env) else "not set"
    console.print(
        f"[bold]LLM[/bold]: {escape(llm.base_url)} model {escape(llm.model)} "
        f"(OpenAI-compatible; {llm.api_key_env} {key})"
    )
    return llm


def _print_web_ui(console: Console, *, link: bool, own_server: bool) -> None:
    """Where the tour's web UI links lead, when it is not the dev server this demo keeps."""
    if not link:
        console.print(
            "[bold]web UI[/bold]: the dev server stops with this demo; run [bold]tnx demo "
            "--keep-server[/bold] to keep it and open the links above"
        )
    elif not own_server:
        console.print(
            f"[bold]web UI[/bold]: links at {DEFAULT_UI_URL}, the default UI location of a dev "
            "server (adjust if yours differs)"
        )


def _address_flag(cluster: ClusterConfig) -> str:
    """The ``--address`` flag a printed command needs ("" for the default address)."""
    address = cluster.address.value
    return "" if address == DEFAULT_ADDRESS else f" --address {address}"


async def _tour_workflows(rt: AgentRuntime, handle_ids: list[str]) -> list[str]:
    """The workflow ids of the handles and all their descendants."""
    out: list[str] = []
    for hid in handle_ids:
        out.extend(rt.workflow_id(h.id) for h in await rt.list(hid))
    return out


async def until_completed(client: Client, workflow_ids: list[str], within_s: float = 10.0) -> None:
    """Wait (at most ``within_s`` seconds) until none of ``workflow_ids`` is running: a closed
    handle's workflow completes at its next workflow task, which a worker that leaves at once
    would leave behind (the workflow would stay running, its task timed out).

    Raises:
        RPCError: a describe failed.
    """
    deadline = time.monotonic() + within_s
    running = list(workflow_ids)
    while running and time.monotonic() < deadline:
        descs = [await client.get_workflow_handle(wid).describe() for wid in running]
        running = [d.id for d in descs if d.status == WorkflowExecutionStatus.RUNNING]
        if running:
            await asyncio.sleep(0.1)


def _print_next(
    console: Console,
    workflow_id: str,
    cluster: ClusterConfig,
    *,
    server_left: bool = True,
    data_dir: Path | None = None,
) -> None:
    """What to paste next, each line runnable as printed: the ids are the workflow ids the
    web UI shows (``tnx`` takes them as they are: the ``demo/`` prefix names the demo's
    scope). The reads need no worker (``tnx`` replays the history); when the demo stopped
    its own server (``server_left`` False), the first line starts it again on the same
    data."""
    flag = _address_flag(cluster)
    console.print("[bold]next[/bold] (closed, the agents stay readable; no worker needed):")
    if not server_left:
        where = ""
        if data_dir is not None and _absolute(data_dir) != _absolute(DEFAULT_DATA_DIR):
            where = f" --data-dir {data_dir}"
        console.print(f"  tnx server start{where}   [dim]# the demo stopped its server[/dim]")
    console.print(f"  temporal workflow describe -w {workflow_id}{flag}")
    console.print(f"  tnx inspect {workflow_id}{flag}   [dim]# replayed from its history[/dim]")
    console.print(f"  tnx trace {workflow_id}{flag}")
    console.print(f"  tnx audit {DEMO_SCOPE}/root --subtree{flag}")


async def quiesce(client: Client, workflow_ids: list[str], within_s: float = 10.0) -> None:
    """Wait (at most ``within_s`` seconds) until none of ``workflow_ids`` has a workflow task
    or an activity pending, or a timer due within ``within_s``: a worker that leaves then
    leaves no task behind on its sticky queue (the web UI would show it timed out).

    Raises:
        RPCError: a describe or history read failed.
    """
    deadline = time.monotonic() + within_s
    while time.monotonic() < deadline:
        waits = [await _busy_for(client, wid, within_s) for wid in workflow_ids]
        longest = max(waits)
        if longest <= 0:
            return
        await asyncio.sleep(min(longest, max(0.0, deadline - time.monotonic()), 1.0))


async def _busy_for(client: Client, workflow_id: str, horizon_s: float) -> float:
    """Seconds until ``workflow_id`` has nothing due (0: nothing due within ``horizon_s``): a
    workflow task or activity pending, a child closed whose close it has not recorded yet, or
    a timer due within ``horizon_s``."""
    wf = client.get_workflow_handle(workflow_id)
    desc = (await wf.describe()).raw_description
    if (
        WorkflowExecutionStatus(desc.workflow_execution_info.status)
        != WorkflowExecutionStatus.RUNNING
    ):
        return 0.0  # closed: nothing of it is ever due
    if desc.HasField("pending_workflow_task") or len(desc.pending_activities):
        return 0.2
    for child in desc.pending_children:
        # a child that has closed but is still pending here: the server has yet to record
        # its close in this workflow (a transfer task after the child's own close), which
        # then schedules a workflow task here
        closed = (await client.get_workflow_handle(child.workflow_id).describe()).status
        if closed != WorkflowExecutionStatus.RUNNING:
            return 0.2
    started: dict[str, datetime] = {}
    async for event in wf.fetch_history_events():
        if event.HasField("timer_started_event_attributes"):
            attrs = event.timer_started_event_attributes
            fire = event.event_time.ToDatetime(UTC) + attrs.start_to_fire_timeout.ToTimedelta()
            started[attrs.timer_id] = fire
        elif event.HasField("timer_fired_event_attributes"):
            started.pop(event.timer_fired_event_attributes.timer_id, None)
        elif event.HasField("timer_canceled_event_attributes"):
            started.pop(event.timer_canceled_event_attributes.timer_id, None)
    now = datetime.now(UTC)
    due = [(fire - now).total_seconds() for fire in started.values()]
    soon = [left for left in due if left <= horizon_s]
    return max(soon, default=0.0) + (0.5 if soon else 0.0)
