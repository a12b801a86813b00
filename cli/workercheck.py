"""Before a ``tnx`` verb talks to the agent workflows: which task queue they run on, and does a
worker poll it? A verb that needs a worker (a query, an update) fails at once with a one-line
hint instead of waiting for a deadline; ``pending`` and ``answer`` do without one (visibility,
and the ``answer`` signal, which the server keeps until a worker runs the workflow).

Used by :func:`toolnexus_temporal.cli.ops.run`; the checks themselves are
:mod:`toolnexus_temporal.client.reachability`.
"""

from __future__ import annotations

import asyncio
import os
import shlex
import sys
import time
from collections.abc import Awaitable, Callable
from pathlib import Path
from typing import Final, TypeVar

from temporalio.client import Client
from temporalio.service import RPCError, RPCStatusCode

from toolnexus_temporal.client.errors import NoWorkerError, VerbRejectedError
from toolnexus_temporal.client.reachability import require_worker, workflow_pollers
from toolnexus_temporal.client.runtime import AgentRuntime
from toolnexus_temporal.workflows.contract.models import Answer
from toolnexus_temporal.workflows.contract.names import (
    AGENT_DEPTH,
    APPROVAL_QUEUE,
    ROOT_ID,
    SIGNAL_ANSWER,
    workflow_id_for,
)

T = TypeVar("T")
U = TypeVar("U")

READ_GRACE_S: Final = 3.0
"""How long :func:`worker_read` lets a worker take to answer a query (s). A worker stopped a
moment ago is still listed by the server (``reachability.LIVE_POLLER_S``): past this, the
verbs that work without a worker go on without one."""


async def root_task_queue(client: Client, scope: str | None) -> str | None:
    """The task queue the runtime's root workflow runs on (every handle of its tree runs on
    it), read with ``DescribeWorkflowExecution`` (no worker needed); None when there is no
    root workflow.

    Raises:
        RPCError: any other failure of the call.
    """
    wf = client.get_workflow_handle(workflow_id_for(scope, ROOT_ID))
    try:
        desc = await wf.describe()
    except RPCError as err:
        if err.status == RPCStatusCode.NOT_FOUND:
            return None
        raise
    return desc.task_queue


RUNTIMES_SHOWN: Final = 5
"""How many other runtimes a "no runtime" error names."""


async def runtime_scopes(client: Client) -> list[str | None]:
    """The scopes of the runtimes in this namespace, from visibility (their root workflows:
    ``AgentDepth = 0``, any status; no worker needed): None for the unscoped runtime (workflow
    id ``root``), ``"demo"`` for ``demo/root``; at most :data:`RUNTIMES_SHOWN`, none when
    visibility cannot be read."""
    scopes: list[str | None] = []
    suffix = "/" + ROOT_ID
    try:
        async for wf in client.list_workflows(f"{AGENT_DEPTH.name} = 0", limit=100):
            if wf.id == ROOT_ID:
                scope = None
            elif wf.id.endswith(suffix):
                scope = wf.id[: -len(suffix)]
            else:
                continue
            if scope not in scopes:
                scopes.append(scope)
            if len(scopes) >= RUNTIMES_SHOWN:
                break
    except RPCError:
        return []
    return scopes


async def waiting_elsewhere(client: Client, scope: str | None) -> dict[str | None, int]:
    """How many agents wait in the approval queue of each runtime other than ``scope``'s,
    from visibility (:data:`APPROVAL_QUEUE`; at most 200 rows read; empty when visibility
    cannot be read): what an empty ``tnx pending`` names (walk 6: it said "no suspended
    agents" while another scope had one)."""
    found: dict[str | None, int] = {}
    try:
        async for wf in client.list_workflows(APPROVAL_QUEUE, limit=200):
            head, sep, _ = wf.id.partition(f"/{ROOT_ID}/")
            other = None if wf.id.startswith(f"{ROOT_ID}/") else head if sep else ""
            if other != scope and other != "":
                found[other] = found.get(other, 0) + 1
    except RPCError:
        return {}
    return found


async def no_root_line(client: Client, scope: str | None, where: str) -> str:
    """The error of a command that found no runtime under ``scope``: the runtimes that exist
    (from visibility) with the option that reaches each, never the advice to create a second
    runtime beside them, and the command again in each of them (:func:`again_in`; walk 6:
    with three runtimes it gave one); ``tnx spawn root NAME`` only when the namespace has
    none (issue 37 item 2)."""
    others = [s for s in await runtime_scopes(client) if s != scope]
    head = f"no runtime to attach to: no {ROOT_ID!r} handle in {where}"
    if not others:
        again = f" --scope {scope}" if scope else ""  # walk 8: it dropped the scope
        return f"{head} (`tnx spawn {ROOT_ID} NAME{again}` creates it)"
    if len(others) == 1:
        return f"{head}; the runtime here: `{command_in(scope, others[0])}`"
    ways = " or ".join(f"`{command_in(scope, other)}`" for other in others)
    return f"{head}; the runtimes here, each with this command: {ways}"


def command_in(scope: str | None, other: str | None) -> str:
    """The ``tnx`` command running (read from the command line) as it runs in the runtime
    of scope ``other`` (:func:`again_in`), for a hint to repeat it; ``tnx ls`` there when it
    cannot tell (not run as ``tnx``)."""
    argv = sys.argv
    words = argv[1:] if argv and Path(argv[0]).name == "tnx" and argv[1:] else ["ls"]
    return again_in(words, scope, other, env_scope=bool(os.environ.get("TNX_SCOPE")))


def again_in(words: list[str], scope: str | None, other: str | None, env_scope: bool) -> str:
    """``tnx WORDS``, a command that found no runtime under ``scope``, as one shell line that
    runs as printed in the runtime of scope ``other`` (None: the unscoped one): its
    ``--scope`` dropped, then ``--scope OTHER`` (``--scope ''`` for the unscoped runtime when
    ``TNX_SCOPE`` is set: ``env_scope``), as the user typed every other word (issue 37 item 1:
    the hint kept the command's name only and dropped the id pasted). An id that names the
    missing scope itself (``walk9/root/a.1``; :func:`.args.scope_in`) is that scope's agent,
    not the other runtime's: the hint is then ``tnx ls --scope OTHER`` (walk 5: the same id
    in another scope opened an unrelated agent)."""
    from toolnexus_temporal.cli.args import scope_in

    kept: list[str] = []
    skip = False
    for word in words:
        if skip:  # the value of a --scope
            skip = False
            continue
        if word == "--scope" or word.startswith("--scope="):
            skip = word == "--scope"
            continue
        if scope is not None and scope_in(word) == scope:
            kept = ["ls"]
            break
        kept.append(word)
    if other is not None:
        kept += ["--scope", other]
    elif env_scope:
        kept += ["--scope", ""]
    return shlex.join(["tnx", *kept])


def no_worker_line(err: NoWorkerError, where: str, connection_flags: str) -> str:
    """The one-line hint for a verb that found no worker.

    Args:
        err: the check's error (task queue, namespace, when a worker last polled).
        where: the lookup's context (``namespace 'x' at host:port, scope 'y'``).
        connection_flags: options the worker needs to reach the same server
            (``--address ... --namespace ...``), or ``""`` for the defaults.
    """
    from toolnexus_temporal.cli.demo import DEMO_REGISTRY, DEMO_TASK_QUEUE

    seen = err.seen
    flags = f" {connection_flags}" if connection_flags else ""
    # the demo's agents run the demo's registry (walk 7 had to guess it)
    registry = DEMO_REGISTRY if err.task_queue == DEMO_TASK_QUEUE else "MODULE:REGISTRY"
    return (
        f"no worker polls task queue {err.task_queue!r} ({where}; {seen}): start one with "
        f"`tnx-worker --task-queue {err.task_queue} --registry {registry}{flags}`"
    )


async def signal_answer(rt: AgentRuntime, handle_id: str, answer: Answer) -> None:
    """Send ``answer`` as the ``answer`` signal to ``handle_id`` (it routes it down to the
    Request's owner): the server records it at once, with or without a worker; the workflow
    takes it, or rejects it loudly (trace and ``last_error``), when a worker runs it.

    Raises:
        VerbRejectedError: the handle's workflow has completed (closed).
        RPCError: no such workflow (NOT_FOUND), or another failure.
    """
    wf = rt.client.get_workflow_handle(rt.workflow_id(handle_id))
    try:
        await wf.signal(SIGNAL_ANSWER, answer)
    except RPCError as err:
        if err.status == RPCStatusCode.NOT_FOUND:
            desc = None
            try:
                desc = await wf.describe()
            except RPCError:
                raise err from None
            if desc is not None:
                raise VerbRejectedError(handle_id, SIGNAL_ANSWER, "handle closed") from err
        raise


async def worker_read(rt: AgentRuntime, read: Callable[[], Awaitable[T]]) -> T | NoWorkerError:
    """``read()`` (queries) when a worker polls the runtime's task queue and answers within
    :data:`READ_GRACE_S`; else, returned rather than raised, the :class:`NoWorkerError` that
    says so (for ``pending`` and ``answer``, which then go on without a worker).

    Raises:
        RPCError: the check, or the read, failed for another reason.
    """
    seen = await workflow_pollers(rt.client, rt.task_queue)
    missing = NoWorkerError(rt.task_queue, rt.client.namespace, seen.last_seen_s)
    if not seen.live:
        return missing
    try:
        return await asyncio.wait_for(read(), READ_GRACE_S)
    except TimeoutError:
        return missing
    except RPCError as err:
        if "poller" in err.message:  # the server's own "no poller seen recently"
            return missing
        raise


SPARE_AFTER_S: Final = 0.25
"""How long :func:`worker_read_or_spare` waits for a worker's answer before it starts the
read from history beside it (s): a worker answers in milliseconds, so the spare read starts
only when the answer is late (a worker SIGKILLed moments ago, still listed as polling)."""


async def worker_read_or_spare(
    rt: AgentRuntime, read: Callable[[], Awaitable[T]], spare: Callable[[], Awaitable[U]]
) -> tuple[T | NoWorkerError, Awaitable[U]]:
    """:func:`worker_read`, with the read that replaces it when no worker answers (``spare``,
    from history) started :data:`SPARE_AFTER_S` into the wait rather than after it: right
    after a worker is SIGKILLed a read waits out the attach grace (1 s) for a query no one
    takes, and the history read then adds its own time (walk 7: 1.5-2.03 s; issue 37 item 4
    asks under 2 s).

    Returns:
        What :func:`worker_read` returns, and the spare read to await when that is the
        NoWorkerError (already under way, or started on await); with a worker's answer the
        spare is cancelled and must not be awaited.

    Raises:
        RPCError: as :func:`worker_read`.
    """
    seen = await workflow_pollers(rt.client, rt.task_queue)
    missing = NoWorkerError(rt.task_queue, rt.client.namespace, seen.last_seen_s)
    if not seen.live:
        return missing, spare()
    query = asyncio.ensure_future(asyncio.wait_for(read(), READ_GRACE_S))
    done, _ = await asyncio.wait({query}, timeout=SPARE_AFTER_S)
    started = None if done else asyncio.ensure_future(spare())
    try:
        found: T | NoWorkerError = await query
    except TimeoutError:
        found = missing
    except RPCError as err:
        if "poller" not in err.message:  # the server's own "no poller seen recently"
            if started is not None:
                started.cancel()
            raise
        found = missing
    except BaseException:
        if started is not None:
            started.cancel()
        raise
    if not isinstance(found, NoWorkerError):
        if started is not None:
            started.cancel()
            await asyncio.gather(started, return_exceptions=True)
        unused: asyncio.Future[U] = asyncio.get_running_loop().create_future()
        unused.cancel()  # awaiting it raises CancelledError; left alone, it warns of nothing
        return found, unused
    return found, started if started is not None else spare()


RECHECK_S: Final = 0.25
"""How often :func:`worker_polls` looks for a poller again in a reconnect window (s)."""


async def worker_polls(client: Client, task_queue: str, address: str) -> None:
    """:func:`~toolnexus_temporal.client.reachability.require_worker`, waiting out the
    reconnect window of the local dev server (``tnx server start``) when it started moments
    ago and lists no poller at all (:func:`~.devserver.reconnect_left_s`): its workers are
    reconnecting, not gone. Elsewhere (another server, a poller listed as stopped, a server
    up for longer) it answers at once, as before.

    Raises:
        NoWorkerError: no worker polls ``task_queue`` (after the window, if any).
    """
    from toolnexus_temporal.cli.devserver import reconnect_left_s
    from toolnexus_temporal.cli.options import DEFAULT_DATA_DIR

    try:
        await require_worker(client, task_queue)
        return
    except NoWorkerError as err:
        if err.last_seen_s is not None:
            raise
        server_dir = DEFAULT_DATA_DIR / "temporal"
        left = await asyncio.to_thread(reconnect_left_s, address, server_dir)
        if left <= 0:
            raise
    deadline = time.monotonic() + left
    while True:
        await asyncio.sleep(RECHECK_S)
        try:
            await require_worker(client, task_queue)
            return
        except NoWorkerError:
            if time.monotonic() >= deadline:
                raise
