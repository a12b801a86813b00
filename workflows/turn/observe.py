"""The workflow side of observability: one observer of the turn (``contract/events.py``,
issue 33 items 3 and 4) that makes the turn's OpenTelemetry span (issue 27 item 1) and
records the metrics workflow code owns (``workflows/contract/metrics.py``).

Deterministic, like all workflow code: neither the span nor a metric adds a command or reads
state outside ``s``.

**The span** is free of OpenTelemetry imports: it lives on the worker's side of the workflow
boundary (``activities/otel.py``, the tracing interceptor), reached through the two extern
functions that interceptor registers for every workflow it intercepts
(``temporalio.workflow.extern_functions()``; the contrib's ``TracingInterceptor`` crosses the
sandbox the same way). Without the interceptor (tracing off, the default) neither exists and
the span costs one dictionary look-up per turn. It is replay-safe as the contrib's workflow
spans are: a turn starts its span only when the workflow is not replaying, and ends it only
when not replaying, with the workflow's own clock (``workflow.time_ns``) as start and end. A
replay (the ``Replayer``, a cold worker, a cache eviction) therefore adds no span; a turn
whose start was replayed ends a span only if the worker still holds one open for that run
(the same worker after an eviction).

**The metrics** (turns started, turns settled by status, budget stops by limit, tokens by agent and
direction, money and unpriced calls by agent) go through ``workflow.metric_meter()``, which
skips replay (the SDK wraps it in ``_ReplaySafeMetricMeter``: nothing is recorded while
``workflow.unsafe.is_replaying()``), so a workflow evicted from the cache and replayed, or
moved to another worker, counts each turn once. A workflow task that fails after it ran (a
worker killed mid-task) runs its new part again on the next attempt and counts it again: the
counters are at-least-once across worker crashes. Without a metrics runtime the meter is the
SDK's no-op meter.
"""

from __future__ import annotations

from typing import Any

from temporalio import workflow

from toolnexus_temporal.workflows.inbox import turn_trigger

with workflow.unsafe.imports_passed_through():
    from toolnexus_temporal.workflows.contract.messages import LlmCallResult
    from toolnexus_temporal.workflows.contract.metrics import (
        BUDGET_STOPS,
        COST,
        TOKENS,
        TURNS,
        TURNS_STARTED,
        UNPRICED_CALLS,
        MetricDef,
    )
    from toolnexus_temporal.workflows.contract.models import TaskResult, ToolCall, ToolResult, Usage
    from toolnexus_temporal.workflows.contract.names import TURN_SPAN_END, TURN_SPAN_START
    from toolnexus_temporal.workflows.contract.state import HandleState


class TurnTelemetry:
    """The span and the metrics of one handle's turns, a turn observer
    (``contract/events.py``).

    The span is opened when the turn starts and ended when it settled; the tokens spent
    meanwhile fill its ``gen_ai.usage.*`` attributes. The metrics count the tokens of each
    call (:func:`tokens_spent`) and each settled turn (:func:`turn_settled`). Holds no
    workflow state (nothing here is serialized): the turn's token totals, for the span.
    """

    def __init__(self) -> None:
        self.input_tokens = 0
        self.output_tokens = 0

    def turn_started(self, s: HandleState) -> None:
        """Count the turn (``tnx_turns_started_total{agent}``: less ``tnx_turns_total``, the
        turns in flight) and open the turn span of handle ``s`` (not on replay; no-op
        without the interceptor).

        The span's attributes (OpenTelemetry GenAI conventions, agent spans):
        ``gen_ai.operation.name`` ``invoke_agent``, ``gen_ai.agent.name``,
        ``gen_ai.request.model`` (the AgentDef's: ``inherit`` means the worker's), plus
        ``tnx.handle.id``, ``tnx.parent.id`` and ``tnx.turn.trigger`` (what drove the turn,
        :func:`~toolnexus_temporal.workflows.inbox.turn_trigger`). A ``tick`` or
        ``background`` turn is the root of its own trace (linked to the handle's previous
        turn); a ``message`` turn continues the trace of the message that woke it.
        """
        self.input_tokens = self.output_tokens = 0
        _add(TURNS_STARTED, 1, {"agent": _agent(s)})
        start = _extern(TURN_SPAN_START)
        if start is None:
            return
        info = workflow.info()
        name = s.defn.name if s.defn is not None else s.id
        trigger = turn_trigger(s)
        start(
            {
                "workflow_id": info.workflow_id,
                "run_id": info.run_id,
                "time_ns": workflow.time_ns(),
                "name": f"invoke_agent {name}",
                "own_trace": trigger != "message",
                "attributes": {
                    "tnx.turn.trigger": trigger,
                    "gen_ai.operation.name": "invoke_agent",
                    "gen_ai.agent.name": name,
                    "gen_ai.request.model": s.defn.model if s.defn is not None else "",
                    "tnx.handle.id": s.id,
                    "tnx.parent.id": s.parent or "",
                },
            }
        )

    def llm_answered(self, s: HandleState, reply: LlmCallResult) -> None:
        """Not observed (the tokens come with :meth:`tokens_spent`)."""

    def tool_settled(self, s: HandleState, call: ToolCall, result: ToolResult) -> None:
        """Not observed (tool spans and tool call metrics are the activities')."""

    def tokens_spent(self, s: HandleState, usage: Usage) -> None:
        """Add one call's usage (tokens) to the turn's totals (the span) and count it
        (:func:`tokens_spent`)."""
        self.input_tokens += usage.prompt_tokens
        self.output_tokens += usage.completion_tokens
        tokens_spent(s, usage)

    def turn_settled(self, s: HandleState, result: TaskResult) -> None:
        """End the turn span with the turn's outcome: ``gen_ai.usage.input_tokens`` and
        ``gen_ai.usage.output_tokens`` (this turn's LLM calls, summaries included),
        ``tnx.turn.status`` and ``tnx.turn.llm_calls`` (not on replay; no-op without the
        interceptor); then count the turn (:func:`turn_settled`)."""
        end = _extern(TURN_SPAN_END)
        if end is not None:
            info = workflow.info()
            end(
                {
                    "workflow_id": info.workflow_id,
                    "run_id": info.run_id,
                    "time_ns": workflow.time_ns(),
                    "error": result.text[:200] if result.status == "error" else None,
                    "attributes": {
                        "gen_ai.usage.input_tokens": self.input_tokens,
                        "gen_ai.usage.output_tokens": self.output_tokens,
                        "tnx.turn.status": result.status,
                        "tnx.turn.llm_calls": result.turns,
                    },
                }
            )
        turn_settled(s, result)


def _extern(name: str) -> Any:
    """The extern function ``name`` when a span may be made now: not replaying, and the
    tracing interceptor installed; else None."""
    if workflow.unsafe.is_replaying():
        return None
    return workflow.extern_functions().get(name)


# ---- the metrics


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
    two), so the directions add up to the handle's own usage, in tokens; its money
    (``tnx_cost_nano_usd_total{agent}``: the whole nano-dollars the handle's own running
    total, already counted with this call, gained) and whether it was unpriced
    (``tnx_unpriced_calls_total{agent}``)."""
    agent = _agent(s)
    other = usage.total_tokens - usage.prompt_tokens - usage.completion_tokens
    _add(TOKENS, usage.prompt_tokens, {"agent": agent, "direction": "input"})
    _add(TOKENS, usage.completion_tokens, {"agent": agent, "direction": "output"})
    _add(TOKENS, other, {"agent": agent, "direction": "other"})
    _add(UNPRICED_CALLS, usage.cost.unpriced, {"agent": agent})
    after = s.turn.own_cost.priced_usd
    before = after - usage.cost.priced_usd
    _add(COST, int(after.scaleb(9)) - int(before.scaleb(9)), {"agent": agent})
