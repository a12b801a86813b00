"""What the outside sees of a handle: the trace, search attributes, the web UI's current
details, the read models, and loud rejection of bad signal input (CONTRACT §7, §8).

The rules are plain functions over ``HandleState`` (``append_trace``, ``view_of``,
``status_of``; the web UI's current details and the pending Request's search attributes are in
``operator.py``); :class:`Visibility` applies them from workflow code, passing
``workflow.now()`` in. Deterministic; no I/O.
"""

from __future__ import annotations

from typing import Any, Final, Protocol, TypeVar

from temporalio import workflow
from temporalio.exceptions import ActivityError, ApplicationError, CancelledError

from toolnexus_temporal.workflows.rules.approvals import stamp_pending_since
from toolnexus_temporal.workflows.rules.roster import all_children, children_count
from toolnexus_temporal.workflows.visibility.operator import (
    OperatorView,
    current_details,
)

with workflow.unsafe.imports_passed_through():
    from pydantic import BaseModel, TypeAdapter, ValidationError

    from toolnexus_temporal.workflows.contract.clock import now_ms
    from toolnexus_temporal.workflows.contract.limits import DETAILS_BYTES, fit
    from toolnexus_temporal.workflows.contract.messages import CloseRequest, WakeRequest
    from toolnexus_temporal.workflows.contract.models import (
        HandleStateName,
        HandleStatus,
        HandleView,
        InboxItem,
        TraceLine,
    )
    from toolnexus_temporal.workflows.contract.names import (
        AGENT_ESCALATED_TO,
        AGENT_REQUEST_ID,
        PUBLIC_SIGNALS,
        ROOT_ID,
    )
    from toolnexus_temporal.workflows.contract.state import HandleState

INVALID: Final = object()
"""Marks a signal whose input was rejected (see :meth:`Visibility.one`)."""

_M = TypeVar("_M", bound=BaseModel)

_WAKE_PAYLOAD: TypeAdapter[WakeRequest | str | None] = TypeAdapter(WakeRequest | str | None)
_CLOSE_PAYLOAD: TypeAdapter[CloseRequest | None] = TypeAdapter(CloseRequest | None)


class Log(Protocol):
    """The recording side of :class:`Visibility` that other components need (a unit test
    passes a fake)."""

    def trace(self, line: str) -> None:
        """Append one trace line."""

    def reject(self, verb: str, error: str) -> None:
        """Record a rejected input loudly."""


def view_of(s: HandleState) -> HandleView:
    """Build the public view of a handle state (CONTRACT §2 fields)."""
    return HandleView(
        **_status_fields(s),
        parent=s.parent,
        depth=s.depth,
        last_result=s.last_result,
        defn=s.defn,
        store_key=s.store_key,
        slot_parent=s.leases.slot_parent,
        subtree_tool_calls=s.usage.subtree_tool_calls,
        report_seq=s.report_seq,
        pending_since_ms=s.approval.pending_since_ms,
        escalated_to=s.approval.escalated_to if s.approval.pending_req else None,
        name=s.defn.name if s.defn else ROOT_ID,
        inbox_count=len(s.intake.items) + len(s.background.waiting),
        children=all_children(s),
        conv_id=s.id,
        queued=s.leases.slot_waiting,
        paused=s.pause.paused,
        tick=s.ticks.spec,
        next_tick_ms=(
            s.ticks.next_ms if s.ticks.spec is not None and s.state != "closed" else None
        ),
        messages_waiting=len(s.intake.wakes),
        window_ends_ms=s.intake.due_ms if s.intake.wakes else None,
    )


def status_of(s: HandleState) -> HandleStatus:
    """Build the small status returned by verbs."""
    return HandleStatus(
        **_status_fields(s),
        inbox_count=len(s.intake.items) + len(s.background.waiting),
        children_count=children_count(s),
        queued=s.leases.slot_waiting,
        paused=s.pause.paused,
    )


def _status_fields(s: HandleState) -> dict[str, Any]:
    """The fields a HandleStatus (and so a HandleView) copies from the state as they are."""
    return {
        "id": s.id,
        "state": s.state,
        "usage_total": s.usage.usage_total,
        "turns_total": s.turn.turns_total,
        "tool_calls_total": s.turn.tool_calls_total,
        "pool_tokens": s.usage.pool_tokens,
        "pool_tool_calls": s.usage.pool_tool_calls,
        "wall_deadline_ms": s.wall_deadline_ms,
        "pending_req": s.approval.pending_req,
        "result_seq": s.result_seq,
        "transcript_len": s.turn.transcript_len,
        "last_error": s.last_error,
        "cost": s.usage.cost,
        "pool_cost_usd": s.usage.pool_cost_usd,
    }


def append_trace(s: HandleState, line: str, at_ms: int) -> None:
    """Append a trace line stamped ``at_ms`` (ms since the epoch, workflow time), keeping at
    most ``options.trace_cap`` lines (the oldest go; ``trace_seq`` keeps counting)."""
    s.trace_seq += 1
    s.trace.append(TraceLine(seq=s.trace_seq, at_ms=at_ms, line=line))
    if len(s.trace) > s.options.trace_cap:
        del s.trace[: len(s.trace) - s.options.trace_cap]


def error_cause(err: BaseException) -> str:
    """The innermost readable message of a Temporal failure chain (at most 300 characters)."""
    cause: BaseException | None = err
    while cause is not None and getattr(cause, "cause", None) is not None:
        cause = cause.cause  # type: ignore[attr-defined]
    return str(getattr(cause, "message", None) or cause or err)[:300]


def error_text(err: ActivityError) -> str:
    """The readable cause of a failed activity: ``cancelled``, the ApplicationError's message,
    or the failure's text."""
    cause = err.cause
    if isinstance(cause, CancelledError):
        return "cancelled"
    if isinstance(cause, ApplicationError):
        return cause.message
    return str(cause or err)


def short_error(err: ValidationError) -> str:
    """The first problem of a validation error as ``field.path: message``."""
    first = err.errors()[0]
    where = ".".join(str(p) for p in first.get("loc", ())) or "payload"
    return f"{where}: {first.get('msg', 'invalid')}"


LAST_ERROR_CHARS = 500
"""How much of an error ``last_error`` keeps."""
REJECT_TRACE_CHARS = 200
"""How much of a rejection's reason its trace line keeps (``last_error`` keeps
``LAST_ERROR_CHARS``)."""
REJECT_COALESCE = 16
"""How many of the latest trace lines an equal rejection is counted on (no new line)."""
REJECT_LOG_CAP = 20
"""Rejections of one run logged one by one; later ones are counted (a summary is logged)."""
REJECT_LOG_EVERY = 1_000
"""Past ``REJECT_LOG_CAP``, a summary warning every this many rejections."""


def note_error(s: HandleState, error: str) -> None:
    """Keep ``error`` as the handle's ``last_error`` (its first ``LAST_ERROR_CHARS``): the one
    writer of that field (a rejected input, an illegal transition, a failed hook or turn)."""
    s.last_error = error[:LAST_ERROR_CHARS]


class Visibility:
    """Trace, search attributes, current details and loud rejection for one handle.

    Owns ``HandleState.trace``/``trace_seq`` and ``last_error`` (:func:`note_error`), and
    per run ``shown`` (the :class:`OperatorView` the search attributes show) and
    ``rejection`` (the last rejection, shown in the current details until the next state
    change).

    Args:
        s: the handle's state model (shared by every component of the workflow).
    """

    def __init__(self, s: HandleState) -> None:
        self.s = s
        # The creator set the search attributes at start, as ``idle`` (the client for the
        # root, the parent for a child; continue-as-new carries them). Set here, not when
        # ``run`` starts: on a worker with a cold cache the SDK may run an update handler
        # before ``run`` (temporalio/sdk-python#1591), and a later replay runs ``run`` first;
        # both orders must issue the same commands (tests/test_cold_start.py).
        shown = workflow.info().typed_search_attributes
        self.shown = OperatorView(
            state="idle",
            request=None,
            request_id=shown.get(AGENT_REQUEST_ID),
            queue=shown.get(AGENT_ESCALATED_TO),
        )
        """What the search attributes show (:class:`OperatorView`): a continued run carries
        the Request id and the queue."""
        self.details_state: HandleStateName = "idle"
        """The state the current details last showed (a rejection is shown until it
        changes; the search attributes show only the durable state)."""
        self.rejection: str | None = None
        """The last rejected input (``{verb} rejected: {reason}``) since the state last
        changed: the current details show it first."""
        self.signals = 0
        """Signals received in this run, rejected ones included (every signal handler
        parses its input here): Temporal refuses signals past a per-run limit, so the run
        continues as new well before it (``Lifecycle.continue_as_new_due``)."""
        self.rejections = 0
        """Inputs rejected in this run (bounds the warnings logged: :meth:`reject`)."""
        self._repeats: dict[str, tuple[int, int]] = {}
        """Recent rejection line → (its trace seq, how many rejections it stands for)."""

    def trace(self, line: str) -> None:
        """Append a trace line at the current workflow time (CONTRACT §7)."""
        append_trace(self.s, line, now_ms())
        if " REJECTED (" in line:
            if len(self._repeats) >= 4 * REJECT_COALESCE:
                self._repeats.clear()
            self._repeats[line] = (self.s.trace_seq, 1)

    def reject(self, verb: str, error: str) -> None:
        """Record a rejected input loudly: ``last_error``, a trace line and a warning. The
        trace line keeps the first ``REJECT_TRACE_CHARS`` of the reason: a flood of
        rejections fills at most ``trace_cap`` short lines of the carried state.

        A rejection stays cheap under a flood (issue 12 item 8: thousands of signals in one
        activation must finish well within the SDK's 2 s deadlock timeout): a rejection
        equal to one of the last ``REJECT_COALESCE`` trace lines bumps that line's count
        (``" ×N"``) instead of adding a line, and only the first ``REJECT_LOG_CAP``
        rejections of a run are logged (then a summary every ``REJECT_LOG_EVERY``); the
        current details are rendered again only for a rejection other than the one they show
        (their counters catch up at the next publish or other rejection)."""
        note_error(self.s, f"{verb} rejected: {error}")
        rejection = f"{verb} rejected: {error[:REJECT_TRACE_CHARS]}"
        if rejection != self.rejection:  # the details show it already (issue 36 item 8)
            self.rejection = rejection
            details = current_details(self.s, rejection)
            workflow.set_current_details(fit(details, DETAILS_BYTES))
        self.rejections += 1
        line = f"{self.s.id}: {verb} REJECTED ({error[:REJECT_TRACE_CHARS]})"
        if not self._coalesce(line):
            self.trace(line)
        n = self.rejections
        if n <= REJECT_LOG_CAP:
            workflow.logger.warning("%s: %s rejected: %s", self.s.id, verb, error)
        elif n == REJECT_LOG_CAP + 1 or n % REJECT_LOG_EVERY == 0:
            workflow.logger.warning(
                "%s: %d inputs rejected in this run (last: %s rejected: %s); further"
                " rejections are counted in the trace, not logged one by one",
                self.s.id,
                n,
                verb,
                error[:REJECT_TRACE_CHARS],
            )

    def _coalesce(self, line: str) -> bool:
        """Count ``line`` on an equal rejection line among the last ``REJECT_COALESCE`` trace
        lines (that line moves to the end as ``line ×N``, with a new seq and the current
        time); False when there is none."""
        seen = self._repeats.get(line)
        if seen is None:
            return False
        seq, count = seen
        trace = self.s.trace
        for back in range(1, min(REJECT_COALESCE, len(trace)) + 1):
            if trace[-back].seq == seq:
                del trace[-back]  # it moves to the end with a new seq: readers see it anew
                append_trace(self.s, f"{line} ×{count + 1}", now_ms())
                self._repeats[line] = (self.s.trace_seq, count + 1)
                return True
        return False

    def publish(self) -> None:
        """Publish the operator view (:meth:`OperatorView.of`): upsert ``AgentState`` (the
        durable state: never ``running``) and the pending Request's search attributes in one
        command when any changed, and refresh the UI's current details, which show the live
        state, ``running`` included (CONTRACT §8; not a command). The creator set every
        attribute at start."""
        s = self.s
        view = OperatorView.of(s)
        if self.details_state != s.state:
            self.details_state = s.state
            self.rejection = None  # shown until the next state change (a run's start is none)
        updates = view.updates(
            self.shown, scope=s.scope, with_prompt=s.options.prompt_in_visibility
        )
        if updates:
            workflow.upsert_search_attributes(updates)
            self.shown = view
            self.rejection = None  # a new Request clears the shown rejection too
        a = s.approval
        if (  # a Request pending, or its stamp left to clear (else nothing to stamp)
            a.pending_req is not None
            or a.pending_since_id is not None
            or a.pending_since_ms is not None
        ):
            stamp_pending_since(s, now_ms())
        workflow.set_current_details(fit(current_details(s, self.rejection), DETAILS_BYTES))

    # ---- signal input: one model per signal, rejected loudly (never a failed task)

    def unknown_signal(self, name: str) -> None:
        """Reject a signal this workflow does not know (it is not buffered)."""
        self.signals += 1
        self.reject(name[:80], f"unknown signal (known: {', '.join(PUBLIC_SIGNALS)})")

    def one(self, verb: str, args: tuple[Any, ...]) -> Any:
        """The single input of a signal (None when there is none), or :data:`INVALID`
        (rejected loudly) when there are several: an extra input must never fail the
        workflow task."""
        self.signals += 1
        if len(args) > 1:
            self.reject(verb, f"expected one input, got {len(args)}")
            return INVALID
        return args[0] if args else None

    def parse(self, verb: str, model: type[_M], args: tuple[Any, ...]) -> _M | None:
        """Validate a signal's single input as ``model``; None (rejected loudly) when it is
        not one."""
        payload = self.one(verb, args)
        if payload is INVALID:
            return None
        try:
            return model.model_validate(payload)
        except ValidationError as err:
            self.reject(verb, f"bad payload: {short_error(err)}")
            return None

    def parse_wake(self, args: tuple[Any, ...]) -> WakeRequest | None:
        """The ``wake`` signal's input: a prompt string, ``null`` or ``{"prompt": ...}``;
        None (rejected loudly) otherwise."""
        payload = self.one("wake", args)
        if payload is INVALID:
            return None
        try:
            parsed = _WAKE_PAYLOAD.validate_python(payload)
        except ValidationError as err:
            self.reject("wake", f"bad payload: {short_error(err)}")
            return None
        return parsed if isinstance(parsed, WakeRequest) else WakeRequest(prompt=parsed)

    def parse_post(self, args: tuple[Any, ...]) -> InboxItem | None:
        """The ``post`` signal's input: an InboxItem as JSON or a bare string (an external
        item); None (rejected loudly) otherwise."""
        payload = self.one("post", args)
        if payload is INVALID:
            return None
        try:
            return (
                InboxItem(text=payload)
                if isinstance(payload, str)
                else InboxItem.model_validate(payload)
            )
        except ValidationError as err:
            self.reject("post", f"bad payload: {short_error(err)}")
            return None

    def parse_close(self, args: tuple[Any, ...]) -> CloseRequest | None:
        """The ``close`` signal's input: ``null`` or ``{"force": bool, "reason": str}``; None
        (rejected loudly) otherwise."""
        payload = self.one("close", args)
        if payload is INVALID:
            return None
        try:
            return _CLOSE_PAYLOAD.validate_python(payload) or CloseRequest()
        except ValidationError as err:
            self.reject("close", f"bad payload: {short_error(err)}")
            return None
