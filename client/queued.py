"""Answers sent while no worker runs: read from the workflow's history, no worker needed
(issue 37 item 8).

An Answer sent by signal (``tnx answer`` with no worker, ``temporal workflow signal --name
answer``) is in the workflow's history as soon as the server accepts it, but the workflow
takes it only at its next workflow task, which needs a worker. Until then the handle is
still ``suspended`` in visibility; :func:`queued_answers` finds those Answers (the
``answer`` signals after the workflow's last completed workflow task) so that ``tnx pending``
can show them beside their Request, with who sent them and when.
"""

from __future__ import annotations

from dataclasses import dataclass
from datetime import UTC, datetime
from typing import Final

from temporalio.api.common.v1 import WorkflowExecution
from temporalio.api.enums.v1 import EventType
from temporalio.api.workflowservice.v1 import GetWorkflowExecutionHistoryReverseRequest
from temporalio.client import Client

from toolnexus_temporal.client.retry import riding_outage
from toolnexus_temporal.workflows.contract.models import Answer
from toolnexus_temporal.workflows.contract.names import SIGNAL_ANSWER

QUEUED_SCAN_EVENTS: Final = 200
"""How many of a workflow's newest history events :func:`queued_answers` reads, at most (one
page of a reverse history read)."""


@dataclass(frozen=True)
class QueuedAnswer:
    """An Answer in a workflow's history that no workflow task has taken yet.

    Attributes:
        request_id: the Request it answers (``Answer.id``).
        ok: approve (True) or decline (False).
        by: who sent it, as the sender stated it (``Answer.by``; unverified), or None.
        sent_at: when the server accepted the signal (its history event time, UTC).
        identity: the sending client's identity as the signal event records it
            (``temporal-cli:alice@host`` for the ``temporal`` CLI), or None.
        edited: it approves with edited arguments (``Answer.edited_args``).
    """

    request_id: str
    ok: bool
    by: str | None
    sent_at: datetime
    identity: str | None = None
    edited: bool = False

    def line(self) -> str:
        """``approve by alice@host, sent 13:46:44 UTC``: the answer in a table cell; an
        Answer that states no ``by`` (a raw ``temporal workflow signal``) names the client
        identity that sent it (walk 6: it showed no sender)."""
        verdict = "approve" if self.ok else "decline"
        if self.ok and self.edited:  # walk 9: an edit read as a plain approval
            verdict = "approve with an edit"
        who = f" by {self.by}" if self.by else ""
        if not who and self.identity:
            who = f" from {self.identity}"
        return f"{verdict}{who}, sent {self.sent_at:%H:%M:%S} UTC"


async def queued_answers(client: Client, workflow_id: str) -> list[QueuedAnswer]:
    """The ``answer`` signals of ``workflow_id``'s current run that came after its last
    completed workflow task, oldest first: what the workflow takes at its next task, once a
    worker polls. Reads the newest :data:`QUEUED_SCAN_EVENTS` events (one reverse page);
    a signal whose input is not an Answer this client can decode (a raw signal with a typo,
    another codec) is left out: the workflow refuses it too. A signal that came while a
    workflow task was in flight (one a worker took just before it stopped) is kept aside by
    the server and written to history when that task ends or times out (10 s): it shows
    from then on.

    Raises:
        RPCError: the history cannot be read (no such workflow: NOT_FOUND), after riding
            out an outage.
    """
    request = GetWorkflowExecutionHistoryReverseRequest(
        namespace=client.namespace,
        execution=WorkflowExecution(workflow_id=workflow_id),
        maximum_page_size=QUEUED_SCAN_EVENTS,
    )
    resp = await riding_outage(
        lambda: client.workflow_service.get_workflow_execution_history_reverse(request)
    )
    found: list[QueuedAnswer] = []
    for event in resp.history.events:  # newest first
        if event.event_type == EventType.EVENT_TYPE_WORKFLOW_TASK_COMPLETED:
            break
        if event.event_type != EventType.EVENT_TYPE_WORKFLOW_EXECUTION_SIGNALED:
            continue
        attrs = event.workflow_execution_signaled_event_attributes
        if attrs.signal_name != SIGNAL_ANSWER or len(attrs.input.payloads) != 1:
            continue
        try:
            [answer] = await client.data_converter.decode(list(attrs.input.payloads), [Answer])
        except Exception:  # not an Answer: the workflow refuses it as well
            continue
        if not isinstance(answer, Answer):
            continue
        found.append(
            QueuedAnswer(
                request_id=answer.id,
                ok=answer.ok,
                by=answer.by,
                sent_at=event.event_time.ToDatetime(tzinfo=UTC),
                identity=attrs.identity or None,
                edited=answer.edited_args is not None,
            )
        )
    found.reverse()
    return found
