"""The model's view of a stored transcript under a :class:`ContextPolicy` (issue 26 item 1).

Pure functions, no I/O and no clock: the LLM activity builds each request with
:func:`model_view` from the complete stored transcript, the policy and the summary state
the workflow passes (``LlmCallInput.context``, ``.summary``); the summarizer activity picks
what to fold with :func:`summary_span`; the host shows the same view (``rt.model_view``).

Turns: a turn is a ``user`` message and every message after it up to the next ``user``
message, so an assistant message that calls tools always stays with its tool results. The
leading ``system`` messages are the head, always sent.

Token counts: the provider's reported usage (``prompt_tokens``) is what the workflow acts
on (it runs the summarizer when a call's view left turns out); text not yet sent is
estimated by :func:`estimate_tokens`: characters / 4, rounded up, plus 4 tokens per message
(role and framing), tool-call names and arguments included. English prose runs about 4
characters per token on GPT and Claude tokenizers; code and non-Latin text run denser, so a
bound should leave margin below the model's real window.
"""

from __future__ import annotations

from pydantic import BaseModel, ConfigDict

from toolnexus_temporal.workflows.contract.models import ContextPolicy, ContextSummary, Message

CHARS_PER_TOKEN = 4
"""The estimate's characters per token (module docstring)."""

MESSAGE_OVERHEAD_TOKENS = 4
"""Tokens the estimate adds per message (role, framing)."""

SUMMARY_PREFIX = "[summary of the earlier conversation"
"""How the summary message of the model's view begins."""

DROPPED_PREFIX = "[context: "
"""How the marker of dropped turns begins."""


class ModelView(BaseModel):
    """What the model is sent for one call, and what was left out.

    Attributes:
        messages: the messages sent, in order.
        estimate_tokens: their estimated size, in tokens (:func:`estimate_tokens`).
        summarized: transcript messages stood for by the summary (0: none).
        dropped: transcript messages neither sent nor summarized (replaced by a marker).
        clipped: messages sent shortened (over ``ContextPolicy.clip_tokens``).
    """

    model_config = ConfigDict(extra="forbid")

    messages: list[Message]
    estimate_tokens: int = 0
    summarized: int = 0
    dropped: int = 0
    clipped: int = 0


def text_tokens(text: str) -> int:
    """Estimated tokens of ``text``: characters / 4, rounded up."""
    return -(-len(text) // CHARS_PER_TOKEN)


def estimate_tokens(message: Message) -> int:
    """Estimated tokens of one message (module docstring), in tokens."""
    size = len(message.content or "")
    for call in message.tool_calls or []:
        size += len(call.name) + len(call.arguments) + len(call.id)
    return MESSAGE_OVERHEAD_TOKENS + -(-size // CHARS_PER_TOKEN)


def clip(message: Message, max_tokens: int) -> tuple[Message, bool]:
    """``message`` with its text cut to about ``max_tokens`` tokens (a note says how much was
    cut), and whether it was cut. Tool calls are never cut (their arguments must parse)."""
    if estimate_tokens(message) <= max_tokens or not message.content:
        return message, False
    content = message.content
    keep = max((max_tokens - MESSAGE_OVERHEAD_TOKENS - 40) * CHARS_PER_TOKEN, 0)
    note = (
        f"\n[clipped for the model: {len(content) - keep} of {len(content)} characters left "
        "out; the stored transcript has them all]"
    )
    return message.model_copy(update={"content": content[:keep] + note}), True


def split_turns(messages: list[Message]) -> tuple[int, list[tuple[int, int]]]:
    """The head's length (leading ``system`` messages) and the turns after it, each as
    ``(start, end)`` message indexes (end exclusive)."""
    head = 0
    while head < len(messages) and messages[head].role == "system":
        head += 1
    starts = [i for i in range(head, len(messages)) if messages[i].role == "user"]
    if not starts or starts[0] != head:
        starts.insert(0, head)
    ends = [*starts[1:], len(messages)]
    return head, [(a, b) for a, b in zip(starts, ends, strict=True) if b > a]


FORK_NOT_RUN = "error: not run: the conversation was forked before this call's result"
"""The result a fork's transcript gives a tool call its copied turns end on without one (a
turn stopped by a budget, or parked on a Request): the transcript stays well-formed."""


def fork_prefix(messages: list[Message], turns: int) -> tuple[list[Message] | None, int]:
    """The first ``turns`` turns of a stored transcript, for a fork (``rt.fork``).

    Turns are those of :func:`split_turns`: the head (leading ``system`` messages) and each
    ``user`` message with everything after it up to the next one. A tool call the copy ends
    on without its result gets :data:`FORK_NOT_RUN` as its result.

    Args:
        messages: the original's complete turns (oldest first).
        turns: how many turns to keep, from the first.

    Returns:
        ``(the fork's messages, the turns in messages)``; the messages are None when
        ``turns`` is below 1 or past the turns in ``messages``.
    """
    _, spans = split_turns(messages)
    available = len(spans)
    if turns < 1 or turns > available:
        return None, available
    start, end = spans[turns - 1]
    kept = list(messages[:end])
    answered = {m.tool_call_id for m in kept[start:] if m.role == "tool"}
    for m in messages[start:end]:
        for call in m.tool_calls or []:
            if call.id not in answered:
                kept.append(Message(role="tool", tool_call_id=call.id, content=FORK_NOT_RUN))
    return kept, available


def model_view(
    messages: list[Message], policy: ContextPolicy | None, summary: ContextSummary | None = None
) -> ModelView:
    """The messages the model is sent for ``messages`` (the whole stored transcript) under
    ``policy``; without a policy, all of them.

    Sent: the head, then the summary (covering the first ``summary.upto`` messages), then
    as many older turns as fit ``policy.max_tokens`` (newest first; the rest replaced by one
    marker), then the ``keep_turns`` recent turns whole. Every message is clipped to
    ``policy.clip_tokens``. The recent turns are sent even when they alone pass the bound.
    """
    if policy is None:
        return ModelView(
            messages=list(messages), estimate_tokens=sum(map(estimate_tokens, messages))
        )
    clipped = 0

    def fit(m: Message) -> Message:
        nonlocal clipped
        out, cut = clip(m, policy.clip_tokens)
        clipped += cut
        return out

    head, turns = split_turns(messages)
    upto = min(summary.upto, len(messages)) if summary is not None and summary.text else 0
    turns = [t for t in turns if t[0] >= upto]
    recent = turns[-policy.keep_turns :]
    older = turns[: len(turns) - len(recent)]
    out_head = [fit(m) for m in messages[:head]]
    summary_msgs = [summary_message(summary, upto - head)] if upto and summary is not None else []
    out_recent = [fit(m) for a, b in recent for m in messages[a:b]]
    used = sum(map(estimate_tokens, [*out_head, *summary_msgs, *out_recent]))
    room = policy.max_tokens - used - 32  # 32: the marker, if any
    kept: list[Message] = []
    first_kept = older[-1][1] if older else 0
    for a, b in reversed(older):
        turn = [fit(m) for m in messages[a:b]]
        size = sum(map(estimate_tokens, turn))
        if size > room:
            break
        room -= size
        kept = turn + kept
        first_kept = a
    dropped = first_kept - (older[0][0] if older else 0)
    marker = (
        [
            Message(
                role="user",
                content=f"{DROPPED_PREFIX}{dropped} earlier message(s) left out of the "
                "model's view; the stored transcript has them]",
            )
        ]
        if dropped
        else []
    )
    sent = [*out_head, *summary_msgs, *marker, *kept, *out_recent]
    return ModelView(
        messages=sent,
        estimate_tokens=sum(map(estimate_tokens, sent)),
        summarized=max(upto - head, 0),
        dropped=dropped,
        clipped=clipped,
    )


def summary_message(summary: ContextSummary, summarized: int) -> Message:
    """The message of the model's view that stands for the first ``summarized`` transcript
    messages after the head: :data:`SUMMARY_PREFIX`, the count, then the summary's text."""
    return Message(
        role="user", content=f"{SUMMARY_PREFIX} ({summarized} message(s))]\n{summary.text}"
    )


def clipped_tokens(messages: list[Message], policy: ContextPolicy) -> int:
    """Estimated tokens of ``messages`` as the model's view sends them (each clipped to
    ``policy.clip_tokens``), in tokens."""
    return sum(estimate_tokens(clip(m, policy.clip_tokens)[0]) for m in messages)


def context_tokens(
    messages: list[Message], policy: ContextPolicy, summary: ContextSummary | None
) -> int:
    """The size the model's view of ``messages`` would have if nothing were left out: the
    head, the summary and every turn after it, each message clipped, in estimated tokens.
    Above ``policy.max_tokens`` the view would have to leave turns out: under ``summarize``
    the summarizer runs first (``workflows/turn/context.py``)."""
    head, turns = split_turns(messages)
    upto = min(summary.upto, len(messages)) if summary is not None and summary.text else 0
    size = clipped_tokens(messages[:head], policy)
    if upto and summary is not None:
        size += estimate_tokens(summary_message(summary, upto - head))
    return size + sum(clipped_tokens(messages[a:b], policy) for a, b in turns if a >= upto)


class Span(BaseModel):
    """What the summarizer folds next (:func:`summary_span`).

    Attributes:
        start / end: the transcript messages folded, as indexes (end exclusive; equal:
            nothing to fold).
        older_left: older turns (past ``keep_turns``) left unfolded after ``end``.
    """

    start: int
    end: int
    older_left: int = 0


def summary_span(
    messages: list[Message],
    policy: ContextPolicy,
    summary: ContextSummary | None,
    pending_turns: int = 0,
) -> Span:
    """The messages the summarizer folds next: from the end of the current summary (or the
    head), every older turn (past the ``keep_turns`` recent ones), oldest first, as many as
    one summarizer request holds (at least one turn): the request, its instructions, the
    current summary and the folded turns, stays within ``policy.max_tokens``
    (:func:`summary_request`).

    Args:
        messages: the committed transcript.
        policy: the handle's context policy.
        summary: the current summary.
        pending_turns: turns that the messages about to be sent start (their ``user``
            messages): they make as many stored recent turns older.
    """
    head, turns = split_turns(messages)
    upto = max(summary.upto if summary is not None and summary.text else 0, head)
    turns = [t for t in turns if t[0] >= upto]
    recent = max(policy.keep_turns - pending_turns, 0)
    older = turns[: max(len(turns) - recent, 0)]
    if not older:
        return Span(start=upto, end=upto)
    earlier = text_tokens(summary.text) if summary is not None and summary.text else 0
    room = policy.max_tokens - sum(map(estimate_tokens, summary_request([], policy, None)))
    room -= earlier + 32  # 32: the request's framing lines
    end = upto
    folded = 0
    for a, b in older:
        size = clipped_tokens(messages[a:b], policy)
        if folded and size > room:
            break
        room -= size
        end = b
        folded += 1
    return Span(start=upto, end=end, older_left=len(older) - folded)


SUMMARIZER_INSTRUCTIONS = (
    "You keep the memory of a long-running agent. Summarize the conversation below for the "
    "agent itself: facts, decisions, open tasks, names, numbers and results it will need "
    "later. Fold in the earlier summary if there is one. Be brief; plain text."
)
"""The summarizer's system message."""


def render_for_summary(message: Message) -> str:
    """One transcript message as a line of text for the summarizer."""
    lines = [f"{message.role}: {message.content}"] if message.content else []
    for call in message.tool_calls or []:
        lines.append(f"{message.role} calls {call.name}({call.arguments})")
    return "\n".join(lines) or f"{message.role}: (empty)"


def summary_request(
    messages: list[Message], policy: ContextPolicy, summary: ContextSummary | None
) -> list[Message]:
    """The summarizer's request: its instructions, then one user message holding the earlier
    summary (if any) and ``messages`` (each clipped to ``policy.clip_tokens``) as text."""
    parts = [f"Earlier summary:\n{summary.text}"] if summary is not None and summary.text else []
    body = "\n".join(render_for_summary(clip(m, policy.clip_tokens)[0]) for m in messages)
    parts.append(f"Conversation to fold in:\n{body}")
    return [
        Message(role="system", content=SUMMARIZER_INSTRUCTIONS),
        Message(role="user", content="\n\n".join(parts)),
    ]
