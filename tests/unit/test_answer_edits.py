"""The pure rules of approvals that edit and explain (issue 34 item 3): the Answer's bounds,
the call re-run with the edit, the note the model reads, the reviewer's words as a declined
call's result, the audit entry, and the schema check of the worker."""

from __future__ import annotations

import json

import pytest
from pydantic import ValidationError

from toolnexus_temporal.activities.tools import define_tool, schema_error
from toolnexus_temporal.workflows.approvals.audit import DATA_KEEP, entry_of
from toolnexus_temporal.workflows.contract.models import (
    EDITED_ARGS_BYTES,
    Answer,
    Request,
    ToolCall,
    ToolResult,
)
from toolnexus_temporal.workflows.rules.approvals import (
    declined_result,
    edited_call,
    expired_result_text,
    reviewed_result,
)

REQ = Request(id="root/a.1#1", kind="approval", prompt="send 100 to bob?")


def test_an_edit_only_approves_and_is_bounded() -> None:
    with pytest.raises(ValidationError, match="only with ok=true"):
        Answer(id=REQ.id, ok=False, edited_args={"a": 1})
    with pytest.raises(ValidationError, match="bytes of JSON"):
        Answer(id=REQ.id, ok=True, edited_args={"a": "x" * EDITED_ARGS_BYTES})
    with pytest.raises(ValidationError):
        Answer(id=REQ.id, ok=False, message="")
    plain = Answer(id=REQ.id, ok=True)
    assert plain.model_dump(mode="json") == {"id": REQ.id, "ok": True}  # no new wire keys


def test_the_call_runs_with_the_edit_and_the_model_is_told() -> None:
    call = ToolCall(id="c1", name="transfer", arguments='{"to": "bob", "amount": 100}')
    answer = Answer(id=REQ.id, ok=True, edited_args={"to": "bob", "amount": 10}, message="less")
    assert edited_call(call, answer).arguments == '{"to":"bob","amount":10}'
    assert edited_call(call, Answer(id=REQ.id, ok=True)) is call
    result = reviewed_result(answer, ToolResult(output="sent 10 to bob"))
    assert result.output == (
        "[the reviewer changed this call's arguments; it ran with "
        '{"to":"bob","amount":10}]\n[the reviewer says: less]\nsent 10 to bob'
    )
    same = ToolResult(output="x")
    assert reviewed_result(Answer(id=REQ.id, ok=True), same) is same


def test_a_declined_call_carries_the_reviewers_words() -> None:
    words = declined_result(REQ, Answer(id=REQ.id, ok=False, message="frozen account"))
    assert words == ToolResult(output="declined by the reviewer: frozen account", is_error=True)
    plain = declined_result(REQ, Answer(id=REQ.id, ok=False, reason="declined"))
    assert plain.output == "declined: send 100 to bob?" and plain.is_error


def test_an_expired_call_tells_the_model_it_did_not_run_and_will_not_run() -> None:
    """Issue 36 item 9: ``expired: <prompt>`` alone never said the action was not run."""
    expired = declined_result(REQ, Answer(id=REQ.id, ok=False, reason="expired"))
    assert expired.is_error
    assert expired.output.startswith("expired: send 100 to bob?")
    assert "did not run and will not run" in expired.output
    assert expired.output == expired_result_text(REQ.prompt)


def test_the_audit_keeps_the_arguments_the_edit_and_the_message_bounded() -> None:
    answer = Answer(id=REQ.id, ok=True, edited_args={"big": "y" * 3_000}, message="m" * 4_000)
    entry = entry_of(
        REQ,
        answer,
        path="update",
        tool="transfer",
        asked_ms=1,
        now_ms=2,
        escalated_to=None,
        arguments=json.dumps({"to": "x" * 5_000}),
    )
    assert entry.arguments is not None and len(entry.arguments) == DATA_KEEP
    assert entry.edited_args is not None and set(entry.edited_args) == {
        "clipped_json",
        "json_chars",
    }
    assert entry.message == "m" * DATA_KEEP


def test_an_edit_is_checked_against_the_tools_schema() -> None:
    def transfer(to: str, amount: int) -> str:
        """Send money."""
        return f"{to}{amount}"

    tool = define_tool(transfer)
    assert tool.arguments_error({"to": "bob", "amount": 3}) is None
    assert "amount" in (tool.arguments_error({"to": "bob"}) or "")
    assert "memo" in (tool.arguments_error({"to": "bob", "amount": 3, "memo": 1}) or "")
    schema = {"type": "object", "properties": {"tz": {"type": "string"}}, "required": ["tz"]}
    assert schema_error(schema, {"tz": "UTC"}) is None
    assert "tz" in (schema_error(schema, {}) or "")
    assert (schema_error(schema, {"tz": 5}) or "").startswith("tz: 5 is not of type")
