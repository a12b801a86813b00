"""The ``tnx.answer_principal`` event matching (activities/principal.py ``principal_of``) and
the approvers rule it feeds (workflows/approvals/audit.py ``approver_error``, ``entry_of``).

The dev server cannot stamp a principal (docs/guide/approvals.md), so the events are built as
a server with an authorizer and claim mapper writes them (``HistoryEvent.principal``), their
payloads encoded by a real DataConverter: pydantic JSON, and the same with the runtime's AES-GCM
payload codec."""

from __future__ import annotations

import base64

import pytest
from temporalio.api.common.v1 import Principal
from temporalio.api.enums.v1 import EventType
from temporalio.api.history.v1 import HistoryEvent
from temporalio.contrib.pydantic import pydantic_data_converter
from temporalio.converter import DataConverter

from toolnexus_temporal.activities.principal import principal_of
from toolnexus_temporal.client.codec import codec_from_keys, data_converter
from toolnexus_temporal.workflows.approvals.audit import (
    Stamp,
    answer_digest,
    approver_error,
    entry_of,
)
from toolnexus_temporal.workflows.contract.messages import (
    PrincipalFound,
    PrincipalLookup,
    StampedPrincipal,
)
from toolnexus_temporal.workflows.contract.models import Answer, ApprovalPolicy, Request
from toolnexus_temporal.workflows.contract.names import SIGNAL_ANSWER, UPDATE_ANSWER

ALICE = Principal(type="jwt", name="alice@example.com")
MALLORY = Principal(type="jwt", name="mallory@example.com")
KEYS = "k1:" + base64.b64encode(bytes(range(32))).decode()
CODEC = data_converter(codec_from_keys(KEYS))
CONVERTERS = pytest.mark.parametrize(
    "converter", [pydantic_data_converter, CODEC], ids=["plain", "codec"]
)


async def signal(
    event_id: int,
    answer: Answer,
    principal: Principal | None,
    converter: DataConverter,
    *,
    name: str = SIGNAL_ANSWER,
    from_workflow: bool = False,
) -> HistoryEvent:
    event = HistoryEvent(
        event_id=event_id, event_type=EventType.EVENT_TYPE_WORKFLOW_EXECUTION_SIGNALED
    )
    attrs = event.workflow_execution_signaled_event_attributes
    attrs.signal_name = name
    attrs.identity = "someone@host (tnx)"
    attrs.input.payloads.extend(await converter.encode([answer]))
    if from_workflow:  # an ancestor's workflow forwarded it (SignalExternalWorkflowExecution)
        attrs.external_workflow_execution.workflow_id = "root/parent.1"
    if principal is not None:
        event.principal.CopyFrom(principal)
    return event


async def accepted(
    event_id: int,
    answer: Answer,
    update_id: str,
    principal: Principal | None,
    converter: DataConverter,
) -> HistoryEvent:
    event = HistoryEvent(
        event_id=event_id, event_type=EventType.EVENT_TYPE_WORKFLOW_EXECUTION_UPDATE_ACCEPTED
    )
    req = event.workflow_execution_update_accepted_event_attributes.accepted_request
    req.input.name = UPDATE_ANSWER
    req.meta.update_id = update_id
    req.meta.identity = "someone@host (tnx)"
    req.input.args.payloads.extend(await converter.encode([answer]))
    if principal is not None:
        event.principal.CopyFrom(principal)
    return event


def lookup(answer: Answer, path: str, **extra: object) -> PrincipalLookup:
    return PrincipalLookup.model_validate(
        {
            "workflow_id": "root/w.1",
            "run_id": "run-1",
            "request_id": answer.id,
            "digest": answer_digest(answer),
            "path": path,
            **extra,
        }
    )


YES = Answer(id="root/w.1#1", ok=True, by="alice", data={"ticket": 7})
NO = Answer(id="root/w.1#1", ok=False, by="alice")


@CONVERTERS
async def test_the_signal_event_of_the_answer_gives_its_principal(
    converter: DataConverter,
) -> None:
    events = [
        await signal(5, NO, MALLORY, converter),  # the same id, another Answer
        await signal(6, YES, ALICE, converter, name="post"),  # another signal
        await signal(7, YES, ALICE, converter),  # this one
        await signal(9, YES, MALLORY, converter),  # after the handler's history length
    ]
    found = await principal_of(events, converter, lookup(YES, "signal", last_event_id=8))
    assert found == PrincipalFound(
        event_id=7, principal=StampedPrincipal(type="jwt", name="alice@example.com")
    )
    # the same Answer sent twice before the handler ran: the newest is taken
    found = await principal_of(events, converter, lookup(YES, "signal", last_event_id=9))
    assert found.event_id == 9 and found.principal is not None
    assert found.principal.name == "mallory@example.com"


@CONVERTERS
async def test_identical_answers_in_one_task_each_get_their_own_principal(
    converter: DataConverter,
) -> None:
    """Issue 36 item 1: two identical Answers from different principals in one workflow task
    (the handler saw the same history length for both): by its place among the run's
    ``answer`` signals (``signal_seq``) each is matched to its own event, not both to the
    newer one; a place whose event carries another Answer matches nothing (refused)."""
    events = [
        await signal(5, NO, None, converter),  # the run's 1st answer signal
        await signal(6, YES, ALICE, converter, name="post"),  # not an answer signal
        await signal(7, YES, MALLORY, converter),  # the 2nd
        await signal(8, YES, ALICE, converter),  # the 3rd: the same Answer, alice's
    ]
    first = await principal_of(
        events, converter, lookup(YES, "signal", last_event_id=9, signal_seq=2)
    )
    second = await principal_of(
        events, converter, lookup(YES, "signal", last_event_id=9, signal_seq=3)
    )
    assert first == PrincipalFound(
        event_id=7, principal=StampedPrincipal(type="jwt", name="mallory@example.com")
    )
    assert second == PrincipalFound(
        event_id=8, principal=StampedPrincipal(type="jwt", name="alice@example.com")
    )
    wrong = await principal_of(
        events, converter, lookup(YES, "signal", last_event_id=9, signal_seq=1)
    )
    assert wrong == PrincipalFound()


@CONVERTERS
async def test_the_update_accepted_event_is_found_by_its_update_id(
    converter: DataConverter,
) -> None:
    events = [
        await accepted(4, YES, "upd-1", MALLORY, converter),
        await accepted(8, YES, "upd-2", ALICE, converter),
        await signal(9, YES, MALLORY, converter),  # a signal never answers an update lookup
    ]
    found = await principal_of(events, converter, lookup(YES, "update", update_id="upd-2"))
    assert found == PrincipalFound(
        event_id=8, principal=StampedPrincipal(type="jwt", name="alice@example.com")
    )
    # the id names the event, and its input must be this Answer
    found = await principal_of(events, converter, lookup(NO, "update", update_id="upd-1"))
    assert found == PrincipalFound()


@CONVERTERS
async def test_no_principal_stamped_or_a_forwarding_workflow_gives_none(
    converter: DataConverter,
) -> None:
    events = [await signal(3, YES, None, converter)]
    found = await principal_of(events, converter, lookup(YES, "signal", last_event_id=3))
    assert found == PrincipalFound(event_id=3, principal=None)
    # an ancestor forwarded it: the stamp is that workflow's worker's, not the answerer's
    events = [await signal(3, YES, ALICE, converter, from_workflow=True)]
    found = await principal_of(events, converter, lookup(YES, "signal", last_event_id=3))
    assert found == PrincipalFound(event_id=3, principal=None)


async def test_payloads_the_converter_cannot_read_match_nothing() -> None:
    events = [await signal(3, YES, ALICE, CODEC)]  # encrypted; read without the codec
    found = await principal_of(events, pydantic_data_converter, lookup(YES, "signal"))
    assert found == PrincipalFound()  # the workflow refuses the Answer (fail-closed)


def test_approvers_are_enforced_against_a_stamped_principal() -> None:
    policy = ApprovalPolicy(approvers={"approval": ["alice@example.com"]})
    req = Request(id="root/w.1#1", kind="approval", prompt="deploy?")
    alice = Stamp(principal=StampedPrincipal(type="jwt", name="alice@example.com"))
    mallory = Stamp(principal=StampedPrincipal(type="jwt", name="mallory@example.com"))
    assert approver_error(policy, req, None, "anyone", alice) is None  # the stamp decides
    error = approver_error(policy, req, None, "alice@example.com", mallory)
    assert error is not None and "'jwt:mallory@example.com' may not answer" in error
    assert "server-stamped principal, verified" in error
    # no principal stamped: the stated identity, unverified
    assert approver_error(policy, req, None, "alice@example.com", Stamp()) is None
    error = approver_error(policy, req, None, "bob", Stamp())
    assert error is not None and "stated identity, unverified" in error
    # the lookup failed: refused even for a listed name (fail-closed)
    error = approver_error(policy, req, None, "alice@example.com", Stamp(unreadable="boom"))
    assert error is not None and "could not be checked" in error and "boom" in error
    # no approvers: no stamp needed, anyone answers
    assert approver_error(ApprovalPolicy(), req, None, None, Stamp(unreadable="x")) is None


def test_the_audit_entry_says_verified_only_with_a_principal() -> None:
    req = Request(id="root/w.1#1", kind="approval", prompt="deploy?")
    answer = Answer(id=req.id, ok=True, by="alice")
    common = {"path": "signal", "tool": "t", "asked_ms": 1, "now_ms": 2, "escalated_to": None}
    stamp = Stamp(principal=StampedPrincipal(type="jwt", name="alice@example.com"))
    entry = entry_of(req, answer, stamp=stamp, **common)  # type: ignore[arg-type]
    assert (entry.verified, entry.principal, entry.by) == (True, "jwt:alice@example.com", "alice")
    for stamp_ in (None, Stamp()):
        entry = entry_of(req, answer, stamp=stamp_, **common)  # type: ignore[arg-type]
        assert (entry.verified, entry.principal) == (False, None)
