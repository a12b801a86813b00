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
  the signal or update event) is read from history by ``rt.audit``; the workflow records the
  ``by`` the sender stated.
* **Approvers** (:func:`approver_error`): ``AgentDef.approval.approvers`` by Request kind or
  tool name. The workflow sees no server-stamped principal, so the check is against the
  stated ``by`` and the entry says ``verified: false``.

Deterministic and I/O free.
"""

from __future__ import annotations

import json
from typing import Any, Final

from pydantic import AwareDatetime, TypeAdapter, ValidationError

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


_WHEN: TypeAdapter[AwareDatetime] = TypeAdapter(AwareDatetime)
"""ISO-8601 times with a zone, and seconds since the epoch (no clock is read)."""

TIMEOUT_KEY: Final = "timeoutMs"
"""The key of a tool's own timeout in ``pending`` metadata (ms; not a Request wire key)."""


def parse_time_ms(value: str) -> int | None:
    """An ISO-8601 time with a zone as ms since the epoch, or None when unreadable or without
    a zone (``pending`` adds ``Z`` to a time without one)."""
    try:
        when = _WHEN.validate_python(value)
    except ValidationError:
        return None
    return round(when.timestamp() * 1000)


def iso_of_ms(ms: int) -> str:
    """ms since the epoch as an ISO-8601 UTC time (millisecond precision)."""
    when = _WHEN.validate_python(ms / 1000)
    return when.isoformat(timespec="milliseconds").replace("+00:00", "Z")


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


def approver_error(
    policy: ApprovalPolicy, req: Request, tool: str | None, by: str | None
) -> str | None:
    """Why ``by`` may not answer ``req`` (None: allowed). The approvers of the Request's kind
    and of its tool both apply; no list: anyone may answer."""
    allowed: list[str] = []
    for key in (req.kind, tool):
        if key is not None and key in policy.approvers:
            allowed.extend(policy.approvers[key])
    if not allowed and not any(k in policy.approvers for k in (req.kind, tool) if k):
        return None
    if by is not None and by in allowed:
        return None
    who = repr(by) if by else "an answer with no 'by'"
    return (
        f"answer {req.id!r}: {who} may not answer it (approvers: {', '.join(sorted(allowed))};"
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
) -> AuditEntry:
    """The audit entry of ``req`` answered by ``answer`` through ``path``."""
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
        verified=False,
        escalated_to=escalated_to,
        expires_at=req.expires_at,
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
