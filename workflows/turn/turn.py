"""The turn (CONTRACT §4, §5): the LLM loop, tool calls, suspension and delegation.

Deterministic, like all workflow code. One turn:

1. call the model (activity ``tnx.llm_call``) with the new messages;
2. run every tool call of the reply concurrently (activity ``tnx.tool_call`` per call; the
   ``task`` tool runs here, in workflow code: spawn → wake → wait → close of a child
   workflow), results appended in call order;
3. a tool that returns ``pending(...)`` suspends: the nearest interpreter (``wait_for`` of
   the handle, else of its ancestors) answers inline, or, with none, the turn parks
   ``suspended`` until the Answer arrives (signal or update ``answer``), then the tool runs
   once more with ``ctx.answer``; the turn goes on where it stopped (CONTRACT §9.1);
4. repeat until a reply has no tool calls, or ``max_turns`` round trips are used.

Steps 2 and 3 (one reply's tool calls) live in ``toolbatch.py``; a turn carried across
continue-as-new while parked is resumed here (``carry.py``).
"""

from __future__ import annotations

import asyncio
from collections.abc import Coroutine, Sequence
from datetime import timedelta
from typing import Any

from temporalio import workflow
from temporalio.common import RetryPolicy
from temporalio.exceptions import ActivityError

from toolnexus_temporal.workflows.approvals.approvals import Approvals
from toolnexus_temporal.workflows.budgets import BudgetLedger
from toolnexus_temporal.workflows.children.delegation import Delegation
from toolnexus_temporal.workflows.inbox import restore_drained, turn_ended, turn_started
from toolnexus_temporal.workflows.machine import Machine, TurnScratch, require_defn, restore
from toolnexus_temporal.workflows.rules.approvals import take_parked
from toolnexus_temporal.workflows.turn.context import summarize_if_due
from toolnexus_temporal.workflows.turn.llmcall import Interrupted, llm_round_trip
from toolnexus_temporal.workflows.turn.toolbatch import ToolBatch
from toolnexus_temporal.workflows.turn.workspace import Workspaces
from toolnexus_temporal.workflows.visibility.visibility import (
    Visibility,
    error_text,
    note_error,
)

with workflow.unsafe.imports_passed_through():
    from toolnexus_temporal.workflows.contract.clock import now_ms
    from toolnexus_temporal.workflows.contract.events import TurnObserver
    from toolnexus_temporal.workflows.contract.limits import SUMMARY_BYTES, fit
    from toolnexus_temporal.workflows.contract.mcp import call_options, server_of
    from toolnexus_temporal.workflows.contract.messages import (
        LlmCallResult,
        ToolCallInput,
    )
    from toolnexus_temporal.workflows.contract.models import (
        Answer,
        LimitName,
        Message,
        TaskResult,
        ToolCall,
        ToolOptions,
        ToolResult,
        Usage,
    )
    from toolnexus_temporal.workflows.contract.names import (
        BACKGROUND_TOOLS,
        TASK_TOOL,
        TOOL_CALL_ACTIVITY,
        TOOL_NON_RETRYABLE,
        WALL_GRACE_MS,
    )
    from toolnexus_temporal.workflows.contract.state import HandleState, ParkedTurn


class Turn:
    """The turn of one handle (see the module docstring).

    Owns ``HandleState.turn`` (:class:`TurnState`: ``transcript_len``, ``llm_seq``,
    ``unsent`` and the counters ``turns_total``, ``own_tokens``, ``tool_calls_total``), and
    the per-turn :class:`TurnScratch`; reads ``store_key`` and ``tool_options`` (set at
    creation, top level).

    Args:
        s: the handle's state model.
        scratch: the per-turn counters and flags (shared with approvals and interrupt).
        vis: trace lines.
        machine: settles the turn; live usage reports.
        budgets: the ledger and the budget check before each LLM call and tool batch.
        approvals: suspensions.
        delegation: the ``task`` tool.
        observers: told of the turn's events, in order (``contract/events.py``): the span,
            the metrics, the context bound (``agent.py``).
    """

    def __init__(
        self,
        s: HandleState,
        scratch: TurnScratch,
        vis: Visibility,
        machine: Machine,
        budgets: BudgetLedger,
        approvals: Approvals,
        delegation: Delegation,
        observers: Sequence[TurnObserver] = (),
    ) -> None:
        self.s = s
        self.scratch = scratch
        self.vis = vis
        self.machine = machine
        self.budgets = budgets
        self.approvals = approvals
        self.delegation = delegation
        self.tools = ToolBatch(
            s, scratch, budgets, approvals, delegation, self._tool_job, self._exec_tool
        )
        self.observers = tuple(observers)
        self.workspaces = Workspaces(s, vis)

    # ------------------------------------------------------------------ the turn

    async def run(self) -> None:
        """Run one admitted turn (see the module docstring).

        A turn is transactional when it is interrupted or fails: the transcript rolls back to
        the turn start (the store's uncommitted tail is dropped by the next call) and the
        drained inbox returns to the front of the inbox.
        """
        s = self.s
        body: Coroutine[Any, Any, TaskResult]
        parked = take_parked(s) if s.approval.parked is not None else None
        if parked is not None:  # carried across continue-as-new while parked
            restore(self.scratch, parked)
            body = self._resume(parked)
        else:
            defn = require_defn(s)
            user_text = turn_started(s)
            unsent_before = list(s.turn.unsent)
            new_messages: list[Message] = list(s.turn.unsent)
            s.turn.unsent = []
            if s.turn.transcript_len == 0 and not new_messages and defn.system_prompt:
                new_messages.append(Message(role="system", content=defn.system_prompt))
            new_messages.append(Message(role="user", content=user_text))
            self.scratch.start(new_messages)
            self.scratch.turn_start_len = s.turn.start_len = s.turn.transcript_len
            self.scratch.unsent_before = unsent_before
            body = self._loop()
        for o in self.observers:
            o.turn_started(s)
        watchdog = self._start_watchdog()
        result: TaskResult
        try:
            result = await body
        except (asyncio.CancelledError, Interrupted):
            if self.scratch.wall_fired:
                result = self._budget_stop("wallMs")
            else:
                result = self._rollback(None)
        except ActivityError as err:
            if self.scratch.wall_fired:
                result = self._budget_stop("wallMs")
            else:
                cause = None if self.scratch.interrupt_requested else error_text(err)
                result = self._rollback(cause)
        finally:
            if watchdog is not None and not watchdog.done():
                watchdog.cancel()
        turn_ended(s)
        approvals = self.approvals
        if (  # a Request was made or carried this turn: clear it (else nothing to clear)
            s.approval.pending_req is not None
            or s.approval.escalated_to is not None
            or approvals.own_parked is not None
            or approvals.own_suspension
        ):
            approvals.clear_pending()
        self.scratch.interrupt_requested = False
        self.machine.settle(result)
        for o in self.observers:
            o.turn_settled(s, result)

    async def _resume(self, parked: ParkedTurn) -> TaskResult:
        """Go on with a turn carried across continue-as-new while parked: wait for the
        Answer, re-run the tool with it, resolve the later suspensions in call order, then
        the LLM loop as if the turn had never left this run."""
        if self.scratch.interrupt_requested:
            raise Interrupted()
        self.scratch.open_calls = parked.calls
        self.scratch.next_messages = await self.tools.resume(parked)
        self.scratch.open_calls = []
        return await self._loop()

    async def _loop(self) -> TaskResult:
        """The LLM loop; budgets are checked before every LLM call and every tool batch
        (CONTRACT §6, §9.3)."""
        s = self.s
        max_turns = s.budget.max_turns
        while True:
            if max_turns is not None and self.scratch.llm_calls >= max_turns:
                s.turn.unsent = self.scratch.next_messages
                return self.scratch.result(
                    "incomplete",
                    f"stopped after {self.scratch.llm_calls} LLM round trip(s): max_turns reached",
                    limit="maxTurns",
                )
            await self.budgets.refresh()
            limit = self.budgets.limit(0)
            if limit is not None:
                return self._budget_stop(limit)
            if await summarize_if_due(s, self.vis, self._count_tokens, self.scratch.next_messages):
                limit = self.budgets.limit(0)
                if limit is not None:
                    return self._budget_stop(limit)
            reply = await self._llm_call(self.scratch.next_messages)
            self._count(reply.usage)
            s.turn.transcript_len = reply.stored_len
            for o in self.observers:
                o.llm_answered(s, reply)
            self.scratch.next_messages = []
            calls = reply.message.tool_calls or []
            if not calls:
                return self.scratch.result("done", reply.message.content or "")
            # Usage rolls up live: after every call under a finite pool above (siblings drain
            # the same pool), else at most once per live_usage_ms; the rest goes with the
            # settle (or suspension) report, which saves ~9 events per call.
            if s.usage.floor is not None or s.options.live_usage_ms is not None:
                self.machine.report()  # at once under a finite pool, else coalesced
            self.scratch.open_calls = calls
            await self.budgets.refresh()
            limit = self.budgets.limit(len(calls))
            if limit is not None:
                return self._budget_stop(limit)
            self.scratch.next_messages = await self.tools.run(calls)
            self.scratch.open_calls = []

    def _budget_stop(self, limit: LimitName) -> TaskResult:
        """Stop the turn at a budget limit: ``incomplete``, partial work and transcript kept.
        Tool calls the model asked for but that did not run get error results, sent first
        on the next wake, so the transcript stays well-formed."""
        s = self.s
        if self.scratch.open_calls:
            s.turn.unsent = [
                Message(
                    role="tool",
                    tool_call_id=call.id,
                    content=f"error: not run: budget exhausted ({limit})",
                )
                for call in self.scratch.open_calls
            ]
        else:
            s.turn.unsent = self.scratch.next_messages
        self.scratch.open_calls = []
        return self.scratch.result(
            "incomplete", f"budget exhausted ({limit}): the turn stopped", limit=limit
        )

    def _start_watchdog(self) -> asyncio.Task[None] | None:
        """A durable timer at the wall deadline that stops the running turn."""
        deadline = self.s.wall_deadline_ms
        if deadline is None:
            return None
        left_ms = deadline - now_ms()
        if left_ms <= 0:
            return None  # the first budget check stops the turn

        async def fire() -> None:
            await workflow.sleep(timedelta(milliseconds=left_ms))
            self.scratch.wall_fired = True
            if self.scratch.task is not None:
                self.scratch.task.cancel()
            # The LLM activity stops itself at the deadline; wait briefly for its outcome
            # (a reply that came in is counted), then stop waiting: a worker that died with
            # the call never acknowledges, and no later call of this handle can start past
            # the deadline anyway.
            await workflow.sleep(timedelta(milliseconds=WALL_GRACE_MS))
            self.scratch.llm_abandoned = True

        return asyncio.create_task(fire())

    def _rollback(self, cause: str | None) -> TaskResult:
        """Undo an interrupted (``cause`` None) or failed turn and build its result."""
        s = self.s
        s.turn.transcript_len = self.scratch.turn_start_len
        s.turn.unsent = self.scratch.unsent_before
        restore_drained(s)
        if cause is None:
            return self.scratch.result(
                "interrupted", "the turn was interrupted; its transcript was not kept"
            )
        result = self.scratch.result("error", f"LLM call failed: {cause}")
        note_error(s, result.text)
        return result

    async def _llm_call(self, new_messages: list[Message]) -> LlmCallResult:
        """One LLM round trip (activity ``tnx.llm_call``) appending ``new_messages``
        (``llmcall.py``).

        Raises:
            Interrupted: an interrupt came before the call was scheduled, or
                cancelled it, or the wall deadline stopped it.
            ActivityError: the call failed after its retries, or was cancelled.
        """
        if self.scratch.interrupt_requested:
            raise Interrupted()
        return await llm_round_trip(self.s, self.scratch, self.vis, new_messages, self._count)

    def _count(self, usage: Usage) -> None:
        """Count one answered LLM call: its round trip and its tokens (CONTRACT §6)."""
        self.scratch.llm_calls += 1
        self.s.turn.turns_total += 1
        self._count_tokens(usage)

    def _count_tokens(self, usage: Usage) -> None:
        """Count tokens spent (an LLM call's, or the summarizer's), in tokens, on the handle
        and its budgets."""
        self.scratch.tokens += usage.total_tokens
        self.s.turn.own_tokens += usage.total_tokens
        self.scratch.cost = self.scratch.cost + usage.cost
        self.s.turn.own_cost = self.s.turn.own_cost + usage.cost
        for o in self.observers:
            o.tokens_spent(self.s, usage)
        self.budgets.recount()

    # ------------------------------------------------------------------ tools

    async def _tool_job(self, index: int, call: ToolCall) -> ToolResult:
        """Run the unique tool call ``index`` (:meth:`_job`); the observers are told its
        result."""
        result = await self._job(index, call)
        for o in self.observers:
            o.tool_settled(self.s, call, result)
        return result

    async def _job(self, index: int, call: ToolCall) -> ToolResult:
        """Run the unique tool call ``index``: ``task``, a registered tool, or an error
        result naming the available tools (an MCP server's as ``<server>__*``)."""
        s = self.s
        defn = require_defn(s)
        if defn.team and (call.name == TASK_TOOL or call.name in BACKGROUND_TOOLS):
            return await self.delegation.tool(index, call)
        if call.name not in defn.tools and server_of(defn, call.name) is None:
            available = ", ".join(
                [
                    *defn.tools,
                    *([TASK_TOOL, *BACKGROUND_TOOLS] if defn.team else []),
                    *(f"{server.name}__*" for server in defn.mcp),
                ]
            )
            return ToolResult(
                output=f"error: unknown tool {call.name!r} (available: {available or 'none'})",
                is_error=True,
            )
        return await self._exec_tool(call, None)

    async def _exec_tool(
        self, call: ToolCall, answer: Answer | None, pinned: tuple[str, timedelta] | None = None
    ) -> ToolResult:
        """One tool activity; its failure becomes an ``is_error`` result (never a failed
        turn). A workspace tool's runs on the worker holding the handle's workspace
        (``workspace.py``), which calls this again with ``pinned``: that worker's task queue
        and the schedule-to-start timeout; a pinned call raises its ``ActivityError``."""
        s = self.s
        opts = s.tool_options.get(call.name) or call_options(s.defn, call.name) or ToolOptions()
        # An interrupt waits until the tool acknowledged its cancellation (a sync tool's
        # thread has stopped, activities/threads.py), so it never outlives the turn.
        cancellation = workflow.ActivityCancellationType.WAIT_CANCELLATION_COMPLETED
        try:
            if opts.workspace and pinned is None:
                return await self.workspaces.run(
                    call, lambda queue, wait: self._exec_tool(call, answer, (queue, wait))
                )
            result: ToolResult = await workflow.execute_activity(
                TOOL_CALL_ACTIVITY,
                ToolCallInput(
                    tool=call.name,
                    arguments=call.arguments,
                    handle_id=s.id,
                    call_id=call.id,
                    answer=answer,
                ),
                result_type=ToolResult,
                task_queue=pinned[0] if pinned else None,
                schedule_to_start_timeout=pinned[1] if pinned else None,
                start_to_close_timeout=timedelta(milliseconds=opts.timeout_ms),
                heartbeat_timeout=timedelta(seconds=30),
                retry_policy=RetryPolicy(
                    initial_interval=timedelta(milliseconds=opts.initial_retry_ms),
                    maximum_attempts=opts.max_attempts,
                    non_retryable_error_types=list(TOOL_NON_RETRYABLE),
                ),
                summary=fit(f"tool {call.name} for {s.id}", SUMMARY_BYTES),
                cancellation_type=cancellation,
            )
        except ActivityError as err:
            if pinned is not None:
                raise  # workspace.py tells a lost worker from other failures
            if self.scratch.interrupt_requested:
                self.vis.trace(f"{s.id}: tool {call.name} ({call.id}) stopped (interrupt)")
                raise
            return ToolResult(output=f"error: {error_text(err)}", is_error=True)
        return result
