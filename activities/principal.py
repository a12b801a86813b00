"""The ``tnx.answer_principal`` activity: the server-stamped principal of the event that
delivered an Answer (issue 26 item 3).

Temporal stamps ``HistoryEvent.principal`` (temporal.api.common.v1.Principal: ``type``,
``name``) on the signal and update events of a server that runs an authorizer with a claim
mapper; workflow code never sees it (the SDK's signal and update inputs carry none). So for a
Request whose approvers are set, the workflow runs this activity: it reads the current run's
history with the worker's client (whose data converter has the worker's payload codec), finds
the event that delivered the Answer and returns its principal, or none. The approvers rule
that uses it is :func:`~toolnexus_temporal.workflows.approvals.audit.approver_error`.

Which event: for the ``admit_answer`` update, its ``WorkflowExecutionUpdateAccepted`` event
(the update id names it); for the ``answer`` signal, the ``WorkflowExecutionSignaled``
event named ``answer`` at the place the handler counted (``signal_seq``: the n-th ``answer``
signal of the run), whose input must decode to the same Answer (the same
:func:`~toolnexus_temporal.workflows.approvals.audit.answer_digest`): so two identical
Answers from different principals in one workflow task are each matched to their own event
(issue 36 item 1). A lookup without ``signal_seq`` (from an older worker) takes the newest
such event at or before the history length the handler saw. A signal sent by another
workflow (an ancestor forwarding the Answer: ``external_workflow_execution`` set) carries that
workflow's worker principal, not the answerer's: it counts as none.
"""

from __future__ import annotations

from collections.abc import AsyncIterable, Iterable
from typing import Any

from temporalio import activity
from temporalio.api.enums.v1 import EventType
from temporalio.api.history.v1 import HistoryEvent
from temporalio.client import Client
from temporalio.converter import DataConverter

from toolnexus_temporal.workflows.approvals.audit import answer_digest
from toolnexus_temporal.workflows.contract.messages import (
    PrincipalFound,
    PrincipalLookup,
    StampedPrincipal,
)
from toolnexus_temporal.workflows.contract.models import Answer
from toolnexus_temporal.workflows.contract.names import (
    ANSWER_PRINCIPAL_ACTIVITY,
    SIGNAL_ANSWER,
    UPDATE_ANSWER,
)

_SIGNALED = EventType.EVENT_TYPE_WORKFLOW_EXECUTION_SIGNALED
_ACCEPTED = EventType.EVENT_TYPE_WORKFLOW_EXECUTION_UPDATE_ACCEPTED


def stamped(event: HistoryEvent) -> StampedPrincipal | None:
    """The event's server-stamped principal, or None (unset, or without a name)."""
    if not event.HasField("principal") or not event.principal.name:
        return None
    return StampedPrincipal(type=event.principal.type, name=event.principal.name)


async def _digest_of(converter: DataConverter, payloads: Any) -> str | None:
    """The digest of the one Answer ``payloads`` decode to, or None (not an Answer: an input
    the workflow rejected loudly)."""
    try:
        (answer,) = await converter.decode(payloads, [Answer])
    except Exception:
        return None
    return answer_digest(answer)


async def principal_of(
    events: AsyncIterable[HistoryEvent] | Iterable[HistoryEvent],
    converter: DataConverter,
    lookup: PrincipalLookup,
) -> PrincipalFound:
    """Find the event of ``events`` (one run's history, oldest first) that delivered the
    Answer ``lookup`` names, and its principal (module docstring: which event).

    Args:
        events: the history events, as ``fetch_history_events`` yields them (or a list).
        converter: the data converter (with any payload codec) the Answer was encoded with.
        lookup: the Answer's id, digest, path and update id or history length.

    Returns:
        The event's id and principal; ``event_id`` None when no event matched.

    Raises:
        Whatever decoding the payloads raises other than for a non-Answer input (a codec
        whose key is missing raises: the activity fails, and the workflow refuses the Answer).
    """
    found = PrincipalFound()
    signals = 0

    async def each() -> Any:
        if isinstance(events, AsyncIterable):
            async for event in events:
                yield event
        else:
            for event in events:
                yield event

    async for event in each():
        if (
            lookup.last_event_id is not None
            and lookup.path == "signal"
            and event.event_id > lookup.last_event_id
        ):
            break
        if lookup.path == "signal" and event.event_type == _SIGNALED:
            attrs = event.workflow_execution_signaled_event_attributes
            if attrs.signal_name != SIGNAL_ANSWER:
                continue
            signals += 1
            if lookup.signal_seq is not None and signals != lookup.signal_seq:
                continue
            if await _digest_of(converter, attrs.input.payloads) != lookup.digest:
                if lookup.signal_seq is not None:
                    return PrincipalFound()  # not the Answer the handler saw: refused
                continue
            forwarded = attrs.HasField("external_workflow_execution")
            found = PrincipalFound(
                event_id=event.event_id, principal=None if forwarded else stamped(event)
            )
            if lookup.signal_seq is not None:
                return found
            # without a place, the newest match wins: keep scanning
        elif lookup.path == "update" and event.event_type == _ACCEPTED:
            request = event.workflow_execution_update_accepted_event_attributes.accepted_request
            if request.input.name != UPDATE_ANSWER or request.meta.update_id != lookup.update_id:
                continue
            if await _digest_of(converter, request.input.args.payloads) != lookup.digest:
                continue
            return PrincipalFound(event_id=event.event_id, principal=stamped(event))
    return found


class PrincipalActivities:
    """The principal lookup, with the worker's Temporal client.

    Args:
        client: the worker's client (its data converter has the worker's payload codec).
    """

    def __init__(self, client: Client) -> None:
        self.client = client

    @activity.defn(name=ANSWER_PRINCIPAL_ACTIVITY)
    async def answer_principal(self, lookup: PrincipalLookup) -> PrincipalFound:
        """Read run ``lookup.run_id`` of ``lookup.workflow_id`` and return the principal of
        the event that delivered the Answer (:func:`principal_of`).

        Raises:
            RPCError: the history could not be read (the activity is retried; the workflow
                refuses the Answer when every attempt failed).
        """
        handle = self.client.get_workflow_handle(lookup.workflow_id, run_id=lookup.run_id)
        return await principal_of(handle.fetch_history_events(), self.client.data_converter, lookup)
