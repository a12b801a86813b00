"""The model's view of a transcript under a context policy (issue 26 item 1), pure rules."""

from __future__ import annotations

import pytest
from pydantic import ValidationError

from toolnexus_temporal.workflows.contract.context import (
    DROPPED_PREFIX,
    SUMMARY_PREFIX,
    context_tokens,
    estimate_tokens,
    model_view,
    split_turns,
    summary_request,
    summary_span,
    text_tokens,
)
from toolnexus_temporal.workflows.contract.models import (
    DEFAULT_CONTEXT,
    AgentDef,
    ContextPolicy,
    ContextSummary,
    Message,
    RuntimeOptions,
    ToolCall,
    context_policy,
)


def transcript(turns: int, size: int = 40) -> list[Message]:
    """A system prompt, then ``turns`` turns: user, assistant calling a tool, tool, reply."""
    out = [Message(role="system", content="be brief")]
    for i in range(turns):
        out += [
            Message(role="user", content=f"u{i} " + "x" * size),
            Message(
                role="assistant", tool_calls=[ToolCall(id=f"c{i}", name="look", arguments="{}")]
            ),
            Message(role="tool", tool_call_id=f"c{i}", content=f"t{i} " + "y" * size),
            Message(role="assistant", content=f"a{i} " + "z" * size),
        ]
    return out


def test_estimate_is_characters_over_four_plus_four_per_message() -> None:
    assert text_tokens("") == 0
    assert text_tokens("abcde") == 2
    assert estimate_tokens(Message(role="user", content="x" * 40)) == 14
    assert estimate_tokens(Message(role="user")) == 4


def test_turns_start_at_user_messages_and_keep_tool_calls_with_results() -> None:
    head, turns = split_turns(transcript(3))
    assert head == 1
    assert turns == [(1, 5), (5, 9), (9, 13)]


def test_no_policy_sends_everything() -> None:
    msgs = transcript(5)
    view = model_view(msgs, None)
    assert view.messages == msgs
    assert view.dropped == 0


def test_drop_keeps_head_recent_turns_and_what_fits_with_a_marker() -> None:
    msgs = transcript(50)
    policy = ContextPolicy(max_tokens=400, keep_turns=2)
    view = model_view(msgs, policy)
    assert view.messages[0] == msgs[0]
    assert view.messages[-8:] == msgs[-8:], "the recent turns are sent whole"
    assert view.messages[1].content is not None
    assert view.messages[1].content.startswith(DROPPED_PREFIX)
    assert view.dropped > 0 and view.dropped % 4 == 0, "whole turns only"
    assert view.estimate_tokens <= policy.max_tokens
    assert len(view.messages) == 1 + 1 + (len(msgs) - 1 - view.dropped)
    # every tool message still follows its assistant call
    roles = [m.role for m in view.messages[2:]]
    assert roles[0] == "user"


def test_recent_turns_are_sent_even_over_the_bound() -> None:
    msgs = transcript(6, size=400)
    view = model_view(msgs, ContextPolicy(max_tokens=300, keep_turns=3))
    assert view.estimate_tokens > 300 and view.clipped == 0
    assert [m.content for m in view.messages[-12:]] == [m.content for m in msgs[-12:]]


def test_a_message_over_the_bound_is_clipped_in_the_view_only() -> None:
    big = Message(role="tool", tool_call_id="c0", content="B" * 40_000)
    msgs = [Message(role="user", content="go"), big]
    policy = ContextPolicy(max_tokens=1_000, keep_turns=1)
    view = model_view(msgs, policy)
    assert view.clipped == 1
    assert estimate_tokens(view.messages[1]) <= policy.clip_tokens
    assert "clipped for the model" in (view.messages[1].content or "")
    assert msgs[1].content == "B" * 40_000, "the stored message is untouched"


def test_summary_stands_for_its_messages() -> None:
    msgs = transcript(20)
    policy = ContextPolicy(max_tokens=2_000, keep_turns=2, older="summarize")
    summary = ContextSummary(text="they talked", upto=1 + 4 * 15)
    view = model_view(msgs, policy, summary)
    assert view.summarized == 60
    assert view.messages[1].content is not None
    assert view.messages[1].content.startswith(SUMMARY_PREFIX)
    assert view.messages[2:] == msgs[61:]


def test_summary_span_folds_whole_older_turns_within_the_bound() -> None:
    msgs = transcript(30)
    policy = ContextPolicy(max_tokens=600, keep_turns=2, older="summarize", summary_max_tokens=64)
    span = summary_span(msgs, policy, None)
    start, end = span.start, span.end
    assert start == 1
    assert (end - 1) % 4 == 0 and end > start
    assert end <= len(msgs) - 8, "recent turns are never folded"
    req = summary_request(msgs[start:end], policy, None)
    assert sum(map(estimate_tokens, req)) <= policy.max_tokens
    # nothing left to fold: every turn after the summary is recent
    done = summary_span(msgs, policy, ContextSummary(text="s", upto=len(msgs) - 8))
    assert (done.start, done.end, done.older_left) == (len(msgs) - 8, len(msgs) - 8, 0)


def test_summary_span_folds_every_older_turn_one_request_holds() -> None:
    """Issue 36 item 5: one summarizer request folds as many older turns as fit the bound
    with its instructions and the earlier summary, not one turn at a time."""
    msgs = transcript(12, size=200)
    policy = ContextPolicy(
        max_tokens=1_000, keep_turns=1, older="summarize", summary_max_tokens=400
    )
    summary = ContextSummary(text="s" * 1_200, upto=1 + 4 * 2)
    span = summary_span(msgs, policy, summary)
    assert span.start == summary.upto
    assert span.end - span.start >= 4 * 3, "several turns in one request"
    assert span.older_left > 0
    request = summary_request(msgs[span.start : span.end], policy, summary)
    assert sum(map(estimate_tokens, request)) <= policy.max_tokens
    bigger = summary_request(msgs[span.start : span.end + 4], policy, summary)
    assert sum(map(estimate_tokens, bigger)) > policy.max_tokens - 32, "no room was wasted"
    assert context_tokens(msgs, policy, summary) > context_tokens(
        msgs, policy, ContextSummary(text=summary.text, upto=span.end)
    )


def test_a_pending_user_message_makes_the_last_stored_turn_older() -> None:
    """Issue 36 item 10: before a turn's first call its ``user`` message is pending, so the
    stored turn before it is no longer recent under ``keep_turns=1`` and can be folded."""
    msgs = transcript(2)
    policy = ContextPolicy(max_tokens=300, keep_turns=1, older="summarize", summary_max_tokens=64)
    assert summary_span(msgs, policy, None).end == 5
    assert summary_span(msgs, policy, None, pending_turns=1).end == len(msgs)


@pytest.mark.parametrize(
    "kwargs",
    [
        {"max_tokens": 10},
        {"max_tokens": 1_000, "keep_turns": 0},
        {"max_tokens": 1_000, "older": "forget"},
        {"max_tokens": 1_000, "message_max_tokens": 2_000},
        {"max_tokens": 500, "older": "summarize", "summary_max_tokens": 400},
        {"max_tokens": 1_000, "older": "summarize", "low_water_tokens": 1_000},
        {"max_tokens": 1_000, "low_water_tokens": 10},
        {"max_tokens": 1_000, "unknown": 1},
    ],
)
def test_bad_policies_are_rejected_loudly(kwargs: dict[str, object]) -> None:
    with pytest.raises(ValidationError):
        ContextPolicy.model_validate(kwargs)


def test_policy_on_agent_and_runtime_is_optional_and_off_the_wire_when_unset() -> None:
    assert "context" not in AgentDef(name="a").model_dump(exclude_defaults=True)
    assert RuntimeOptions().context is None
    a = AgentDef(name="a", context=ContextPolicy(max_tokens=1_000))
    assert AgentDef.model_validate_json(a.model_dump_json()) == a


def test_the_policy_in_force_defaults_to_a_bound_and_unbounded_opts_out() -> None:
    """Issue 36 item 5: the agent's policy, else the runtime's, else ``DEFAULT_CONTEXT``;
    ``"unbounded"`` (agent or runtime) is the explicit opt-out."""
    mine = ContextPolicy(max_tokens=1_000)
    assert context_policy(None, None) == DEFAULT_CONTEXT
    assert DEFAULT_CONTEXT.max_tokens == 100_000 and DEFAULT_CONTEXT.older == "summarize"
    assert context_policy(mine, None) == mine
    assert context_policy(None, mine) == mine
    assert context_policy("unbounded", mine) is None
    assert context_policy(None, "unbounded") is None
    assert context_policy(mine, "unbounded") == mine
    a = AgentDef(name="a", context="unbounded")
    assert AgentDef.model_validate_json(a.model_dump_json()) == a
