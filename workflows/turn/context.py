"""The context policy in a turn (issue 26 item 1): which policy a handle has, and the
summarizer call (activity ``tnx.llm_summarize``) that folds older turns into the summary.

Deterministic, like all workflow code: the summarizer runs before an LLM call when the
previous call's result said its view left messages out or its reported prompt tokens passed
the bound (``TurnState.context_due``, set from activity results only). Its tokens count on
the handle like any LLM call's (usage, budgets), not as a round trip (``max_turns``). The
summary (bounded) is kept in ``TurnState.summary`` and carried by continue-as-new; the
model's view itself is built in the activity (``workflows/contract/context.py``), so
workflow history does not grow with the transcript.
"""

from __future__ import annotations

from collections.abc import Callable
from datetime import timedelta

from temporalio import workflow
from temporalio.common import RetryPolicy
from temporalio.exceptions import ActivityError

from toolnexus_temporal.workflows.budgets import remaining_cost
from toolnexus_temporal.workflows.machine import require_defn

with workflow.unsafe.imports_passed_through():
    from toolnexus_temporal.workflows.contract.limits import SUMMARY_BYTES, fit
    from toolnexus_temporal.workflows.contract.messages import (
        LlmCallResult,
        SummarizeInput,
        SummarizeResult,
    )
    from toolnexus_temporal.workflows.contract.models import (
        ContextPolicy,
        TaskResult,
        ToolCall,
        ToolResult,
        Usage,
    )
    from toolnexus_temporal.workflows.contract.names import (
        LLM_NON_RETRYABLE,
        LLM_SUMMARIZE_ACTIVITY,
        workflow_id_for,
    )
    from toolnexus_temporal.workflows.contract.state import HandleState


def policy_of(s: HandleState) -> ContextPolicy | None:
    """The handle's context policy: its AgentDef's, else the runtime's, else None."""
    defn = s.defn
    return (defn.context if defn is not None else None) or s.options.context


def note_reply(s: HandleState, reply: LlmCallResult) -> None:
    """After an answered call: mark the summarizer due when its view left messages out or the
    provider reported more prompt tokens than the bound (deterministic: activity results)."""
    policy = policy_of(s)
    if policy is None or policy.older != "summarize":
        return
    if reply.dropped > 0 or reply.usage.prompt_tokens > policy.max_tokens:
        s.turn.context_due = True


class ContextBound:
    """The context bound, a turn observer (``contract/events.py``): after each answered call
    it marks the summarizer due (:func:`note_reply`); the turn runs the summarizer
    (:func:`summarize_if_due`) before its next call."""

    def turn_started(self, s: HandleState) -> None:
        """Not observed."""

    def llm_answered(self, s: HandleState, reply: LlmCallResult) -> None:
        """See :func:`note_reply`."""
        note_reply(s, reply)

    def tokens_spent(self, s: HandleState, usage: Usage) -> None:
        """Not observed."""

    def tool_settled(self, s: HandleState, call: ToolCall, result: ToolResult) -> None:
        """Not observed."""

    def turn_settled(self, s: HandleState, result: TaskResult) -> None:
        """Not observed."""


async def summarize_if_due(s: HandleState, count_tokens: Callable[[Usage], None]) -> None:
    """Run the summarizer when it is due (module docstring); its usage goes to
    ``count_tokens``. A failed summarizer call leaves the summary as it was (the view drops
    with a marker meanwhile) and is tried again after the next call.

    Raises:
        asyncio.CancelledError: the turn was interrupted meanwhile.
    """
    policy = policy_of(s)
    if not s.turn.context_due or policy is None or policy.older != "summarize":
        return
    s.turn.context_due = False
    defn = require_defn(s)
    opts = s.options
    inp = SummarizeInput(
        conv_id=s.store_key or workflow_id_for(s.scope, s.id),
        length=s.turn.transcript_len,
        policy=policy,
        summary=s.turn.summary,
        model=defn.model,
        style=defn.style,
        deadline_ms=s.wall_deadline_ms,
        need_price=remaining_cost(s) is not None,
    )
    try:
        result: SummarizeResult = await workflow.execute_activity(
            LLM_SUMMARIZE_ACTIVITY,
            inp,
            result_type=SummarizeResult,
            task_queue=s.task_queue,
            start_to_close_timeout=timedelta(milliseconds=opts.llm_timeout_ms),
            heartbeat_timeout=timedelta(milliseconds=opts.llm_heartbeat_ms),
            retry_policy=RetryPolicy(
                initial_interval=timedelta(milliseconds=opts.llm_initial_retry_ms),
                backoff_coefficient=2.0,
                maximum_attempts=opts.llm_max_attempts,
                non_retryable_error_types=list(LLM_NON_RETRYABLE),
            ),
            summary=fit(f"summarize the context of {s.id}", SUMMARY_BYTES),
            cancellation_type=workflow.ActivityCancellationType.WAIT_CANCELLATION_COMPLETED,
        )
    except ActivityError:
        workflow.logger.warning("%s: the summarizer failed; the view drops meanwhile", s.id)
        return
    count_tokens(result.usage)
    s.turn.summary_tokens += result.usage.total_tokens
    if result.summary is not None:
        s.turn.summary = result.summary
