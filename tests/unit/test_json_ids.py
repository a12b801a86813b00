"""``--json`` prints ids as the text does (issue 37 item 1, walk 8): with the runtime's scope,
in the id fields and trace lines only."""

from __future__ import annotations

from toolnexus_temporal.cli.hostcmd import scoped_doc


def shown(handle_id: str) -> str:
    return f"walk/{handle_id}"


def test_id_fields_and_trace_lines_carry_the_scope() -> None:
    doc = {
        "id": "root/ops.1",
        "name": "root",  # an agent's name is not an id
        "parent": "root",
        "children": ["root/ops.1/worker.2"],
        "pending_req": {"id": "root/ops.1#2", "kind": "approval"},
        "transcript": [{"role": "assistant", "tool_calls": [{"id": "call_1"}]}],
        "queued_answers": [{"request": "root/ops.1#2", "by": "root@vm"}],
        "line": "root/ops.1: answer root/ops.1#2 (ok)",
    }
    assert scoped_doc([doc], shown) == [
        {
            "id": "walk/root/ops.1",
            "name": "root",
            "parent": "walk/root",
            "children": ["walk/root/ops.1/worker.2"],
            "pending_req": {"id": "walk/root/ops.1#2", "kind": "approval"},
            "transcript": [{"role": "assistant", "tool_calls": [{"id": "call_1"}]}],
            "queued_answers": [{"request": "walk/root/ops.1#2", "by": "root@vm"}],
            "line": "walk/root/ops.1: answer walk/root/ops.1#2 (ok)",
        }
    ]
    already = {"id": "walk/root/ops.1"}  # never scoped twice
    assert scoped_doc(already, shown) == already
