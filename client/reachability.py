"""Is a worker serving the runtime's task queue? Fast answers instead of waiting for a deadline.

A query to a workflow whose task queue has no worker waits (the server holds it for a worker
until a deadline, ~30 s) and an update waits to be accepted forever; the server's
``DescribeTaskQueue`` answers in milliseconds with the pollers it has seen. A worker keeps a
long poll open on its workflow task queue at all times (each lasts up to a minute, then the
next begins), so a poller whose last poll began more than :data:`LIVE_POLLER_S` ago has
stopped; the server lists a stopped worker's poller for five minutes after its last poll.
The workers' heartbeats (``ListWorkers``; the SDK sends one a minute and a last one with
status ``SHUTTING_DOWN`` when a worker stops gracefully) tell a stopped worker at once: a
poller whose worker's newest heartbeat says it stopped after that poll began is gone.

Also :func:`namespace_exists`, for ``tnx-worker``.

Two uses of the worker check:

* the ``tnx`` CLI checks once before a verb that needs a worker (:func:`require_worker`);
* :class:`~toolnexus_temporal.client.runtime.AgentRuntime` checks only once a query has gone
  unanswered for :data:`PROBE_AFTER_S` (:func:`guarded`, with a cached
  :class:`WorkerProbe`): nothing is added to a query that answers, none to ``run_turn``.

Limits: the age of a poll is read against the local clock (a client clock more than about
half a minute ahead of the server's could take a live worker for a stopped one); a worker
killed outright (no last heartbeat) less than :data:`LIVE_POLLER_S` ago still counts as live
(the query then fails when the server's own "no poller seen" check does).
"""

from __future__ import annotations

import asyncio
import time
from collections.abc import Awaitable, Callable, Sequence
from dataclasses import dataclass
from datetime import UTC, datetime, timedelta
from typing import Final, TypeVar

from temporalio.api.enums.v1 import TaskQueueType, WorkerStatus
from temporalio.api.taskqueue.v1 import TaskQueue
from temporalio.api.workflowservice.v1 import (
    DescribeNamespaceRequest,
    DescribeTaskQueueRequest,
    ListWorkersRequest,
)
from temporalio.client import Client
from temporalio.service import RPCError, RPCStatusCode

from toolnexus_temporal.client.errors import NoWorkerError
from toolnexus_temporal.client.queries import quoted

_R = TypeVar("_R")

LIVE_POLLER_S: Final = 90.0
"""A poller whose last poll began longer ago than this (s) is taken as stopped: a live worker
starts a new long poll at least every minute (the server's long-poll interval)."""

PROBE_AFTER_S: Final = 5.0
"""How long a query may go unanswered before :func:`guarded` checks for a worker (s); the
check is then repeated every :data:`PROBE_EVERY_S` while the query waits. A query answers in
milliseconds when a worker serves it; the grace lets a host start a moment before its
worker (a worker that polls within it is found)."""

PROBE_EVERY_S: Final = 5.0
"""How often :func:`guarded` checks again while a query still waits (s)."""

UNLISTED_PROBES: Final = 1
"""Checks that may find no poller listed at all before :func:`guarded` gives up: the first
is forgiven, since right after a server restart its workers take 5-8 s to poll again (a
query then waits ``PROBE_AFTER_S + PROBE_EVERY_S``, 10 s, before ``NoWorkerError``)."""

PROBE_CACHE_S: Final = 2.0
"""How long a :class:`WorkerProbe` reuses its last answer (s): many queries waiting at once
share one ``DescribeTaskQueue`` call."""


@dataclass(frozen=True)
class Pollers:
    """What the server knows of the workers polling one workflow task queue.

    Attributes:
        task_queue: the task queue.
        count: pollers the server lists (it keeps a stopped one for five minutes).
        last_seen_s: seconds since the most recent poll began (None: none listed).
        running_s: seconds since the most recent poll of a worker not known to have stopped
            (None: every listed poller's worker said it stopped, or none is listed).
    """

    task_queue: str
    count: int
    last_seen_s: float | None
    running_s: float | None = None

    @property
    def live(self) -> bool:
        """Whether a worker polls now: a poll of a worker that has not said it stopped began
        within :data:`LIVE_POLLER_S`."""
        return self.running_s is not None and self.running_s <= LIVE_POLLER_S


@dataclass(frozen=True)
class Poll:
    """One poller of a task queue as ``DescribeTaskQueue`` lists it.

    Attributes:
        identity: the worker's identity (``pid@host`` unless set).
        last_access: when its last poll began (timezone-aware, the server's clock).
    """

    identity: str
    last_access: datetime


@dataclass(frozen=True)
class WorkerSeen:
    """One worker's last heartbeat on a task queue as ``ListWorkers`` lists it (the SDK sends
    one every minute by default, and a last one, with status ``SHUTTING_DOWN``, when the
    worker stops gracefully).

    Attributes:
        identity: the worker's identity.
        stopped: its last heartbeat said it is shutting down or shut down.
        at: that heartbeat's time (timezone-aware, the worker's clock).
    """

    identity: str
    stopped: bool
    at: datetime


def pollers_of(
    task_queue: str, polls: list[Poll], now: datetime, workers: Sequence[WorkerSeen] = ()
) -> Pollers:
    """:class:`Pollers` from the pollers' last polls at ``now``: a poller whose worker's
    newest heartbeat says it stopped after that poll began is left out (a worker stopped a
    moment ago is gone at once, not after :data:`LIVE_POLLER_S`); a time ahead of ``now``
    (clock skew) counts as a poll just now."""
    newest: dict[str, WorkerSeen] = {}
    for beat in workers:
        if beat.identity not in newest or beat.at > newest[beat.identity].at:
            newest[beat.identity] = beat

    def stopped_since(poll: Poll) -> bool:
        beat = newest.get(poll.identity)
        return beat is not None and beat.stopped and beat.at >= poll.last_access

    running = [poll.last_access for poll in polls if not stopped_since(poll)]

    def age(times: list[datetime]) -> float | None:
        return max(0.0, (now - max(times)).total_seconds()) if times else None

    return Pollers(task_queue, len(polls), age([poll.last_access for poll in polls]), age(running))


async def workers_on(client: Client, task_queue: str) -> list[WorkerSeen]:
    """The workers' last heartbeats on ``task_queue`` (``ListWorkers``); empty when the server
    does not keep them (older servers, or worker heartbeats turned off).

    Raises:
        RPCError: the server refused the call for another reason than not having it.
    """
    try:
        response = await client.workflow_service.list_workers(
            ListWorkersRequest(namespace=client.namespace, query=f"TaskQueue={quoted(task_queue)}"),
            timeout=timedelta(seconds=PROBE_EVERY_S),
        )
    except RPCError as err:
        if err.status in (
            RPCStatusCode.UNIMPLEMENTED,
            RPCStatusCode.INVALID_ARGUMENT,
            RPCStatusCode.PERMISSION_DENIED,
        ):
            return []
        raise
    stopping = (WorkerStatus.WORKER_STATUS_SHUTTING_DOWN, WorkerStatus.WORKER_STATUS_SHUTDOWN)
    return [
        WorkerSeen(
            identity=beat.worker_identity,
            stopped=beat.status in stopping,
            at=beat.heartbeat_time.ToDatetime(UTC),
        )
        for beat in (info.worker_heartbeat for info in response.workers_info)
        if beat.task_queue == task_queue
    ]


async def workflow_pollers(client: Client, task_queue: str) -> Pollers:
    """Ask the server which workers poll ``task_queue`` for workflow tasks (``DescribeTaskQueue``
    and ``ListWorkers``, at once; neither needs a worker).

    Raises:
        RPCError: the server refused the call (e.g. unknown namespace).
    """
    response, workers = await asyncio.gather(
        client.workflow_service.describe_task_queue(
            DescribeTaskQueueRequest(
                namespace=client.namespace,
                task_queue=TaskQueue(name=task_queue),
                task_queue_type=TaskQueueType.TASK_QUEUE_TYPE_WORKFLOW,
            ),
            timeout=timedelta(seconds=PROBE_EVERY_S),
        ),
        workers_on(client, task_queue),
    )
    polls = [Poll(p.identity, p.last_access_time.ToDatetime(UTC)) for p in response.pollers]
    return pollers_of(task_queue, polls, datetime.now(UTC), workers)


async def require_worker(client: Client, task_queue: str) -> Pollers:
    """Check that a worker polls ``task_queue``.

    Returns:
        The pollers found (live).

    Raises:
        NoWorkerError: none polls it now.
        RPCError: the server refused the check.
    """
    found = await workflow_pollers(client, task_queue)
    if not found.live:
        raise NoWorkerError(task_queue, client.namespace, found.last_seen_s)
    return found


class WorkerProbe:
    """:func:`require_worker` for one runtime, its answer reused for :data:`PROBE_CACHE_S`
    and one call in flight at a time.

    Args:
        client: the runtime's client.
        task_queue: the runtime's task queue.
    """

    def __init__(self, client: Client, task_queue: str) -> None:
        self.client = client
        self.task_queue = task_queue
        self._checked_at = float("-inf")
        self._error: NoWorkerError | None = None
        self._lock = asyncio.Lock()

    async def check(self) -> None:
        """Raise :class:`NoWorkerError` when no worker polls the task queue. A failed check
        (the server unreachable) is not an answer: it raises nothing.

        Raises:
            NoWorkerError: no worker polls it.
        """
        async with self._lock:
            if time.monotonic() - self._checked_at > PROBE_CACHE_S:
                try:
                    await require_worker(self.client, self.task_queue)
                    self._error = None
                except NoWorkerError as err:
                    self._error = err
                except Exception:
                    self._error = None
                self._checked_at = time.monotonic()
            if self._error is not None:
                raise NoWorkerError(
                    self._error.task_queue, self._error.namespace, self._error.last_seen_s
                )


async def guarded(call: Callable[[], Awaitable[_R]], probe: WorkerProbe | None) -> _R:
    """Run ``call`` (a query); if it has not answered within :data:`PROBE_AFTER_S`, ask
    ``probe`` (then every :data:`PROBE_EVERY_S`) and give up with its error when no worker
    polls: at once when the server lists only stopped pollers, on the second check when it
    lists none (:data:`UNLISTED_PROBES`: a server that just restarted lists none while its
    workers reconnect). Without a probe, just ``await call()``.

    Raises:
        NoWorkerError: the call waited and no worker polls the task queue (it is cancelled).
    """
    if probe is None:
        return await call()
    task = asyncio.ensure_future(call())
    try:
        done, _ = await asyncio.wait({task}, timeout=PROBE_AFTER_S)
        unlisted = 0
        while not done:
            try:
                await probe.check()
            except NoWorkerError as err:
                # The server lists no poller at all: no worker ever polled, or the server
                # restarted (it keeps pollers in memory) and its workers are reconnecting,
                # which takes them 5-8 s. Wait one more PROBE_EVERY_S for the query before
                # saying so; a stopped worker the server still lists is told at once.
                unlisted += 1
                if err.last_seen_s is not None or unlisted > UNLISTED_PROBES:
                    raise
            done, _ = await asyncio.wait({task}, timeout=PROBE_EVERY_S)
        return task.result()
    finally:
        task.cancel()  # no-op when done


async def namespace_exists(client: Client) -> bool:
    """Whether the client's namespace exists (``DescribeNamespace``); True when the server
    does not say (a refusal other than NOT_FOUND, such as missing permission)."""
    try:
        await client.workflow_service.describe_namespace(
            DescribeNamespaceRequest(namespace=client.namespace),
            timeout=timedelta(seconds=PROBE_EVERY_S),
        )
    except RPCError as err:
        return err.status != RPCStatusCode.NOT_FOUND
    return True
