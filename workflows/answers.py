"""Answers (CONTRACT §3 resume, §9.2) and, under protocol 3, parking on delegated tasks:
the part of :class:`~toolnexus_temporal.workflows.approvals.Approvals` that an Answer and a
task child's report drive. Rules in :mod:`~toolnexus_temporal.workflows.parking`.

* :meth:`AnswerRouting.answer` / :meth:`~AnswerRouting.admit`: an Answer (the ``answer``
  signal, the ``admit_answer`` update) goes to this handle's parked Request, or is forwarded
  down to the child whose parked Request has this id (protocol 3: routed by the id's handle
  part, from any ancestor, and reported to the parent at once).
* :meth:`AnswerRouting.sync_parking` (protocol 3): the surfaced Request of parked ``task``
  children, recomputed on every report, Answer and task call start and end.

Deterministic; no I/O.
"""

from __future__ import annotations

from temporalio import workflow

from toolnexus_temporal.workflows.machine import Machine, TurnScratch
from toolnexus_temporal.workflows.outbox import Signals
from toolnexus_temporal.workflows.parking import (
    answer_hop,
    parked_on,
    surfaced_child_request,
    verdict_of,
)
from toolnexus_temporal.workflows.visibility import Visibility

with workflow.unsafe.imports_passed_through():
    from toolnexus_temporal.workflows.models import Answer
    from toolnexus_temporal.workflows.names import PROTOCOL_HARDENED, SIGNAL_ANSWER
    from toolnexus_temporal.workflows.state import HandleState


class AnswerRouting:
    """Answers and protocol 3's parking on task children, for one handle (the base of
    :class:`~toolnexus_temporal.workflows.approvals.Approvals`).

    Per run: the Answers not yet taken by the parked turn, the ids forwarded to children, the
    Answers being delivered, the running ``task`` calls and this handle's own parked Request.

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
        self.s = s
        self.scratch = scratch
        self.vis = vis
        self.machine = machine
        self.outbox = outbox
        self.answers: dict[str, Answer] = {}
        self.forwarded: set[str] = set()
        self.task_children: dict[int, str] = {}
        """(protocol 3) The running ``task`` calls of this turn: call index → child id."""
        self.own_parked: str | None = None
        """(protocol 3) The id of this handle's own Request parked for an Answer from
        outside (not while an interpreter answers inline)."""
        self.delivering: dict[str, int] = {}
        """(protocol 3) Answers forwarded to a child parked on them, with the child's report
        seq at that moment (the ``admit_answer`` update waits for a newer report)."""
        self.seen_parked: set[str] = set()
        """(protocol 3) Task children seen parked in this run: they no longer hold back a
        later call's parked Request (:func:`surfaced_child_request`)."""
        self.own_suspension = False
        """A tool of this handle's own suspended and is being resolved (inline or parked):
        its suspension is not a parking on task children."""

    @property
    def hardened(self) -> bool:
        """Protocol 3: the parking and routing rules of issue 12 apply."""
        return self.s.protocol >= PROTOCOL_HARDENED

    def answer(self, answer: Answer) -> tuple[str | None, str | None]:
        """Route an Answer (CONTRACT §3 resume): to this handle's parked turn, or down to the
        child whose parked Request has this id.

        Returns:
            (None, the handle it was delivered to), or (the error, None): no pending
            Request, another id, already answered, or being cancelled. A rejection changes
            nothing and is recorded loudly (CONTRACT §9.2).
        """
        if self.hardened:
            return self.route(answer)
        s = self.s
        pending = s.pending_req
        if s.state != "suspended" or pending is None:
            error = f"{s.id} has no pending request"
        elif answer.id != pending.id:
            error = f"answer {answer.id!r} matches no pending request (pending: {pending.id!r})"
        elif answer.id in self.answers or answer.id in self.forwarded:
            error = f"request {answer.id!r} is already answered"
        elif self.scratch.interrupt_requested or s.closing:
            error = f"request {answer.id!r} is being cancelled (interrupt or close)"
        else:
            error = None
        if error is not None:
            self.vis.reject("answer", error)
            return error, None
        self.vis.trace(f"{s.id}: answer {answer.id} ({'ok' if answer.ok else 'not ok'})")
        for child_id, info in s.children_info.items():
            if info.pending_req is not None and info.pending_req.id == answer.id:
                # The answer is on its way: this handle resumes now (the waiting task sees the
                # child running); a child that refuses it reports `suspended` again.
                s.children_info[child_id] = info.model_copy(
                    update={"state": "running", "pending_req": None, "parked": False}
                )
                self.forwarded.add(answer.id)
                self.outbox.signal_later(child_id, SIGNAL_ANSWER, answer)
                return None, child_id
        self.answers[answer.id] = answer
        return None, s.id

    def route(self, answer: Answer) -> tuple[str | None, str | None]:
        """:meth:`routed`, then reported to the parent at once (``answer_id`` and
        ``answer_error``: a parent's ``admit_answer`` update waits for it), unless the id is
        outside this handle's subtree (no parent forwarded that: no report is owed)."""
        error, answered = self.routed(answer)
        if answer_hop(self.s, answer.id).to is not None:
            self.s.answer_id, self.s.answer_error = answer.id, error
            self.machine.report(now=True)
        return error, answered

    def routed(self, answer: Answer) -> tuple[str | None, str | None]:
        """Protocol 3's :meth:`answer`: route by the id's handle part (:func:`answer_hop`).

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
            pending = s.pending_req
            if self.own_parked is None or pending is None:
                error = f"answer {answer.id!r}: {s.id} has no pending request"
            elif answer.id != self.own_parked:
                error = f"answer {answer.id!r} matches no pending request (pending: {pending.id!r})"
            elif answer.id in self.answers:
                error = f"request {answer.id!r} is already answered"
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
            self.answers[answer.id] = answer
            s.pending_req = None
            self.machine.transition("running", f"answer {verdict}")
            return None, s.id
        info = s.children_info[hop.to]
        self.outbox.signal_later(hop.to, SIGNAL_ANSWER, answer)
        self.delivering[answer.id] = info.report_seq
        if parked_on(info) == answer.id:
            # The child is parked on it: it runs again (a child that refuses the Answer
            # reports `suspended` again), and this handle resumes or surfaces the next one.
            self.vis.trace(f"{s.id}: answer {answer.id} ({verdict}) → {hop.to}")
            s.children_info[hop.to] = info.model_copy(
                update={"state": "running", "pending_req": None, "parked": False}
            )
            self.forwarded.add(answer.id)
            self.seen_parked.add(hop.to)
            self.sync_parking()
        else:
            self.vis.trace(f"{s.id}: answer {answer.id} ({verdict}) forwarded to {hop.to}")
        return None, hop.to

    async def admit(self, answer: Answer) -> tuple[str | None, str | None]:
        """The ``admit_answer`` update: :meth:`answer`; under protocol 3 an Answer forwarded
        to a child returns once that child has processed it (its report names it), with its
        rejection if it rejected it: a ``wait`` on the child right after this update waits
        for the continued turn, never for the answered Request."""
        error, answered = self.answer(answer)
        seen = self.delivering.pop(answer.id, None)
        if error is None and answered is not None and seen is not None:
            s = self.s
            child = answered

            def processed() -> bool:
                info = s.children_info.get(child)
                if info is None or info.state == "closed":
                    return True
                return info.report_seq > seen and info.answer_id == answer.id

            await workflow.wait_condition(processed)
            info = s.children_info.get(child)
            if info is not None and info.state != "closed" and info.answer_error is not None:
                return f"{child}: {info.answer_error}", None
        return error, answered

    def track_task(self, index: int, child_id: str) -> None:
        """(Protocol 3) The ``task`` call ``index`` runs child ``child_id``."""
        self.task_children[index] = child_id
        self.sync_parking()

    def untrack_task(self, index: int, *, sync: bool = True) -> None:
        """(Protocol 3) The ``task`` call ``index`` is over: its result came (``sync``), or it
        was aborted (no sync: the turn settles by itself)."""
        if self.task_children.pop(index, None) is not None and sync:
            self.sync_parking()

    def sync_parking(self) -> None:
        """(Protocol 3) Make this handle's parking match its task children's reports: park
        on the first parked call's Request (call order) once no earlier call is still
        running without having parked (it may park first), surface another one as a new
        ``pending`` result when that changes, or resume when none is parked any more.

        Called on every child report, every Answer and every task call's start and end;
        idempotent. Does nothing during an interrupt, a wall-clock stop or a close (the
        turn settles by itself), nor while this handle's own tool suspension is resolved.
        """
        s = self.s
        if not self.hardened or s.state not in ("running", "suspended"):
            return
        if self.scratch.interrupt_requested or self.scratch.wall_fired or s.closing:
            return
        if self.own_suspension:
            return  # a tool of its own suspended (parked, or an interpreter answers inline)
        for child in self.task_children.values():
            info = s.children_info.get(child)
            if info is not None and info.answer_error is not None:
                self.forwarded.discard(info.answer_id or "")  # it refused it: still parked
            if parked_on(info) is not None:
                self.seen_parked.add(child)
        req = surfaced_child_request(s, self.task_children, self.forwarded, self.seen_parked)
        if req is None:
            if s.state == "suspended":
                s.pending_req = None
                self.machine.transition("running", "delegated task answered")
            return
        if s.state == "suspended" and s.pending_req is not None and s.pending_req.id == req.id:
            return  # already surfaced
        s.pending_req = req
        s.last_result = self.scratch.result("pending", req.prompt, pending=req)
        s.result_seq += 1
        if s.state == "running":
            self.machine.transition("suspended", f"delegated task waits for {req.kind}")
        else:
            self.vis.trace(f"{s.id}: surfaces {req.id} (delegated task waits for {req.kind})")
            self.vis.publish()
            self.machine.report()
