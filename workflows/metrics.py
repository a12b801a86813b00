"""The metrics workflow code records (``workflows/contract/metrics.py``): turns settled by
status, budget stops by limit, tokens by agent and direction.

Recorded through ``workflow.metric_meter()``, which skips replay (the SDK wraps it in
``_ReplaySafeMetricMeter``: nothing is recorded while ``workflow.unsafe.is_replaying()``), so
a workflow evicted from the cache and replayed, or moved to another worker, counts each turn
once. A workflow task that fails after it ran (a worker killed mid-task) runs its new part
again on the next attempt and counts it again: the counters are at-least-once across worker
crashes. Without a metrics runtime the meter is the SDK's no-op meter.

Deterministic: recording a metric adds no command and reads no state outside ``s``.
"""

from __future__ import annotations

from temporalio import workflow

with workflow.unsafe.imports_passed_through():
    from toolnexus_temporal.workflows.contract.messages import LlmCallResult
    from toolnexus_temporal.workflows.contract.metrics import (
        BUDGET_STOPS,
        TOKENS,
        TURNS,
        MetricDef,
    )
    from toolnexus_temporal.workflows.contract.models import TaskResult, ToolCall, ToolResult, Usage
    from toolnexus_temporal.workflows.contract.state import HandleState


def _add(metric: MetricDef, value: int, labels: dict[str, str]) -> None:
    if value <= 0:
        return
    meter = workflow.metric_meter()
    meter.create_counter(metric.name, metric.description, metric.unit).add(value, labels)


def _agent(s: HandleState) -> str:
    return s.defn.name if s.defn is not None else "root"


def turn_settled(s: HandleState, result: TaskResult) -> None:
    """Count one settled turn of ``s`` (``tnx_turns_total{agent,status}``) and, when a limit
    stopped it, the stop (``tnx_budget_stops_total{agent,limit}``)."""
    agent = _agent(s)
    _add(TURNS, 1, {"agent": agent, "status": result.status})
    if result.limit is not None:
        _add(BUDGET_STOPS, 1, {"agent": agent, "limit": result.limit})


def tokens_spent(s: HandleState, usage: Usage) -> None:
    """Count one call's tokens on ``s`` (``tnx_tokens_total{agent,direction}``): ``input``
    (prompt), ``output`` (completion) and ``other`` (what the provider's total has beyond the
    two), so the directions add up to the handle's own usage, in tokens."""
    agent = _agent(s)
    other = usage.total_tokens - usage.prompt_tokens - usage.completion_tokens
    _add(TOKENS, usage.prompt_tokens, {"agent": agent, "direction": "input"})
    _add(TOKENS, usage.completion_tokens, {"agent": agent, "direction": "output"})
    _add(TOKENS, other, {"agent": agent, "direction": "other"})


class TurnMetrics:
    """The turn's metrics, a turn observer (``contract/events.py``): :func:`tokens_spent` and
    :func:`turn_settled`."""

    def turn_started(self, s: HandleState) -> None:
        """Not observed."""

    def llm_answered(self, s: HandleState, reply: LlmCallResult) -> None:
        """Not observed (the tokens come with :meth:`tokens_spent`)."""

    def tokens_spent(self, s: HandleState, usage: Usage) -> None:
        """See :func:`tokens_spent`."""
        tokens_spent(s, usage)

    def tool_settled(self, s: HandleState, call: ToolCall, result: ToolResult) -> None:
        """Not observed (tool calls are counted by the activities)."""

    def turn_settled(self, s: HandleState, result: TaskResult) -> None:
        """See :func:`turn_settled`."""
        turn_settled(s, result)
