"""Is a worker serving the runtime's task queue? Fast answers instead of waiting for a deadline.

A query to a workflow whose task queue has no worker waits (the server holds it for a worker
until a deadline, ~30 s) and an update waits to be accepted forever; the server's
``DescribeTaskQueue`` answers in milliseconds with the pollers it has seen. A worker keeps a
long poll open on its workflow task queue at all times (each lasts up to a minute, then the
next begins), so a poller whose last poll began more than :data:`LIVE_POLLER_S` ago has
stopped; the server lists a stopped worker's poller for five minutes after its last poll.

Also :func:`namespace_exists`, for ``tnx-worker``.

Two uses of the worker check:

* the ``tnx`` CLI checks once before a verb that needs a worker (:func:`require_worker`);
* :class:`~toolnexus_temporal.client.runtime.AgentRuntime` checks only once a query has gone
  unanswered for :data:`PROBE_AFTER_S` (:func:`guarded`, with a cached
  :class:`WorkerProbe`): nothing is added to a query that answers, none to ``run_turn``.

Limits: the age of a poll is read against the local clock (a client clock more than about
half a minute ahead of the server's could take a live worker for a stopped one); a worker
stopped less than :data:`LIVE_POLLER_S` ago still counts as live (the query then fails when
the server's own "no poller seen" check does).
"""

from __future__ import annotations

import asyncio
import time
from collections.abc import Awaitable, Callable
from dataclasses import dataclass
from datetime import UTC, datetime, timedelta
from typing import Final, TypeVar

from temporalio.api.enums.v1 import TaskQueueType
from temporalio.api.taskqueue.v1 import TaskQueue
from temporalio.api.workflowservice.v1 import DescribeNamespaceRequest, DescribeTaskQueueRequest
from temporalio.client import Client
from temporalio.service import RPCError, RPCStatusCode

from toolnexus_temporal.client.errors import NoWorkerError

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
    """

    task_queue: str
    count: int
    last_seen_s: float | None

    @property
    def live(self) -> bool:
        """Whether a worker polls now: one poll began within :data:`LIVE_POLLER_S`."""
        return self.last_seen_s is not None and self.last_seen_s <= LIVE_POLLER_S


def pollers_of(task_queue: str, last_access: list[datetime], now: datetime) -> Pollers:
    """:class:`Pollers` from the pollers' last-access times (timezone-aware) at ``now``; a
    time ahead of ``now`` (clock skew) counts as a poll just now."""
    if not last_access:
        return Pollers(task_queue, 0, None)
    newest = max(last_access)
    return Pollers(task_queue, len(last_access), max(0.0, (now - newest).total_seconds()))


async def workflow_pollers(client: Client, task_queue: str) -> Pollers:
    """Ask the server which workers poll ``task_queue`` for workflow tasks (one
    ``DescribeTaskQueue`` call; it needs no worker).

    Raises:
        RPCError: the server refused the call (e.g. unknown namespace).
    """
    response = await client.workflow_service.describe_task_queue(
        DescribeTaskQueueRequest(
            namespace=client.namespace,
            task_queue=TaskQueue(name=task_queue),
            task_queue_type=TaskQueueType.TASK_QUEUE_TYPE_WORKFLOW,
        ),
        timeout=timedelta(seconds=PROBE_EVERY_S),
    )
    seen = [p.last_access_time.ToDatetime(UTC) for p in response.pollers]
    return pollers_of(task_queue, seen, datetime.now(UTC))


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
    polls. Without a probe, just ``await call()``.

    Raises:
        NoWorkerError: the call waited and no worker polls the task queue (it is cancelled).
    """
    if probe is None:
        return await call()
    task = asyncio.ensure_future(call())
    try:
        done, _ = await asyncio.wait({task}, timeout=PROBE_AFTER_S)
        while not done:
            await probe.check()
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
