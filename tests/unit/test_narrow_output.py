"""At 80 columns or piped, ``tnx`` never cuts what an approver needs (issue 24 item 8): ids,
request ids and prompts are whole; piped lists are plain, whole table rows; ``--help`` never
cuts an option name; ``--version`` exists."""

from __future__ import annotations

import io

import click
import pytest
from rich.console import Console
from typer.main import get_command
from typer.testing import CliRunner

from toolnexus_temporal.cli import hostcmd, render
from toolnexus_temporal.cli.app import app
from toolnexus_temporal.cli.render import one_line
from toolnexus_temporal.cli.worker_cmd import app as worker_app
from toolnexus_temporal.client.handle import Handle
from toolnexus_temporal.workflows.contract.models import Request, TraceLine

DEEP = "root/coordinator.1/explore.2/deep-researcher.3"
PROMPT = "deploy billing-service v2.41 to production in eu-west-1 and us-east-2 tonight?"


def parked(hid: str, n: int) -> Handle:
    req = Request(id=f"{hid}#{n}", kind="approval", prompt=PROMPT)
    return Handle.model_validate(
        {"id": hid, "name": "x", "state": "suspended", "pending_req": req, "pending_since_ms": 0}
    )


def printed(renderable: object, width: int) -> str:
    console = Console(width=width, file=io.StringIO(), record=True)
    console.print(renderable)
    return console.export_text()


def words(text: str) -> str:
    return " ".join(text.split())


def test_the_queue_at_80_columns_cuts_nothing() -> None:
    handles = [parked(DEEP, 12), parked("root/ops.1", 1)]
    shown = printed(render.pending_table(handles, width=80), 80)
    assert "…" not in shown
    for h in handles:
        assert h.id in shown and f"{h.id}#" in shown  # ids and request ids on one line
    assert words(shown).count(PROMPT) == 2
    assert all(len(line) <= 80 for line in shown.splitlines())


def test_a_list_that_fits_is_a_table_and_piped_rows_are_whole() -> None:
    handles = [parked(DEEP, 12), parked("root/ops.1", 1)]
    wide = printed(render.pending_table(handles, width=None), 1_000)
    rows = [line for line in wide.splitlines() if line.startswith("root/")]
    assert len(rows) == 2
    assert all(PROMPT in row and "approval" in row for row in rows)
    assert rows[0].split()[0] == DEEP and rows[0].rstrip().endswith(f"{DEEP}#12")
    # a short tree fits 80 columns: a table
    ls = printed(render.tree_table([parked("root/ops.1", 1)], width=80), 80)
    assert ls.splitlines()[0].split()[:3] == ["ID", "STATE", "WAITING"]


def commands(group: click.Command, path: tuple[str, ...] = ()) -> list[tuple[str, ...]]:
    found = [path]
    if isinstance(group, click.Group):
        for name, sub in group.commands.items():
            found += commands(sub, (*path, name))
    return found


@pytest.mark.parametrize("target", ["tnx", "tnx-worker"])
def test_help_at_80_columns_cuts_no_option_name(target: str) -> None:
    typer_app = app if target == "tnx" else worker_app
    root = get_command(typer_app)
    for path in commands(root):
        command = root
        for name in path:
            assert isinstance(command, click.Group)
            command = command.commands[name]
        result = CliRunner().invoke(typer_app, [*path, "--help"], env={"COLUMNS": "80"})
        assert result.exit_code == 0, (path, result.output)
        assert "…" not in result.output, (path, result.output)
        for param in command.params:
            for opt in param.opts:
                if opt.startswith("--"):
                    assert opt in result.output, (path, opt)
        assert all(len(line) <= 80 for line in result.output.splitlines() if " " in line)


def test_version() -> None:
    for typer_app, program in ((app, "tnx"), (worker_app, "tnx-worker")):
        result = CliRunner().invoke(typer_app, ["--version"])
        assert result.exit_code == 0 and result.output.startswith(f"{program} 0."), result.output
        assert "temporalio" in result.output


LONG = "deploy billing-service v2.41 " + "with every billing table migrated, " * 6 + "tonight?"


def test_piped_lists_inspect_and_trace_are_whole_past_the_console_width(
    capsys: pytest.CaptureFixture[str],
) -> None:
    """What ``tnx pending``, ``ls``, ``inspect`` and ``trace`` print through
    :func:`hostcmd.show` when stdout is a pipe: whole rows however long, at any ``COLUMNS``
    (rich caps a print's width at the console's: rows past 80 columns were cut with ``…``)."""
    assert not hostcmd.out.is_terminal  # captured: a pipe
    prompt = one_line(LONG)
    req = Request(id=f"{DEEP}#12", kind="approval", prompt=prompt)
    h = Handle.model_validate(
        {"id": DEEP, "name": "x", "state": "suspended", "pending_req": req, "pending_since_ms": 0}
    )
    line = TraceLine(at_ms=0, seq=1, line=f"{DEEP}: running→suspended ({prompt})")
    for renderable in (
        render.pending_table([h], width=hostcmd.list_width()),
        render.tree_table([h], width=hostcmd.list_width()),
        render.handle_table(h),
        render.trace_table([line]),
    ):
        hostcmd.show(renderable)
        shown = capsys.readouterr().out
        assert "…" not in shown, shown
        assert DEEP in shown
        assert not any(line.endswith(" ") for line in shown.splitlines()), shown  # no padding
    hostcmd.show(render.pending_table([h], width=hostcmd.list_width()))
    [row] = [ln for ln in capsys.readouterr().out.splitlines() if ln.startswith(DEEP)]
    assert prompt in row and row.rstrip().endswith(f"{DEEP}#12")  # one plain, whole row


def test_inspect_and_trace_fit_a_terminal_of_80_columns() -> None:
    """On a terminal (a console as wide as it), ``inspect`` and ``trace`` keep one line per
    field and cut a long text with ``…`` (piped, they are whole: above)."""
    req = Request(id="root/ops.1#1", kind="approval", prompt=one_line(LONG))
    h = Handle.model_validate(
        {"id": "root/ops.1", "name": "x", "state": "suspended", "pending_req": req}
    )
    line = TraceLine(at_ms=0, seq=1, line=f"root/ops.1: running→suspended ({one_line(LONG)})")
    for renderable in (render.handle_table(h), render.trace_table([line])):
        shown = printed(renderable, 80)
        assert all(len(row) <= 80 for row in shown.splitlines()), shown
        assert "…" in shown and "root/ops.1" in shown


def test_piped_text_is_not_wrapped(capsys: pytest.CaptureFixture[str]) -> None:
    """A result, a legend or a header printed with ``out.print`` is one line when piped (the
    new-user walk of issue 37 found ``tnx wait > file`` cut mid-sentence at 80 columns)."""
    assert not hostcmd.out.is_terminal
    text = "the reply " + "word " * 60 + "end"
    hostcmd.out.print(text)
    assert capsys.readouterr().out == text + "\n"


def test_a_piped_table_keeps_its_caption_on_one_line(capsys: pytest.CaptureFixture[str]) -> None:
    """``tnx ls | cat``: the legend under a narrow table is one line, not wrapped to the
    table's width (the second new-user walk of issue 37)."""
    legend = "COST: USD of the subtree (? = a model without a price: unknown) " * 2
    hostcmd.show(render.listing(["ID", "STATE"], [["root/a.1", "idle"]], None, caption=legend))
    lines = capsys.readouterr().out.splitlines()
    assert lines[-1] == legend.rstrip(), lines
