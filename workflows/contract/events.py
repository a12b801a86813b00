"""The events of a turn and the protocol of their observers (issue 33 item 4).

The turn (``workflows/turn/turn.py``) does its work (LLM calls, tool calls, budgets, the
settle) and tells its observers what happened, in order, instead of calling each cross-cutting
feature: the span and the metrics (one observer, ``turn/observe.py``) and the context bound
(``turn/context.py``) are observers given to the turn at construction (``agent.py``). An
observer reads the state and may write only its own part (the context bound writes
``turn.context_due``); it issues no command.

Types only: deterministic and I/O free.
"""

from __future__ import annotations

from typing import Protocol

from toolnexus_temporal.workflows.contract.messages import LlmCallResult
from toolnexus_temporal.workflows.contract.models import TaskResult, ToolCall, ToolResult, Usage
from toolnexus_temporal.workflows.contract.state import HandleState


class TurnObserver(Protocol):
    """What one observer of a handle's turns is told, in order: ``turn_started``, then per
    LLM round trip ``llm_answered`` and ``tokens_spent`` (the summarizer's tokens too), per
    tool job ``tool_settled``, and ``turn_settled`` once the result is settled."""

    def turn_started(self, s: HandleState) -> None:
        """A turn of ``s`` starts (a fresh one, or one carried across continue-as-new)."""

    def llm_answered(self, s: HandleState, reply: LlmCallResult) -> None:
        """An LLM round trip answered (its message is stored: ``reply.stored_len``)."""

    def tokens_spent(self, s: HandleState, usage: Usage) -> None:
        """Tokens were spent: an LLM call's, or the summarizer's (``usage``, in tokens)."""

    def tool_settled(self, s: HandleState, call: ToolCall, result: ToolResult) -> None:
        """A tool job returned ``result`` for ``call`` (a suspension's first run returns its
        ``pending`` result; the re-run with the Answer settles again)."""

    def turn_settled(self, s: HandleState, result: TaskResult) -> None:
        """The turn settled with ``result`` (after ``Machine.settle``)."""
