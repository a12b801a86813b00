"""The audit of every answer (issue 26 item 3): ``AgentRuntime.audit`` and ``tnx audit``.

Each handle keeps an :class:`~toolnexus_temporal.workflows.contract.state.AuditEntry` per
answered Request in its state (carried across continue-as-new, readable after close). This
module joins them with what Temporal recorded on the history events that carried the Answer:
the ``identity`` of the ``answer`` signal or of the ``admit_answer`` update request, and the
event's ``principal`` where the server stamps one (only with an authorizer and claim mapper
configured: the dev server and a default self-hosted server stamp none). For a Request with
approvers the workflow itself read that principal (``tnx.answer_principal``) and enforced the
approvers against it: the entry then says ``verified`` and names it; without one, the check
ran against the sender's stated ``by`` and ``verified`` is False. Every run of each workflow is read
(runs listed by workflow id), the handle's ancestors too: an Answer sent to a parent and
routed down was first recorded there. The event named is the one that delivered the Answer
that was taken, as the workflow recorded it in the entry (its run, and its update id or its
place among the run's ``answer`` signals: issue 36 item 1), never a refused Answer's before
it; for an Answer an ancestor forwarded, the earliest event with the Request's id in the
ancestors' runs names the sender and the path (``signal`` or ``update``).
"""

from __future__ import annotations

import builtins
from collections.abc import Callable
from datetime import UTC, datetime
from typing import Any

from pydantic import BaseModel
from temporalio.api.enums.v1 import EventType
from temporalio.client import Client

from toolnexus_temporal.client.handlers import AgentWorkflowStub
from toolnexus_temporal.client.queries import quoted
from toolnexus_temporal.client.rpc import HandleRpc
from toolnexus_temporal.workflows.contract.models import Answer
from toolnexus_temporal.workflows.contract.names import SIGNAL_ANSWER, UPDATE_ANSWER
from toolnexus_temporal.workflows.contract.state import AuditEntry


class AuditRecord(BaseModel):
    """One answered Request, as ``rt.audit`` and ``tnx audit`` show it.

    Attributes:
        handle_id: the handle that raised the Request.
        request_id: its id.
        kind: its kind; ``prompt``, ``tool``: what was asked, by which tool.
        asked_at / answered_at: when it was raised and answered (ISO-8601, UTC; workflow
            time: an Answer sent while no worker ran is answered when one applies it).
        sent_at: when the server recorded the event that delivered the Answer (ISO-8601,
            UTC; None when no event carried it): earlier than ``answered_at`` by the wait
            for a worker when the Answer was queued (issue 37 item 8).
        path: ``signal``, ``update``, ``interpreter``, ``expiry`` or ``escalation``.
        ok / reason / data: the decision and its data.
        by: who answered, as the sender stated it (``Answer.by``), or the interpreter.
        identity: the caller identity Temporal recorded on the signal or update event (None
            for ``interpreter``, ``expiry`` and ``escalation``: no event carried an Answer).
        principal: the server-stamped principal of that event (None without an authorizer):
            the one the approvers were enforced against when ``verified``.
        verified: whether the approvers were enforced against that principal (a Request
            with approvers, on a server that stamps principals).
        escalated_to: where it escalated before the Answer (``queue:NAME``,
            ``interpreter:NAME``).
        expires_at: the Request's deadline, if it had one (ISO-8601).
        arguments: the arguments the model called the tool with (JSON text, cut to 2,000
            characters).
        edited_args: the arguments the reviewer approved instead (``Answer.edited_args``).
        message: the reviewer's words for the model (``Answer.message``).
        workflow_id / run_id: the workflow run whose event carried the Answer.
    """

    handle_id: str
    request_id: str
    kind: str = ""
    prompt: str = ""
    tool: str | None = None
    asked_at: str | None = None
    answered_at: str | None = None
    sent_at: str | None = None
    path: str
    ok: bool
    reason: str | None = None
    data: dict[str, Any] | None = None
    by: str | None = None
    identity: str | None = None
    principal: str | None = None
    verified: bool = False
    escalated_to: str | None = None
    expires_at: str | None = None
    arguments: str | None = None
    edited_args: dict[str, Any] | None = None
    message: str | None = None
    workflow_id: str | None = None
    run_id: str | None = None


class Sender(BaseModel):
    """What one history event recorded of an Answer's sender."""

    path: str
    identity: str | None
    principal: str | None
    at_ns: int
    workflow_id: str
    run_id: str
    forwarded: bool = False


def _iso(ms: int | None) -> str | None:
    """ms since the epoch as ISO-8601 UTC, or None."""
    if ms is None:
        return None
    return datetime.fromtimestamp(ms / 1000, UTC).isoformat(timespec="milliseconds")


def _principal(event: Any) -> str | None:
    """The event's server-stamped principal (``type:name``), or None."""
    if not event.HasField("principal"):
        return None
    p = event.principal
    text = ":".join(part for part in (getattr(p, "type", ""), getattr(p, "name", "")) if part)
    return text or None


def _answer_event(event: Any) -> tuple[str, str, Any, str, bool] | None:
    """An ``answer`` signal or ``admit_answer`` update event as (path, identity, payloads,
    its key in the run: ``update:<id>`` or ``signal`` (numbered by the caller), whether
    another workflow sent it), or None for any other event."""
    if event.event_type == EventType.EVENT_TYPE_WORKFLOW_EXECUTION_SIGNALED:
        attrs = event.workflow_execution_signaled_event_attributes
        if attrs.signal_name != SIGNAL_ANSWER:
            return None
        forwarded = attrs.HasField("external_workflow_execution")
        return "signal", attrs.identity, attrs.input.payloads, "signal", forwarded
    if event.event_type == EventType.EVENT_TYPE_WORKFLOW_EXECUTION_UPDATE_ACCEPTED:
        req = event.workflow_execution_update_accepted_event_attributes.accepted_request
        if req.input.name != UPDATE_ANSWER:
            return None
        key = f"update:{req.meta.update_id}"
        return "update", req.meta.identity, req.input.args.payloads, key, False
    return None


async def senders(
    client: Client,
    workflow_ids: builtins.list[str],
    exact: dict[tuple[str, str, str], Sender] | None = None,
) -> dict[str, Sender]:
    """The earliest ``answer`` signal or ``admit_answer`` update event per Request id, over
    every run of each workflow in ``workflow_ids`` (continued-as-new and closed runs too).

    Args:
        exact: filled, when given, with every such event by (workflow id, run id, key): key
            ``update:<update id>`` or ``signal:<n>`` (the n-th ``answer`` signal of the run,
            from 1, as the workflow counts them: ``AuditEntry.signal_seq``).
    """
    found: dict[str, Sender] = {}
    converter = client.data_converter
    for wid in workflow_ids:
        async for run in client.list_workflows(f"WorkflowId = {quoted(wid)}"):
            history = client.get_workflow_handle(wid, run_id=run.run_id)
            signals = 0
            async for event in history.fetch_history_events():
                parsed = _answer_event(event)
                if parsed is None:
                    continue
                path, identity, payloads, key, forwarded = parsed
                if path == "signal":
                    signals += 1
                    key = f"signal:{signals}"
                sender = Sender(
                    path=path,
                    identity=identity or None,
                    principal=_principal(event),
                    at_ns=event.event_time.ToNanoseconds(),
                    workflow_id=wid,
                    run_id=run.run_id,
                    forwarded=forwarded,
                )
                if exact is not None:
                    exact[(wid, run.run_id, key)] = sender
                try:
                    (answer,) = await converter.decode(payloads, [Answer])
                except Exception:  # an input the workflow rejected loudly: not an Answer
                    continue
                known = found.get(answer.id)
                if known is None or sender.at_ns < known.at_ns:
                    found[answer.id] = sender
    return found


def _delivered_by(
    entry: AuditEntry,
    workflow_id: str,
    found: dict[str, Sender],
    exact: dict[tuple[str, str, str], Sender],
) -> Sender | None:
    """The event that delivered ``entry``'s Answer: the very one the workflow recorded
    (issue 36 item 1: never a refused Answer's before it); for an Answer an ancestor
    forwarded (or an entry written before the workflow recorded its event), the earliest
    event with the Request's id in the handle's and its ancestors' runs."""
    if entry.path not in ("signal", "update"):
        return None
    key = None
    if entry.update_id is not None:
        key = f"update:{entry.update_id}"
    elif entry.signal_seq is not None:
        key = f"signal:{entry.signal_seq}"
    if entry.run_id is not None and key is not None:
        sender = exact.get((workflow_id, entry.run_id, key))
        if sender is not None and not sender.forwarded:
            return sender
    return found.get(entry.request_id)


async def audit_of(rpc: HandleRpc, handle_ids: builtins.list[str]) -> builtins.list[AuditRecord]:
    """The audit records of ``handle_ids`` (their state's entries joined with the history
    events that carried each Answer), in order of answer time.

    Args:
        rpc: the runtime's RPC helper (state queries, workflow ids).
        handle_ids: the handles whose Requests are audited.
    """
    entries: builtins.list[tuple[str, AuditEntry]] = []
    for hid in handle_ids:
        state = await rpc.query(hid, AgentWorkflowStub.state)
        entries.extend((hid, entry) for entry in state.approval.audit)
    return await audit_records(rpc.client, rpc.workflow_id, handle_ids, entries)


async def audit_records(
    client: Client,
    workflow_id: Callable[[str], str],
    handle_ids: builtins.list[str],
    entries: builtins.list[tuple[str, AuditEntry]],
) -> builtins.list[AuditRecord]:
    """``entries`` (handle id, entry: the ``approval.audit`` of each handle's state, read by a
    query or rebuilt from history) joined with the history events that carried each Answer,
    in order of answer time.

    Args:
        client: the client the histories are read with (its data converter decodes them).
        workflow_id: a handle id's workflow id (the runtime's scope).
        handle_ids: the handles audited (their ancestors' runs are scanned too).
        entries: their audit entries.

    Raises:
        RPCError: a listing or a history could not be read.
    """
    scanned: set[str] = set()
    for hid in handle_ids:
        parts = hid.split("/")
        scanned.update("/".join(parts[:n]) for n in range(2, len(parts) + 1))
    exact: dict[tuple[str, str, str], Sender] = {}
    found = await senders(client, [workflow_id(h) for h in sorted(scanned)], exact)
    records = []
    for hid, entry in entries:
        sender = _delivered_by(entry, workflow_id(hid), found, exact)
        records.append(
            AuditRecord(
                handle_id=hid,
                request_id=entry.request_id,
                kind=entry.kind,
                prompt=entry.prompt,
                tool=entry.tool,
                asked_at=_iso(entry.asked_ms),
                answered_at=_iso(entry.answered_ms),
                sent_at=_iso(sender.at_ns // 1_000_000) if sender else None,
                path=sender.path if sender else entry.path,
                ok=entry.ok,
                reason=entry.reason,
                data=entry.data,
                by=entry.by,
                identity=sender.identity if sender else None,
                principal=entry.principal or (sender.principal if sender else None),
                verified=entry.verified,
                escalated_to=entry.escalated_to,
                expires_at=entry.expires_at,
                arguments=entry.arguments,
                edited_args=entry.edited_args,
                message=entry.message,
                workflow_id=sender.workflow_id if sender else None,
                run_id=sender.run_id if sender else None,
            )
        )
    records.sort(key=lambda r: r.answered_at or "")
    return records
