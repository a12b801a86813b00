"""One LLM round trip of a turn (activity ``tnx.llm_call``), and how it ends when the turn
is interrupted or hits its wall limit (issue 12, items 5-7).

Deterministic, like all workflow code. How a call is awaited:

* the call is scheduled with ``WAIT_CANCELLATION_COMPLETED``: an interrupt (or the wall
  watchdog) cancels it and the turn waits until the activity acknowledged, so the handle's
  next call never overlaps it at the provider;
* a reply that comes in although the call was cancelled is counted (its tokens were paid),
  not kept;
* the activity gets the wall deadline (``deadline_ms``): it starts no model call past it and
  aborts one in flight at it (``LlmWallDeadline``). ``WALL_GRACE_MS`` after the deadline the
  turn stops waiting even without an acknowledgement (a worker that died with the call).
"""

from __future__ import annotations

import asyncio
from collections.abc import Callable
from datetime import timedelta
from typing import Any

from temporalio import workflow
from temporalio.common import RetryPolicy
from temporalio.exceptions import ActivityError, ApplicationError

from toolnexus_temporal.workflows.budgets import remaining_cost
from toolnexus_temporal.workflows.machine import TurnScratch, require_defn
from toolnexus_temporal.workflows.turn.context import policy_of
from toolnexus_temporal.workflows.visibility.visibility import Visibility

with workflow.unsafe.imports_passed_through():
    from toolnexus_temporal.workflows.contract.limits import SUMMARY_BYTES, fit
    from toolnexus_temporal.workflows.contract.messages import LlmCallInput, LlmCallResult
    from toolnexus_temporal.workflows.contract.models import Message, Usage
    from toolnexus_temporal.workflows.contract.names import (
        LLM_CALL_ACTIVITY,
        LLM_NON_RETRYABLE,
        workflow_id_for,
    )
    from toolnexus_temporal.workflows.contract.state import HandleState


class Interrupted(Exception):
    """Raised inside a turn when an interrupt (or the wall limit) aborted it."""


Count = Callable[[Usage], None]
"""Counts one answered call's usage (the turn's ``_count``)."""


async def llm_round_trip(
    s: HandleState,
    scratch: TurnScratch,
    vis: Visibility,
    new_messages: list[Message],
    count: Count,
) -> LlmCallResult:
    """Call the model once for handle ``s`` (its next call number, ``s.llm_seq``).

    Returns:
        The reply; its usage is not counted yet (the caller counts it).

    Raises:
        Interrupted: the call was cancelled or stopped by the wall deadline; a reply that
            came in anyway was counted through ``count``.
        ActivityError: the call failed after its retries.
    """
    defn = require_defn(s)
    opts = s.options
    s.turn.llm_seq += 1
    inp = LlmCallInput(
        conv_id=s.store_key or workflow_id_for(s.scope, s.id),
        base_len=s.turn.transcript_len,
        fence=s.turn.llm_seq,
        new_messages=new_messages,
        model=defn.model,
        style=defn.style,
        tools=defn.tools,
        team=defn.team,
        mcp=[server.name for server in defn.mcp],
        deadline_ms=s.wall_deadline_ms,
        context=policy_of(s),
        summary=s.turn.summary,
        need_price=remaining_cost(s) is not None,
    )
    options: dict[str, Any] = {
        "result_type": LlmCallResult,
        "task_queue": s.task_queue,
        "start_to_close_timeout": timedelta(milliseconds=opts.llm_timeout_ms),
        "heartbeat_timeout": timedelta(milliseconds=opts.llm_heartbeat_ms),
        "retry_policy": RetryPolicy(
            initial_interval=timedelta(milliseconds=opts.llm_initial_retry_ms),
            backoff_coefficient=2.0,
            maximum_attempts=opts.llm_max_attempts,
            non_retryable_error_types=list(LLM_NON_RETRYABLE),
        ),
        "summary": fit(f"LLM call for {s.id}", SUMMARY_BYTES),
    }
    handle = workflow.start_activity(
        LLM_CALL_ACTIVITY,
        inp,
        cancellation_type=workflow.ActivityCancellationType.WAIT_CANCELLATION_COMPLETED,
        **options,
    )
    return await _await_call(s, scratch, vis, handle, count)


async def _await_call(
    s: HandleState,
    scratch: TurnScratch,
    vis: Visibility,
    handle: workflow.ActivityHandle[Any],
    count: Count,
) -> LlmCallResult:
    """Wait until the call ended (see the module docstring)."""
    cancelled = False
    while not handle.done() and not scratch.llm_abandoned:
        try:
            await workflow.wait_condition(lambda: handle.done() or scratch.llm_abandoned)
        except asyncio.CancelledError:
            cancelled = True
            handle.cancel()
    if not handle.done():
        vis.trace(f"{s.id}: LLM call {s.turn.llm_seq} not acknowledged past the wall deadline")
        raise Interrupted()
    try:
        result: LlmCallResult = handle.result()
    except ActivityError as err:
        cause = err.cause
        kind = cause.type if isinstance(cause, ApplicationError) else None
        if kind == "LlmReplyTooLarge" and isinstance(cause, ApplicationError) and cause.details:
            count(Usage.model_validate(cause.details[0]))
        if kind == "LlmWallDeadline":
            scratch.wall_fired = True
            raise Interrupted() from err
        if cancelled:
            raise Interrupted() from err
        raise
    if cancelled or scratch.interrupt_requested or scratch.wall_fired:
        count(result.usage)
        raise Interrupted()
    return result
