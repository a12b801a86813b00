"""The context policy in a turn (issue 26 item 1): which policy a handle has, and the
summarizer call (activity ``tnx.llm_summarize``) that folds older turns into the summary.

Deterministic, like all workflow code. Under ``older="summarize"`` the summarizer runs
before an LLM call (:func:`summarize_if_due`) when

* that call's request would pass the bound: the committed transcript's view with nothing
  left out (``TurnState.view_tokens``, reported by the last LLM or summarizer result) plus
  the messages the call adds (estimated, clipped) is over ``max_tokens`` (issue 36 item 10:
  before the first such call, not after it); or
* the previous call's result says its view left messages out (a summarizer that failed) or
  the provider reported more prompt tokens than the bound (``TurnState.context_due``).

Once it runs it folds every older turn one request holds (``context.summary_span``), and
calls the model again (at most :data:`SUMMARIZER_ROUNDS` times in all) while older turns are
left and the context is still over ``ContextPolicy.low_water`` (half the bound by default):
the context ends well below the bound, so the summarizer runs once per many turns, not
before every one (issue 36 item 5). Every summarizer call is a line of the handle's trace
(``rt.trace``) with why it ran, what it folded and its tokens. Its tokens count on the
handle like any LLM call's (usage, budgets), not as a round trip (``max_turns``). The
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
from toolnexus_temporal.workflows.visibility.visibility import Visibility

with workflow.unsafe.imports_passed_through():
    from toolnexus_temporal.workflows.contract.context import clipped_tokens
    from toolnexus_temporal.workflows.contract.limits import SUMMARY_BYTES, fit
    from toolnexus_temporal.workflows.contract.messages import (
        LlmCallResult,
        SummarizeInput,
        SummarizeResult,
    )
    from toolnexus_temporal.workflows.contract.models import (
        ContextPolicy,
        Message,
        TaskResult,
        ToolCall,
        ToolResult,
        Usage,
        context_policy,
    )
    from toolnexus_temporal.workflows.contract.names import (
        LLM_NON_RETRYABLE,
        LLM_SUMMARIZE_ACTIVITY,
        workflow_id_for,
    )
    from toolnexus_temporal.workflows.contract.state import HandleState

SUMMARIZER_ROUNDS = 4
"""The most summarizer calls before one LLM call (each folds at least one older turn)."""


def policy_of(s: HandleState) -> ContextPolicy | None:
    """The handle's context policy (``contract/models.context_policy``): its AgentDef's,
    else the runtime's, else ``DEFAULT_CONTEXT``; None: ``"unbounded"``."""
    defn = s.defn
    return context_policy(defn.context if defn is not None else None, s.options.context)


def note_reply(s: HandleState, reply: LlmCallResult) -> None:
    """After an answered call: keep its ``view_tokens``, and mark the summarizer due when its
    view left messages out or the provider reported more prompt tokens than the bound
    (deterministic: activity results)."""
    policy = policy_of(s)
    if policy is None or policy.older != "summarize":
        return
    s.turn.view_tokens = reply.view_tokens
    if reply.dropped > 0:
        s.turn.context_due = True
        s.turn.context_why = f"the last request left {reply.dropped} message(s) out"
    elif reply.usage.prompt_tokens > policy.max_tokens:
        s.turn.context_due = True
        s.turn.context_why = (
            f"the provider reported {reply.usage.prompt_tokens} prompt tokens, over the "
            f"bound of {policy.max_tokens}"
        )


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


def pending_turns(messages: list[Message]) -> int:
    """The turns ``messages`` (about to be sent) start: their ``user`` messages."""
    return sum(1 for m in messages if m.role == "user")


def due_reason(s: HandleState, policy: ContextPolicy, pending: list[Message]) -> str | None:
    """Why the summarizer runs before the call that sends ``pending``, or None when it does
    not (module docstring)."""
    if s.turn.nothing_to_fold and pending_turns(pending) == 0:
        return None  # no turn became older since the summarizer found nothing to fold
    size = s.turn.view_tokens + clipped_tokens(pending, policy)
    if size > policy.max_tokens:
        return (
            f"the next request would be about {size} tokens, over the bound of {policy.max_tokens}"
        )
    return (s.turn.context_why or "due") if s.turn.context_due else None


async def summarize_if_due(
    s: HandleState,
    vis: Visibility,
    count_tokens: Callable[[Usage], None],
    pending: list[Message],
) -> bool:
    """Run the summarizer before the LLM call that sends ``pending`` when it is due, until
    the context fits the low-water mark (module docstring); its usage goes to
    ``count_tokens``, and each call is a trace line. A failed summarizer call leaves the
    summary as it was (the view drops with a marker meanwhile) and is tried again before
    the next call.

    Returns:
        Whether the summarizer was asked (its tokens may have reached a budget).

    Raises:
        asyncio.CancelledError: the turn was interrupted meanwhile.
    """
    policy = policy_of(s)
    if policy is None or policy.older != "summarize":
        return False
    if pending_turns(pending):
        s.turn.nothing_to_fold = False  # a new turn makes the stored ones older
    why = due_reason(s, policy, pending)
    if why is None:
        return False
    s.turn.context_due = False
    s.turn.context_why = ""
    turns = pending_turns(pending)
    tokens = clipped_tokens(pending, policy)
    for _ in range(SUMMARIZER_ROUNDS):
        result = await _summarize_once(s, policy, turns)
        if result is None:
            vis.trace(f"{s.id}: summarizer failed ({why}); the view drops meanwhile")
            return True
        s.turn.view_tokens = result.view_tokens
        s.turn.nothing_to_fold = result.older_left == 0
        if result.summary is None:
            s.turn.nothing_to_fold = True
            return True
        count_tokens(result.usage)
        s.turn.summary_tokens += result.usage.total_tokens
        s.turn.summary = result.summary
        vis.trace(
            f"{s.id}: summarizer folded {result.folded} message(s) ({why}): "
            f"{result.usage.total_tokens} tokens ({result.usage.prompt_tokens} in, "
            f"{result.usage.completion_tokens} out); context now about "
            f"{result.view_tokens + tokens} tokens"
        )
        if result.older_left == 0 or result.view_tokens + tokens <= policy.low_water:
            return True
        why = f"still over the low-water mark of {policy.low_water} tokens"
    return True


async def _summarize_once(
    s: HandleState, policy: ContextPolicy, turns: int
) -> SummarizeResult | None:
    """One summarizer call; None when it failed after its retries."""
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
        pending_turns=turns,
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
        return None
    return result
