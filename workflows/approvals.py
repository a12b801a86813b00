"""Suspension and approvals (CONTRACT §5, §3 resume, §9.1, §9.2).

A tool that returns ``pending(...)`` suspends its turn. The nearest interpreter (the
handle's own ``wait_for``, else its ancestors') answers inline through the ``tnx.interpret``
activity; with none, the handle parks ``suspended`` until the Answer arrives (the
``answer`` signal or the ``admit_answer`` update), and the same turn goes on. A handle whose
delegated ``task`` child parks parks too, with the child's Request stamped with its own path;
an Answer given to it is routed down to that child.

Protocol 3 (issue 12; rules in :mod:`~toolnexus_temporal.workflows.parking`): the surfaced
Request of parked ``task`` children is recomputed on every report and Answer (the first
parked call in call order; a change is a new ``pending`` result); an accepted Answer resumes
the handle in its handler; an Answer sent to any ancestor is forwarded down by its id. The
Answer routing and that parking are in :mod:`~toolnexus_temporal.workflows.answers` (the
base class :class:`~toolnexus_temporal.workflows.answers.AnswerRouting`).

This module holds :class:`Approvals` (suspension, inline interpreters, waiting parked for
the Answer, protocol 1 and 2's parking on a delegated task's child), :class:`Answered` and
:func:`rerun_result`.

:meth:`Approvals.suspend` returns the Answer (the turn re-runs the tool with it, see
:func:`rerun_result`) or a ready decline result. Deterministic; no I/O.
"""

from __future__ import annotations

from datetime import timedelta
from typing import Any, NamedTuple

from temporalio import workflow
from temporalio.common import RetryPolicy
from temporalio.exceptions import ActivityError

from toolnexus_temporal.workflows.answers import AnswerRouting
from toolnexus_temporal.workflows.machine import Machine, TurnScratch
from toolnexus_temporal.workflows.outbox import Signals
from toolnexus_temporal.workflows.parking import stamped, verdict_of, with_path
from toolnexus_temporal.workflows.visibility import Visibility, error_text

with workflow.unsafe.imports_passed_through():
    from toolnexus_temporal.workflows.messages import InterpretInput
    from toolnexus_temporal.workflows.models import Answer, Request, ToolCall, ToolResult
    from toolnexus_temporal.workflows.names import (
        INTERPRET_ACTIVITY,
        INTERPRET_NON_RETRYABLE,
    )
    from toolnexus_temporal.workflows.state import HandleState


class Answered(NamedTuple):
    """A suspension answered ``ok``: the turn re-runs the tool with ``answer``."""

    request: Request
    answer: Answer


def rerun_result(request: Request, again: ToolResult) -> ToolResult:
    """The tool result after the re-run with the Answer: a second suspension is an
    ``unresolved`` error result (CONTRACT §5), anything else is the result."""
    if isinstance(again.metadata.get("pending"), dict):
        return ToolResult(
            output=f"unresolved: {request.prompt} (the tool suspended again after its answer)",
            is_error=True,
        )
    return again


class Approvals(AnswerRouting):
    """Suspensions, Answers and parking of one handle.

    Owns ``pending_req``, ``request_seq`` and ``interpreters``; per run, the delegated tasks
    parked on a child's Request (by tool call index). Answers and protocol 3's parking on
    task children come from :class:`~toolnexus_temporal.workflows.answers.AnswerRouting`.

    Args:
        s: the handle's state model.
        scratch: the turn's counters (results) and interrupt flag.
        vis: trace, publish and rejections.
        machine: transitions and reports.
        outbox: forwards an Answer to a child.
    """

    def __init__(
        self,
        s: HandleState,
        scratch: TurnScratch,
        vis: Visibility,
        machine: Machine,
        outbox: Signals,
    ) -> None:
        super().__init__(s, scratch, vis, machine, outbox)
        self.parked_tasks: dict[int, Request] = {}

    async def suspend(
        self, call: ToolCall, fields: dict[str, Any], carried: Request | None = None
    ) -> Answered | ToolResult:
        """Resolve one suspension (CONTRACT §5): the nearest interpreter answers inline, else
        the handle parks until the Answer arrives; then it runs again.

        Args:
            call: the tool call that suspended.
            fields: its ``metadata["pending"]`` (a Request without ``id``).
            carried: the Request this suspension already parked on in an earlier run (a
                parked turn carried across continue-as-new): the handle is still parked on
                it and only waits for its Answer.

        Returns:
            The Answer when ``ok`` (the caller re-runs the tool with it), else the error
            result for the model (``declined: ...``, ``expired: ...``, ``cancelled: ...``).
        """
        self.own_suspension = True
        try:
            return await self._suspend(call, fields, carried)
        finally:
            self.own_suspension = False

    async def _suspend(
        self, call: ToolCall, fields: dict[str, Any], carried: Request | None
    ) -> Answered | ToolResult:
        """:meth:`suspend` itself."""
        s = self.s
        nearest = s.interpreters[0] if s.interpreters else None
        if carried is not None:  # still parked on it (its Answer may have come already)
            req = carried
            answer = await self._await_answer(req)
        elif nearest is not None:
            req = s.pending_req = stamped(s, fields)
            self.machine.transition("suspended", f"{call.name} needs {req.kind}")
            self.vis.trace(f"{s.id}: escalate → {nearest.handle_id} answers ({nearest.name})")
            answer = await self.interpret(nearest.name, nearest.handle_id, req)
        else:
            # Park: waiters get `pending` now; the Answer continues this very turn.
            req = s.pending_req = stamped(s, fields)
            s.last_result = self.scratch.result("pending", req.prompt, pending=req)
            s.result_seq += 1
            self.machine.transition(
                "suspended", f"{call.name} needs {req.kind}; waiting for an answer"
            )
            answer = await self._await_answer(req)
        if not self.hardened or s.state == "suspended":  # 3: the Answer's handler resumed it
            s.pending_req = None
            self.machine.transition("running", f"answer {verdict_of(answer)}")
        if not answer.ok:
            return ToolResult(output=f"{answer.reason or 'declined'}: {req.prompt}", is_error=True)
        return Answered(request=req, answer=answer)

    async def _await_answer(self, req: Request) -> Answer:
        """Wait, parked, for the Answer to ``req`` (``own_parked`` names it meanwhile)."""
        self.own_parked = req.id
        try:
            await workflow.wait_condition(lambda: req.id in self.answers)
        finally:
            self.own_parked = None
        return self.answers.pop(req.id)

    async def interpret(self, name: str, answerer: str, req: Request) -> Answer:
        """Ask interpreter ``name`` (on behalf of handle ``answerer``) to answer ``req``
        (activity ``tnx.interpret``, timeout ``options.interpreter_timeout_ms``). A failure
        is traced and answers ``cancelled``; during an interrupt it is re-raised."""
        try:
            answer: Answer = await workflow.execute_activity(
                INTERPRET_ACTIVITY,
                InterpretInput(interpreter=name, answerer=answerer, request=req),
                result_type=Answer,
                start_to_close_timeout=timedelta(
                    milliseconds=self.s.options.interpreter_timeout_ms
                ),
                heartbeat_timeout=timedelta(seconds=30),
                retry_policy=RetryPolicy(
                    maximum_attempts=3,
                    non_retryable_error_types=list(INTERPRET_NON_RETRYABLE),
                ),
                summary=f"interpreter {name} answers {req.id}",
            )
        except ActivityError as err:
            if self.scratch.interrupt_requested:
                raise
            self.vis.trace(f"{self.s.id}: interpreter {name} FAILED ({error_text(err)})")
            return Answer(id=req.id, ok=False, reason="cancelled")
        return answer

    # ---- parking for a delegated task's child

    def is_parked(self, index: int) -> bool:
        """Whether the ``task`` call ``index`` is parked on its child's Request."""
        return index in self.parked_tasks

    def park_for_child(self, index: int, child_req: Request) -> None:
        """The child of ``task`` call ``index`` parked on ``child_req``: this handle parks too,
        surfacing the first parked call's Request (in call order) with its own path."""
        s = self.s
        req = with_path(s, child_req)
        self.parked_tasks[index] = req
        first = self.parked_tasks[min(self.parked_tasks)]
        if s.state == "suspended":
            s.pending_req = first
            self.vis.publish()
            self.machine.report()
            return
        s.pending_req = first
        s.last_result = self.scratch.result("pending", first.prompt, pending=first)
        s.result_seq += 1
        self.machine.transition("suspended", f"delegated task waits for {req.kind}")

    def unpark_for_child(self, index: int) -> None:
        """The child of ``task`` call ``index`` runs again: surface the next parked call's
        Request, or resume (suspended→running) when none is left."""
        s = self.s
        self.parked_tasks.pop(index, None)
        if self.parked_tasks:
            s.pending_req = self.parked_tasks[min(self.parked_tasks)]
            self.vis.publish()
            self.machine.report()
            return
        s.pending_req = None
        self.machine.transition("running", "delegated task answered")

    def forget_task(self, index: int) -> None:
        """The ``task`` call ``index`` was aborted: it is no longer parked."""
        self.parked_tasks.pop(index, None)
