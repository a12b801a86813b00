"""Worker wiring: the agent workflow plus its activities on one task queue.

As a program (``tnx-worker`` or ``python worker.py``)::

    tnx-worker --registry toolnexus_temporal.cli.demo:REGISTRY --task-queue tnx \\
        --llm-base-url http://127.0.0.1:8080/v1 --model my-model

The LLM endpoint comes from the options or the environment (``OPENAI_BASE_URL``,
``OPENAI_API_KEY``, ``TNX_MODEL``); the Temporal address from ``--address`` or
``TEMPORAL_ADDRESS``. SIGINT/SIGTERM shut the worker down cleanly (in-flight activities get
their cancellation, workflow state is already durable).
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
from toolnexus_temporal.activities.store import ConversationStore, SqliteConversationStore
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
    # Heartbeats reach the server at most this often. A cancel (interrupt) is delivered on a
    # heartbeat (activities beat every second: an interrupted LLM call stops within ~1 s,
    # CONTRACT §3), and an LLM call's live text rides on them (issue 14, item 4): at 0.5 s a
    # host sees streamed text within ~0.7 s (bench/live.py: 1 s gave up to ~1.5 s), for at
    # most two heartbeats a second while a model streams.
    "max_heartbeat_throttle_interval": timedelta(milliseconds=500),
    "default_heartbeat_throttle_interval": timedelta(milliseconds=500),
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
    store: ConversationStore | None = None,
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
        store: the conversation store (default: SQLite at ``.tnx/conversations.sqlite``).
        transport: an httpx transport for the LLM client (tests: ``httpx.MockTransport``).
        max_concurrent_turns: LLM HTTP calls in flight at once in this process (None: 100).
        sandboxed: run the workflow inside Temporal's sandbox (see :func:`workflow_runner`;
            default False: faster, determinism checked statically and by replay in CI).
        **worker_options: passed to ``temporalio.worker.Worker`` (default
            ``max_concurrent_activities``: the LLM cap plus ``DEFAULT_ACTIVITY_SLOTS``).

    Raises:
        RegistryError: the registry is not usable.
        ValueError: ``max_concurrent_turns`` below 1.
    """
    if max_concurrent_turns is not None and max_concurrent_turns < 1:
        raise ValueError(f"max_concurrent_turns must be at least 1, got {max_concurrent_turns}")
    reg = Registry.coerce(registry)
    registry_activities = RegistryActivities(reg)
    tool_activities = ToolActivities(reg.tools, reg.interpreters, secrets=llm.secrets)
    cap = max_concurrent_turns or DEFAULT_MAX_CONCURRENT_TURNS
    llm_activities = LlmActivities(
        llm,
        store or SqliteConversationStore(DEFAULT_STORE_PATH),
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
    store_path: Path,
    max_concurrent_turns: int | None = None,
    sandboxed: bool = False,
) -> None:
    """Run a worker until SIGINT or SIGTERM, then shut it down cleanly."""
    registry = Registry.load(registry_spec)
    client = await connect(address, namespace)
    stop = asyncio.Event()
    loop = asyncio.get_running_loop()
    for sig in (signal.SIGINT, signal.SIGTERM):
        loop.add_signal_handler(sig, stop.set)
    async with create_worker(
        client,
        registry=registry,
        llm=llm,
        task_queue=task_queue,
        store=SqliteConversationStore(store_path),
        max_concurrent_turns=max_concurrent_turns,
        sandboxed=sandboxed,
    ) as worker:
        run = asyncio.create_task(worker.run())
        typer.echo(
            f"worker on {address} namespace={namespace} task_queue={task_queue} "
            f"agents={', '.join(registry.names())} llm={llm.base_url} model={llm.model}"
        )
        done, _ = await asyncio.wait(
            [run, asyncio.create_task(stop.wait())], return_when=asyncio.FIRST_COMPLETED
        )
        if run not in done:
            typer.echo("shutting down...")
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
        Path, typer.Option(envvar="TNX_STORE", help="SQLite conversation store file")
    ] = DEFAULT_STORE_PATH,
    sandbox: Annotated[
        bool,
        typer.Option(
            "--sandbox",
            envvar="TNX_SANDBOX",
            help="Run workflows in Temporal's sandbox (slower; see worker.workflow_runner)",
        ),
    ] = False,
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
    asyncio.run(
        serve(
            address=address,
            namespace=namespace,
            task_queue=task_queue,
            registry_spec=registry,
            llm=llm,
            store_path=store,
            max_concurrent_turns=max_concurrent_turns,
            sandboxed=sandbox,
        )
    )


def main() -> None:
    """Console entry point ``tnx-worker``."""
    app()


if __name__ == "__main__":
    main()
