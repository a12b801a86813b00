"""The audit of every answer (issue 26 item 3): ``AgentRuntime.audit`` and ``tnx audit``.

Each handle keeps an :class:`~toolnexus_temporal.workflows.contract.state.AuditEntry` per
answered Request in its state (carried across continue-as-new, readable after close). This
module joins them with what Temporal recorded on the history events that carried the Answer:
the ``identity`` of the ``answer`` signal or of the ``admit_answer`` update request, and the
event's ``principal`` where the server stamps one (only with an authorizer and claim mapper
configured: the dev server and a default self-hosted server stamp none). For a Request with
approvers the workflow itself read that principal (``tnx.answer_principal``) and enforced the
approvers against it: the entry then says ``verified`` and names it; without one, the check
ran against the sender's stated ``by`` and ``verified`` is False.

What is read is bounded by the entries kept (``AUDIT_KEEP``), not by the agent's age: the
runs the kept entries name (each entry records the run whose event delivered its Answer),
and of each only the part that holds the events named, read from the end nearer to them and
no further (:func:`read_named`; issue 38); and, only for an entry that event does not
settle, the runs of the handle and its ancestors open while that Request waited: an Answer
sent to a parent and routed down was first recorded there. The event named is the one that
delivered the Answer that was taken, as the workflow recorded it in the entry (its run, and
its update id or its place among the run's ``answer`` signals: issue 36 item 1), never a
refused Answer's before it; for an Answer an ancestor forwarded, the earliest event with the
Request's id in the ancestors' runs names the sender and the path (``signal`` or
``update``).
"""

from __future__ import annotations

import asyncio
import builtins
import time
from collections.abc import AsyncIterator, Callable
from datetime import UTC, datetime
from typing import Any, Final

from pydantic import BaseModel
from temporalio.api.common.v1 import WorkflowExecution
from temporalio.api.enums.v1 import EventType
from temporalio.api.history.v1 import HistoryEvent
from temporalio.api.workflowservice.v1 import GetWorkflowExecutionHistoryReverseRequest
from temporalio.client import Client
from temporalio.service import RPCError, RPCStatusCode

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
            for a worker when the Answer was queued.
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


_DELIVERED = ("signal", "update")
"""The paths of an Answer that a history event carried."""

WINDOW_SLACK_MS = 5_000
"""How far around a Request's wait (asked to answered, workflow time) an ancestor's run is
read for the event that carried a forwarded Answer (ms): workflow time and event time may
differ by the length of a workflow task."""


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
    *,
    within: builtins.list[tuple[int, int]] | None = None,
    skip: set[tuple[str, str]] | None = None,
) -> dict[str, Sender]:
    """The earliest ``answer`` signal or ``admit_answer`` update event per Request id, over
    the runs of each workflow in ``workflow_ids`` (continued-as-new and closed runs too).

    Args:
        exact: filled, when given, with every such event by (workflow id, run id, key): key
            ``update:<update id>`` or ``signal:<n>`` (the n-th ``answer`` signal of the run,
            from 1, as the workflow counts them: ``AuditEntry.signal_seq``).
        within: only the runs whose time span overlaps one of these (from, to) windows (ms
            since the epoch) are read; None: every run.
        skip: (workflow id, run id) pairs not to read again (already read by the caller).
    """
    found: dict[str, Sender] = {}
    for wid in workflow_ids:
        async for run in client.list_workflows(f"WorkflowId = {quoted(wid)}"):
            if skip is not None and (wid, run.run_id) in skip:
                continue
            if within is not None and not _overlaps(run, within):
                continue
            await read_run(client, wid, run.run_id, found, exact)
    return found


READS_AT_ONCE = 8
"""Histories read at once (the runs an old agent's kept entries name are read together)."""


async def _gather_bounded(reads: Any) -> None:
    """Await ``reads`` (coroutines), at most :data:`READS_AT_ONCE` at a time."""
    gate = asyncio.Semaphore(READS_AT_ONCE)

    async def one(read: Any) -> None:
        async with gate:
            await read

    await asyncio.gather(*(one(read) for read in reads))


def _overlaps(run: Any, windows: builtins.list[tuple[int, int]]) -> bool:
    """Whether ``run`` (a listed workflow execution) was open during one of ``windows``."""
    start = int(run.start_time.timestamp() * 1000)
    close = int(run.close_time.timestamp() * 1000) if run.close_time else None
    return any(start <= to and (close is None or close >= since) for since, to in windows)


async def read_run(
    client: Client,
    wid: str,
    run_id: str,
    found: dict[str, Sender],
    exact: dict[tuple[str, str, str], Sender] | None = None,
) -> None:
    """Read one run's ``answer`` signal and ``admit_answer`` update events into ``found``
    (the earliest per Request id, merged with what it holds) and ``exact`` (see
    :func:`senders`)."""
    history = client.get_workflow_handle(wid, run_id=run_id)
    signals = 0
    async for event in history.fetch_history_events():
        parsed = _answer_event(event)
        if parsed is None:
            continue
        if parsed[0] == "signal":
            signals += 1
        await _note(client, wid, run_id, event, parsed, signals, found, exact)


async def _note(
    client: Client,
    wid: str,
    run_id: str,
    event: Any,
    parsed: tuple[str, str, Any, str, bool],
    signals: int,
    found: dict[str, Sender],
    exact: dict[tuple[str, str, str], Sender] | None,
) -> str:
    """Record one ``answer`` event (``parsed`` by :func:`_answer_event`; a signal is the
    ``signals``-th of its run) in ``exact`` and ``found``; returns its key."""
    path, identity, payloads, key, forwarded = parsed
    if path == "signal":
        key = f"signal:{signals}"
    sender = Sender(
        path=path,
        identity=identity or None,
        principal=_principal(event),
        at_ns=event.event_time.ToNanoseconds(),
        workflow_id=wid,
        run_id=run_id,
        forwarded=forwarded,
    )
    if exact is not None:
        exact[(wid, run_id, key)] = sender
    try:
        (answer,) = await client.data_converter.decode(payloads, [Answer])
    except Exception:  # an input the workflow rejected loudly: not an Answer
        return key
    known = found.get(answer.id)
    if known is None or sender.at_ns < known.at_ns:
        found[answer.id] = sender
    return key


PAGE_EVENTS: Final = 100
"""The page size asked for when a run is read only up to the events an audit needs. The
server counts it in batches of events (what one workflow task wrote), so a page holds about
twice as many events; measured on an old agent's runs (1,600 events), smaller pages cost
more round trips than the events they spare."""


async def read_named(
    client: Client,
    wid: str,
    run_id: str,
    wanted: dict[str, int],
    found: dict[str, Sender],
    exact: dict[tuple[str, str, str], Sender],
) -> bool:
    """Read the events of one run that ``wanted`` names (keys ``update:<id>`` and
    ``signal:<n>``, as :func:`senders` keys ``exact``) into ``exact`` and ``found``, and no
    more of the run than that: from its first event, stopping once all are read; or, when
    they are all updates and nearer the run's end (by when each was taken, ``wanted``'s
    values, ms since the epoch, against the run's start and close), from its last event
    back (signals are numbered from the run's start, so only updates are found that way).

    Returns:
        Whether the whole run was read, its signals too (a key never found reads all of
        it; a read from the end skips the signals).
    """
    reverse = False
    if wanted and all(key.startswith("update:") for key in wanted):
        desc = await client.get_workflow_handle(wid, run_id=run_id).describe()
        start = desc.start_time.timestamp() * 1000 if desc.start_time else 0.0
        end = desc.close_time.timestamp() * 1000 if desc.close_time else time.time() * 1000
        spots = [(at - start) / max(end - start, 1.0) for at in wanted.values()]
        reverse = 1 - min(spots) < max(spots)
    if reverse:
        try:
            await _scan(client, wid, run_id, _backward(client, wid, run_id), wanted, found, exact)
            return False
        except RPCError as err:  # a server without the reverse read: from the start
            if err.status != RPCStatusCode.UNIMPLEMENTED:
                raise
    events = _forward(client, wid, run_id)
    return not await _scan(client, wid, run_id, events, wanted, found, exact, numbered=True)


async def _scan(
    client: Client,
    wid: str,
    run_id: str,
    events: AsyncIterator[Any],
    wanted: dict[str, int],
    found: dict[str, Sender],
    exact: dict[tuple[str, str, str], Sender],
    *,
    numbered: bool = False,
) -> bool:
    """Note the ``answer`` events of ``events`` (one run's, in either order) until every key
    of ``wanted`` is noted; signals only when ``numbered`` (the events come from the run's
    first, so each signal's place is known). Returns whether it stopped early."""
    left = set(wanted)
    signals = 0
    async for event in events:
        parsed = _answer_event(event)
        if parsed is None:
            continue
        if parsed[0] == "signal":
            if not numbered:
                continue
            signals += 1
        left.discard(await _note(client, wid, run_id, event, parsed, signals, found, exact))
        if not left:
            return True
    return False


async def _forward(client: Client, wid: str, run_id: str) -> AsyncIterator[Any]:
    """The run's events, first to last, :data:`PAGE_EVENTS` a page."""
    handle = client.get_workflow_handle(wid, run_id=run_id)
    async for event in handle.fetch_history_events(page_size=PAGE_EVENTS):
        yield event


async def _backward(client: Client, wid: str, run_id: str) -> AsyncIterator[HistoryEvent]:
    """The run's events, last to first, :data:`PAGE_EVENTS` a page
    (``GetWorkflowExecutionHistoryReverse``)."""
    token = b""
    while True:
        page = await client.workflow_service.get_workflow_execution_history_reverse(
            GetWorkflowExecutionHistoryReverseRequest(
                namespace=client.namespace,
                execution=WorkflowExecution(workflow_id=wid, run_id=run_id),
                maximum_page_size=PAGE_EVENTS,
                next_page_token=token,
            ),
            retry=True,
        )
        for event in page.history.events:
            yield event
        token = page.next_page_token
        if not token:
            return


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
    if entry.path not in _DELIVERED:
        return None
    return _own_event(entry, workflow_id, exact) or found.get(entry.request_id)


def _key_of(entry: AuditEntry) -> str | None:
    """The key (as :func:`senders` keys ``exact``) of the event the workflow recorded as
    delivering ``entry``'s Answer: ``update:<id>`` or ``signal:<n>``; None when it recorded
    none (an entry from an older worker, or not delivered by an event)."""
    if entry.update_id is not None:
        return f"update:{entry.update_id}"
    if entry.signal_seq is not None:
        return f"signal:{entry.signal_seq}"
    return None


def _own_event(
    entry: AuditEntry, workflow_id: str, exact: dict[tuple[str, str, str], Sender]
) -> Sender | None:
    """The event the workflow recorded as delivering ``entry``'s Answer (its run, and its
    update id or its place among the run's ``answer`` signals), when it was read and was
    not a signal an ancestor forwarded; else None."""
    key = _key_of(entry)
    if entry.run_id is None or key is None:
        return None
    sender = exact.get((workflow_id, entry.run_id, key))
    return sender if sender is not None and not sender.forwarded else None


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


async def _read_named_runs(
    client: Client,
    workflow_id: Callable[[str], str],
    entries: builtins.list[tuple[str, AuditEntry]],
    found: dict[str, Sender],
    exact: dict[tuple[str, str, str], Sender],
) -> set[tuple[str, str]]:
    """Read the runs ``entries`` name into ``found`` and ``exact``: at most one run per kept
    entry, whatever the agent's age (issue 38: not every run an old agent ever had), and of
    each only up to the events named (:func:`read_named`); an entry that names its run but
    not its event (an older worker's) has its run read whole.

    Returns:
        The (workflow id, run id) of the runs read whole.
    """
    wanted: dict[tuple[str, str], dict[str, int] | None] = {}
    for hid, entry in entries:
        if entry.path not in _DELIVERED or entry.run_id is None:
            continue
        run = (workflow_id(hid), entry.run_id)
        keys = wanted.setdefault(run, {})
        key = _key_of(entry)
        if key is None or keys is None:
            wanted[run] = None
        else:
            keys[key] = entry.answered_ms
    whole: set[tuple[str, str]] = set()

    async def read(run: tuple[str, str], keys: dict[str, int] | None) -> None:
        wid, run_id = run
        if keys is None:
            await read_run(client, wid, run_id, found, exact)
        elif not await read_named(client, wid, run_id, keys, found, exact):
            return
        whole.add(run)

    await _gather_bounded(read(run, keys) for run, keys in sorted(wanted.items()))
    return whole


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
    exact: dict[tuple[str, str, str], Sender] = {}
    found: dict[str, Sender] = {}
    # 1. The runs the entries name (issue 36 item 1), each up to the events named.
    whole = await _read_named_runs(client, workflow_id, entries, found, exact)
    # 2. Entries their own event does not settle (an Answer an ancestor forwarded, or an entry
    # written before the workflow recorded its event): the runs of the handle and its
    # ancestors open while the Request waited.
    unsettled = [
        (hid, entry)
        for hid, entry in entries
        if entry.path in _DELIVERED and _own_event(entry, workflow_id(hid), exact) is None
    ]
    if unsettled:
        scanned: set[str] = set()
        for hid, _ in unsettled:
            parts = hid.split("/")
            scanned.update("/".join(parts[:n]) for n in range(2, len(parts) + 1))
        windows = [
            ((entry.asked_ms or 0) - WINDOW_SLACK_MS, entry.answered_ms + WINDOW_SLACK_MS)
            for _, entry in unsettled
        ]
        more = await senders(
            client,
            [workflow_id(h) for h in sorted(scanned)],
            exact,
            within=windows,
            skip=whole,
        )
        for request_id, earliest in more.items():
            known = found.get(request_id)
            if known is None or earliest.at_ns < known.at_ns:
                found[request_id] = earliest
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
