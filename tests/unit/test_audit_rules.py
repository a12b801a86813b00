"""The pure rules of expiry, escalation, approvers and the audit (workflows/approvals/audit.py)."""

from __future__ import annotations

import json

import pytest
from pydantic import ValidationError

from toolnexus_temporal.activities import pending
from toolnexus_temporal.activities.registry import Registry, RegistryError
from toolnexus_temporal.workflows.approvals.audit import (
    AUDIT_KEEP,
    DATA_KEEP,
    answered_error,
    approver_error,
    deadline_ms,
    entry_of,
    escalation_due_ms,
    expires_at_for,
    expires_while_escalated,
    record,
)
from toolnexus_temporal.workflows.contract.clock import iso_of_ms, parse_time_ms
from toolnexus_temporal.workflows.contract.models import (
    APPROVAL_WAIT_MAX_MS,
    AgentDef,
    Answer,
    ApprovalPolicy,
    Escalation,
    Request,
)
from toolnexus_temporal.workflows.contract.state import HandleState

NOW = 1_764_600_000_000  # ms since the epoch


def req(**extra: object) -> Request:
    return Request.model_validate({"id": "root/w.1#1", "kind": "approval", "prompt": "p", **extra})


def test_times_round_trip_and_need_a_zone() -> None:
    assert parse_time_ms(iso_of_ms(NOW)) == NOW
    assert iso_of_ms(NOW).endswith("Z")
    assert parse_time_ms("2026-12-01T10:00:00+02:00") == parse_time_ms("2026-12-01T08:00:00Z")
    assert parse_time_ms("2026-12-01T10:00:00") is None  # no zone: not guessed in a workflow
    assert parse_time_ms("soon") is None


def test_expiry_comes_from_the_request_then_the_tool_then_the_agent() -> None:
    agent = ApprovalPolicy(timeout_ms=60_000)
    own = {"expiresAt": "2026-12-01T08:00:00Z", "timeoutMs": 5}
    assert expires_at_for(own, agent, NOW) == "2026-12-01T08:00:00Z"
    assert "timeoutMs" not in own  # never reaches the Request's wire keys
    assert expires_at_for({"timeoutMs": 1_500}, agent, NOW) == iso_of_ms(NOW + 1_500)
    assert expires_at_for({}, agent, NOW) == iso_of_ms(NOW + 60_000)
    assert expires_at_for({}, ApprovalPolicy(), NOW) is None
    assert deadline_ms(req(expiresAt=iso_of_ms(NOW))) == NOW
    assert deadline_ms(req()) is None


def test_pending_checks_its_deadline_loudly() -> None:
    meta = pending("approval", "p", timeout_ms=10).metadata["pending"]
    assert meta["timeoutMs"] == 10
    naive = pending("approval", "p", expires_at="2026-12-01T08:00:00").metadata["pending"]
    assert naive["expiresAt"] == "2026-12-01T08:00:00+00:00"  # no zone: UTC, said so
    with pytest.raises(ValueError, match="not an ISO-8601 time"):
        pending("approval", "p", expires_at="tomorrow")
    with pytest.raises(ValueError, match="positive"):
        pending("approval", "p", timeout_ms=0)


def test_escalation_after_a_delay_or_at_the_deadline() -> None:
    early = ApprovalPolicy(escalate=Escalation(after_ms=100, queue="ops"))
    at_deadline = ApprovalPolicy(escalate=Escalation(interpreter="boss"))
    assert escalation_due_ms(early, NOW, NOW + 5_000, escalated=False) == NOW + 100
    assert escalation_due_ms(early, NOW, None, escalated=True) is None
    assert escalation_due_ms(at_deadline, NOW, NOW + 5_000, escalated=False) == NOW + 5_000
    assert escalation_due_ms(at_deadline, NOW, None, escalated=False) is None
    assert escalation_due_ms(ApprovalPolicy(), NOW, NOW + 5, escalated=False) is None
    # an escalation at the deadline replaces the decline; an early one does not
    assert not expires_while_escalated(at_deadline)
    assert expires_while_escalated(early) and expires_while_escalated(ApprovalPolicy())


def test_an_escalation_names_exactly_one_target() -> None:
    with pytest.raises(ValidationError, match="exactly one"):
        Escalation(after_ms=5)
    with pytest.raises(ValidationError, match="exactly one"):
        Escalation(queue="ops", interpreter="boss")
    with pytest.raises(ValidationError):
        Escalation(after_ms=0, queue="ops")


def test_an_unregistered_escalation_interpreter_is_refused() -> None:
    agent = AgentDef(name="w", approval=ApprovalPolicy(escalate=Escalation(interpreter="boss")))
    with pytest.raises(RegistryError, match="escalates to interpreter 'boss'"):
        Registry([agent])


def test_approvers_by_kind_or_tool() -> None:
    policy = ApprovalPolicy(approvers={"approval": ["alice"], "deploy": ["bob"]})
    assert approver_error(policy, req(), "deploy", "alice") is None
    assert approver_error(policy, req(), "deploy", "bob") is None
    assert approver_error(policy, req(), "other", "alice") is None
    error = approver_error(policy, req(), "other", "bob")
    assert error is not None and "'bob' may not answer" in error and "unverified" in error
    assert "no 'by'" in (approver_error(policy, req(), None, None) or "")
    assert approver_error(ApprovalPolicy(), req(), None, None) is None  # no list: anyone
    assert approver_error(policy, req(kind="input"), "x", None) is None


def test_the_audit_is_bounded_and_names_an_earlier_answer() -> None:
    s = HandleState(id="root/w.1", task_queue="tq")
    for n in range(AUDIT_KEEP + 5):
        r = Request(id=f"root/w.1#{n}", kind="approval", prompt="p")
        path = "expiry" if n == AUDIT_KEEP + 4 else "update"
        answer = Answer(
            id=r.id, ok=path != "expiry", reason="expired" if path == "expiry" else None
        )
        record(
            s,
            entry_of(
                r, answer, path=path, tool="t", asked_ms=NOW, now_ms=NOW + n, escalated_to=None
            ),
        )
    assert len(s.approval.audit) == AUDIT_KEEP
    assert s.approval.audit[0].request_id == "root/w.1#5"
    assert "expired at" in (answered_error(s, f"root/w.1#{AUDIT_KEEP + 4}") or "")
    assert "already answered (ok, by update" in (answered_error(s, "root/w.1#9") or "")
    assert answered_error(s, "root/w.1#0") is None  # dropped from the bounded audit


def test_waits_too_long_for_a_timer_are_refused_loudly() -> None:
    """A timeout or escalation delay the workflow could not turn into a timer (a deadline
    past year 9999 made ``iso_of_ms`` raise inside the workflow: its task failed on every
    retry and the agent hung) is refused where it is given."""
    too_long = APPROVAL_WAIT_MAX_MS + 1
    with pytest.raises(ValidationError):
        ApprovalPolicy(timeout_ms=too_long)
    with pytest.raises(ValidationError):
        Escalation(after_ms=too_long, queue="ops")
    with pytest.raises(ValueError, match="at most"):
        pending("approval", "p", timeout_ms=10**20)
    with pytest.raises(ValueError, match="positive"):
        pending("approval", "p", timeout_ms=1.5)  # type: ignore[arg-type]
    ApprovalPolicy(timeout_ms=APPROVAL_WAIT_MAX_MS, escalate=Escalation(after_ms=1, queue="q"))
    # a Request that reaches the workflow with a far deadline anyway waits, and never raises
    assert expires_at_for({"timeoutMs": 10**20}, ApprovalPolicy(), NOW) == iso_of_ms(
        NOW + APPROVAL_WAIT_MAX_MS
    )


@pytest.mark.parametrize(
    "approvers",
    [
        {"approval": ["a" * 201]},  # longer than any Answer.by: it could never match
        {"approval": [""]},
        {"approval": []},  # nobody could answer: the Request would wait for its timer alone
        {"": ["alice"]},
        {"approval": [f"u{n}" for n in range(101)]},
        {f"kind{n}": ["alice"] for n in range(101)},
    ],
)
def test_approver_lists_are_bounded_and_never_empty(approvers: dict[str, list[str]]) -> None:
    with pytest.raises(ValidationError):
        ApprovalPolicy(approvers=approvers)
    with pytest.raises(ValidationError):
        AgentDef.model_validate({"name": "w", "approval": {"approvers": approvers}})


def test_an_audit_entry_keeps_a_bounded_copy_of_the_answers_data() -> None:
    """The audit keeps 200 entries in the handle's state (carried by continue-as-new): an
    Answer's data of 300 KB each would make that state 60 MB, past any payload limit. Small
    data is kept as it is; large data as its first DATA_KEEP characters of JSON and its size."""
    r = Request(id="root/w.1#1", kind="approval", prompt="p")
    small = {"otp": 123456, "note": "ok"}
    kept = entry_of(
        r,
        Answer(id=r.id, ok=True, data=small),
        path="update",
        tool="t",
        asked_ms=NOW,
        now_ms=NOW,
        escalated_to=None,
    )
    assert kept.data == small
    big = {"blob": "x" * 300_000}
    clipped = entry_of(
        r,
        Answer(id=r.id, ok=True, data=big),
        path="update",
        tool="t",
        asked_ms=NOW,
        now_ms=NOW,
        escalated_to=None,
    )
    assert clipped.data is not None
    assert len(json.dumps(clipped.data)) < DATA_KEEP + 200
    assert clipped.data["clipped_json"].startswith('{"blob": "xxx')
    assert clipped.data["json_chars"] == len(json.dumps(big, sort_keys=True))
