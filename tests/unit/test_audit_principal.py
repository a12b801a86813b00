"""The audit's reading of history (client/audit.py ``senders``): the caller identity and, where
the server stamps one, the principal of the signal or update event that carried an Answer.

The dev server cannot stamp a principal (``temporal server start-dev`` has no authorizer or
claim mapper: docs/guide/approvals.md), so the events here are built as a server with an
authorizer writes them (``HistoryEvent.principal``, temporal api common.v1.Principal)."""

from __future__ import annotations

from collections.abc import AsyncIterator
from types import SimpleNamespace
from typing import Any

from temporalio.api.common.v1 import Principal
from temporalio.api.enums.v1 import EventType
from temporalio.api.history.v1 import HistoryEvent
from temporalio.contrib.pydantic import pydantic_data_converter

from toolnexus_temporal.client.audit import senders
from toolnexus_temporal.workflows.contract.models import Answer
from toolnexus_temporal.workflows.contract.names import SIGNAL_ANSWER, UPDATE_ANSWER


async def _signal(answer: Answer, identity: str, principal: Principal | None) -> HistoryEvent:
    event = HistoryEvent(event_type=EventType.EVENT_TYPE_WORKFLOW_EXECUTION_SIGNALED)
    event.event_time.FromMilliseconds(1_000)
    attrs = event.workflow_execution_signaled_event_attributes
    attrs.signal_name = SIGNAL_ANSWER
    attrs.identity = identity
    attrs.input.payloads.extend(await pydantic_data_converter.encode([answer]))
    if principal is not None:
        event.principal.CopyFrom(principal)
    return event


async def _update(answer: Answer, identity: str) -> HistoryEvent:
    event = HistoryEvent(event_type=EventType.EVENT_TYPE_WORKFLOW_EXECUTION_UPDATE_ACCEPTED)
    event.event_time.FromMilliseconds(2_000)
    req = event.workflow_execution_update_accepted_event_attributes.accepted_request
    req.input.name = UPDATE_ANSWER
    req.meta.identity = identity
    req.input.args.payloads.extend(await pydantic_data_converter.encode([answer]))
    return event


class _Client:
    """The few Client calls ``senders`` makes, over one run's events."""

    data_converter = pydantic_data_converter

    def __init__(self, events: list[HistoryEvent]) -> None:
        self.events = events

    async def list_workflows(self, query: str) -> AsyncIterator[Any]:
        yield SimpleNamespace(run_id="run-1")

    def get_workflow_handle(self, wid: str, run_id: str) -> Any:
        async def fetch() -> AsyncIterator[HistoryEvent]:
            for event in self.events:
                yield event

        return SimpleNamespace(fetch_history_events=fetch)


async def test_a_server_stamped_principal_is_read_beside_the_identity() -> None:
    stamped = Principal(type="jwt", name="alice@example.com")
    events = [
        await _signal(Answer(id="root/w.1#1", ok=True, by="alice"), "temporal-cli", stamped),
        await _signal(Answer(id="root/w.1#2", ok=False, by="bob"), "bob@host (tnx)", None),
        await _update(Answer(id="root/w.1#3", ok=True), "carol@host (tnx)"),
    ]
    found = await senders(_Client(events), ["wf"])  # type: ignore[arg-type]
    one, two, three = (found[f"root/w.1#{n}"] for n in (1, 2, 3))
    assert (one.path, one.identity, one.principal) == (
        "signal",
        "temporal-cli",
        "jwt:alice@example.com",
    )
    assert (two.path, two.identity, two.principal) == ("signal", "bob@host (tnx)", None)
    assert (three.path, three.identity, three.principal) == ("update", "carol@host (tnx)", None)
    assert one.run_id == "run-1" and one.workflow_id == "wf"
