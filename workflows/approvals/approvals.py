"""Approvals: suspension, Answers and parking, for one handle (CONTRACT §5, §3 resume,
§9.1, §9.2). The rules are pure functions in
:mod:`~toolnexus_temporal.workflows.rules.approvals`; a parked turn carried across
continue-as-new is in :mod:`~toolnexus_temporal.workflows.lifecycle.carry`.

* **Suspension** (:meth:`Approvals.suspend`): a tool that returns ``pending(...)`` suspends
  its turn. The nearest interpreter (the handle's own ``wait_for``, else its ancestors')
  answers inline through the ``tnx.interpret`` activity; with none, the handle parks
  ``suspended`` until the Answer arrives (the ``answer`` signal or the ``admit_answer``
  update), and the same turn goes on: the tool re-runs with the Answer
  (:func:`rerun_result`), or a decline becomes the tool's error result.
* **Answers** (:meth:`Approvals.received`, :meth:`Approvals.admit`): an Answer goes to this
  handle's parked Request, or is forwarded down to the child on the path to the handle that
  owns its id (routed by the id's handle part, from any ancestor), and is reported to the
  parent at once. An accepted Answer resumes the handle in its handler.
* **Parking on delegated tasks** (:meth:`Approvals.sync_parking`): a handle whose ``task``
  children park parks too, surfacing the first parked call's Request (call order) stamped
  with its own path; recomputed on every child report, Answer and task call start and end.

Every pending result is published through :meth:`Machine.publish_result
<toolnexus_temporal.workflows.machine.Machine.publish_result>`, the one path that settles or
publishes a result. Deterministic; no I/O.
"""

from __future__ import annotations

import asyncio
from datetime import timedelta
from typing import Any, Final, NamedTuple

from temporalio import workflow
from temporalio.common import RetryPolicy
from temporalio.exceptions import ActivityError

from toolnexus_temporal.workflows.approvals.audit import (
    Delivery,
    Stamp,
    answer_digest,
    answered_error,
    approver_error,
    approvers_of,
    deadline_ms,
    entry_of,
    escalation_due_ms,
    expires_at_for,
    expires_while_escalated,
    record,
)
from toolnexus_temporal.workflows.machine import Machine, TurnScratch
from toolnexus_temporal.workflows.outbox import Signals
from toolnexus_temporal.workflows.rules.approvals import (
    answer_hop,
    declined_result,
    parked_on,
    stamped,
    surfaced_child_request,
    verdict_of,
)
from toolnexus_temporal.workflows.rules.roster import update_child
from toolnexus_temporal.workflows.visibility.visibility import Visibility, error_text

with workflow.unsafe.imports_passed_through():
    from toolnexus_temporal.workflows.contract.clock import now_ms
    from toolnexus_temporal.workflows.contract.limits import SUMMARY_BYTES, fit
    from toolnexus_temporal.workflows.contract.messages import (
        EditCheck,
        EditChecked,
        InterpretInput,
        PrincipalFound,
        PrincipalLookup,
    )
    from toolnexus_temporal.workflows.contract.models import (
        Answer,
        ApprovalPolicy,
        Request,
        ToolCall,
        ToolResult,
    )
    from toolnexus_temporal.workflows.contract.names import (
        ANSWER_PRINCIPAL_ACTIVITY,
        CHECK_EDIT_ACTIVITY,
        INTERPRET_ACTIVITY,
        INTERPRET_NON_RETRYABLE,
        SIGNAL_ANSWER,
    )
    from toolnexus_temporal.workflows.contract.state import (
        CheckedAnswer,
        HandleState,
        ParkedTurn,
    )


LOOKUPS_MAX: Final = 4
"""Principal lookups (``tnx.answer_principal``) one handle runs at once, and as many edit
checks (``tnx.check_edit``); and Answers by signal being checked (``ApprovalState.checking``).
Each Answer to a
Request with approvers runs one before it is checked, and the Request's id is in the
approval queue for anyone who may signal: 3,052 ``answer`` signals in 20 s from 8 senders
reached the server's 2,000 pending activities per workflow, and every workflow task failed
from then on (the handle hung, queries refused). Past the cap an Answer is refused at once,
loudly (fail-closed: ``send it again``)."""

REPORT_BURST_MS: Final = 1_000
"""An Answer rejected within this many ms of the previous rejection is reported to the parent
with the next coalesced report (within ``live_usage_ms``) rather than at once."""

BUSY: Final = f"{LOOKUPS_MAX} other Answers to it were being checked at that moment"
"""Why an Answer past :data:`LOOKUPS_MAX` checks is refused (its sender unchecked)."""

CHECKING_MAX: Final = LOOKUPS_MAX
"""Answers by signal waiting for their checks (``ApprovalState.checking``), checked one at a
time, in the order they came; another that needs a check meanwhile is refused at once
(:data:`BUSY`). One at a time: each check reads the run's history on the worker,
and under a flood of ``answer`` signals (16 senders, 320-500/s, ``bench.answer_flood``) four
at once kept the worker busy enough that a workflow task outlived 100 buffered signals, which
the server force-fails; the worker's replay then outlived the next 100, and no task completed
until the flood stopped (a query waited 17-23 s). The ``admit_answer`` update (the client's
path) runs its own lookups, up to :data:`LOOKUPS_MAX` at once."""


CHECK_RETRY = RetryPolicy(initial_interval=timedelta(milliseconds=500), maximum_attempts=3)
"""The retries of the worker-side checks of an Answer (its principal lookup, its edit's
schema check): three attempts, 0.5 s apart at first; a check that still fails refuses the
Answer (fail-closed)."""


def busy_edit(answer: Answer, tool: str, why: str) -> str:
    """Why ``answer``'s edit of ``tool``'s arguments is refused unchecked (``why``: the
    checks already under way)."""
    return (
        f"answer {answer.id!r}: its edit of {tool}'s arguments could not be checked"
        f" ({why}); send it again"
    )


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


class Approvals:
    """Suspensions, Answers and parking of one handle.

    Owns ``HandleState.approval`` (:class:`ApprovalState`: ``pending_req``, ``request_seq``,
    ``interpreters``, ``answer_id`` and ``answer_error``; ``parked`` with ``carry.py``,
    ``pending_since_*`` stamped by ``Visibility.publish``); per run, the Answers not yet
    taken by the parked turn, the ids forwarded to children, the Answers being delivered, the
    running ``task`` calls and this handle's own parked Request.

    Args:
        s: the handle's state model.
        scratch: the turn's counters (results) and interrupt flag.
        vis: trace, publish and rejections.
        machine: transitions, reports and the published result.
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
        self.s = s
        self.scratch = scratch
        self.vis = vis
        self.machine = machine
        self.outbox = outbox
        self.answers: dict[str, Answer] = {}
        self.forwarded: set[str] = set()
        self.task_children: dict[int, str] = {}
        """The running ``task`` calls of this turn: call index → child id."""
        self.own_parked: str | None = None
        """The id of this handle's own Request parked for an Answer from
        outside (not while an interpreter answers inline)."""
        self.delivering: dict[str, int] = {}
        """Answers forwarded to a child parked on them, with the child's report
        seq at that moment (the ``admit_answer`` update waits for a newer report)."""
        self.seen_parked: set[str] = set()
        """Task children seen parked in this run: they no longer hold back a
        later call's parked Request (:func:`surfaced_child_request`)."""
        self.own_suspension = False
        """A tool of this handle's own suspended and is being resolved (inline or parked):
        its suspension is not a parking on task children."""
        self.own_tool: str | None = None
        """The tool whose Request is parked (``own_parked``): its approvers apply, and an
        edit is checked against its parameters schema."""
        self.own_args: str | None = None
        """The arguments (JSON text) of the call whose suspension is being resolved: the
        audit keeps them."""
        self.edit_checks = 0
        """Edit checks in flight (:meth:`edit_error`, at most :data:`LOOKUPS_MAX`)."""
        self.lookups = 0
        """Principal lookups in flight (:meth:`stamp_of`, at most :data:`LOOKUPS_MAX`)."""
        self.checker_running = False
        """The task of :meth:`check` runs."""
        self.rejected_ms = -REPORT_BURST_MS
        """When this run last rejected an Answer it reports (workflow time, ms)."""

    def clear_pending(self) -> None:
        """The turn settled: no Request is pending or escalated any more, and a carried turn
        stopped before it waited again leaves nothing of what :meth:`carried` pre-set."""
        self.s.approval.pending_req = None
        self.s.approval.escalated_to = None
        self.own_parked, self.own_suspension = None, False

    def carried(self, parked: ParkedTurn) -> None:
        """A run resumed a turn carried across continue-as-new (``carry.py``): parked on its
        own tool, an Answer may come before the turn waits again (this run's first task),
        and reports of other children must not resume it as if it were parked on them;
        parked on ``task`` children, follow their reports."""
        if parked.index >= 0:
            self.own_parked = parked.request.id
            self.own_suspension = True
            call = parked.calls[parked.index]
            self.own_tool, self.own_args = call.name, call.arguments
        else:
            self.task_children = dict(parked.children)

    @property
    def policy(self) -> ApprovalPolicy:
        """The agent's expiry, escalation and approvers (the root's: none)."""
        return self.s.defn.approval if self.s.defn is not None else ApprovalPolicy()

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
            result for the model (``declined: ...``, ``expired: ...`` with "this action did not
            run and will not run", ``cancelled: ...``).
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
        nearest = s.approval.interpreters[0] if s.approval.interpreters else None
        self.own_args = call.arguments
        if carried is None:
            s.approval.escalated_to = None  # a new Request: not escalated yet
            fields = dict(fields)
            expires = expires_at_for(fields, self.policy, now_ms())
            if expires is not None:
                fields["expiresAt"] = expires
        if carried is not None:  # still parked on it (its Answer may have come already)
            req = carried
            answer = await self._await_answer(req, call.name)
        elif nearest is not None:
            req = s.approval.pending_req = stamped(s, fields)
            asked = now_ms()
            self.machine.transition("suspended", f"{call.name} needs {req.kind}")
            self.vis.trace(f"{s.id}: escalate → {nearest.handle_id} answers ({nearest.name})")
            answer = await self.interpret(nearest.name, nearest.handle_id, req)
            if answer.by is None:
                answer = answer.model_copy(update={"by": f"interpreter {nearest.name}"})
            self._audit(req, answer, "interpreter", call.name, asked)
        else:
            # Park: waiters get `pending` now; the Answer continues this very turn.
            req = s.approval.pending_req = stamped(s, fields)
            self.machine.publish_result(self.scratch.result("pending", req.prompt, pending=req))
            self.machine.transition(
                "suspended", f"{call.name} needs {req.kind}; waiting for an answer"
            )
            answer = await self._await_answer(req, call.name)
        if s.state == "suspended":  # else the Answer's handler resumed it
            s.approval.pending_req = None
            s.approval.escalated_to = None
            self.machine.transition("running", f"answer {verdict_of(answer)}")
        if not answer.ok:
            return declined_result(req, answer)
        return Answered(request=req, answer=answer)

    async def _await_answer(self, req: Request, tool: str) -> Answer:
        """Wait, parked, for the Answer to ``req`` (``own_parked`` names it meanwhile), with a
        durable timer for its deadline and its escalation (``audit.py``): unanswered at the
        deadline it is answered ``expired``; an escalation asks an interpreter for the
        parent, or sets ``AgentEscalatedTo``. No deadline and no escalation: no timer."""
        self.own_parked, self.own_tool = req.id, tool
        try:
            await self._deadlines(req, tool)
        finally:
            self.own_parked = self.own_tool = None
        return self.answers.pop(req.id)

    async def _deadlines(self, req: Request, tool: str) -> None:
        """:meth:`_await_answer`'s wait: until ``req.id`` is in ``answers``."""
        s, policy = self.s, self.policy
        expires = deadline_ms(req)
        while req.id not in self.answers:
            asked = s.approval.pending_since_ms or now_ms()
            escalated = s.approval.escalated_to is not None
            escalate_at = escalation_due_ms(policy, asked, expires, escalated)
            decline_at = expires if expires_while_escalated(policy) else None
            due = [t for t in (escalate_at, decline_at) if t is not None]
            if not due:
                await workflow.wait_condition(lambda: req.id in self.answers)
                return
            wait_ms = max(0, min(due) - now_ms())
            try:
                await workflow.wait_condition(
                    lambda: req.id in self.answers, timeout=timedelta(milliseconds=wait_ms)
                )
            except TimeoutError:
                pass
            if req.id in self.answers:
                return
            if escalate_at is not None and now_ms() >= escalate_at:
                await self._escalate(req, tool, asked)
            elif decline_at is not None and now_ms() >= decline_at:
                answer = Answer(id=req.id, ok=False, reason="expired", by="expiry timer")
                late = now_ms() - decline_at
                self.vis.trace(
                    f"{s.id}: request {req.id} expired (deadline {req.expires_at}, fired"
                    f" {late} ms after it)"
                )
                self._audit(req, answer, "expiry", tool, asked)
                self.answers[req.id] = answer

    async def _escalate(self, req: Request, tool: str, asked: int) -> None:
        """Escalate ``req`` (:class:`~toolnexus_temporal.workflows.contract.models.
        Escalation`): to an interpreter answering for the parent, or to a named queue."""
        s = self.s
        esc = self.policy.escalate
        assert esc is not None
        if esc.queue is not None:
            s.approval.escalated_to = f"queue:{esc.queue}"
            self.vis.trace(f"{s.id}: escalate {req.id} → queue {esc.queue} (unanswered)")
            self.vis.publish()
            return
        assert esc.interpreter is not None
        s.approval.escalated_to = f"interpreter:{esc.interpreter}"
        parent = s.parent or s.id
        self.vis.trace(f"{s.id}: escalate {req.id} → {parent} answers ({esc.interpreter})")
        answer = await self.interpret(esc.interpreter, parent, req)
        if req.id in self.answers:  # an Answer from outside came first
            return
        if answer.by is None:
            answer = answer.model_copy(update={"by": f"interpreter {esc.interpreter}"})
        answer = answer.model_copy(update={"id": req.id})
        self._audit(req, answer, "escalation", tool, asked)
        self.answers[req.id] = answer

    def _audit(
        self,
        req: Request,
        answer: Answer,
        path: str,
        tool: str | None,
        asked: int | None,
        stamp: Stamp | None = None,
        delivery: Delivery | None = None,
    ) -> None:
        """Record ``req`` answered by ``answer`` through ``path`` in the audit (``stamp``:
        the principal lookup its approvers were checked with; ``delivery``: the event that
        carried it)."""
        s = self.s
        entry = entry_of(
            req,
            answer,
            path=path,
            tool=tool,
            asked_ms=asked,
            now_ms=now_ms(),
            escalated_to=s.approval.escalated_to,
            stamp=stamp,
            arguments=self.own_args,
            delivery=delivery,
        )
        record(s, entry)
        routed = f" (routed down; sent via {entry.routed_via})" if entry.routed_via else ""
        self.vis.trace(
            f"{s.id}: audit {req.id}: {verdict_of(answer)} via {path}{routed}"
            + (f" by {answer.by}" if answer.by else "")
        )

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
                summary=fit(f"interpreter {name} answers {req.id}", SUMMARY_BYTES),
            )
        except ActivityError as err:
            if self.scratch.interrupt_requested:
                raise
            self.vis.trace(f"{self.s.id}: interpreter {name} FAILED ({error_text(err)})")
            return Answer(id=req.id, ok=False, reason="cancelled")
        return answer

    async def stamp_of(
        self, answer: Answer, delivery: Delivery, last_event_id: int | None = None
    ) -> Stamp | None:
        """The server-stamped principal of the event that delivered ``answer`` (``delivery``:
        its update id, or its place among the run's ``answer`` signals), read by the
        ``tnx.answer_principal`` activity, only when
        the Answer is for this handle's own parked Request and that Request has approvers
        (:func:`approvers_of`); None otherwise (nothing is run). A failed lookup (every
        attempt failed, a few seconds) or one that found no event is a :class:`Stamp` with
        ``unreadable``: the Answer is then refused (fail-closed, :func:`approver_error`); so
        is one that comes while :data:`LOOKUPS_MAX` lookups are in flight (nothing is run).
        ``last_event_id``: for a signal, the history length when its handler ran (default:
        now); with ``delivery.run_id`` it names the run to read, an earlier one for an Answer
        carried across continue-as-new."""
        s = self.s
        if not self.needs_lookup(answer):
            return None
        if self.lookups >= LOOKUPS_MAX:
            return Stamp(unreadable=BUSY)
        info = workflow.info()
        update = delivery.update_id
        if update is None and last_event_id is None:
            last_event_id = info.get_current_history_length()
        lookup = PrincipalLookup(
            workflow_id=info.workflow_id,
            run_id=delivery.run_id,
            request_id=answer.id,
            digest=answer_digest(answer),
            path="update" if update is not None else "signal",
            update_id=update,
            last_event_id=last_event_id if update is None else None,
            signal_seq=delivery.signal_seq,
        )
        self.lookups += 1
        try:
            found: PrincipalFound = await workflow.execute_activity(
                ANSWER_PRINCIPAL_ACTIVITY,
                lookup,
                result_type=PrincipalFound,
                start_to_close_timeout=timedelta(seconds=30),
                retry_policy=CHECK_RETRY,
                summary=fit(f"principal of the answer to {answer.id}", SUMMARY_BYTES),
            )
        except ActivityError as err:
            self.vis.trace(f"{s.id}: principal of {answer.id} unreadable ({error_text(err)})")
            unreadable = f"the history that carried it was unreadable: {error_text(err)}"
            return Stamp(unreadable=unreadable)
        finally:
            self.lookups -= 1
        if found.event_id is None:  # never expected: refused rather than checked weaker
            self.vis.trace(f"{s.id}: principal of {answer.id}: no history event carried it")
            return Stamp(unreadable="no history event of this run carried this Answer")
        p = found.principal
        self.vis.trace(
            f"{s.id}: principal of {answer.id}: "
            + (f"{p.type}:{p.name} (verified)" if p else "none (stated identity, unverified)")
        )
        return Stamp(principal=p)

    async def edit_error(self, answer: Answer) -> str | None:
        """Why ``answer``'s ``edited_args`` may not replace the arguments of the call parked
        on it (one line), or None: it fits the tool's parameters schema, or there is nothing
        to check here (no edit, or the Answer is not for this handle's own parked Request:
        the handle that owns it checks it). Checked by the ``tnx.check_edit`` activity on
        the worker, which knows the tool's schema (the registry's tool, or the MCP server's
        ``inputSchema``). A check that failed, or one asked while :data:`LOOKUPS_MAX` run, is
        a refusal (fail-closed: ``send it again``)."""
        s = self.s
        tool = self.own_tool
        if not self.needs_edit_check(answer) or tool is None:
            return None
        refused = f"answer {answer.id!r}: its edit of {tool}'s arguments"
        if self.edit_checks >= LOOKUPS_MAX:
            return busy_edit(answer, tool, f"{LOOKUPS_MAX} others were")
        self.edit_checks += 1
        try:
            checked: EditChecked = await workflow.execute_activity(
                CHECK_EDIT_ACTIVITY,
                EditCheck(tool=tool, arguments=answer.edited_args, handle_id=s.id),
                result_type=EditChecked,
                start_to_close_timeout=timedelta(seconds=60),
                retry_policy=CHECK_RETRY,
                summary=fit(f"check the edit of {answer.id}", SUMMARY_BYTES),
            )
        except ActivityError as err:
            self.vis.trace(f"{s.id}: edit of {answer.id} unchecked ({error_text(err)})")
            return f"{refused} could not be checked ({error_text(err)}); send it again"
        finally:
            self.edit_checks -= 1
        if checked.error is None:
            return None
        return f"{refused} does not fit its schema: {checked.error}"

    def needs_lookup(self, answer: Answer) -> bool:
        """Whether ``answer`` is for this handle's own parked Request and that Request has
        approvers: its sender's principal is then read (:meth:`stamp_of`)."""
        s = self.s
        pending = s.approval.pending_req
        return (
            pending is not None
            and answer.id == self.own_parked
            and answer_hop(s, answer.id).to == s.id
            and approvers_of(self.policy, pending, self.own_tool) is not None
        )

    def needs_edit_check(self, answer: Answer) -> bool:
        """Whether ``answer`` edits the arguments of this handle's own parked call: the
        edit is then checked against the tool's schema (:meth:`edit_error`)."""
        s = self.s
        return (
            answer.edited_args is not None
            and self.own_tool is not None
            and answer.id == self.own_parked
            and answer_hop(s, answer.id).to == s.id
        )

    def received(self, answer: Answer, signal_seq: int) -> None:
        """The ``answer`` signal (``signal_seq``: its place among this run's ``answer``
        signals, from 1; the handler counts every one). O(1) and synchronous, so a flood of
        Answers costs each signal little and holds back no continue-as-new (issue 36 item
        8): an Answer that needs no worker-side check is routed at once (:meth:`answer`);
        one that does (:meth:`needs_lookup`, :meth:`needs_edit_check`) joins
        ``ApprovalState.checking`` and is checked after the handler (:meth:`check`), or is
        refused at once, loudly, when :data:`CHECKING_MAX` are being checked (fail-closed:
        ``send it again``)."""
        info = workflow.info()
        delivery = Delivery(run_id=info.run_id, signal_seq=signal_seq)
        lookup, edit = self.needs_lookup(answer), self.needs_edit_check(answer)
        if not (lookup or edit):
            self.answer(answer, "signal", None, None, delivery)
            return
        checking = self.s.approval.checking
        if len(checking) >= CHECKING_MAX:
            stamp = Stamp(unreadable=BUSY) if lookup else None
            busy = None if lookup else busy_edit(answer, self.own_tool or "", BUSY)
            self.answer(answer, "signal", stamp, busy, delivery)
            return
        queued = CheckedAnswer(
            answer=answer,
            run_id=info.run_id,
            signal_seq=signal_seq,
            last_event_id=info.get_current_history_length(),
        )
        checking.append(queued)
        self.check()

    def check(self) -> None:
        """Check the Answers of ``ApprovalState.checking``, oldest first, one at a time, in a
        task of its own (started once): each one's principal (:meth:`stamp_of`, in the run
        that delivered it) and its edit (:meth:`edit_error`), then route it (:meth:`answer`)
        and drop it from ``checking``. A continue-as-new meanwhile abandons the task; the
        next run starts it again for what it carried (``RunLoop.run``)."""
        if self.checker_running:
            return
        self.checker_running = True

        async def run() -> None:
            checking = self.s.approval.checking
            try:
                while checking:
                    queued = checking[0]
                    delivery = Delivery(run_id=queued.run_id, signal_seq=queued.signal_seq)
                    try:
                        stamp = await self.stamp_of(queued.answer, delivery, queued.last_event_id)
                        edit_error = await self.edit_error(queued.answer)
                        self.answer(queued.answer, "signal", stamp, edit_error, delivery)
                    finally:
                        if checking and checking[0] is queued:
                            checking.pop(0)
            finally:
                self.checker_running = False

        asyncio.create_task(run())  # noqa: RUF006 (its work is in ``checking``: carried over)

    def answer(
        self,
        answer: Answer,
        path: str = "signal",
        stamp: Stamp | None = None,
        edit_error: str | None = None,
        delivery: Delivery | None = None,
    ) -> tuple[str | None, str | None]:
        """Route an Answer (CONTRACT §3 resume; :meth:`routed`), then report it to the parent
        at once (``answer_id`` and ``answer_error``: a parent's ``admit_answer`` update waits
        for it), unless the id is outside this handle's subtree (no parent forwarded that: no
        report is owed).

        Returns:
            (None, the handle it was delivered to), or (the error, None): no pending
            Request, another id, already answered, or being cancelled. A rejection changes
            nothing and is recorded loudly (CONTRACT §9.2).
        """
        error, answered = self.routed(answer, path, stamp, edit_error, delivery)
        if answer_hop(self.s, answer.id).to is not None:
            self.s.approval.answer_id, self.s.approval.answer_error = answer.id, error
            # A rejection right after another goes with the next coalesced report: a flood
            # of rejected Answers must not become a flood of reports to the parent, each
            # one a signal in flight that holds back continue-as-new (issue 36 item 8).
            t = now_ms()
            burst = error is not None and t - self.rejected_ms < REPORT_BURST_MS
            if error is not None:
                self.rejected_ms = t
            self.machine.report(now=not burst, coalesce=burst)
        return error, answered

    def routed(
        self,
        answer: Answer,
        path: str = "signal",
        stamp: Stamp | None = None,
        edit_error: str | None = None,
        delivery: Delivery | None = None,
    ) -> tuple[str | None, str | None]:
        """Route ``answer`` by its id's handle part (:func:`answer_hop`); ``stamp``: the
        principal lookup of :meth:`stamp_of` (the approvers are checked with it);
        ``edit_error``: why its edit was refused (:meth:`edit_error`), for this handle's own
        Request; ``delivery``: the event that carried it (recorded in the audit when taken).

        This handle's own parked Request takes it, and the handle is ``running`` again at
        once (a ``wait`` right after it waits for the continued turn). A child on the path
        gets it forwarded: when that child's report shows it parked on this very id, this
        handle resumes or surfaces its next parked task at once (:meth:`sync_parking`);
        otherwise the child routes it further down and the owner checks it.

        Returns:
            (None, the handle it was delivered to: this one or the child it was forwarded
            to), or (the error, None), recorded loudly; a rejection changes nothing.
        """
        s = self.s
        hop = answer_hop(s, answer.id)
        error = hop.error
        if hop.to == s.id:
            pending = s.approval.pending_req
            earlier = answered_error(s, answer.id)
            if earlier is not None and answer.id != self.own_parked:
                error = earlier
            elif self.own_parked is None or pending is None:
                error = f"answer {answer.id!r}: {s.id} has no pending request"
            elif answer.id != self.own_parked:
                error = f"answer {answer.id!r} matches no pending request (pending: {pending.id!r})"
            elif answer.id in self.answers:
                error = answered_error(s, answer.id) or f"request {answer.id!r} is already answered"
            else:
                error = approver_error(self.policy, pending, self.own_tool, answer.by, stamp)
                error = error or edit_error
        elif hop.to is not None and answer.id in self.forwarded:
            error = f"request {answer.id!r} is already answered"
        if error is None and (self.scratch.interrupt_requested or s.closing):
            error = f"request {answer.id!r} is being cancelled (interrupt or close)"
        if error is not None or hop.to is None:
            error = error or "rejected"
            self.vis.reject("answer", error)
            return error, None
        verdict = verdict_of(answer)
        if hop.to == s.id:
            self.vis.trace(f"{s.id}: answer {answer.id} ({verdict})")
            assert s.approval.pending_req is not None
            self._audit(
                s.approval.pending_req,
                answer,
                path,
                self.own_tool,
                s.approval.pending_since_ms,
                stamp,
                delivery,
            )
            self.answers[answer.id] = answer
            s.approval.pending_req = None
            s.approval.escalated_to = None
            self.machine.transition("running", f"answer {verdict}")
            return None, s.id
        info = s.roster.children_info[hop.to]
        # the child's page names the path the first handle took it by (walk 8)
        routed = answer.routed_via or (path if path in ("signal", "update") else None)
        self.outbox.signal_later(
            hop.to, SIGNAL_ANSWER, answer.model_copy(update={"routed_via": routed})
        )
        self.delivering[answer.id] = info.report_seq
        if parked_on(info) == answer.id:
            # The child is parked on it: it runs again (a child that refuses the Answer
            # reports `suspended` again), and this handle resumes or surfaces the next one.
            # the hop this handle took it by: the child's audit line says `via signal` (the
            # forward), `tnx audit` names this one (walk 6 read them as a contradiction)
            self.vis.trace(f"{s.id}: answer {answer.id} ({verdict}) via {path} → {hop.to}")
            update_child(s, hop.to, state="running", pending_req=None, parked=False)
            self.forwarded.add(answer.id)
            self.seen_parked.add(hop.to)
            self.sync_parking()
        else:
            self.vis.trace(
                f"{s.id}: answer {answer.id} ({verdict}) via {path} forwarded to {hop.to}"
            )
        return None, hop.to

    async def admit(self, answer: Answer) -> tuple[str | None, str | None]:
        """The ``admit_answer`` update: :meth:`answer`; an Answer forwarded
        to a child returns once that child has processed it (its report names it), with its
        rejection if it rejected it: a ``wait`` on the child right after this update waits
        for the continued turn, never for the answered Request. A child that closed before it
        took the Answer (its close was on its way when the Answer was forwarded) rejects it,
        loudly: an Answer is never reported taken when nobody took it."""
        update = workflow.current_update_info()
        delivery = Delivery(
            run_id=workflow.info().run_id, update_id=update.id if update is not None else None
        )
        stamp = await self.stamp_of(answer, delivery)
        edit_error = await self.edit_error(answer)
        error, answered = self.answer(answer, "update", stamp, edit_error, delivery)
        seen = self.delivering.pop(answer.id, None)
        if error is None and answered is not None and seen is not None:
            s = self.s
            child = answered

            def took() -> bool:
                info = s.roster.children_info.get(child)
                return info is not None and info.report_seq > seen and info.answer_id == answer.id

            def processed() -> bool:
                info = s.roster.children_info.get(child)
                return info is None or info.state == "closed" or took()

            await workflow.wait_condition(processed)
            info = s.roster.children_info.get(child)
            if not took() or info is None:
                error = f"answer {answer.id!r}: {child} closed before it took it"
                self.vis.reject("answer", error)
                return error, None
            if info.answer_error is not None:
                return f"{child}: {info.answer_error}", None
        return error, answered

    def track_task(self, index: int, child_id: str) -> None:
        """The ``task`` call ``index`` runs child ``child_id``."""
        self.task_children[index] = child_id
        self.sync_parking()

    def untrack_task(self, index: int, *, sync: bool = True) -> None:
        """The ``task`` call ``index`` is over: its result came (``sync``), or it
        was aborted (no sync: the turn settles by itself)."""
        if self.task_children.pop(index, None) is not None and sync:
            self.sync_parking()

    def sync_parking(self) -> None:
        """Make this handle's parking match its task children's reports: park
        on the first parked call's Request (call order) once no earlier call is still
        running without having parked (it may park first), surface another one as a new
        ``pending`` result when that changes, or resume when none is parked any more.

        Called on every child report, every Answer and every task call's start and end;
        idempotent. Does nothing during an interrupt, a wall-clock stop or a close (the
        turn settles by itself), nor while this handle's own tool suspension is resolved.
        """
        s = self.s
        if s.state not in ("running", "suspended"):
            return
        if self.scratch.interrupt_requested or self.scratch.wall_fired or s.closing:
            return
        if self.own_suspension:
            return  # a tool of its own suspended (parked, or an interpreter answers inline)
        for child in self.task_children.values():
            info = s.roster.children_info.get(child)
            if info is not None and info.answer_error is not None:
                self.forwarded.discard(info.answer_id or "")  # it refused it: still parked
            if parked_on(info) is not None:
                self.seen_parked.add(child)
        req = surfaced_child_request(s, self.task_children, self.forwarded, self.seen_parked)
        if req is None:
            if s.state == "suspended":
                s.approval.pending_req = None
                self.machine.transition("running", "delegated task answered")
            return
        if (
            s.state == "suspended"
            and s.approval.pending_req is not None
            and s.approval.pending_req.id == req.id
        ):
            return  # already surfaced
        s.approval.pending_req = req
        self.machine.publish_result(self.scratch.result("pending", req.prompt, pending=req))
        if s.state == "running":
            self.machine.transition("suspended", f"delegated task waits for {req.kind}")
        else:
            self.vis.trace(f"{s.id}: surfaces {req.id} (delegated task waits for {req.kind})")
            self.vis.publish()
            self.machine.report()
