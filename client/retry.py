"""Which failed RPCs the host library retries, and how: connection-level failures (a server
outage, a restart) and the server's update limits.

Temporal's frontend refuses an update past two limits: 10 updates in flight per workflow
(RESOURCE_EXHAUSTED, "limit on number of concurrent in-flight updates has been reached") and
2,000 updates per workflow run ("limit on the total number of distinct updates"). The client
survives both: a verb with a signal form falls back to it (:mod:`.fallback`), the rest retry
with backoff. An outage (UNAVAILABLE: "tcp connect error", "transport error", ...) is ridden
out with backoff for up to :data:`OUTAGE_RETRY_S`; an update is re-asked under the same id,
so it is admitted at most once and its outcome is returned.

Also how an update's refusal shows: refused before the workflow accepted it
(:func:`is_refused_update`: retried), or rejected by its validator (:func:`rejected_at_once`).
"""

from __future__ import annotations

import asyncio
from collections.abc import Awaitable, Callable
from typing import Any, Final, TypeVar

from temporalio.client import WorkflowUpdateHandle
from temporalio.service import RPCError, RPCStatusCode

_R = TypeVar("_R")

OUTAGE_RETRY_S: Final = 180.0
"""How long a call rides out a server that cannot be reached, s (a dev server restart or a
cluster failover takes 10-30 s)."""

OUTAGE_DELAY_MAX_S: Final = 2.0
"""The longest pause between two tries during an outage, s."""

_CONNECTION_TEXT: Final = (
    "tcp connect error",
    "transport error",
    "connection refused",
    "connection reset",
    "broken pipe",
    "error trying to connect",
    "h2 protocol error",  # the HTTP/2 connection failed under the call (seen under load)
)


def is_connection_error(err: RPCError) -> bool:
    """The server could not be reached or dropped the connection (nothing was decided).

    An UNAVAILABLE whose text says the update was aborted is the workflow's refusal, not an
    outage (see ``HandleRpc._call``)."""
    text = str(err).lower()
    if any(part in text for part in _CONNECTION_TEXT):
        return True
    return err.status == RPCStatusCode.UNAVAILABLE and "update was aborted" not in text


def is_update_limit(err: RPCError) -> bool:
    """The server refused an update for one of its per-workflow update limits (in flight, or
    total per run)."""
    text = str(err).lower()
    return "limit on" in text and "update" in text


async def riding_outage(call: Callable[[], Awaitable[_R]]) -> _R:
    """Run ``call``, retrying it with backoff (0.1 s doubling to :data:`OUTAGE_DELAY_MAX_S`)
    while the server cannot be reached, for up to :data:`OUTAGE_RETRY_S` in all.

    Raises:
        RPCError: any other failure, or the outage lasted longer.
    """
    delay, waited = 0.1, 0.0
    while True:
        try:
            return await call()
        except RPCError as err:
            if not is_connection_error(err) or waited >= OUTAGE_RETRY_S:
                raise
        await asyncio.sleep(delay)
        waited += delay
        delay = min(delay * 2, OUTAGE_DELAY_MAX_S)


def rejected_at_once(started: WorkflowUpdateHandle[Any]) -> bool:
    """Whether an update handle came back with a failed outcome already known: the
    validator rejected it (the server answers a rejection at once, stage COMPLETED).

    The SDK keeps that outcome in ``WorkflowUpdateHandle._known_outcome`` (no public
    accessor); without it (an SDK that renames it) this is False and the rejection surfaces
    from ``HandleRpc.result`` instead.
    """
    outcome = getattr(started, "_known_outcome", None)
    has_field = getattr(outcome, "HasField", None)
    return bool(has_field is not None and has_field("failure"))


def is_refused_update(err: RPCError) -> bool:
    """An update refused before the workflow accepted it (see ``HandleRpc._call``)."""
    if err.status == RPCStatusCode.RESOURCE_EXHAUSTED:
        return True
    if err.status == RPCStatusCode.UNAVAILABLE:
        return "update was aborted" in str(err)
    # The workflow task that carried the update failed, for example a continue-as-new that
    # raced a new event (UnhandledCommand): the update was not accepted.
    return err.status == RPCStatusCode.FAILED_PRECONDITION and "workflow task failure" in str(err)


def is_failing_workflow_task(err: RPCError) -> bool:
    """The server refused an update or a query because the workflow's workflow task keeps
    failing ("Workflow Task in failed state": a worker that cannot run it, e.g. one without
    the codec keys); it is retried by the server, and the refusal ends once a worker
    completes it."""
    return "workflow task in failed state" in str(err).lower()


def is_busy_query(err: RPCError) -> bool:
    """A query the server could not answer in time, nothing refused: the workflow's query
    buffer is full (many hosts polling one workflow), or the call timed out while its
    workflow task was slow (a just-closed workflow many hosts ask, a loaded server). The
    client-side timeout comes back as CANCELLED "Timeout expired" (tonic), the server's as
    DEADLINE_EXCEEDED."""
    text = str(err).lower()
    if "query buffer is full" in text or err.status == RPCStatusCode.DEADLINE_EXCEEDED:
        return True
    return err.status == RPCStatusCode.CANCELLED and "timeout expired" in text


QUERY_BUSY_TRIES = 20
"""How many times :func:`riding_busy_queries` asks a refused query again."""


async def riding_busy_queries(call: Callable[[], Awaitable[_R]]) -> _R:
    """Run a query, asking again (backoff 50 ms doubling to 1 s) while the server refuses it
    because the workflow's query buffer is full: many hosts polling one workflow (the server
    buffers one consistent query per workflow task in flight).

    Raises:
        RPCError: any other refusal, or the buffer still full after ``QUERY_BUSY_TRIES``.
    """
    delay = 0.05
    for _ in range(QUERY_BUSY_TRIES - 1):
        try:
            return await call()
        except RPCError as err:
            if not is_busy_query(err):
                raise
        await asyncio.sleep(delay)
        delay = min(delay * 2, 1.0)
    return await call()
