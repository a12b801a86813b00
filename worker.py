"""Worker wiring: the agent workflow plus its activities on one task queue
(:func:`create_worker`), the replayer over the same code (:func:`replayer`) and Worker
Versioning (:func:`deployment_config`).

As a program it is ``tnx-worker`` (:mod:`toolnexus_temporal.cli.worker_cmd`):

    tnx-worker --registry toolnexus_temporal.cli.demo:REGISTRY --task-queue tnx \\
        --llm-base-url http://127.0.0.1:8080/v1 --model my-model

SIGINT/SIGTERM shut it down gracefully: it stops taking tasks and lets the activities in
flight (LLM calls, tools) finish for up to ``--graceful-shutdown-s`` seconds (default 30)
before they get their cancellation; workflow state is already durable. A second signal stops
it at once.
"""

from __future__ import annotations

import asyncio
import contextlib
import os
import weakref
from collections.abc import AsyncIterator, Sequence
from datetime import timedelta
from pathlib import Path
from typing import Any

import httpx
from temporalio.client import Client
from temporalio.common import VersioningBehavior, WorkerDeploymentVersion
from temporalio.converter import DataConverter, PayloadCodec
from temporalio.runtime import Runtime
from temporalio.worker import (
    Interceptor,
    Replayer,
    UnsandboxedWorkflowRunner,
    Worker,
    WorkerDeploymentConfig,
    WorkflowRunner,
)
from temporalio.worker.workflow_sandbox import SandboxedWorkflowRunner, SandboxRestrictions

from toolnexus_temporal.activities.fork import ForkActivities
from toolnexus_temporal.activities.llm import LlmActivities, LlmConfig
from toolnexus_temporal.activities.mcp import McpPool
from toolnexus_temporal.activities.principal import PrincipalActivities
from toolnexus_temporal.activities.registry import Registry, RegistryActivities
from toolnexus_temporal.activities.store import (
    ConversationStore,
)
from toolnexus_temporal.activities.stores import close_store, open_checked, open_store
from toolnexus_temporal.activities.tools import ToolActivities
from toolnexus_temporal.activities.watch import WatchActivities
from toolnexus_temporal.activities.workspace import WorkspaceHost, WorkspacePlugin
from toolnexus_temporal.client.keycheck import (
    KeyMismatchError,
    KeyWatch,
    check_worker_keys,
    worker_converter,
)
from toolnexus_temporal.observability.activity import ActivityObserver
from toolnexus_temporal.observability.tracing import tracing_wanted
from toolnexus_temporal.workflows.agent import AgentWorkflow

WORKFLOWS: tuple[type, ...] = (AgentWorkflow,)
"""The workflow classes every worker registers (and :func:`replayer` replays)."""

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
    # croniter (contract/cron.py): pure given a numeric start time; with dateutil, which it
    # imports, re-imported per run it would only cost time.
    "croniter",
    "dateutil",
    # OpenTelemetry (only imported when tracing is on): the contrib's workflow interceptor
    # uses its context API inside workflows; its own OpenTelemetryPlugin passes it through.
    "opentelemetry",
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


def replayer(
    data_converter: DataConverter,
    *,
    sandboxed: bool = False,
    workflows: tuple[type, ...] = (),
    runtime: Runtime | None = None,
    interceptors: Sequence[Interceptor] = (),
) -> Replayer:
    """A Replayer with what a worker registers: :data:`WORKFLOWS` (read at call time), the
    client's ``data_converter`` (so a payload codec decodes the histories as it does for the
    worker) and the worker's :func:`workflow_runner`.

    Args:
        data_converter: the converter of the client the histories come from.
        sandboxed: replay inside Temporal's sandbox (stricter, slower).
        workflows: replay these classes instead (tests: a deliberately changed variant).
        runtime: the SDK core runtime to replay on (default: the process's).
        interceptors: worker interceptors to replay with (tests: the tracing interceptor,
            which must add no span on replay).
    """
    return Replayer(
        workflows=list(workflows or WORKFLOWS),
        data_converter=data_converter,
        workflow_runner=workflow_runner(sandboxed=sandboxed),
        runtime=runtime,
        interceptors=list(interceptors),
    )


def deployment_config(version: WorkerDeploymentVersion) -> WorkerDeploymentConfig:
    """Worker Versioning for a worker of deployment ``version``: it polls as that version,
    and the agent workflows it runs are AUTO_UPGRADE: a running agent moves to the
    deployment's current version at its next workflow task (README "Worker Versioning":
    agents live for days; code changes stay behind ``patched``/protocol gates, checked by
    ``tnx replay-check`` before the deploy).

    The behaviour is the worker's default, not ``@workflow.defn(versioning_behavior=...)``:
    a behaviour on the definition is sent with every workflow task completion, and Temporal
    (1.32) rejects it from an unversioned worker ("versioning behavior cannot be specified
    without deployment options"), which would stop every agent on an unversioned worker.
    """
    return WorkerDeploymentConfig(
        version=version,
        use_worker_versioning=True,
        default_versioning_behavior=VersioningBehavior.AUTO_UPGRADE,
    )


def parse_deployment(name: str | None, build_id: str | None) -> WorkerDeploymentVersion | None:
    """``--deployment-name`` and ``--build-id`` as a version: both or neither.

    Raises:
        ValueError: only one of them, or one that is blank or contains a ``.`` in the name
            (the canonical form ``{name}.{build_id}`` splits at the first dot).
    """
    name, build_id = (name or "").strip(), (build_id or "").strip()
    if not name and not build_id:
        return None
    if not name or not build_id:
        missing = "--deployment-name (TNX_DEPLOYMENT_NAME)" if not name else "--build-id"
        raise ValueError(
            f"Worker Versioning needs both a deployment name and a build id: {missing} is missing"
        )
    if "." in name:
        raise ValueError(f"deployment name {name!r} must not contain '.'")
    return WorkerDeploymentVersion(deployment_name=name, build_id=build_id)


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
    codec: PayloadCodec | None = None,
    deployment: WorkerDeploymentVersion | None = None,
    check_keys: bool = True,
    tracing: bool | None = None,
    workspace_root: str | Path | None = None,
    **worker_options: Any,
) -> AsyncIterator[Worker]:
    """Build the runtime's Temporal worker on ``task_queue`` (the agent workflow, LLM calls,
    tools, interpreters, hooks and registry look-ups) and close the HTTP client and the MCP
    sessions (``activities/mcp.py``) afterwards.

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
        codec: a payload codec (encryption at rest, :mod:`~toolnexus_temporal.client.codec`):
            the worker then uses ``client``'s connection with the pydantic converter plus this
            codec in place of ``client``'s converter (None: ``client`` as given; a client from
            ``connect(..., codec=...)`` already has it).
        deployment: opt into Worker Versioning as this deployment version (deployment name
            and build id; :func:`deployment_config`). None: an unversioned worker.
        check_keys: check the worker's codec keys against the task queue's key canary before
            the worker exists (:mod:`~toolnexus_temporal.client.keycheck`: created by the
            first worker with a codec, re-written by one whose current key is newer). Either
            way a worker whose codec stops decoding its payloads reads the canary again and
            stops polling (``Worker.shutdown``) if its keys cannot read it
            (:func:`stale_keys` then says why). False only for tests of that run-time guard.
        tracing: OpenTelemetry traces (docs/guide/tracing.md): True on, False off, None
            (default) on only when the ``OTEL_*`` environment names an exporter
            (:func:`~toolnexus_temporal.observability.tracing.tracing_wanted`). On, the worker
            gets the tracing interceptor unless ``client`` already has it (``connect(...,
            tracing=True)``); off, no interceptor is added.
        workspace_root: where the handles' workspaces live when the registry has workspace
            tools (``define_tool(workspace=True)``; ``docs/guide/workspaces.md``): the
            worker then also polls a task queue of its own while it runs. Kept when the
            worker stops; None: a temporary root, removed when the worker stops.
        **worker_options: passed to ``temporalio.worker.Worker`` (default
            ``max_concurrent_activities``: the LLM cap plus ``DEFAULT_ACTIVITY_SLOTS``).

    Raises:
        RegistryError: the registry is not usable.
        ImportError: agents list MCP servers and the ``mcp`` package is missing
            (``pip install 'toolnexus-temporal[mcp]'``; docs/guide/mcp.md).
        ValueError: ``max_concurrent_turns`` below 1.
        StoreConfigError: ``store`` is a URL of an unknown scheme (or its driver is missing).
        StoreUnavailableError: the store's server cannot be reached.
        StoreError: the store refuses to open (a schema newer than this code).
        KeyMismatchError: the task queue's payloads are encrypted with a key this worker does
            not have (or it has no codec): it would fail every task it took.
        RPCError: the key canary could not be read or written (the server refused).
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
    if deployment is not None:
        worker_options["deployment_config"] = deployment_config(deployment)
    worker_options["interceptors"] = [
        *worker_options.get("interceptors", ()),
        *_tracing_interceptors(client, tracing),
    ]
    worker_options.setdefault("identity", worker_identity(client.identity))
    effective = codec if codec is not None else client.data_converter.payload_codec
    if check_keys:
        await check_worker_keys(client, task_queue, effective)
    watch = KeyWatch(client, task_queue, effective)
    config = client.config()
    config["data_converter"] = worker_converter(client.data_converter, effective, watch)
    await open_checked(conv_store)
    try:
        async with _worker(
            Client(**config), reg, llm, task_queue, conv_store, transport,
            max_concurrent_turns, sandboxed, worker_options,
            None if workspace_root is None else Path(workspace_root),
        ) as worker:  # fmt: skip
            _WATCHES[worker] = watch
            watching = asyncio.create_task(watch.run(worker.shutdown))
            try:
                yield worker
            finally:
                watching.cancel()
                with contextlib.suppress(asyncio.CancelledError):
                    await watching
    finally:
        if owned:
            await close_store(conv_store)


def _tracing_interceptors(client: Client, tracing: bool | None) -> list[Interceptor]:
    """The tracing interceptor the worker adds (:mod:`~toolnexus_temporal.observability.otel`,
    imported only then): one when tracing is wanted and ``client`` has none already."""
    if not tracing_wanted(tracing):
        return []
    from toolnexus_temporal.observability.otel import TnxTracingInterceptor, tracing_interceptor

    if any(isinstance(i, TnxTracingInterceptor) for i in client.config()["interceptors"]):
        return []
    return [tracing_interceptor()]


def worker_identity(client_identity: str) -> str:
    """This process's worker identity: the client's, with ``pid N`` unless it names this
    process already (the SDK's default ``pid@host`` does).

    Temporal records a worker's identity on the task events it starts and lists its pollers
    and heartbeats by it; the runtime's clients all send ``{user}@{host} (tnx)``
    (:func:`~toolnexus_temporal.client.cluster.default_identity`), so without the pid the
    processes of one host (``tnx-worker --processes N``) would be one worker to the server:
    one's last heartbeat (shutting down) would mark the others' pollers stopped too
    (:mod:`~toolnexus_temporal.client.reachability`)."""
    pid = str(os.getpid())
    return client_identity if pid in client_identity else f"{client_identity} pid {pid}"


_WATCHES: weakref.WeakKeyDictionary[Worker, KeyWatch] = weakref.WeakKeyDictionary()


def stale_keys(worker: Worker) -> KeyMismatchError | None:
    """Why ``worker`` (from :func:`create_worker`) stopped itself: its codec keys no longer
    read its task queue's payloads (the key canary); None while they do."""
    watch = _WATCHES.get(worker)
    return watch.stale if watch is not None else None


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
    workspace_root: Path | None = None,
) -> AsyncIterator[Worker]:
    registry_activities = RegistryActivities(reg)
    mcp_pool = McpPool(reg.mcp_servers)  # sessions start on first use, end with the worker
    tool_activities = ToolActivities(reg.tools, reg.interpreters, secrets=llm.secrets, mcp=mcp_pool)
    cap = max_concurrent_turns or DEFAULT_MAX_CONCURRENT_TURNS
    llm_activities = LlmActivities(
        llm,
        conv_store,
        transport=transport,
        tool_schemas=registry_activities.tool_schemas,
        max_concurrent=cap,
        mcp_schemas=mcp_pool.schemas,
    )
    options = {**WORKER_DEFAULTS, **worker_options}
    # Last: inside the tracing interceptor, whose RunActivity span its spans are children of.
    observer = ActivityObserver(tool_known=tool_activities.knows, llm_target=llm_activities.target)
    options["interceptors"] = [*options.get("interceptors", ()), observer]
    extra: list[Any] = []
    if any(tool.options.workspace for tool in reg.tools.values()):  # activities/workspace.py
        host = WorkspaceHost(task_queue, tool_activities, workspace_root)
        extra.append(host.claim)
        options["plugins"] = [*options.get("plugins", ()), WorkspacePlugin(host)]
    try:
        yield Worker(
            client,
            task_queue=task_queue,
            workflows=list(WORKFLOWS),
            activities=[
                registry_activities.resolve_agent,
                registry_activities.run_hook,
                tool_activities.tool_call,
                tool_activities.interpret,
                tool_activities.check_edit,
                llm_activities.llm_call,
                llm_activities.llm_summarize,
                ForkActivities(conv_store).fork_transcript,
                WatchActivities(client).watch_children,
                PrincipalActivities(client).answer_principal,
                *extra,
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
        await mcp_pool.aclose()


def main() -> None:
    """Console entry point ``tnx-worker`` (:mod:`toolnexus_temporal.cli.worker_cmd`)."""
    from toolnexus_temporal.cli.worker_cmd import main as run_main

    run_main()


if __name__ == "__main__":
    main()
