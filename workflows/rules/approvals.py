"""Request rules: a Request's deterministic id (:func:`stamped`), and
which Request a handle parked on its delegated tasks surfaces, and where an Answer sent to a
handle goes. Plain functions over ``HandleState``;
:class:`~toolnexus_temporal.workflows.answers.AnswerRouting` (the base of ``Approvals``) applies
them.

* :func:`surfaced_child_request`: a handle whose ``task`` children park surfaces the parked
  Request of the first task call in call order (CONTRACT §5: "the first in call order is
  surfaced; the others are answered in turn"), stamped with its own ``data.path``. It is
  recomputed on every child report and every Answer, so it never depends on which child's
  coroutine happened to run first.
* :func:`stamp_pending_since`: when the pending Request was made (for its age in ``tnx``).
* :func:`edited_call`, :func:`reviewed_result`, :func:`declined_result`: an Answer that
  edits or explains (issue 34 item 3): the call re-run with the reviewer's arguments, the
  note the model reads before its result, the reviewer's words as a declined call's result;
  :func:`expired_result_text`: an expired call's result says it did not run and will not
  (issue 36 item 9).
* :func:`answer_hop`: an Answer is routed by its id's handle part (``{handle id}#{n}``): this
  handle's own Request, or the child on the path down to the handle that owns the id. Each
  level forwards to the next; the owner checks the id against its pending Request.

Deterministic and I/O free.
"""

from __future__ import annotations

import json
from collections.abc import Collection, Mapping
from typing import Any, Final, NamedTuple

from toolnexus_temporal.workflows.contract.limits import fit
from toolnexus_temporal.workflows.contract.models import Answer, Request, ToolCall, ToolResult
from toolnexus_temporal.workflows.contract.state import ChildInfo, HandleState, ParkedTurn


def stamped(s: HandleState, fields: dict[str, Any]) -> Request:
    """The Request of a tool's ``pending`` metadata with this handle's deterministic id
    ``{id}#{n}`` and ``data.path`` (CONTRACT §5, §9.5); counts ``request_seq``."""
    s.approval.request_seq += 1
    data = dict(fields.get("data") or {})
    data["path"] = s.id.split("/")
    return Request.model_validate(
        {**fields, "id": f"{s.id}#{s.approval.request_seq}", "data": data}
    )


def stamp_pending_since(s: HandleState, now_ms: int) -> None:
    """Keep ``pending_since_ms`` on the current ``pending_req``: set to ``now_ms`` when a new
    Request is pending, None when none is; unchanged while the same one waits. State only
    (no command): :meth:`Visibility.publish` calls it on every change it publishes."""
    req = s.approval.pending_req
    if req is None:
        s.approval.pending_since_ms = s.approval.pending_since_id = None
    elif s.approval.pending_since_id != req.id or s.approval.pending_since_ms is None:
        s.approval.pending_since_id = req.id
        s.approval.pending_since_ms = now_ms


def verdict_of(answer: Answer) -> str:
    """``ok``, or why not (``declined`` when no reason is given)."""
    return "ok" if answer.ok else (answer.reason or "declined")


def with_path(s: HandleState, req: Request) -> Request:
    """``req`` with ``data.path`` set to this handle's path (its id split on ``/``)."""
    data = dict(req.data or {})
    data["path"] = s.id.split("/")
    return req.model_copy(update={"data": data})


def surfaced_child_request(
    s: HandleState,
    task_children: Mapping[int, str],
    answered: Collection[str] = (),
    has_parked: Collection[str] = (),
) -> Request | None:
    """The Request a handle surfaces for its delegated tasks, or None (issue 12 item 1).

    Args:
        s: the handle's state (``children_info`` holds each child's latest report).
        task_children: the running ``task`` calls of the current turn: call index → child id.
        answered: Request ids this handle already forwarded an Answer for: a report sent
            before the child took it still shows it parked, and is not a parking.
        has_parked: child ids known to have parked at least once in this turn (an
            Answer-taking child, see :func:`ever_parked`, counts too).

    Returns:
        The parked Request (with this handle's ``data.path``) of the lowest call index ``j``
        whose child reports itself parked on a Request not in ``answered``, provided no
        earlier call ``i < j`` is still running without having parked yet (it may park
        first in call order: the handle keeps running until it parks or finishes). A child
        that finished, or that already parked once and was answered, does not block. None
        when nothing is to be surfaced.
    """
    for index in sorted(task_children):
        child = task_children[index]
        info = s.roster.children_info.get(child)
        request_id = parked_on(info)
        if request_id is not None and request_id not in answered:
            assert info is not None and info.pending_req is not None
            return with_path(s, info.pending_req)
        if finished(info) or request_id is not None:
            continue
        if child in has_parked or ever_parked(info):
            continue
        return None  # an earlier call may still park: it comes first in call order
    return None


def finished(info: ChildInfo | None) -> bool:
    """The child's task is over: closed, or idle after its first settled result."""
    if info is None:
        return False
    return info.state == "closed" or (info.state == "idle" and info.result_seq >= 1)


def ever_parked(info: ChildInfo | None) -> bool:
    """The child's reports show it took an Answer (it was parked, or forwarded one down to
    a parked descendant): it parked at least once (survives continue-as-new)."""
    return info is not None and info.answer_id is not None and info.answer_error is None


def parked_on(info: ChildInfo | None) -> str | None:
    """The id of the Request a child's latest report shows it parked on, or None."""
    if info is None or not info.parked or info.pending_req is None:
        return None
    return info.pending_req.id


class Hop(NamedTuple):
    """Where an Answer goes from one handle.

    Attributes:
        to: this handle's id (its own Request), a child's id (forward down), or None.
        error: why it goes nowhere (set exactly when ``to`` is None).
    """

    to: str | None
    error: str | None = None


def answer_hop(s: HandleState, request_id: str) -> Hop:
    """Route an Answer by its id's handle part (``{handle id}#{n}``).

    Returns:
        ``Hop(s.id)`` for a Request this handle raised; ``Hop(child)`` for one raised in the
        subtree of a live child (the child on the path); else ``Hop(None, error)``: not a
        Request id, outside this handle's subtree, an unknown child, or a closed one. The
        number part is checked by the owner, against its pending Request.
    """
    owner, sep, number = request_id.rpartition("#")
    if not sep or not owner or not number:
        return Hop(None, f"answer {request_id!r} is not a request id ('<handle id>#<n>')")
    if owner == s.id:
        return Hop(s.id)
    prefix = f"{s.id}/"
    if not owner.startswith(prefix):
        return Hop(None, f"answer {request_id!r} is not for {s.id} or its subtree")
    child = prefix + owner[len(prefix) :].split("/", 1)[0]
    info = s.roster.children_info.get(child)
    if info is None:
        return Hop(None, f"answer {request_id!r} matches no pending request: no handle {child}")
    if info.state == "closed":
        return Hop(None, f"answer {request_id!r} matches no pending request: {child} is closed")
    return Hop(child)


def take_parked(s: HandleState) -> ParkedTurn | None:
    """The parked turn a continue-as-new carried over (``lifecycle/carry.py``), taken: the
    new run's turn resumes it."""
    parked, s.approval.parked = s.approval.parked, None
    return parked


EDIT_NOTE_BYTES: Final = 2_000
"""The most of the edited arguments (JSON, UTF-8 bytes) the note before a tool's result
quotes (:func:`reviewed_result`); the tool got them whole."""


def edited_call(call: ToolCall, answer: Answer) -> ToolCall:
    """The call the tool runs once more after ``answer``: with the reviewer's
    ``edited_args`` as its arguments (compact JSON) when it edits, else ``call`` itself."""
    if answer.edited_args is None:
        return call
    return call.model_copy(update={"arguments": compact(answer.edited_args)})


def reviewed_result(answer: Answer, result: ToolResult) -> ToolResult:
    """The result the model reads after an ``ok`` Answer: ``result``, its output preceded
    by one note line per thing the reviewer did: ``[the reviewer changed this call's
    arguments; it ran with {...}]`` for an edit, ``[the reviewer says: ...]`` for a message.
    Unchanged when the Answer neither edits nor explains."""
    notes: list[str] = []
    if answer.edited_args is not None:
        shown = fit(compact(answer.edited_args), EDIT_NOTE_BYTES)
        notes.append(f"[the reviewer changed this call's arguments; it ran with {shown}]")
    if answer.message is not None:
        notes.append(f"[the reviewer says: {answer.message}]")
    if not notes:
        return result
    output = "\n".join([*notes, result.output])
    return result.model_copy(update={"output": output})


def expired_result_text(prompt: str) -> str:
    """The result the model reads for a call whose Request expired (no Answer before its
    deadline): ``expired: <prompt>``, then that the action did not run and will not run,
    so the model neither reports it done nor waits for it (issue 36 item 9)."""
    return (
        f"expired: {prompt}\n[no answer came before the deadline: this action did not run"
        " and will not run]"
    )


def declined_result(req: Request, answer: Answer) -> ToolResult:
    """The error result the model reads for a call whose Answer is not ``ok``: the
    reviewer's words when the Answer carries a ``message`` (``declined by the reviewer:
    <message>``), :func:`expired_result_text` for an expiry, else ``<reason>: <prompt>``
    (CONTRACT §5)."""
    reason = answer.reason or "declined"
    if answer.message is not None:
        return ToolResult(output=f"{reason} by the reviewer: {answer.message}", is_error=True)
    if reason == "expired":
        return ToolResult(output=expired_result_text(req.prompt), is_error=True)
    return ToolResult(output=f"{reason}: {req.prompt}", is_error=True)


def compact(arguments: dict[str, Any]) -> str:
    """Tool arguments as compact JSON text (non-ASCII kept)."""
    return json.dumps(arguments, separators=(",", ":"), ensure_ascii=False, default=str)
