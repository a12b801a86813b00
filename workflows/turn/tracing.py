"""The turn's OpenTelemetry span (issue 27, item 1), from workflow code.

Deterministic, like all workflow code, and free of OpenTelemetry imports: the span lives on
the worker's side of the workflow boundary (``activities/otel.py``, the tracing interceptor),
reached through the two extern functions that interceptor registers for every workflow it
intercepts (``temporalio.workflow.extern_functions()``; the contrib's
``TracingInterceptor`` crosses the sandbox the same way). Without the interceptor (tracing
off, the default) neither exists and this module does nothing but one dictionary look-up per
turn.

Replay-safe as the contrib's workflow spans are: a turn starts its span only when the
workflow is not replaying, and ends it only when not replaying, with the workflow's own
clock (``workflow.time_ns``) as start and end. A replay (the ``Replayer``, a cold worker, a
cache eviction) therefore adds no span; a turn whose start was replayed ends a span only if
the worker still holds one open for that run (the same worker after an eviction).
"""

from __future__ import annotations

from typing import Any

from temporalio import workflow

with workflow.unsafe.imports_passed_through():
    from toolnexus_temporal.workflows.contract.messages import LlmCallResult
    from toolnexus_temporal.workflows.contract.models import TaskResult, ToolCall, ToolResult, Usage
    from toolnexus_temporal.workflows.contract.state import HandleState

TURN_SPAN_START = "__tnx_turn_span_start"
"""Extern function: open the turn span of ``(workflow_id, run_id)`` (``activities/otel.py``)."""

TURN_SPAN_END = "__tnx_turn_span_end"
"""Extern function: end the open turn span of ``(workflow_id, run_id)``."""


class TurnTrace:
    """The span of the running turn of one handle, a turn observer
    (``contract/events.py``): opened when the turn starts, ended when it settled; the tokens
    spent meanwhile fill the span's ``gen_ai.usage.*`` attributes. Holds no workflow state
    (nothing here is serialized)."""

    def __init__(self) -> None:
        self.input_tokens = 0
        self.output_tokens = 0

    def turn_started(self, s: HandleState) -> None:
        """Open the turn span of handle ``s`` (not on replay; no-op without the interceptor).

        The span's attributes (OpenTelemetry GenAI conventions, agent spans):
        ``gen_ai.operation.name`` ``invoke_agent``, ``gen_ai.agent.name``,
        ``gen_ai.request.model`` (the AgentDef's: ``inherit`` means the worker's), plus
        ``tnx.handle.id`` and ``tnx.parent.id``.
        """
        self.input_tokens = self.output_tokens = 0
        start = _extern(TURN_SPAN_START)
        if start is None:
            return
        info = workflow.info()
        name = s.defn.name if s.defn is not None else s.id
        start(
            {
                "workflow_id": info.workflow_id,
                "run_id": info.run_id,
                "time_ns": workflow.time_ns(),
                "name": f"invoke_agent {name}",
                "attributes": {
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
        """Not observed (tool spans are the activities')."""

    def tokens_spent(self, s: HandleState, usage: Usage) -> None:
        """Add one call's usage (tokens) to the turn's totals."""
        self.input_tokens += usage.prompt_tokens
        self.output_tokens += usage.completion_tokens

    def turn_settled(self, s: HandleState, result: TaskResult) -> None:
        """End the turn span with the turn's outcome: ``gen_ai.usage.input_tokens`` and
        ``gen_ai.usage.output_tokens`` (this turn's LLM calls, summaries included),
        ``tnx.turn.status`` and ``tnx.turn.llm_calls`` (not on replay; no-op without the
        interceptor)."""
        end = _extern(TURN_SPAN_END)
        if end is None:
            return
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


def _extern(name: str) -> Any:
    """The extern function ``name`` when a span may be made now: not replaying, and the
    tracing interceptor installed; else None."""
    if workflow.unsafe.is_replaying():
        return None
    return workflow.extern_functions().get(name)
