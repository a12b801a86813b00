"""The message records (issue 34): what became of a message a host named, as the client's
signal fallback reads it back with the ``message`` query. Pure rules over the state."""

from __future__ import annotations

import pytest

from tests.unit.fakes import handle
from toolnexus_temporal.client.errors import (
    AgentBusy,
    MessageOutcomeLostError,
    VerbRejectedError,
)
from toolnexus_temporal.client.fallback import outcome_response
from toolnexus_temporal.workflows.contract.models import TaskResult
from toolnexus_temporal.workflows.contract.state import (
    RECORD_BYTES,
    RECORDS_MAX,
    HandleState,
    WakeMessage,
)
from toolnexus_temporal.workflows.inbox import (
    add_record,
    drain,
    message_outcome,
    record_answer,
    restore_drained,
)


def message(s: HandleState, mid: str, text: str) -> None:
    """A message ``text`` that waits, recorded as ``mid`` (what ``Inbox.receive`` does)."""
    s.intake.wake_seq += 1
    s.intake.wakes.append(WakeMessage(seq=s.intake.wake_seq, prompt=text))
    add_record(s, mid, s.intake.wake_seq)


def publish(s: HandleState, text: str, status: str = "done") -> TaskResult:
    """What ``Machine.publish_result`` does, then tells the inbox."""
    result = TaskResult.model_validate({"status": status, "text": text})
    s.last_result = result
    s.result_seq += 1
    record_answer(s, result)
    return result


def test_a_message_is_answered_by_the_first_result_of_the_turn_that_took_it() -> None:
    s = handle()
    message(s, "a", "first")
    assert message_outcome(s, "a").status == "waiting"
    drain(s, None)
    assert message_outcome(s, "a").status == "taken"
    message(s, "b", "second")  # arrives while the turn runs: waits for the next one
    publish(s, "re: first")
    out_a, out_b = message_outcome(s, "a"), message_outcome(s, "b")
    assert (out_a.status, out_a.result and out_a.result.text) == ("answered", "re: first")
    assert out_b.status == "waiting"
    drain(s, None)
    publish(s, "re: second")
    publish(s, "re: a later wake")  # a later result answers nobody recorded
    out_a, out_b = message_outcome(s, "a"), message_outcome(s, "b")
    assert out_a.result is not None and out_a.result.text == "re: first"
    assert out_b.result is not None and out_b.result.text == "re: second"
    assert len(s.intake.answers) == 2


def test_a_turn_the_interrupt_policy_stopped_answers_nobody() -> None:
    """The stopped turn's messages go back (``restore_wakes``): its ``interrupted`` result is
    not theirs; the turn that holds them next answers them all, once each."""
    s = handle()
    message(s, "a", "first")
    drain(s, None)
    message(s, "b", "second")
    s.intake.restore_wakes = True  # Inbox.stop_turn
    restore_drained(s)
    publish(s, "the turn was interrupted", "interrupted")
    assert message_outcome(s, "a").status == "waiting"
    drain(s, None)
    assert [m.seq for m in s.intake.turn_wakes] == [1, 2]
    publish(s, "re: first second")
    for mid in ("a", "b"):
        out = message_outcome(s, mid)
        assert out.result is not None and out.result.text == "re: first second"


def test_a_plain_interrupt_answers_its_turns_messages_with_interrupted() -> None:
    """``rt.interrupt`` (not the policy): the messages do not go on; the sender is told."""
    s = handle()
    message(s, "a", "first")
    drain(s, None)
    restore_drained(s)
    publish(s, "the turn was interrupted", "interrupted")
    out = message_outcome(s, "a")
    assert out.status == "answered" and out.result is not None
    assert out.result.status == "interrupted"


def test_refused_closed_and_unknown() -> None:
    s = handle()
    add_record(s, "r", 0, "busy", "root/a.1 is busy (a turn is running)")
    message(s, "w", "never answered")
    assert message_outcome(s, "r").status == "busy"
    assert message_outcome(s, "nope").status == "unknown"
    s.state = "closed"
    assert message_outcome(s, "w").status == "closed"
    with pytest.raises(AgentBusy):
        outcome_response(s.id, message_outcome(s, "r"))
    closed = outcome_response(s.id, message_outcome(s, "w"))
    assert closed is not None and closed.result.status == "closed"
    with pytest.raises(MessageOutcomeLostError):
        outcome_response(s.id, message_outcome(s, "nope"))
    add_record(s, "c", 0, "refused", "handle closed")
    with pytest.raises(VerbRejectedError, match="handle closed"):
        outcome_response(s.id, message_outcome(s, "c"))


def test_records_are_bounded_by_count_oldest_first() -> None:
    s = handle()
    for n in range(RECORDS_MAX + 5):
        message(s, f"m{n}", "x")
    assert len(s.intake.records) == RECORDS_MAX
    assert message_outcome(s, "m4").status == "unknown"
    assert message_outcome(s, "m5").status == "waiting"


def test_answers_are_bounded_by_bytes_and_kept_once_per_turn() -> None:
    """Results past ``RECORD_BYTES`` evict the oldest answered records (the newest result
    stays whatever its size); several messages of one turn share one kept result."""
    s = handle()
    big = "x" * (RECORD_BYTES // 3)
    for turn in range(5):
        message(s, f"t{turn}a", "a")
        message(s, f"t{turn}b", "b")
        drain(s, None)
        publish(s, f"{turn}{big}")
    assert len(s.intake.answers) == 2  # three would pass the bound
    assert message_outcome(s, "t2a").status == "unknown"
    out = message_outcome(s, "t4b")
    assert out.result is not None and out.result.text.startswith("4")
    huge = "y" * (RECORD_BYTES * 2)
    message(s, "h", "huge")
    drain(s, None)
    publish(s, huge)
    assert [a.result_seq for a in s.intake.answers] == [s.result_seq]
    assert message_outcome(s, "h").status == "answered"
