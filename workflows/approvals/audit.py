"""Expiry, escalation and the audit of Requests (issue 26 items 2 and 3): pure rules.

* **Expiry** (:func:`expires_at_for`, :func:`deadline_ms`): a Request expires at its own
  ``expiresAt`` (``pending(expires_at=...)``), else ``timeout_ms`` after it was raised, from the
  tool (``pending(timeout_ms=...)``) or the agent (``AgentDef.approval.timeout_ms``). The
  deadline is stamped on the Request as an absolute time when it is raised, so a worker kill,
  a server restart or a continue-as-new (the parked turn carries the Request) keeps it: the
  next run's durable timer waits for what is left. Unanswered at the deadline, the Request is
  answered ``ok=false, reason="expired"`` (path ``expiry``).
* **Escalation** (:func:`escalation_due_ms`): ``AgentDef.approval.escalate`` escalates instead
  of declining: ``after_ms`` after the Request was raised (or at its deadline when unset), to
  an interpreter answering for the parent (path ``escalation``), or to a named operator queue
  (the ``AgentEscalatedTo`` search attribute; the Request keeps waiting).
* **The audit** (:func:`record`, :func:`entry_of`): one :class:`AuditEntry` per answered
  Request in ``ApprovalState.audit`` (the last :data:`AUDIT_KEEP`; carried across
  continue-as-new with the state). Who sent it as Temporal recorded it (the ``identity`` of
  the signal or update event) is read from history by ``rt.audit``: the entry names that
  event (a :class:`Delivery`: run, update id or place among the run's ``answer`` signals),
  so a refused Answer before it is never taken for it; the workflow records the ``by`` the
  sender stated.
* **Approvers** (:func:`approvers_of`, :func:`approver_error`): ``AgentDef.approval.approvers``
  by Request kind or tool name. For a Request with approvers, the workflow first reads the
  server-stamped principal of the event that delivered the Answer (the
  ``tnx.answer_principal`` activity: a :class:`Stamp`). With a principal, the approvers are
  enforced against its ``name`` and the entry says ``verified: true`` with the principal;
  without one (the dev server, a server without an authorizer and claim mapper, an Answer
  forwarded by an ancestor), against the stated ``by``, ``verified: false``. When the history
  could not be read, the Answer is rejected (fail-closed: a lookup failure never approves,
  nor falls back to the weaker check).

Deterministic and I/O free.
"""

from __future__ import annotations

import hashlib
import json
from typing import Any, Final, NamedTuple

from toolnexus_temporal.workflows.contract.clock import iso_of_ms, parse_time_ms
from toolnexus_temporal.workflows.contract.messages import StampedPrincipal
from toolnexus_temporal.workflows.contract.models import (
    APPROVAL_WAIT_MAX_MS,
    Answer,
    ApprovalPolicy,
    Request,
)
from toolnexus_temporal.workflows.contract.state import AuditEntry, HandleState

AUDIT_KEEP: Final = 200
"""Answered Requests a handle keeps in its audit (oldest dropped first)."""

PROMPT_KEEP: Final = 500
"""Characters of a Request's prompt an audit entry keeps."""

DATA_KEEP: Final = 2_000
"""Characters of an Answer's data (as JSON) an audit entry keeps: the audit's entries live in
the handle's state, carried by continue-as-new, so each is bounded (:func:`kept_data`)."""


def kept_data(data: dict[str, Any] | None) -> dict[str, Any] | None:
    """``data`` as an audit entry keeps it: as it is when its JSON (sorted keys) is at most
    :data:`DATA_KEEP` characters, else ``{"clipped_json": <its first DATA_KEEP characters>,
    "json_chars": <its length>}`` (the tool got the whole data; deterministic)."""
    if not data:
        return data
    text = json.dumps(data, sort_keys=True, default=str)
    if len(text) <= DATA_KEEP:
        return data
    return {"clipped_json": text[:DATA_KEEP], "json_chars": len(text)}


TIMEOUT_KEY: Final = "timeoutMs"
"""The key of a tool's own timeout in ``pending`` metadata (ms; not a Request wire key)."""


def expires_at_for(fields: dict[str, Any], policy: ApprovalPolicy, now_ms: int) -> str | None:
    """The ``expiresAt`` a new Request gets: its own, else now + the tool's ``timeoutMs``,
    else now + the agent's ``timeout_ms``; None: it never expires. Pops ``timeoutMs``."""
    timeout = fields.pop(TIMEOUT_KEY, None)
    own = fields.get("expiresAt")
    if isinstance(own, str):
        return own
    if isinstance(timeout, int) and timeout > 0:  # a hand-built one is held to the bound too
        return iso_of_ms(now_ms + min(timeout, APPROVAL_WAIT_MAX_MS))
    if policy.timeout_ms is not None:
        return iso_of_ms(now_ms + policy.timeout_ms)
    return None


def deadline_ms(req: Request) -> int | None:
    """When ``req`` expires (ms since the epoch), or None."""
    return parse_time_ms(req.expires_at) if req.expires_at else None


def escalation_due_ms(
    policy: ApprovalPolicy, asked_ms: int, expires_ms: int | None, escalated: bool
) -> int | None:
    """When the pending Request escalates (ms since the epoch), or None: no escalation, it
    escalated already, or it has neither ``after_ms`` nor a deadline."""
    esc = policy.escalate
    if esc is None or escalated:
        return None
    if esc.after_ms is not None:
        return asked_ms + esc.after_ms
    return expires_ms


def expires_while_escalated(policy: ApprovalPolicy) -> bool:
    """Whether the deadline still declines after an escalation: only when the escalation
    came early (``after_ms``); one at the deadline replaces the decline."""
    return policy.escalate is None or policy.escalate.after_ms is not None


class Delivery(NamedTuple):
    """Which history event delivered an Answer to this handle (issue 36 item 1): its run,
    and its update id (``admit_answer``) or its place among the run's ``answer`` signals
    (from 1). The audit names the sender of exactly this event for the Answer taken."""

    run_id: str
    update_id: str | None = None
    signal_seq: int | None = None


class Stamp(NamedTuple):
    """What the ``tnx.answer_principal`` lookup found for one Answer: the server-stamped
    ``principal`` of its event (None: the server stamped none), or why the history could not
    be read (``unreadable``; the Answer is then rejected: :func:`approver_error`)."""

    principal: StampedPrincipal | None = None
    unreadable: str | None = None


def principal_text(principal: StampedPrincipal) -> str:
    """A principal as the audit shows it: ``type:name`` (``name`` alone without a type)."""
    return f"{principal.type}:{principal.name}" if principal.type else principal.name


def answer_digest(answer: Answer) -> str:
    """The sha256 (hex) of ``answer``'s JSON (sorted keys): the workflow and the
    ``tnx.answer_principal`` activity each decode the event's input, and the event is the one
    whose Answer has this digest (deterministic)."""
    text = json.dumps(answer.model_dump(mode="json"), sort_keys=True, default=str)
    return hashlib.sha256(text.encode()).hexdigest()


def approvers_of(policy: ApprovalPolicy, req: Request, tool: str | None) -> list[str] | None:
    """Who may answer ``req`` raised by ``tool``: the union of the approvers of its kind and
    of its tool (a name on either list may answer), or None when neither has a list (anyone
    may answer; no principal is looked up)."""
    keys = [k for k in (req.kind, tool) if k is not None and k in policy.approvers]
    if not keys:
        return None
    return [name for k in keys for name in policy.approvers[k]]


def approver_error(
    policy: ApprovalPolicy,
    req: Request,
    tool: str | None,
    by: str | None,
    stamp: Stamp | None = None,
) -> str | None:
    """Why the Answer may not answer ``req`` (None: allowed).

    No approvers for the Request's kind or tool: anyone may answer. Otherwise, with a
    ``stamp`` whose ``principal`` is set, ``principal.name`` must be listed (enforced,
    verified); with ``stamp.unreadable`` the Answer is refused (fail-closed); with no stamp or
    no principal, the stated ``by`` must be listed (unverified). Source: issue 26 item 3;
    Temporal stamps ``HistoryEvent.principal`` only with an authorizer and claim mapper."""
    allowed = approvers_of(policy, req, tool)
    if allowed is None:
        return None
    names = ", ".join(sorted(allowed))
    if stamp is not None and stamp.unreadable is not None:
        return (
            f"answer {req.id!r}: its sender could not be checked ({stamp.unreadable[:300]});"
            " refused, send it again"
            f" (approvers: {names})"
        )
    if stamp is not None and stamp.principal is not None:
        if stamp.principal.name in allowed:
            return None
        return (
            f"answer {req.id!r}: principal {principal_text(stamp.principal)!r} may not answer"
            f" it (approvers: {names}; checked against the server-stamped principal, verified)"
        )
    if by is not None and by in allowed:
        return None
    who = repr(by) if by else "an answer with no 'by'"
    return (
        f"answer {req.id!r}: {who} may not answer it (approvers: {names};"
        " checked against the stated identity, unverified)"
    )


def entry_of(
    req: Request,
    answer: Answer,
    *,
    path: str,
    tool: str | None,
    asked_ms: int | None,
    now_ms: int,
    escalated_to: str | None,
    stamp: Stamp | None = None,
    arguments: str | None = None,
    delivery: Delivery | None = None,
) -> AuditEntry:
    """The audit entry of ``req`` answered by ``answer`` through ``path``; ``verified`` with
    the principal when ``stamp`` (the lookup the approvers check used) has one. It keeps the
    call's original ``arguments`` (JSON text), the reviewer's ``edited_args`` and ``message``,
    each bounded to :data:`DATA_KEEP` characters (the edit as :func:`kept_data` keeps data),
    and the ``delivery`` of the Answer (the event that carried it, for ``rt.audit``)."""
    principal = stamp.principal if stamp is not None else None
    return AuditEntry(
        request_id=req.id,
        kind=req.kind,
        prompt=req.prompt[:PROMPT_KEEP],
        tool=tool,
        asked_ms=asked_ms,
        answered_ms=now_ms,
        path=path,
        ok=answer.ok,
        reason=None if answer.ok else (answer.reason or "declined"),
        data=kept_data(answer.data),
        by=answer.by,
        principal=principal_text(principal) if principal is not None else None,
        verified=principal is not None,
        escalated_to=escalated_to,
        expires_at=req.expires_at,
        arguments=arguments[:DATA_KEEP] if arguments is not None else None,
        edited_args=kept_data(answer.edited_args),
        message=answer.message[:DATA_KEEP] if answer.message is not None else None,
        run_id=delivery.run_id if delivery is not None else None,
        update_id=delivery.update_id if delivery is not None else None,
        signal_seq=delivery.signal_seq if delivery is not None else None,
        routed_via=answer.routed_via if path == "signal" else None,
    )


def record(s: HandleState, entry: AuditEntry) -> None:
    """Append ``entry`` to the handle's audit, keeping the last :data:`AUDIT_KEEP`."""
    s.approval.audit.append(entry)
    del s.approval.audit[:-AUDIT_KEEP]


def answered_error(s: HandleState, request_id: str) -> str | None:
    """The rejection of an Answer to a Request already answered (expired, escalated or
    answered), naming how; None when the audit does not know it."""
    for entry in reversed(s.approval.audit):
        if entry.request_id == request_id:
            when = iso_of_ms(entry.answered_ms)
            if entry.path == "expiry":
                return (
                    f"request {request_id!r} expired at {when} (answered ok=false,"
                    " reason=expired, by its timer): this Answer changes nothing"
                )
            verdict = "ok" if entry.ok else entry.reason
            return (
                f"request {request_id!r} is already answered ({verdict}, by {entry.path}"
                f" at {when}): this Answer changes nothing"
            )
    return None
