"""``tnx-worker``: run the runtime's worker (:func:`toolnexus_temporal.worker.create_worker`)
as a process until SIGINT or SIGTERM.

Every setting is a flag with an environment variable: the Temporal connection as for ``tnx``
(flags, ``TEMPORAL_*`` variables, the config file's profile; README "Connecting to a
cluster"), the registry (``TNX_REGISTRY``), the LLM (``OPENAI_BASE_URL``, ``TNX_MODEL``), the
conversation store (``TNX_STORE_URL``), the payload codec (``TNX_CODEC_KEYS``) and Worker
Versioning (``TNX_DEPLOYMENT_NAME``, ``TNX_BUILD_ID``). A missing or bad setting is a usage
error (exit 2); a store or server that cannot be reached, or codec keys that cannot read the task
queue's payloads (:mod:`toolnexus_temporal.client.keycheck`), is one line (exit 1).
"""

from __future__ import annotations

import asyncio
import functools
import inspect
import os
import signal
import sys
from collections.abc import Callable
from datetime import timedelta
from pathlib import Path
from typing import Annotated, Any, NamedTuple

import typer
from temporalio.client import Client
from temporalio.common import WorkerDeploymentVersion
from temporalio.runtime import Runtime
from temporalio.service import RPCError
from temporalio.worker import Worker

from toolnexus_temporal.activities.llm import LlmConfig
from toolnexus_temporal.activities.registry import Registry
from toolnexus_temporal.activities.store import (
    ConversationStore,
    StoreError,
    StoreUnavailableError,
)
from toolnexus_temporal.activities.stores import close_store, open_checked, open_store
from toolnexus_temporal.cli.appstyle import APP_SETTINGS, version_callback
from toolnexus_temporal.cli.connection_opts import CONNECTION_OPTIONS, load_cluster
from toolnexus_temporal.cli.ops import connect_message, hard_exit
from toolnexus_temporal.cli.supervisor import CHILD_ENV, process_label, run_supervisor
from toolnexus_temporal.cli.usage import OneLineCommand
from toolnexus_temporal.cli.worker_settings import WorkerSettings, settings_from, settings_options
from toolnexus_temporal.client.cluster import ClusterConfig
from toolnexus_temporal.client.codec import AesGcmCodec
from toolnexus_temporal.client.errors import ClusterConfigError, ClusterConnectError
from toolnexus_temporal.client.keycheck import KeyMismatchError
from toolnexus_temporal.client.queries import quoted
from toolnexus_temporal.client.reachability import namespace_exists
from toolnexus_temporal.observability.prometheus import (
    DEFAULT_FLEET_INTERVAL_S,
    FleetGauges,
    MetricsEndpointError,
    metrics_address,
    metrics_runtime,
)
from toolnexus_temporal.observability.tracing import traces_exporter, tracing_wanted
from toolnexus_temporal.worker import DEFAULT_GRACEFUL_SHUTDOWN_S, create_worker, stale_keys


class WorkerStartError(Exception):
    """The worker could not start (no server at the address, an unknown namespace): one line
    for the operator, exit code 1 (:func:`run`)."""


async def serve(
    *,
    cluster: ClusterConfig,
    task_queue: str,
    registry_spec: str,
    llm: LlmConfig,
    store: str | Path,
    max_concurrent_turns: int | None = None,
    sandboxed: bool = False,
    codec: AesGcmCodec | None = None,
    deployment: WorkerDeploymentVersion | None = None,
    graceful_shutdown_s: float = DEFAULT_GRACEFUL_SHUTDOWN_S,
    metrics: MetricsOptions | None = None,
    tracing: bool | None = None,
    workspace_root: Path | None = None,
) -> None:
    """Run a worker until SIGINT or SIGTERM, then shut it down gracefully (its store closed):
    it stops taking tasks and lets the activities in flight finish for up to
    ``graceful_shutdown_s`` seconds before cancelling them. An LLM call cancelled there is
    asked again by another worker (the provider answers twice), so a restart waits for it; a
    second signal stops at once (the process dies with the signal's default action: like a
    crash, which the runtime survives).

    Args:
        cluster: the Temporal connection (address, namespace, TLS, API key).
        store: the conversation store's URL or SQLite path (see ``open_store``).
        codec: the payload codec (encryption at rest), None for plain payloads.
        deployment: Worker Versioning's deployment version, None for an unversioned worker.
        metrics: serve Prometheus metrics (:class:`MetricsOptions`: the process's SDK runtime
            binds the port; :mod:`~toolnexus_temporal.observability.prometheus`), None for none.
        tracing: OpenTelemetry traces: True/False, None from the ``OTEL_*`` environment
            (docs/guide/tracing.md).
        workspace_root: where the workspaces of workspace tools live (kept); None: a
            temporary root removed when the worker stops (``docs/guide/workspaces.md``).

    Raises:
        StoreConfigError: ``store`` is not a usable URL.
        StoreUnavailableError: the store's server cannot be reached.
        WorkerStartError: Temporal cannot be reached, or the namespace does not exist (one
            line: where, why); or the metrics port cannot be bound; or the worker stopped
            itself because its codec keys no longer read the task queue's payloads
            (:func:`~toolnexus_temporal.worker.stale_keys`).
        KeyMismatchError: the task queue's payloads are encrypted with a key this worker
            lacks (the key canary, :mod:`~toolnexus_temporal.client.keycheck`): it does not
            start.
    """
    conv_store = open_store(store)
    await open_checked(conv_store)  # an unreachable store fails first, once
    try:
        await _serve(cluster, task_queue, registry_spec, llm, conv_store,
                     max_concurrent_turns, sandboxed, codec, deployment,
                     graceful_shutdown_s, metrics, tracing, workspace_root)  # fmt: skip
    finally:
        await close_store(conv_store)


async def _serve(
    cluster: ClusterConfig,
    task_queue: str,
    registry_spec: str,
    llm: LlmConfig,
    conv_store: ConversationStore,
    max_concurrent_turns: int | None,
    sandboxed: bool,
    codec: AesGcmCodec | None,
    deployment: WorkerDeploymentVersion | None,
    graceful_shutdown_s: float,
    metrics: MetricsOptions | None,
    tracing: bool | None = None,
    workspace_root: Path | None = None,
) -> None:
    registry = Registry.load(registry_spec)
    client, runtime = await _connect(cluster, codec, metrics, tracing)
    stop = _stop_on_signals()
    try:
        async with create_worker(
            client,
            registry=registry,
            llm=llm,
            task_queue=task_queue,
            store=conv_store,
            max_concurrent_turns=max_concurrent_turns,
            sandboxed=sandboxed,
            deployment=deployment,
            graceful_shutdown_timeout=timedelta(seconds=graceful_shutdown_s),
            tracing=tracing,
            workspace_root=workspace_root,
        ) as worker:
            run = asyncio.create_task(worker.run())
            fleet = _start_fleet_gauges(client, task_queue, runtime, metrics)
            typer.echo(
                process_label() + f"worker on {cluster.describe()} task_queue={task_queue} "
                f"agents={', '.join(registry.names())} llm={llm.base_url} model={llm.model} "
                f"store={conv_store!r}" + _start_details(codec, deployment, tracing, metrics)
            )
            await _run_until_stopped(worker, run, stop, graceful_shutdown_s)
            if fleet is not None:
                fleet.cancel()
            await run
            stale = stale_keys(worker)
            if stale is not None:
                raise WorkerStartError(f"stopped: {stale}")
    except RPCError as err:  # the key canary could not be read or written
        raise WorkerStartError(
            f"cannot start a worker at {cluster.describe()}: Temporal answered "
            f"{err.status.name}: {err.message}"
        ) from err


async def _connect(
    cluster: ClusterConfig,
    codec: AesGcmCodec | None,
    metrics: MetricsOptions | None,
    tracing: bool | None,
) -> tuple[Client, Runtime | None]:
    """The worker's client (on the metrics runtime when metrics are served) and that runtime.

    Raises:
        WorkerStartError: the metrics port cannot be bound, Temporal cannot be reached, or
            the namespace does not exist.
    """
    runtime = None
    if metrics is not None:
        try:
            runtime = metrics_runtime(metrics.host, metrics.port)
        except MetricsEndpointError as err:
            raise WorkerStartError(str(err)) from err
    try:
        client = await cluster.connect(codec=codec, runtime=runtime, tracing=tracing)
    except ClusterConnectError as err:
        raise WorkerStartError(connect_message(err.target, err.reason)) from err
    if not await namespace_exists(client):
        raise WorkerStartError(
            f"cannot start a worker at {cluster.describe()}: "
            f"namespace {client.namespace!r} does not exist there"
        )
    return client, runtime


def _stop_on_signals() -> asyncio.Event:
    """An event set by the first SIGINT or SIGTERM; a second one gets its default action (the
    process stops at once)."""
    stop = asyncio.Event()
    loop = asyncio.get_running_loop()

    def on_signal() -> None:
        stop.set()
        for sig in (signal.SIGINT, signal.SIGTERM):
            loop.remove_signal_handler(sig)  # a second signal: its default action, at once

    for sig in (signal.SIGINT, signal.SIGTERM):
        loop.add_signal_handler(sig, on_signal)
    return stop


def _start_details(
    codec: AesGcmCodec | None,
    deployment: WorkerDeploymentVersion | None,
    tracing: bool | None,
    metrics: MetricsOptions | None,
) -> str:
    """The optional part of the start line: codec key, version, tracing, metrics URL."""
    return (
        (f" codec=aes-256-gcm key={codec.current_key_id}" if codec else "")
        + (f" version={deployment.to_canonical_string()}" if deployment else "")
        + (f" tracing={traces_exporter()}" if tracing_wanted(tracing) else "")
        + (
            f" metrics=http://{metrics_address(metrics.host, metrics.port)}/metrics"
            if metrics
            else ""
        )
    )


async def _run_until_stopped(
    worker: Worker, run: asyncio.Task[None], stop: asyncio.Event, graceful_shutdown_s: float
) -> None:
    """Wait for the worker's ``run`` to end or ``stop`` to be set; on ``stop``, shut the
    worker down gracefully (the activities in flight get ``graceful_shutdown_s``)."""
    done, _ = await asyncio.wait(
        [run, asyncio.create_task(stop.wait())], return_when=asyncio.FIRST_COMPLETED
    )
    if run not in done:
        typer.echo(
            f"shutting down: activities in flight get up to {graceful_shutdown_s:g} s "
            "to finish (signal again to stop now)..."
        )
        await worker.shutdown()


class MetricsOptions(NamedTuple):
    """The Prometheus endpoint of ``tnx-worker`` (``--metrics-port``; docs/guide/metrics.md).
    A named tuple, not a dataclass: ``typer MODULE utils docs`` (the CLI reference page) loads
    this module outside ``sys.modules``, where a dataclass cannot be made (the page's
    ``tnx-worker`` section was empty).

    Attributes:
        port: the TCP port of ``/metrics``.
        host: the address it binds (``0.0.0.0``: every interface).
        fleet_interval_s: seconds between the fleet gauges' visibility reads (0: no fleet
            gauges from this worker).
    """

    port: int
    host: str = "0.0.0.0"
    fleet_interval_s: float = DEFAULT_FLEET_INTERVAL_S


def _start_fleet_gauges(
    client: Client, task_queue: str, runtime: Runtime | None, metrics: MetricsOptions | None
) -> asyncio.Task[None] | None:
    """The fleet gauges' loop (:class:`~toolnexus_temporal.observability.prometheus.FleetGauges`) on
    the metrics runtime's meter, or None without metrics or with ``fleet_interval_s`` 0."""
    if runtime is None or metrics is None or metrics.fleet_interval_s <= 0:
        return None
    gauges = FleetGauges(
        client, task_queue, runtime.metric_meter, metrics.fleet_interval_s, quote=quoted
    )
    return asyncio.create_task(gauges.run())


app = typer.Typer(help="Run a toolnexus-temporal worker.", **APP_SETTINGS)

WorkerVersion = Annotated[
    bool,
    typer.Option(
        "--version",
        is_eager=True,
        callback=version_callback("tnx-worker"),
        help="Print the version and exit.",
    ),
]


def _process_metrics(port: int | None, host: str, fleet_interval_s: float) -> MetricsOptions | None:
    """The metrics options of this process. Under ``--processes N`` (docs/guide/scale.md)
    child ``i`` of ``N`` serves on ``port + i - 1`` (one port cannot be bound twice), and only
    child 1 reads the fleet gauges (every child would report the same values)."""
    if port is None:
        return None
    index = int(os.environ.get(CHILD_ENV, "1/1").split("/")[0])
    return MetricsOptions(port + index - 1, host, fleet_interval_s if index == 1 else 0)


def _with_connection_options(func: Callable[..., None]) -> Callable[..., None]:
    """Give the command ``func(cluster, **own)`` the connection flags of ``tnx``
    (:mod:`toolnexus_temporal.cli.connection_opts`); a bad setting is one line, exit 2."""
    own = [
        p for p in inspect.signature(func, eval_str=True).parameters.values() if p.name != "cluster"
    ]

    @functools.wraps(func)
    def command(**kwargs: Any) -> None:
        try:
            cluster = load_cluster(kwargs)
        except ClusterConfigError as err:
            typer.echo(f"error: {err}", err=True)
            raise typer.Exit(2) from None
        func(cluster, **kwargs)

    params = [*own, *CONNECTION_OPTIONS]
    setattr(command, "__signature__", inspect.Signature(params))  # noqa: B010
    command.__annotations__ = {p.name: p.annotation for p in params}
    return command


def _with_settings(func: Callable[..., None]) -> Callable[..., None]:
    """Give the command ``func(cluster, settings, **own)`` the options of
    :class:`~toolnexus_temporal.cli.worker_settings.WorkerSettings`; an option that does not
    check out is a usage error naming it (exit 2)."""
    own = [
        p.replace(kind=inspect.Parameter.KEYWORD_ONLY)
        for p in inspect.signature(func, eval_str=True).parameters.values()
        if p.name not in ("cluster", "settings")
    ]

    @functools.wraps(func)
    def command(cluster: ClusterConfig, **kwargs: Any) -> None:
        func(cluster, settings_from(kwargs), **kwargs)

    params = [*settings_options(), *own]
    setattr(command, "__signature__", inspect.Signature(params))  # noqa: B010
    command.__annotations__ = {p.name: p.annotation for p in params}
    return command


@app.command(cls=OneLineCommand)
@_with_connection_options
@_with_settings
def run(cluster: ClusterConfig, settings: WorkerSettings, version: WorkerVersion = False) -> None:
    """Run the worker until SIGINT/SIGTERM. The Temporal connection comes from the flags,
    the TEMPORAL_* variables and the config file's profile, as for tnx (docs/guide/production.md,
    "Connecting to a cluster")."""
    count = settings.process_count
    if count > 1:  # every flag is checked: the children run this command with --processes 1
        raise typer.Exit(run_supervisor(sys.argv[1:], count))
    metrics = _process_metrics(
        settings.metrics_port, settings.metrics_host, settings.fleet_metrics_interval_s
    )
    try:
        asyncio.run(
            serve(
                cluster=cluster,
                task_queue=settings.task_queue,
                registry_spec=settings.registry,
                llm=settings.llm,
                store=settings.store,
                max_concurrent_turns=settings.max_concurrent_turns,
                sandboxed=settings.sandbox,
                codec=settings.codec,
                deployment=settings.deployment,
                graceful_shutdown_s=settings.graceful_shutdown_s,
                metrics=metrics,
                tracing=settings.otel,
                workspace_root=settings.workspace_root,
            )
        )
    except (StoreUnavailableError, StoreError, WorkerStartError, KeyMismatchError) as err:
        typer.echo(f"tnx-worker: {process_label()}{err}", err=True)
        raise typer.Exit(1) from None


def main() -> None:
    """Console entry point ``tnx-worker``.

    The process ends without interpreter finalization: a thread of the SDK's Rust core (a
    failed client's, say) can abort it with SIGABRT (temporalio/sdk-python#300; see
    :func:`~toolnexus_temporal.cli.ops.hard_exit`). The worker and its store are closed by
    then.
    """
    try:
        app()
    except SystemExit as done:
        code = done.code
        if code is not None and not isinstance(code, int):
            print(code, file=sys.stderr)
        hard_exit(1 if code is not None and not isinstance(code, int) else (code or 0))
