"""``tnx wait`` while the turn runs (issue 14, item 4), over ``AgentRuntime.stream``:

* ``--follow``: the model's text printed as it streams, a line per tool call started and
  ended (``--json``: one JSON object per event, the last of kind ``end``, each with its
  ``seq``); interrupted (Ctrl-C, ``--timeout-ms``'s process limit), it prints the line that
  resumes it: ``resume with: tnx wait ID --follow --after SEQ``;
* ``--after SEQ``: continue a follow after the event ``SEQ`` (every later event once);
* without it, on a terminal: a live status line (state, elapsed seconds, tokens so far,
  current tool), gone when the turn ends; not on a terminal: nothing extra (plain ``wait``).
"""

from __future__ import annotations

import asyncio
import json
import sys
import time
from collections.abc import Callable
from dataclasses import dataclass, field

from rich.console import Console, RenderableType
from rich.live import Live
from rich.markup import escape
from rich.text import Text

from toolnexus_temporal.client.handle import HandleRef
from toolnexus_temporal.client.runtime import AgentRuntime
from toolnexus_temporal.client.stream import (
    LiveEvent,
    TextDelta,
    TokenCount,
    ToolCallEnd,
    ToolCallStart,
    TurnEnd,
)
from toolnexus_temporal.workflows.contract.models import TaskResult


@dataclass
class StatusLine:
    """The live status line's state; rendered on every refresh (elapsed keeps ticking).

    Attributes:
        handle_id: the handle followed.
        started: ``time.monotonic()`` when following began.
        tokens: tokens of the turn so far (``TokenCount``).
        tools: tool calls started and not ended, by call id (their names).
        writing: the model's text is streaming.
    """

    handle_id: str
    started: float = field(default_factory=time.monotonic)
    tokens: int = 0
    tools: dict[str, str] = field(default_factory=dict)
    writing: bool = False

    def take(self, event: LiveEvent) -> None:
        """Update from one stream event."""
        if isinstance(event, TextDelta):
            self.writing, self.tools = True, {}
        elif isinstance(event, TokenCount):
            self.tokens = event.tokens
        elif isinstance(event, ToolCallStart):
            self.writing = False
            self.tools[event.call_id] = event.name
        elif isinstance(event, ToolCallEnd):
            self.tools.pop(event.call_id, None)

    def __rich__(self) -> RenderableType:
        elapsed = time.monotonic() - self.started
        state = "running · writing" if self.writing and not self.tools else "running"
        line = Text.assemble(
            ("⟳ ", "green"), (self.handle_id, "bold"), f" {state} · {elapsed:.0f}s"
        )
        line.append(f" · tokens {self.tokens}")
        if self.tools:
            line.append(f" · tool {', '.join(sorted(set(self.tools.values())))}", style="cyan")
        return line


async def follow(
    rt: AgentRuntime,
    target: HandleRef,
    timeout_ms: int | None,
    *,
    console: Console,
    show_text: bool,
    json_lines: bool,
    after: str | None = None,
    shown: Callable[[str], str] = str,
) -> tuple[TaskResult, bool]:
    """Follow the handle's turn to its end; print as the module docstring says.

    Args:
        rt: the runtime.
        target: the handle.
        timeout_ms: give up after this many ms (a ``timeout`` result).
        console: where tool lines and notes go.
        show_text: print the text (``--follow``); else a status line on a terminal.
        json_lines: print every event as a JSON line.
        after: continue after this event's ``seq`` (``--after``).
        shown: the form a handle id is printed in (``Options.shown``: with the scope), so
            the ``resume with:`` line pastes back as printed.

    Returns:
        The turn's result (``wait``'s when the handle never ran a turn: the next result) and
        whether any text was printed.

    Raises:
        HandleNotFoundError: no such handle.
    """
    status = StatusLine(str(target if isinstance(target, str) else target.id))
    printer = TextPrinter(console)
    printed = False
    result: TaskResult | None = None
    live = None if show_text or json_lines else Live(status, console=console, transient=True)
    if live is not None:
        live.start()
    seq = after
    try:
        async for event in rt.stream(target, timeout_ms, after=after):
            seq = event.seq or seq
            status.take(event)
            if json_lines and not (isinstance(event, TurnEnd) and event.result is None):
                _write(json.dumps(event.model_dump(mode="json"), ensure_ascii=False) + "\n")
            elif show_text:
                printer.show(event)
                printed = printed or bool(printer.attempts)
            if isinstance(event, TurnEnd):
                result = event.result
    except (asyncio.CancelledError, KeyboardInterrupt):
        if show_text and not json_lines:  # nothing shown yet: resume from the start
            printer.resume_hint(shown(status.handle_id), seq)
        raise
    finally:
        if live is not None:
            live.stop()
    if printer.printed and show_text:
        _write("\n")
    if result is None:  # never ran a turn: wait for its next result, as plain `wait` does
        result = await rt.wait(target, timeout_ms)
        if json_lines:
            _write(json.dumps(TurnEnd(result=result).model_dump(mode="json")) + "\n")
    return result, printed


@dataclass
class TextPrinter:
    """``--follow``'s printer of stream events: the model's text as it streams, a line per
    tool call started and ended. A retried LLM call (a later ``attempt`` of the same call)
    streams its reply again from the start: the broken partial text is ended with a line
    that says so, and the new attempt starts on a line of its own (never glued to it).

    Attributes:
        console: where tool lines and notes go (the text itself goes to stdout as is).
        printed: text was printed since the last line break.
        attempts: the attempt last printed, by LLM call (activity id).
    """

    console: Console
    printed: bool = False
    attempts: dict[str, int] = field(default_factory=dict)

    def show(self, event: LiveEvent) -> None:
        """Print one event."""
        if isinstance(event, TextDelta):
            seen = self.attempts.get(event.call)
            if event.restart or (seen is not None and event.attempt > seen):
                self._break()
                self.console.print(
                    f"[dim]↻ the model call failed and was retried (attempt {event.attempt});"
                    " its reply starts over:[/]"
                )
            self.attempts[event.call] = event.attempt
            if event.skipped:
                _write(f"[… {event.skipped} characters]")
            _write(event.text)
            self.printed = self.printed or bool(event.text or event.skipped)
        elif isinstance(event, ToolCallStart | ToolCallEnd):
            self._break()
            arrow = "→" if isinstance(event, ToolCallStart) else "←"
            end = ""
            if isinstance(event, ToolCallEnd):
                end = " error" if event.is_error else " ok"
            self.console.print(
                f"[dim]{arrow} tool {escape(event.name)} ({escape(event.call_id)}){end}[/]"
            )

    def resume_hint(self, handle_id: str, seq: str | None) -> None:
        """Print the command that continues this follow after the last event shown (with no
        event shown yet, the follow from the start)."""
        self._break()
        after = f" --after {escape(seq)}" if seq else ""
        self.console.print(
            f"[dim]resume with: tnx wait {escape(handle_id)} --follow{after}[/]",
            soft_wrap=True,
        )

    def _break(self) -> None:
        if self.printed:
            _write("\n")
            self.printed = False


def _write(text: str) -> None:
    sys.stdout.write(text)
    sys.stdout.flush()
