"""The worker's Prometheus endpoint (``tnx-worker --metrics-port``) and its fleet gauges.

One endpoint serves the Temporal SDK's runtime metrics (``temporal_*``) and ours
(``workflows/contract/metrics.py``): :func:`metrics_runtime` makes the process's SDK core
runtime with a ``PrometheusConfig`` (Temporal's Python SDK docs, "Metrics"), and the worker's
client is connected with it, so its workers, workflows and activities record through that
runtime's meter. A Runtime is made once per process: each one binds its own port.

Gauges of fleet-wide state (approvals waiting and the oldest wait, live handles by their
durable state: ``AgentState`` is never ``running``, issue 35 item 2) are
not any one workflow's: :class:`FleetGauges` reads them from visibility every
``interval_s`` seconds (count queries, plus bounded lists for the oldest wait) and sets
them on the runtime's meter. Every worker of a task queue reports the same values, so
aggregate them with ``max()`` in PromQL, never ``sum()``. Visibility is eventually
consistent: the gauges lag the handles by up to a second or so plus the interval.
"""

from __future__ import annotations

import asyncio
import logging
import time
from collections.abc import Callable
from dataclasses import dataclass, field
from datetime import UTC, datetime
from typing import Final, get_args

from temporalio.client import Client
from temporalio.common import MetricMeter
from temporalio.runtime import PrometheusConfig, Runtime, TelemetryConfig
from temporalio.service import RPCError

from toolnexus_temporal.workflows.contract.metrics import (
    APPROVAL_OLDEST_WAIT,
    APPROVALS_WAITING,
    HANDLES,
    LATENCY_BUCKETS_MS,
    LLM_LATENCY,
    TOOL_LATENCY,
)
from toolnexus_temporal.workflows.contract.models import DurableStateName
from toolnexus_temporal.workflows.contract.names import (
    AGENT_STATE,
    AGENT_WAITING_SINCE,
    APPROVAL_QUEUE,
    WORKFLOW_TYPE,
)

log = logging.getLogger(__name__)

DEFAULT_FLEET_INTERVAL_S: Final = 15.0
"""Seconds between two visibility reads of the fleet gauges (Prometheus' default scrape
interval)."""

FLEET_LIST_LIMIT: Final = 1_000
"""Approval-queue rows read per round of the oldest-wait search (:meth:`FleetGauges.read`)."""

OLDEST_ROUNDS_MAX: Final = 20
"""The most rounds of the oldest-wait search per read. Each round lists only Requests older
than the oldest found so far, so two rounds are the rule and more need Requests parked
faster than visibility lists them."""

HANDLE_STATES: Final[tuple[DurableStateName, ...]] = get_args(DurableStateName)
"""The ``state`` label values of ``tnx_handles``: the values of ``AgentState``, the durable
state (a handle in a turn shows ``idle``; the turns in flight are
``tnx_turns_started_total`` less ``tnx_turns_total``)."""


class MetricsEndpointError(Exception):
    """The metrics endpoint could not be served (the address is in use or invalid)."""


def metrics_address(host: str, port: int) -> str:
    """``host:port``, an IPv6 host in brackets (``[::]:9464``, RFC 3986): the address
    :func:`metrics_runtime` binds and the authority of the ``/metrics`` URL."""
    if ":" in host and not host.startswith("["):
        return f"[{host}]:{port}"
    return f"{host}:{port}"


def metrics_runtime(host: str, port: int) -> Runtime:
    """The SDK core runtime serving Prometheus text at ``http://{host}:{port}/metrics``:
    the SDK's metrics with its defaults (durations in milliseconds, no ``_total`` suffix
    added), ours with :data:`LATENCY_BUCKETS_MS` for the latency histograms.

    Raises:
        MetricsEndpointError: the port cannot be bound (in use, or a bad address).
    """
    buckets = list(LATENCY_BUCKETS_MS)
    bind = metrics_address(host, port)
    try:
        return Runtime(
            telemetry=TelemetryConfig(
                metrics=PrometheusConfig(
                    bind_address=bind,
                    histogram_bucket_overrides={
                        LLM_LATENCY.name: buckets,
                        TOOL_LATENCY.name: buckets,
                    },
                )
            )
        )
    except (ValueError, RuntimeError) as err:
        raise MetricsEndpointError(f"cannot serve metrics on {bind}: {err}") from err


@dataclass
class FleetSnapshot:
    """One visibility read of the fleet gauges.

    Attributes:
        handles: live handles (running workflows) per state.
        approvals_waiting: live suspended handles (the approval queue).
        oldest_wait_ms: the longest wait of a pending Request, in ms (0 with none).
    """

    handles: dict[str, int] = field(default_factory=dict)
    approvals_waiting: int = 0
    oldest_wait_ms: float = 0.0


class FleetGauges:
    """Sets ``tnx_approvals_waiting``, ``tnx_approval_oldest_wait_milliseconds`` and
    ``tnx_handles{state}`` for ``task_queue`` from visibility (module docstring).

    Args:
        client: a client of the namespace.
        task_queue: the runtime's task queue (the gauges count its handles only).
        meter: the metrics runtime's meter (``Runtime.metric_meter``).
        interval_s: seconds between reads.
        quote: how a value goes into a visibility query: the host's
            :func:`~toolnexus_temporal.client.queries.quoted` (the one place that does it;
            this package imports no host module). It raises ``ValueError`` for a value it
            cannot quote.

    Raises:
        ValueError: ``interval_s`` not above 0, or a task queue ``quote`` refuses.
    """

    def __init__(
        self,
        client: Client,
        task_queue: str,
        meter: MetricMeter,
        interval_s: float = DEFAULT_FLEET_INTERVAL_S,
        *,
        quote: Callable[[str], str],
    ) -> None:
        if interval_s <= 0:
            raise ValueError(f"interval_s must be above 0, got {interval_s}")
        self._quoted = quote
        self.client = client
        self.task_queue = task_queue
        self.interval_s = interval_s
        labelled = meter.with_additional_attributes(
            {"namespace": client.namespace, "task_queue": task_queue}
        )
        self._handles = labelled.create_gauge(HANDLES.name, HANDLES.description, HANDLES.unit)
        self._waiting = labelled.create_gauge(
            APPROVALS_WAITING.name, APPROVALS_WAITING.description, APPROVALS_WAITING.unit
        )
        self._oldest = labelled.create_gauge_float(
            APPROVAL_OLDEST_WAIT.name, APPROVAL_OLDEST_WAIT.description, APPROVAL_OLDEST_WAIT.unit
        )
        self._live = (
            f'WorkflowType={quote(WORKFLOW_TYPE)} AND ExecutionStatus="Running" '
            f"AND TaskQueue={quote(task_queue)}"
        )

    async def read(self) -> FleetSnapshot:
        """Read the gauges' values from visibility (without setting them).

        Raises:
            RPCError: visibility refused or could not be reached.
        """
        snap = FleetSnapshot()
        for state in HANDLE_STATES:
            query = f"{self._live} AND {AGENT_STATE.name}={self._quoted(state)}"
            snap.handles[state] = (await self.client.count_workflows(query)).count
        queue = f"{APPROVAL_QUEUE} AND TaskQueue={self._quoted(self.task_queue)}"
        snap.approvals_waiting = (await self.client.count_workflows(queue)).count
        oldest = await self._oldest_since(queue) if snap.approvals_waiting else None
        if oldest is not None:
            snap.oldest_wait_ms = max(0.0, (time.time() - oldest.timestamp()) * 1000)
        return snap

    async def _oldest_since(self, queue: str) -> datetime | None:
        """The earliest ``AgentWaitingSince`` in ``queue``, exact at any queue length.

        Visibility on SQL stores cannot order by a search attribute, so a bounded list may
        miss the oldest row: the search lists up to :data:`FLEET_LIST_LIMIT` rows, takes
        their earliest, and lists again among the rows older than that until a count finds
        none older (or :data:`OLDEST_ROUNDS_MAX` rounds: then the oldest found)."""
        oldest: datetime | None = None
        query = queue
        for _ in range(OLDEST_ROUNDS_MAX):
            found: datetime | None = None
            async for wf in self.client.list_workflows(query, limit=FLEET_LIST_LIMIT):
                since = wf.typed_search_attributes.get(AGENT_WAITING_SINCE)
                if since is not None and (found is None or since < found):
                    found = since
            if found is None:
                break
            oldest = found
            query = f"{queue} AND {AGENT_WAITING_SINCE.name} < {self._quoted(_ms_floor(found))}"
            if not (await self.client.count_workflows(query)).count:
                break
        return oldest

    async def collect(self) -> FleetSnapshot:
        """Read the gauges (:meth:`read`) and set them.

        Raises:
            RPCError: as :meth:`read` (the gauges keep their last values).
        """
        snap = await self.read()
        for state, count in snap.handles.items():
            self._handles.set(count, {"state": state})
        self._waiting.set(snap.approvals_waiting)
        self._oldest.set(snap.oldest_wait_ms)
        return snap

    async def run(self) -> None:
        """:meth:`collect` every ``interval_s`` seconds until cancelled; a failed read is
        logged and tried again at the next interval."""
        while True:
            try:
                await self.collect()
            except (RPCError, RuntimeError) as err:  # RuntimeError: the client's connection
                log.warning("fleet gauges: visibility read failed: %s", err)
            await asyncio.sleep(self.interval_s)


def _ms_floor(at: datetime) -> str:
    """``at`` floored to its millisecond, as a visibility query's datetime literal (RFC 3339,
    UTC). Visibility keeps a finer value than the microseconds a client reads back (a row
    compared ``<`` its own microsecond literal), so the search compares at whole
    milliseconds: a Request parked in the same millisecond as the oldest found, before it,
    is the one it can miss."""
    return at.astimezone(UTC).strftime("%Y-%m-%dT%H:%M:%S.%f")[:-3] + "Z"
