"""``context.fork_prefix``: a fork's first turns (issue 34 item 5), pure."""

from __future__ import annotations

from toolnexus_temporal.workflows.contract.context import FORK_NOT_RUN, fork_prefix
from toolnexus_temporal.workflows.contract.models import Message, ToolCall


def m(role: str, content: str | None = None, **kw: object) -> Message:
    return Message.model_validate({"role": role, "content": content, **kw})


CALL = ToolCall(id="c1", name="look", arguments="{}")
TRANSCRIPT = [
    m("system", "sys"),
    m("user", "u1"),
    m("assistant", None, tool_calls=[CALL]),
    m("tool", "found", tool_call_id="c1"),
    m("assistant", "a1"),
    m("user", "u2"),
    m("assistant", None, tool_calls=[CALL.model_copy(update={"id": "c2"})]),
]


def test_turns_keep_the_head_and_whole_turns() -> None:
    kept, available = fork_prefix(TRANSCRIPT, 1)
    assert available == 2
    assert kept == TRANSCRIPT[:5]


def test_a_call_without_its_result_is_answered_not_run() -> None:
    kept, _ = fork_prefix(TRANSCRIPT, 2)
    assert kept is not None
    assert kept[:-1] == TRANSCRIPT
    assert kept[-1] == m("tool", FORK_NOT_RUN, tool_call_id="c2")


def test_out_of_range_turns_keep_nothing() -> None:
    for turns in (0, -1, 3):
        assert fork_prefix(TRANSCRIPT, turns) == (None, 2)
    assert fork_prefix([], 1) == (None, 0)
