"""The double-texting policy's text (``workflows/contract/policy.py``) and the pure rules of a
kept message (``workflows/inbox.py``: ``drain``, ``answered_after``, ``restore_drained``)."""

from __future__ import annotations

import pytest
from pydantic import ValidationError

from toolnexus_temporal.workflows.contract.messages import TurnRequest, WakeRequest
from toolnexus_temporal.workflows.contract.models import AgentDef
from toolnexus_temporal.workflows.contract.policy import parse_policy, policy_error
from toolnexus_temporal.workflows.contract.state import HandleState, WakeMessage
from toolnexus_temporal.workflows.inbox import answered_after, drain, restore_drained


@pytest.mark.parametrize(
    ("text", "parsed"),
    [
        ("enqueue", ("enqueue", 0)),
        ("interrupt", ("interrupt", 0)),
        ("reject", ("reject", 0)),
        ("debounce:1", ("debounce", 1)),
        ("debounce:3600000", ("debounce", 3_600_000)),
    ],
)
def test_the_four_policies(text: str, parsed: tuple[str, int]) -> None:
    assert policy_error(text) is None
    assert parse_policy(text) == parsed


@pytest.mark.parametrize(
    "text", ["", "queue", "Enqueue", "debounce", "debounce:", "debounce:0", "debounce:-5",
             "debounce:3600001", "debounce:1.5", "reject ", 3,
             "debounce:\u00b2", "debounce:\u0969\u0966\u0966"]
)  # fmt: skip
def test_anything_else_is_refused_in_one_line(text: object) -> None:
    error = policy_error(text)
    assert error is not None and "\n" not in error
    assert "enqueue, interrupt, reject or debounce:MS" in error


def test_the_models_refuse_a_bad_policy() -> None:
    for build in (
        lambda: AgentDef(name="a", double_texting="later"),
        lambda: TurnRequest(prompt="x", policy="later"),
        lambda: WakeRequest(prompt="x", policy="later"),
    ):
        with pytest.raises(ValidationError, match="unknown double-texting policy 'later'"):
            build()
    assert AgentDef(name="a").double_texting == "enqueue"
    assert TurnRequest().policy is None  # None: the agent's


def message(seq: int, prompt: str) -> WakeMessage:
    return WakeMessage(seq=seq, prompt=prompt, via="run_turn")


def test_one_turn_holds_the_waiting_messages_in_order() -> None:
    s = HandleState(id="root/a.1", task_queue="q", result_seq=4)
    s.intake.wakes = [message(1, "first"), message(2, "second")]
    s.intake.wake_seq = 2
    assert answered_after(s, 1) is None
    drain(s, None)
    assert s.intake.wake_prompt == "first\n\nsecond"
    assert s.intake.wakes == [] and [m.seq for m in s.intake.turn_wakes] == [1, 2]
    assert answered_after(s, 1) == answered_after(s, 2) == 4
    assert answered_after(s, 3) is None


def test_an_interrupt_policy_sends_the_messages_on() -> None:
    s = HandleState(id="root/a.1", task_queue="q")
    s.intake.wakes = [message(1, "first")]
    drain(s, None)
    s.intake.wakes = [message(2, "second")]
    s.intake.restore_wakes = True
    restore_drained(s)
    assert [m.seq for m in s.intake.wakes] == [1, 2]
    assert answered_after(s, 1) is None  # waiting again: its sender waits for the next turn
    assert not s.intake.restore_wakes and s.intake.turn_wakes == []


def test_a_money_amount_of_minus_zero_is_zero() -> None:
    """``Decimal("-0")`` passes ``ge=0``; it is kept as ``0`` so no amount shows ``-0``
    (a breaker's ``Budget(max_cost_usd="-0")`` showed ``pool_cost_usd=-0``)."""
    from toolnexus_temporal.workflows.contract.models import Budget

    budget = Budget(max_cost_usd="-0")
    assert budget.max_cost_usd is not None and not budget.max_cost_usd.is_signed()
    assert budget.model_dump(mode="json")["max_cost_usd"] == "0"


def test_a_debounce_window_out_of_range_says_so() -> None:
    """Walk 7: ``debounce:0`` was called an unknown policy."""
    from toolnexus_temporal.workflows.contract.policy import policy_error

    assert policy_error("debounce:0") == (
        "debounce window 0 ms is out of range: use enqueue, interrupt, reject or debounce:MS"
        " (MS from 1 to 3600000)"
    )
    assert policy_error("debounce:3600001") is not None
    assert policy_error(
        "debounce:soon",
    ).startswith("unknown double-texting policy")
