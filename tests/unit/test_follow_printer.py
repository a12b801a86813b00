"""``tnx wait --follow``'s printer (issue 24 item 3): a retried LLM call streams its reply again
from the start; the CLI ends the broken partial text and starts the new attempt on its own
line, rather than gluing the two together."""

from __future__ import annotations

import pytest
from rich.console import Console

from toolnexus_temporal.cli.live import TextPrinter
from toolnexus_temporal.client.stream import TextDelta, ToolCallEnd, ToolCallStart

PARTIAL = "Here is the plan: first we migrate the b"
WHOLE = "Here is the plan: first we migrate the billing tables, then we switch traffic."


def test_a_retried_call_starts_over_on_its_own_line(capsys: pytest.CaptureFixture[str]) -> None:
    printer = TextPrinter(Console(width=200))
    for event in (
        TextDelta(text=PARTIAL[:20], call="llm-1", attempt=1),
        TextDelta(text=PARTIAL[20:], call="llm-1", attempt=1),
        TextDelta(text=WHOLE[:30], call="llm-1", attempt=2),
        TextDelta(text=WHOLE[30:], call="llm-1", attempt=2),
    ):
        printer.show(event)
    out = capsys.readouterr().out
    assert "the bHere" not in out
    first, note, last = out.splitlines()
    assert first == PARTIAL
    assert "retried (attempt 2)" in note and "starts over" in note
    assert last == WHOLE


def test_one_attempt_and_tool_lines_print_as_before(capsys: pytest.CaptureFixture[str]) -> None:
    printer = TextPrinter(Console(width=200))
    printer.show(TextDelta(text="looking it up", call="llm-1", attempt=1))
    printer.show(ToolCallStart(call_id="c1", name="lookup"))
    printer.show(ToolCallEnd(call_id="c1", name="lookup", is_error=False))
    printer.show(TextDelta(text="found it", call="llm-2", attempt=1))  # the next call: no note
    assert capsys.readouterr().out.splitlines() == [
        "looking it up",
        "→ tool lookup (c1)",
        "← tool lookup (c1) ok",
        "found it",
    ]


def test_a_restart_marker_starts_over_even_for_a_resumed_printer(
    capsys: pytest.CaptureFixture[str],
) -> None:
    """A printer resumed with ``--after`` never saw attempt 1: the ``restart`` marker alone
    ends the line and says the reply starts over."""
    printer = TextPrinter(Console(width=200))
    printer.show(TextDelta(text=WHOLE[:30], call="llm-1", attempt=2, restart=True))
    printer.show(TextDelta(text=WHOLE[30:], call="llm-1", attempt=2))
    note, last = capsys.readouterr().out.splitlines()
    assert "retried (attempt 2)" in note and last == WHOLE


def test_the_resume_hint_names_the_handle_and_the_last_seq(
    capsys: pytest.CaptureFixture[str],
) -> None:
    printer = TextPrinter(Console(width=40))  # narrower than the line: never wrapped
    printer.show(TextDelta(text="half a sen", call="llm-1"))
    seq = "0193a1b2-c3d4-7e5f-8a9b-0c1d2e3f4a5b.17.1.10.0.3"
    printer.resume_hint("ops-1", seq)
    assert capsys.readouterr().out.splitlines() == [
        "half a sen",
        f"resume with: tnx wait ops-1 --follow --after {seq}",
    ]
