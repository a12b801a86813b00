"""Worker wiring: the agent workflow plus its activities on one task queue.

As a program (``tnx-worker`` or ``python worker.py``)::

    tnx-worker --registry toolnexus_temporal.cli.demo:REGISTRY --task-queue tnx \\
        --llm-base-url http://127.0.0.1:8080/v1 --model my-model

The LLM endpoint comes from the options or the environment (``OPENAI_BASE_URL``,
``OPENAI_API_KEY``, ``TNX_MODEL``); the Temporal address from ``--address`` or
``TEMPORAL_ADDRESS``. SIGINT/SIGTERM shut the worker down gracefully: it stops taking tasks
and lets the activities in flight (LLM calls, tools) finish for up to
``--graceful-shutdown-s`` seconds (default 30) before they get their cancellation; workflow
state is already durable. A second signal stops it at once.
"""

from __future__ import annotations

import asyncio
import contextlib
import os
import signal
from collections.abc import AsyncIterator
from datetime import timedelta
from pathlib import Path
from typing import Annotated, Any

import httpx
import typer
from temporalio.client import Client
from temporalio.worker import UnsandboxedWorkflowRunner, Worker, WorkflowRunner
from temporalio.worker.workflow_sandbox import SandboxedWorkflowRunner, SandboxRestrictions

from toolnexus_temporal.activities.llm import LlmActivities, LlmConfig
from toolnexus_temporal.activities.registry import Registry, RegistryActivities, RegistryError
from toolnexus_temporal.activities.store import (
    ConversationStore,
    StoreConfigError,
    StoreError,
    StoreUnavailableError,
)
from toolnexus_temporal.activities.stores import close_store, open_checked, open_store
from toolnexus_temporal.activities.tools import ToolActivities
from toolnexus_temporal.activities.watch import WatchActivities
from toolnexus_temporal.client.rpc import connect
from toolnexus_temporal.workflows.agent import AgentWorkflow

DEFAULT_TASK_QUEUE = "tnx"
"""The task queue used when none is given."""

DEFAULT_STORE_PATH = Path(".tnx/conversations.sqlite")
"""The SQLite conversation store used when none is given."""

DEFAULT_MAX_CONCURRENT_TURNS = 100
"""LLM calls in flight at once per worker process when not configured."""

DEFAULT_ACTIVITY_SLOTS = 100
"""Activity slots of the worker beyond the LLM cap (tools, interpreters, hooks, look-ups)."""

DEFAULT_GRACEFUL_SHUTDOWN_S = 30.0
"""Seconds ``tnx-worker`` lets activities in flight finish after SIGTERM/SIGINT before it
cancels them (``--graceful-shutdown-s``)."""

SANDBOX_PASSTHROUGH = (
    # pydantic: deterministic, and re-importing it per workflow run is slow.
    "pydantic",
    "pydantic_core",
    # Our whole workflow package, imported once per worker process instead of once per
    # workflow instance: the sandbox's re-import cost ~200 KiB of RSS per idle agent once the
    # workflow was split into concept modules (bench/idle.py: ~530 KiB/agent re-imported,
    # ~110 KiB passed through; the floor's one-module workflow: ~120). Passing through is
    # safe because these modules hold no mutable module state (state lives in each
    # AgentWorkflow instance) and call nothing non-deterministic: tests/unit/
    # test_determinism_guard.py checks both statically, and the replay tests check behaviour.
    # It also keeps one class per model across the sandbox boundary.
    "toolnexus_temporal.workflows",
)


WORKER_DEFAULTS: dict[str, Any] = {
    # Heartbeats reach the server at most this often; a cancel (interrupt) is delivered on a
    # heartbeat, so this bounds how long an interrupted LLM call keeps running (CONTRACT §3).
    "max_heartbeat_throttle_interval": timedelta(seconds=1),
    "default_heartbeat_throttle_interval": timedelta(seconds=1),
    # Every agent is a long-lived workflow: keep up to this many in the worker's cache (the
    # SDK's default, 1,000, evicts and replays agents beyond it). ~100 KiB each when idle.
    "max_cached_workflows": 5_000,
    # A workflow task goes first to the sticky queue of the worker that ran the workflow last;
    # if that worker died, the task waits this long before it moves to the shared queue. The
    # SDK's 10 s made a turn's wall limit fire ~10 s late after a worker crash (issue 12, item
    # 7). A live worker picks its sticky tasks up in milliseconds; a busier one that misses 1 s
    # only costs a replay on another worker.
    "sticky_queue_schedule_to_start_timeout": timedelta(seconds=1),
}


def workflow_runner(*, sandboxed: bool = False) -> WorkflowRunner:
    """The runner of ``AgentWorkflow``.

    By default the workflow runs outside Temporal's sandbox: the sandbox re-checks every
    activation of our own workflow code (no user code ever runs in a workflow: tools, hooks
    and interpreters are activities) and measured here it doubled the worker's CPU per
    workflow task, adding ~30 ms to a plain turn (p50 76 → 47 ms) and halving the spawn
    rate (19 → 35 agents/s; README "Benchmarks"). Determinism is checked instead where it
    costs nothing at run time: statically (tests/unit/test_determinism_guard.py: imports,
    I/O calls, clocks, randomness, mutable module state) and by replaying every committed
    history *inside* the sandbox in CI (tests/test_replay.py), which fails on any restricted
    call the replayed paths make.

    Args:
        sandboxed: run inside the sandbox, with our pass-through modules
            (``SANDBOX_PASSTHROUGH``): slower, and the strict mode the replay tests use.
    """
    if not sandboxed:
        return UnsandboxedWorkflowRunner()
    return SandboxedWorkflowRunner(
        restrictions=SandboxRestrictions.default.with_passthrough_modules(*SANDBOX_PASSTHROUGH)
    )


@contextlib.asynccontextmanager
async def create_worker(
    client: Client,
    *,
    registry: Registry | Any,
    llm: LlmConfig,
    task_queue: str = DEFAULT_TASK_QUEUE,
    store: ConversationStore | str | Path | None = None,
    transport: httpx.AsyncBaseTransport | None = None,
    max_concurrent_turns: int | None = None,
    sandboxed: bool = False,
    **worker_options: Any,
) -> AsyncIterator[Worker]:
    """Build the runtime's Temporal worker on ``task_queue`` (the agent workflow, LLM calls,
    tools, interpreters, hooks and registry look-ups) and close the HTTP client afterwards.

    Use as ``async with create_worker(...) as worker: await worker.run()`` or wrap the worker
    in ``async with worker:`` for an in-process worker in tests and demos.

    LLM calls run on the handle's own task queue, so Temporal hands each one straight back to
    the worker that scheduled it (eager activity dispatch). The runtime-wide LLM cap of
    CONTRACT §6 (``max_concurrent_turns``) is a semaphore around the HTTP call alone, in this
    process: a call waiting for it heartbeats (an interrupt still reaches it), a parent
    waiting on its children holds none, so no cap can deadlock a tree. With several worker
    processes the cap applies per process.

    Args:
        client: a client connected with ``pydantic_data_converter`` (see :func:`connect`).
        registry: a Registry, a dict of AgentDef or a list of AgentDef.
        llm: the LLM endpoint and default model.
        task_queue: the task queue all handles of the runtime use.
        store: the conversation store: a store object, or a URL or path for
            :func:`~toolnexus_temporal.activities.stores.open_store`
            (``postgresql://...``, ``sqlite:///path``, a file path; default: SQLite at
            ``.tnx/conversations.sqlite``). It is opened here, before the worker exists (a
            PostgreSQL server that cannot be reached fails now, once); a store given as a URL
            or path is closed when the context exits, a store object is left to its owner.
        transport: an httpx transport for the LLM client (tests: ``httpx.MockTransport``).
        max_concurrent_turns: LLM HTTP calls in flight at once in this process (None: 100).
        sandboxed: run the workflow inside Temporal's sandbox (see :func:`workflow_runner`;
            default False: faster, determinism checked statically and by replay in CI).
        **worker_options: passed to ``temporalio.worker.Worker`` (default
            ``max_concurrent_activities``: the LLM cap plus ``DEFAULT_ACTIVITY_SLOTS``).

    Raises:
        RegistryError: the registry is not usable.
        ValueError: ``max_concurrent_turns`` below 1.
        StoreConfigError: ``store`` is a URL of an unknown scheme (or its driver is missing).
        StoreUnavailableError: the store's server cannot be reached.
        StoreError: the store refuses to open (a schema newer than this code).
    """
    if max_concurrent_turns is not None and max_concurrent_turns < 1:
        raise ValueError(f"max_concurrent_turns must be at least 1, got {max_concurrent_turns}")
    reg = Registry.coerce(registry)
    owned = store is None or isinstance(store, str | Path)
    conv_store: ConversationStore = (
        open_store(DEFAULT_STORE_PATH if store is None else store)
        if store is None or isinstance(store, str | Path)
        else store
    )
    await open_checked(conv_store)
    try:
        async with _worker(
            client, reg, llm, task_queue, conv_store, transport, max_concurrent_turns, sandboxed,
            worker_options,
        ) as worker:  # fmt: skip
            yield worker
    finally:
        if owned:
            await close_store(conv_store)


@contextlib.asynccontextmanager
async def _worker(
    client: Client,
    reg: Registry,
    llm: LlmConfig,
    task_queue: str,
    conv_store: ConversationStore,
    transport: httpx.AsyncBaseTransport | None,
    max_concurrent_turns: int | None,
    sandboxed: bool,
    worker_options: dict[str, Any],
) -> AsyncIterator[Worker]:
    registry_activities = RegistryActivities(reg)
    tool_activities = ToolActivities(reg.tools, reg.interpreters, secrets=llm.secrets)
    cap = max_concurrent_turns or DEFAULT_MAX_CONCURRENT_TURNS
    llm_activities = LlmActivities(
        llm,
        conv_store,
        transport=transport,
        tool_schemas=registry_activities.tool_schemas,
        max_concurrent=cap,
    )
    options = {**WORKER_DEFAULTS, **worker_options}
    try:
        yield Worker(
            client,
            task_queue=task_queue,
            workflows=[AgentWorkflow],
            activities=[
                registry_activities.resolve_agent,
                registry_activities.run_hook,
                tool_activities.tool_call,
                tool_activities.interpret,
                llm_activities.llm_call,
                WatchActivities(client).watch_children,
            ],
            workflow_runner=workflow_runner(sandboxed=sandboxed),
            # LLM calls waiting for the cap hold an activity slot: leave room for tools.
            max_concurrent_activities=options.pop(
                "max_concurrent_activities", cap + DEFAULT_ACTIVITY_SLOTS
            ),
            **options,
        )
    finally:
        await llm_activities.aclose()


async def serve(
    *,
    address: str,
    namespace: str,
    task_queue: str,
    registry_spec: str,
    llm: LlmConfig,
    store: str | Path,
    max_concurrent_turns: int | None = None,
    sandboxed: bool = False,
    graceful_shutdown_s: float = DEFAULT_GRACEFUL_SHUTDOWN_S,
) -> None:
    """Run a worker until SIGINT or SIGTERM, then shut it down gracefully (its store closed):
    it stops taking tasks and lets the activities in flight finish for up to
    ``graceful_shutdown_s`` seconds before cancelling them. An LLM call cancelled there is
    asked again by another worker (the provider answers twice), so a restart waits for it; a
    second signal stops at once (the process dies with the signal's default action: like a
    crash, which the runtime survives).

    Args:
        store: the conversation store's URL or SQLite path (see ``open_store``).

    Raises:
        StoreConfigError: ``store`` is not a usable URL.
        StoreUnavailableError: the store's server cannot be reached.
    """
    conv_store = open_store(store)
    await open_checked(conv_store)  # an unreachable store fails first, once
    try:
        await _serve(address, namespace, task_queue, registry_spec, llm, conv_store,
                     max_concurrent_turns, sandboxed, graceful_shutdown_s)  # fmt: skip
    finally:
        await close_store(conv_store)


async def _serve(
    address: str,
    namespace: str,
    task_queue: str,
    registry_spec: str,
    llm: LlmConfig,
    conv_store: ConversationStore,
    max_concurrent_turns: int | None,
    sandboxed: bool,
    graceful_shutdown_s: float,
) -> None:
    registry = Registry.load(registry_spec)
    client = await connect(address, namespace)
    stop = asyncio.Event()
    loop = asyncio.get_running_loop()

    def on_signal() -> None:
        stop.set()
        for sig in (signal.SIGINT, signal.SIGTERM):
            loop.remove_signal_handler(sig)

    for sig in (signal.SIGINT, signal.SIGTERM):
        loop.add_signal_handler(sig, on_signal)
    async with create_worker(
        client,
        registry=registry,
        llm=llm,
        task_queue=task_queue,
        store=conv_store,
        max_concurrent_turns=max_concurrent_turns,
        sandboxed=sandboxed,
        graceful_shutdown_timeout=timedelta(seconds=graceful_shutdown_s),
    ) as worker:
        run = asyncio.create_task(worker.run())
        typer.echo(
            f"worker on {address} namespace={namespace} task_queue={task_queue} "
            f"agents={', '.join(registry.names())} llm={llm.base_url} model={llm.model} "
            f"store={conv_store!r}"
        )
        done, _ = await asyncio.wait(
            [run, asyncio.create_task(stop.wait())], return_when=asyncio.FIRST_COMPLETED
        )
        if run not in done:
            typer.echo(
                f"shutting down: activities in flight get up to {graceful_shutdown_s:g} s "
                "to finish (signal again to stop now)..."
            )
            await worker.shutdown()
        await run


app = typer.Typer(add_completion=False, help="Run a toolnexus-temporal worker.")


@app.command()
def run(
    registry: Annotated[
        str,
        typer.Option(
            help="Agent registry as package.module:NAME, e.g. toolnexus_temporal.cli.demo:REGISTRY"
        ),
    ],
    address: Annotated[
        str, typer.Option(envvar="TEMPORAL_ADDRESS", help="Temporal frontend host:port")
    ] = "127.0.0.1:7233",
    namespace: Annotated[str, typer.Option(envvar="TEMPORAL_NAMESPACE")] = "default",
    task_queue: Annotated[str, typer.Option(envvar="TNX_TASK_QUEUE")] = DEFAULT_TASK_QUEUE,
    llm_base_url: Annotated[
        str | None, typer.Option(envvar="OPENAI_BASE_URL", help="OpenAI-compatible base URL")
    ] = None,
    model: Annotated[
        str | None, typer.Option(envvar="TNX_MODEL", help="Model used for model='inherit'")
    ] = None,
    style: Annotated[
        str, typer.Option(envvar="TNX_LLM_STYLE", help="Wire style: openai or anthropic")
    ] = "openai",
    max_concurrent_turns: Annotated[
        int | None,
        typer.Option(envvar="TNX_MAX_CONCURRENT_TURNS", help="LLM calls in flight at once"),
    ] = None,
    store: Annotated[
        str,
        typer.Option(
            envvar=["TNX_STORE_URL", "TNX_STORE"],
            help="Conversation store: postgresql://user:pw@host:5432/db (many hosts), "
            "sqlite:///abs/path or a SQLite file path (one host)",
        ),
    ] = str(DEFAULT_STORE_PATH),
    sandbox: Annotated[
        bool,
        typer.Option(
            "--sandbox",
            envvar="TNX_SANDBOX",
            help="Run workflows in Temporal's sandbox (slower; see worker.workflow_runner)",
        ),
    ] = False,
    graceful_shutdown_s: Annotated[
        float,
        typer.Option(
            envvar="TNX_GRACEFUL_SHUTDOWN_S",
            min=0,
            help="Seconds activities in flight (LLM calls, tools) get to finish after "
            "SIGTERM/SIGINT before they are cancelled",
        ),
    ] = DEFAULT_GRACEFUL_SHUTDOWN_S,
) -> None:
    """Run the worker until SIGINT/SIGTERM."""
    try:
        Registry.load(registry)
    except RegistryError as err:
        raise typer.BadParameter(str(err), param_hint="--registry") from None
    if not llm_base_url:
        raise typer.BadParameter(
            "no LLM endpoint: pass --llm-base-url or set OPENAI_BASE_URL", param_hint="llm"
        )
    model = model or os.environ.get("OPENAI_MODEL")
    if not model:
        raise typer.BadParameter("no model: pass --model or set TNX_MODEL", param_hint="model")
    if style not in ("openai", "anthropic"):
        raise typer.BadParameter("style must be openai or anthropic", param_hint="style")
    llm = LlmConfig(base_url=llm_base_url, model=model, style=style)
    try:
        open_store(store)  # only checks the URL: nothing connects yet
    except StoreConfigError as err:
        raise typer.BadParameter(str(err), param_hint="--store") from None
    try:
        asyncio.run(
            serve(
                address=address,
                namespace=namespace,
                task_queue=task_queue,
                registry_spec=registry,
                llm=llm,
                store=store,
                max_concurrent_turns=max_concurrent_turns,
                sandboxed=sandbox,
                graceful_shutdown_s=graceful_shutdown_s,
            )
        )
    except (StoreUnavailableError, StoreError) as err:
        typer.echo(f"tnx-worker: {err}", err=True)
        raise typer.Exit(1) from None


def main() -> None:
    """Console entry point ``tnx-worker``."""
    app()


if __name__ == "__main__":
    main()
