"""The runtime's own Prometheus metrics: every name, kind, unit and label, in one place.

``tnx-worker --metrics-port`` serves them, with the Temporal SDK's runtime metrics
(``temporal_*``), from one Prometheus endpoint: the SDK's core runtime
(``temporalio.runtime.PrometheusConfig``) owns the port, and ours are created through the
same meter (``workflow.metric_meter()``, ``activity.metric_meter()``, ``Runtime.metric_meter``).
Who records what:

* workflow code (``workflows/turn/observe.py``): turns started and settled (their difference
  is the turns in flight: visibility records no ``running``, issue 35 item 2), tokens,
  money, budget stops. The
  workflow meter skips replay (the SDK's ``_ReplaySafeMetricMeter``), so a replayed turn is
  not counted twice;
* activities (``observability/metrics.py``): LLM calls and tool calls, with their latency, one
  per attempt;
* the worker (``observability/prometheus.py``): the fleet gauges read from visibility.

Conventions (docs/guide/metrics.md): names start with ``tnx_``; counters end in ``_total``
(the SDK's ``counters_total_suffix`` stays off so its own names match Temporal's
dashboards); durations are integer milliseconds, as the SDK reports its own by default, and
say so in the name (``_milliseconds``). Labels are low-cardinality: registry names (agent,
tool, model), closed vocabularies (status, limit, state, outcome); never a handle or workflow
id. The SDK adds ``namespace``, ``task_queue`` and ``workflow_type`` / ``activity_type`` to
what workflows and activities record, and ``service_name`` to everything.

Deterministic and I/O free (the workflow code imports it).
"""

from __future__ import annotations

from typing import Final, Literal, NamedTuple

MetricKind = Literal["counter", "histogram", "gauge"]


class MetricDef(NamedTuple):
    """One metric of ours.

    Attributes:
        name: the Prometheus name (``tnx_...``).
        kind: counter, histogram or gauge.
        unit: the unit (``1`` for a count, ``ms``, ``tokens``).
        description: the ``# HELP`` text.
        labels: our labels, beyond those the SDK adds.
        source: who records it: ``workflow``, ``activity`` or ``worker`` (the fleet gauges).
    """

    name: str
    kind: MetricKind
    unit: str
    description: str
    labels: tuple[str, ...]
    source: Literal["workflow", "activity", "worker"]


TURNS: Final = MetricDef(
    "tnx_turns_total",
    "counter",
    "1",
    "Turns settled, by status (done, incomplete, interrupted, error)",
    ("agent", "status"),
    "workflow",
)
TURNS_STARTED: Final = MetricDef(
    "tnx_turns_started_total",
    "counter",
    "1",
    "Turns started; turns in flight (running or parked) = sum(tnx_turns_started_total) - "
    "sum(tnx_turns_total)",
    ("agent",),
    "workflow",
)
TOKENS: Final = MetricDef(
    "tnx_tokens_total",
    "counter",
    "tokens",
    "Tokens spent by LLM and summarizer calls, by agent and direction (input: prompt, "
    "output: completion)",
    ("agent", "direction"),
    "workflow",
)
COST: Final = MetricDef(
    "tnx_cost_nano_usd_total",
    "counter",
    "nano_usd",
    "Money spent by priced LLM and summarizer calls, by agent, in nano-USD (1e-9 USD; the "
    "counter adds the whole nano-dollars of each handle's exact running total, so it never "
    "drifts)",
    ("agent",),
    "workflow",
)
UNPRICED_CALLS: Final = MetricDef(
    "tnx_unpriced_calls_total",
    "counter",
    "1",
    "LLM and summarizer calls of a model the worker has no price for (their cost is unknown)",
    ("agent",),
    "workflow",
)
BUDGET_STOPS: Final = MetricDef(
    "tnx_budget_stops_total",
    "counter",
    "1",
    "Turns stopped at a limit (incomplete), by limit (maxTurns, tokens, toolCalls, wallMs, "
    "costUsd)",
    ("agent", "limit"),
    "workflow",
)
LLM_CALLS: Final = MetricDef(
    "tnx_llm_calls_total",
    "counter",
    "1",
    "LLM HTTP round trips (each attempt), by model and outcome (ok, error, cancelled: an "
    "interrupt or the wall deadline)",
    ("model", "outcome"),
    "activity",
)
LLM_LATENCY: Final = MetricDef(
    "tnx_llm_call_latency_milliseconds",
    "histogram",
    "ms",
    "Latency of one LLM HTTP round trip (the whole streamed reply), by model",
    ("model",),
    "activity",
)
TOOL_CALLS: Final = MetricDef(
    "tnx_tool_calls_total",
    "counter",
    "1",
    "Tool activity attempts, by tool and outcome (ok, error: an is_error result or a raised "
    "error, pending: a suspension, cancelled)",
    ("tool", "outcome"),
    "activity",
)
TOOL_LATENCY: Final = MetricDef(
    "tnx_tool_call_latency_milliseconds",
    "histogram",
    "ms",
    "Latency of one tool activity attempt, by tool",
    ("tool",),
    "activity",
)
APPROVALS_WAITING: Final = MetricDef(
    "tnx_approvals_waiting",
    "gauge",
    "1",
    "Live suspended handles waiting for an Answer (the approval queue) on this task queue; "
    "every worker reports the same fleet value: aggregate with max()",
    ("namespace", "task_queue"),
    "worker",
)
APPROVAL_OLDEST_WAIT: Final = MetricDef(
    "tnx_approval_oldest_wait_milliseconds",
    "gauge",
    "ms",
    "How long the longest-waiting pending Request has waited (0 with none); fleet value: "
    "aggregate with max()",
    ("namespace", "task_queue"),
    "worker",
)
HANDLES: Final = MetricDef(
    "tnx_handles",
    "gauge",
    "1",
    "Live handles (running workflows) by AgentState, the durable state (idle, suspended, "
    "closed: a handle in a turn counts as idle); fleet value: aggregate with max()",
    ("namespace", "task_queue", "state"),
    "worker",
)

ALL_METRICS: Final = (
    TURNS,
    TURNS_STARTED,
    TOKENS,
    COST,
    UNPRICED_CALLS,
    BUDGET_STOPS,
    LLM_CALLS,
    LLM_LATENCY,
    TOOL_CALLS,
    TOOL_LATENCY,
    APPROVALS_WAITING,
    APPROVAL_OLDEST_WAIT,
    HANDLES,
)
"""Every metric of ours (docs/guide/metrics.md lists each; a unit test checks it)."""

LATENCY_BUCKETS_MS: Final = (
    5.0,
    10.0,
    25.0,
    50.0,
    100.0,
    250.0,
    500.0,
    1_000.0,
    2_500.0,
    5_000.0,
    10_000.0,
    30_000.0,
    60_000.0,
    120_000.0,
    300_000.0,
)
"""Histogram buckets of our latencies, in ms (the SDK's default for a new histogram stops at
10 s; an LLM reply can take minutes)."""

UNKNOWN_LABEL: Final = "unknown"
"""The label value recorded for a name outside the registry (a tool the worker lacks): the
label set stays bounded whatever a model asks for."""
