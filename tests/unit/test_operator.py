"""What an operator sees in the web UI (issue 14 item 1): current details that start with the
pending Request and the Answer to paste, the pending Request's search attributes, handler
descriptions that mark the internal ones. Pure rules, no server."""

from __future__ import annotations

import json
import shlex
from datetime import UTC, datetime

import pytest
from temporalio.workflow import _Definition

from tests.unit.fakes import handle
from toolnexus_temporal.workflows.agent import AgentWorkflow
from toolnexus_temporal.workflows.contract import handler_docs
from toolnexus_temporal.workflows.contract.models import AgentDef, Answer, Request, iso_utc
from toolnexus_temporal.workflows.contract.names import PUBLIC_SIGNALS, UPDATE_ANSWER
from toolnexus_temporal.workflows.contract.state import AuditEntry
from toolnexus_temporal.workflows.visibility.operator import (
    answer_json,
    current_details,
    request_attributes,
    static_details,
    static_summary,
)

REQ = Request(id="root/a.1#2", kind="approval", prompt="deploy to prod?")


def test_suspended_details_start_with_the_prompt_the_id_and_the_answer() -> None:
    s = handle(state="suspended", pending_req=REQ, scope="team")
    lines = current_details(s).split("\n\n")
    assert lines[0] == "**Waiting for approval:** deploy to prod?"
    # the Request id as tnx prints ids, with the scope: it pastes back (issue 37 item 1)
    assert lines[1] == "Request id: `team/root/a.1#2`"
    assert lines[2] == 'Answer: Signal `answer` with input `{"id": "team/root/a.1#2", "ok": true}`'
    assert json.loads(lines[3].split("`")[1]) == {
        "id": "team/root/a.1#2",
        "ok": False,
        "reason": "declined",
    }
    shell = shlex.split(lines[4].removeprefix("Shell: `").removesuffix("`"))
    assert shell[:3] == ["temporal", "workflow", "signal"]
    assert shell[shell.index("--workflow-id") + 1] == "team/root/a.1"  # the scoped workflow id
    assert shell[shell.index("--name") + 1] == "answer"
    assert json.loads(shell[shell.index("--input") + 1]) == {"id": "team/root/a.1#2", "ok": True}
    assert "**team/root/a.1** — `suspended`" in lines[5]  # the id as tnx prints it


def test_a_prompt_with_quotes_gives_a_shell_line_that_parses() -> None:
    req = Request(id="root/o'k.1#1", kind="input", prompt='say "it\'s fine"')
    s = handle(id="root/o'k.1", state="suspended", pending_req=req)
    shell_line = current_details(s).split("\n\n")[4]
    shell = shlex.split(shell_line.removeprefix("Shell: `").removesuffix("`"))
    assert json.loads(shell[-1]) == {"id": "root/o'k.1#1", "ok": True}


def test_details_of_a_handle_that_waits_for_nothing_keep_their_old_head() -> None:
    s = handle(state="idle")
    assert current_details(s).startswith("**root/a.1** — `idle`\nturns 0")


def test_a_rejection_comes_first() -> None:
    s = handle(state="suspended", pending_req=REQ)
    text = current_details(s, "answer rejected: answer 'x' matches no pending request")
    first, second = text.split("\n\n")[:2]
    assert first == "**⚠ answer rejected: answer 'x' matches no pending request**"
    assert second.startswith("**Waiting for approval:**")


def test_answer_json_is_an_answer() -> None:
    assert json.loads(answer_json(REQ)) == {"id": REQ.id, "ok": True}


def test_answer_json_carries_an_edit_as_an_answer() -> None:
    edit = {"service": "billing", "environment": "staging"}
    body = json.loads(answer_json(REQ, edited_args=edit))
    assert body == {"id": REQ.id, "ok": True, "edited_args": edit}
    assert Answer.model_validate(body).edited_args == edit
    with pytest.raises(ValueError, match="only with ok"):
        answer_json(REQ, ok=False, edited_args=edit)


def test_request_attributes_set_and_unset() -> None:
    new = request_attributes(REQ, None)
    assert {u.key.name: u.value for u in new} == {
        "AgentRequestId": "root/a.1#2",
        "AgentRequestKind": "approval",
        "AgentRequestPrompt": "deploy to prod?",
    }
    assert request_attributes(REQ, REQ.id) == []  # nothing changed: no command
    other = Request(id="root/a.1/b.1#1", kind="input", prompt="x" * 500)
    swapped = {u.key.name: u.value for u in request_attributes(other, REQ.id)}
    assert swapped["AgentRequestPrompt"] == "x" * 160
    cleared = request_attributes(None, REQ.id)
    assert sorted(u.key.name for u in cleared) == [
        "AgentRequestExpires",
        "AgentRequestId",
        "AgentRequestKind",
        "AgentRequestPrompt",
        "AgentWaitingSince",
    ]
    assert all(u.value is None for u in cleared)
    assert request_attributes(None, None) == []


def test_the_request_id_attribute_carries_the_scope_as_tnx_prints_it() -> None:
    """Issue 37 item 1 (one id form): the web UI's ``AgentRequestId`` column shows the id
    ``tnx`` prints (``walk/root/a.1#2``), which pastes into ``tnx answer --request``; an
    unchanged scoped id is no command, the unscoped one shown by an older run is replaced."""
    scoped = {u.key.name: u.value for u in request_attributes(REQ, None, scope="walk")}
    assert scoped["AgentRequestId"] == "walk/root/a.1#2"
    assert request_attributes(REQ, "walk/root/a.1#2", scope="walk") == []
    again = {u.key.name: u.value for u in request_attributes(REQ, REQ.id, scope="walk")}
    assert again["AgentRequestId"] == "walk/root/a.1#2"


def test_a_deadline_is_set_with_the_request_and_unset_by_the_next_one() -> None:
    """Issue 37 item 9: the approval queue shows each Request's expiry (in the same upsert)."""
    due = Request(id="root/a.1#3", kind="approval", prompt="p", expiresAt="2026-12-07T18:30:00Z")
    shown = {u.key.name: u.value for u in request_attributes(due, None)}
    assert shown["AgentRequestExpires"] == datetime(2026, 12, 7, 18, 30, tzinfo=UTC)
    then = {u.key.name: u.value for u in request_attributes(REQ, due.id)}  # no deadline
    assert "AgentRequestExpires" in then and then["AgentRequestExpires"] is None
    odd = Request(id="root/a.1#4", kind="approval", prompt="p", expiresAt="next week")
    assert "AgentRequestExpires" not in {u.key.name for u in request_attributes(odd, None)}


def test_details_end_with_who_answered_the_latest_requests() -> None:
    """Issue 37 item 9: the agent's page (current details) names who answered, newest first,
    at most three; the path and whether the principal was verified."""
    at = 1_796_000_000_000
    audit = [
        AuditEntry(request_id=f"root/a.1#{n}", answered_ms=at + n, by=f"user{n}", ok=n != 4)
        for n in range(1, 5)
    ]
    audit.append(AuditEntry(request_id="root/a.1#5", answered_ms=at + 5, ok=False, path="expiry"))
    audit.append(
        AuditEntry(
            request_id="root/a.1#6",
            answered_ms=at + 6,
            by="alice",
            principal="jwt:alice@corp",
            path="update",
            ok=True,
            verified=True,
        )
    )
    lines = current_details(handle(state="idle", audit=audit)).split("\n")
    head = lines.index("answered: 6, latest first (all: `tnx audit root/a.1`)")
    assert lines[head + 1 :] == [
        f"- {iso_utc(at + 6)} `root/a.1#6` approved by alice (jwt:alice@corp) via update"
        " · verified",
        f"- {iso_utc(at + 5)} `root/a.1#5` declined by its deadline via expiry · unverified",
        f"- {iso_utc(at + 4)} `root/a.1#4` declined by user4 via signal · unverified",
    ]
    # walk 8: an Answer a parent routed down says the path the sender used, as the audit does
    routed = AuditEntry(request_id="root/a.1#7", answered_ms=at + 7, by="carol", ok=True)
    routed.routed_via = "update"
    routed.edited_args = {"env": "staging"}
    lines = current_details(handle(state="idle", audit=[routed])).split("\n")
    assert lines[-1] == (
        f"- {iso_utc(at + 7)} `root/a.1#7` approved with an edit by carol via update (routed"
        " down by its parent) · unverified"
    )
    assert "answered:" not in current_details(handle(state="idle"))
    # walk 7: an edit is said as `tnx audit` says it; the root has no parent to route down
    edited = AuditEntry(request_id="root#1", answered_ms=at, by="bo", ok=True, edited_args={})
    root = handle(id="root", parent=None, defn=None, state="idle", audit=[edited])
    assert current_details(root).endswith(
        f"- {iso_utc(at)} `root#1` approved with an edit by bo via signal · unverified"
    )


def test_static_summary_and_details_name_the_agent_parent_and_purpose() -> None:
    s = handle(defn=AgentDef(name="a", description="Reviews deploys."))
    assert static_summary(s) == "agent a (child of root): Reviews deploys."
    scoped = handle(defn=AgentDef(name="a"), scope="team")  # the parent as tnx prints ids
    assert static_summary(scoped) == "agent a (child of team/root)"
    details = static_details(s)
    assert "**root/a.1** — agent `a`, child of `root`" in details
    assert "Purpose: Reviews deploys." in details


def test_handler_descriptions_mark_internal_ones_and_explain_public_ones() -> None:
    defn = _Definition.from_class(AgentWorkflow)
    assert defn is not None
    described = {
        **{n: d.description for n, d in defn.signals.items() if n},
        **{n: d.description for n, d in defn.updates.items() if n},
        **{n: d.description for n, d in defn.queries.items() if n},
    }
    assert all(described.values()), [n for n, d in described.items() if not d]
    internal = {n for n, d in described.items() if d and d.startswith(handler_docs.INTERNAL)}
    assert internal == {
        "child_report",
        "slot_request",
        "slot_release",
        "slot_recall",
        "budget_ask",
        "budget_reply",
        "pool_floor",
        "spawn",
        "turn",
    }
    assert not internal & set(PUBLIC_SIGNALS)
    assert '{"id": "<request id>", "ok": true}' in (described["answer"] or "")
    assert '{"id": "<request id>", "ok": true}' in (described[UPDATE_ANSWER] or "")


def test_a_scoped_request_id_is_taken_as_its_workflow_names_it() -> None:
    """``tnx`` prints every id with its scope; the workflow takes an Answer's id in that form
    as printed (``names.id_in_scope``), and leaves any other id as given."""
    from toolnexus_temporal.workflows.contract.names import id_in_scope

    assert id_in_scope("team", "team/root/a.1#2") == "root/a.1#2"
    assert id_in_scope("team", "team/root#1") == "root#1"
    assert id_in_scope("team", "root/a.1#2") == "root/a.1#2"
    assert id_in_scope(None, "team/root/a.1#2") == "team/root/a.1#2"
    assert id_in_scope("root", "root/a.1#2") == "root/a.1#2"  # unscoped, in scope "root"
    assert id_in_scope("root", "root/root/a.1#2") == "root/a.1#2"
    assert id_in_scope("team", "team/other#1") == "team/other#1"
