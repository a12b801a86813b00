"""The logic behind the host verbs of the ``tnx`` CLI: connect, attach an :class:`AgentRuntime`,
run one verb, and turn every expected failure into a :class:`CliError` (one readable line and
an exit code). How results look is :mod:`toolnexus_temporal.cli.render`.

Nothing here re-implements the runtime: each command is one ``AgentRuntime`` call (plus the
attach). Exit codes:

* 0: the verb succeeded (``wait``: the result is ``done`` or ``pending``);
* 1: the verb answered "no": unknown handle, rejected verb, refused spawn, rejected post,
  a ``wait`` result other than ``done``/``pending``, no runtime root to attach to;
* 2: the environment failed: cannot connect, unknown namespace, Temporal errors, no answer
  in time (no worker serving the task queue), bad option values.
"""

from __future__ import annotations

import asyncio
import contextlib
import logging
import os
import re
import sys
from collections.abc import Awaitable, Callable
from typing import Final, Literal, NoReturn, TypeVar

from temporalio.api.workflowservice.v1 import DescribeNamespaceRequest
from temporalio.client import Client, WorkflowUpdateRPCTimeoutOrCancelledError
from temporalio.service import RPCError, RPCStatusCode

from toolnexus_temporal.cli.options import DEFAULT_ADDRESS as DEFAULT_ADDRESS
from toolnexus_temporal.cli.options import DEFAULT_NAMESPACE as DEFAULT_NAMESPACE
from toolnexus_temporal.cli.options import DEFAULT_STORE as DEFAULT_STORE
from toolnexus_temporal.cli.options import DEFAULT_TASK_QUEUE as DEFAULT_TASK_QUEUE
from toolnexus_temporal.cli.options import EXIT_ENV as EXIT_ENV
from toolnexus_temporal.cli.options import EXIT_NO as EXIT_NO
from toolnexus_temporal.cli.options import CliError as CliError
from toolnexus_temporal.cli.options import Options as Options
from toolnexus_temporal.cli.render import one_line, scoped_ids, truncate
from toolnexus_temporal.cli.workercheck import (
    no_root_line,
    no_worker_line,
    root_task_queue,
    worker_polls,
)
from toolnexus_temporal.client.cluster import ClusterConfig, connect
from toolnexus_temporal.client.codec import CodecError, codec_from_env
from toolnexus_temporal.client.errors import (
    ClusterConfigError,
    ClusterConnectError,
    HandleNotFoundError,
    NoWorkerError,
    TnxError,
)
from toolnexus_temporal.client.queries import check_scope, check_task_queue
from toolnexus_temporal.client.reachability import workflow_pollers
from toolnexus_temporal.client.reads import TranscriptReader
from toolnexus_temporal.client.runtime import AgentRuntime
from toolnexus_temporal.workflows.contract.names import ROOT_ID

T = TypeVar("T")

CONNECT_TIMEOUT_S: Final = 10.0
"""Seconds allowed for connecting to Temporal."""

VERB_TIMEOUT_S: Final = 60.0
"""Seconds a verb may take before the CLI gives up (no worker serves the task queue, most
likely). ``wait`` adds its own ``--timeout-ms`` and has no limit without one."""

WorkerNeed = Literal["required", "optional"]
"""Whether a verb needs a worker polling the task queue (see :func:`run`)."""


# ---------------------------------------------------------------------------- running verbs


_client_used = False


def client_used() -> bool:
    """True once :func:`run` has connected a Temporal client in this process."""
    return _client_used


def hard_exit(code: int) -> None:
    """Flush stdout and stderr, then end the process at once with ``code``.

    After a Temporal client was used, interpreter finalization can abort the process
    (``Fatal Python error: PyGILState_Release`` and SIGABRT) when a thread of the SDK's Rust
    core touches Python objects while the interpreter is being torn down
    (temporalio/sdk-python#300). A CLI command has nothing left to clean up at that point,
    so it skips finalization. Spans that tracing still holds are exported first, for up to
    ``observability.otel.FLUSH_AT_EXIT_S`` (that module is imported only when tracing is on).
    """
    otel = sys.modules.get("toolnexus_temporal.observability.otel")
    if otel is not None:
        otel.flush_tracing()
    for stream in (sys.stdout, sys.stderr):
        with contextlib.suppress(Exception):
            stream.flush()
    os._exit(code)


def run(
    opts: Options,
    verb: Callable[[AgentRuntime], Awaitable[T]],
    *,
    create: bool = False,
    store: TranscriptReader | None = None,
    timeout_s: float | None = VERB_TIMEOUT_S,
    worker: WorkerNeed = "required",
) -> T:
    """Connect, attach the runtime, run ``verb`` on it and return its result.

    Args:
        opts: the common options.
        verb: one AgentRuntime call.
        create: start the root workflow when it does not exist (``spawn``); otherwise only
            attach (``AgentRuntime.start(create=False)``) and fail when there is no root.
        store: the conversation store to give the runtime (``inspect --transcript``).
        timeout_s: give up after this many seconds (None: never).
        worker: ``"required"``: first check that a worker polls the root's task queue and
            fail at once with a hint when none does (:mod:`.workercheck`), then attach;
            ``"optional"``: neither check nor attach (``pending``, ``answer``: the verb asks
            :func:`~toolnexus_temporal.client.reachability.workflow_pollers` itself).

    Raises:
        CliError: every expected failure, as one readable line and an exit code.
    """
    logger = logging.getLogger("temporalio")
    before = logger.level
    logger.setLevel(logging.ERROR)  # the SDK's warnings are not for CLI users
    try:
        return asyncio.run(
            _run(opts, verb, create=create, store=store, timeout_s=timeout_s, worker=worker)
        )
    finally:
        logger.setLevel(before)


async def _run(
    opts: Options,
    verb: Callable[[AgentRuntime], Awaitable[T]],
    *,
    create: bool,
    store: TranscriptReader | None,
    timeout_s: float | None,
    worker: WorkerNeed,
) -> T:
    """:func:`run`'s coroutine: connect, attach to the root (its task queue), check for a
    worker when ``worker`` is required, run ``verb``, and turn every expected failure into a
    :class:`CliError` (a client error's ids as ``tnx`` prints them, with the scope:
    :func:`~.render.scoped_ids`, so they paste back; issue 37 item 1)."""
    check_query_options(opts)
    client = await connect_client(opts)
    rt = AgentRuntime(client, task_queue=opts.task_queue, scope=opts.scope, store=store)

    async def no_root() -> CliError:
        return CliError(await no_root_line(client, opts.scope, opts.where()))

    async def attach_and_run() -> T:
        nonlocal rt
        queue = await root_task_queue(client, opts.scope)
        if queue is None and not create:
            await _check_namespace(rt, opts)
            raise await no_root()
        if queue is not None and queue != rt.task_queue:  # the tree runs where its root does
            rt = AgentRuntime(client, task_queue=queue, scope=opts.scope, store=store)
        if worker == "optional":
            return await verb(rt)
        await worker_polls(client, rt.task_queue, opts.address)
        try:
            await rt.start(create=create)
        except HandleNotFoundError as err:
            await _check_namespace(rt, opts)
            raise await no_root() from err
        return await verb(rt)

    try:
        return await asyncio.wait_for(attach_and_run(), timeout=timeout_s)
    except CliError:
        raise
    except Exception as err:
        task = asyncio.current_task()
        if task is not None and task.cancelling():  # Ctrl-C: the SDK turned it into its error
            raise asyncio.CancelledError from err  # asyncio.run: KeyboardInterrupt, "interrupted"
        await _failed(err, opts, rt, timeout_s)
        raise  # not reached: _failed always raises


def not_found_hint(handle_id: str, shown: Callable[[str], str]) -> str:
    """What to type instead of ``handle_id``, an id no workflow has (walk 6): a Request id
    (``root/ops.1#3``, the REQUEST column) names its handle before the ``#``; a handle id
    always starts with ``root`` (``coordinator.1`` is ``root/coordinator.1``). Empty: no
    better guess."""
    if "#" in handle_id:
        owner = handle_id.rpartition("#")[0]
        return f"; {shown(handle_id)} is a Request id: its agent is {shown(owner)}"
    if not re.fullmatch(r"[A-Za-z0-9_./-]+", handle_id):  # no guess for 'bad id!!' (walk 9)
        return ""
    if handle_id != ROOT_ID and not handle_id.startswith(f"{ROOT_ID}/"):
        return f"; a handle id starts with {ROOT_ID!r}: {shown(f'{ROOT_ID}/{handle_id}')}?"
    return ""


async def _failed(
    err: Exception, opts: Options, rt: AgentRuntime, timeout_s: float | None
) -> NoReturn:
    """Raise the :class:`CliError` of a verb's failure ``err`` (``err`` itself when it is
    not one :func:`run` expects)."""
    try:
        raise err
    except CodecError as err:
        raise CliError(f"cannot read the agent's payloads: {err}", EXIT_ENV) from err
    except KeyError as err:
        if "binary/encrypted" not in str(err):
            raise
        raise CliError(
            "the agents' payloads are encrypted (payload codec): set TNX_CODEC_KEYS or "
            "TNX_CODEC_KEY_FILE to the workers' keys",
            EXIT_ENV,
        ) from err
    except TimeoutError as err:
        raise CliError(
            f"no answer in {timeout_s:g}s from the agent workflows in {opts.where()}: "
            f"is a worker serving task queue {rt.task_queue!r}?",
            EXIT_ENV,
        ) from err
    except HandleNotFoundError as err:
        await _check_namespace(rt, opts)
        hint = not_found_hint(err.handle_id, opts.shown)
        raise CliError(f"{scoped_ids(str(err), opts.shown)} ({opts.where()}){hint}") from err
    except NoWorkerError as err:
        raise CliError(no_worker_note(err, opts), EXIT_ENV) from err
    except TnxError as err:  # VerbRejectedError among them: its message says it all
        raise CliError(scoped_ids(str(err), opts.shown)) from err
    except WorkflowUpdateRPCTimeoutOrCancelledError as err:
        raise CliError(
            f"no answer from the agent workflow: {err} "
            f"(is a worker serving task queue {rt.task_queue!r}?)",
            EXIT_ENV,
        ) from err
    except RPCError as err:
        if "poller" in err.message:  # the server's "no poller seen for task queue recently"
            seen = await _last_poll(rt)
            missing = NoWorkerError(rt.task_queue, rt.client.namespace, seen)
            raise CliError(no_worker_note(missing, opts), EXIT_ENV) from err
        raise CliError(
            f"Temporal at {opts.address} answered {err.status.name}: {one_line(err.message)}",
            EXIT_ENV,
        ) from err


async def _last_poll(rt: AgentRuntime) -> float | None:
    """Seconds since a worker last polled the runtime's task queue (None: unknown)."""
    try:
        return (await workflow_pollers(rt.client, rt.task_queue)).last_seen_s
    except RPCError:
        return None


async def connect_client(opts: Options) -> Client:
    """A client for ``opts`` (the cluster: address, namespace, TLS, API key, ...), connected
    with the runtime's data converter, encrypted when ``TNX_CODEC_KEYS`` /
    ``TNX_CODEC_KEY_FILE`` give codec keys.

    Raises:
        CliError: a setting is invalid, or the server does not answer in
            ``CONNECT_TIMEOUT_S`` or refuses (exit 2).
    """
    global _client_used
    _client_used = True
    try:
        codec = codec_from_env()  # TNX_CODEC_KEYS / TNX_CODEC_KEY_FILE: encryption at rest
        cluster = opts.cluster or ClusterConfig.load(address=opts.address, namespace=opts.namespace)
        return await asyncio.wait_for(
            connect(config=cluster, codec=codec), timeout=CONNECT_TIMEOUT_S
        )
    except (CodecError, ClusterConfigError) as err:
        raise CliError(str(err), EXIT_ENV) from err
    except ClusterConnectError as err:
        raise CliError(connect_message(cluster.describe(), err.reason), EXIT_ENV) from err
    except TimeoutError as err:
        raise CliError(
            f"cannot connect to Temporal at {opts.address}: no answer in {CONNECT_TIMEOUT_S:g}s",
            EXIT_ENV,
        ) from err
    except RuntimeError as err:
        raise CliError(connect_message(opts.address, str(err)), EXIT_ENV) from err


def check_query_options(opts: Options) -> None:
    """Refuse a ``--scope`` or ``--task-queue`` no visibility query can carry, before
    anything is sent (``client/queries.py``; issue 23 item 7).

    Raises:
        CliError: ``invalid --scope: ...`` / ``invalid --task-queue: ...`` (exit 2).
    """
    try:
        check_scope(opts.scope)
    except ValueError as err:
        raise CliError(f"invalid --scope: {err}", EXIT_ENV) from err
    try:
        check_task_queue(opts.task_queue)
    except ValueError as err:
        raise CliError(f"invalid --task-queue: {err}", EXIT_ENV) from err


def run_client(opts: Options, work: Callable[[Client], Awaitable[T]]) -> T:
    """Connect (:func:`connect_client`) and run ``work`` with the client, no runtime attached
    (commands over many workflows, such as ``replay-check``).

    Raises:
        CliError: an invalid ``--scope``, cannot connect, or Temporal refused a call (exit 2).
    """

    check_query_options(opts)

    async def go() -> T:
        client = await connect_client(opts)
        try:
            return await work(client)
        except RPCError as err:
            raise CliError(
                f"Temporal at {opts.address} answered {err.status.name}: {one_line(err.message)}",
                EXIT_ENV,
            ) from err

    logger = logging.getLogger("temporalio")
    before = logger.level
    logger.setLevel(logging.ERROR)  # the SDK's warnings are not for CLI users
    try:
        return asyncio.run(go())
    finally:
        logger.setLevel(before)


def no_worker_note(err: NoWorkerError, opts: Options) -> str:
    """:func:`~.workercheck.no_worker_line` for ``opts``."""
    return no_worker_line(err, opts.where(), worker_flags(opts))


def worker_flags(opts: Options) -> str:
    """The ``tnx-worker`` options that reach the server ``opts`` names (none for the
    defaults), for hints."""
    flags = []
    if opts.address != DEFAULT_ADDRESS:
        flags.append(f"--address {opts.address}")
    if opts.namespace != DEFAULT_NAMESPACE:
        flags.append(f"--namespace {opts.namespace}")
    return " ".join(flags)


def connect_message(address: str, raw: str) -> str:
    """A failed connection to Temporal at ``address`` as one line (``tnx`` and
    ``tnx-worker``): a refused connection says what to do, anything else is cut to 300
    characters."""
    if "Connection refused" in raw or "ConnectionRefused" in raw:
        return (
            f"cannot connect to Temporal at {address}: connection refused "
            "(is the server running? `tnx server start`, or pass --address)"
        )
    return f"cannot connect to Temporal at {address}: {truncate(one_line(raw), 300)}"


async def _check_namespace(rt: AgentRuntime, opts: Options) -> None:
    """Turn a "not found" caused by a missing namespace into that message (exit 2)."""
    try:
        await rt.client.workflow_service.describe_namespace(
            DescribeNamespaceRequest(namespace=opts.namespace)
        )
    except RPCError as err:
        if err.status == RPCStatusCode.NOT_FOUND:
            raise CliError(
                f"namespace {opts.namespace!r} does not exist at {opts.address}", EXIT_ENV
            ) from err
        # Anything else: keep the original "not found" message.
