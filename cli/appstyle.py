"""How ``tnx`` and ``tnx-worker`` present themselves: plain help, ``--version`` and
one-line usage errors.

Help is click's plain formatter (``rich_markup_mode=None``): at any width, option names,
environment variable names and paths wrap, never cut (rich's help tables cut them with
``…`` at 80 columns), and piped help is plain text. A usage error is one line
``error: <option>: <what is allowed>``, exit 2 (:mod:`~toolnexus_temporal.cli.usage`).
"""

from __future__ import annotations

from collections.abc import Callable
from importlib.metadata import PackageNotFoundError, version
from typing import Any, Final

import typer

from toolnexus_temporal.cli.usage import OneLineGroup

APP_SETTINGS: Final[dict[str, Any]] = {
    "rich_markup_mode": None,
    "add_completion": False,
    "cls": OneLineGroup,
}
"""The settings every ``typer.Typer`` of the command line is built with (an app of one
command, ``tnx-worker``'s, takes ``cls=OneLineCommand`` on its command)."""


def version_line(program: str) -> str:
    """``tnx 0.1.0 (temporalio 1.35.0)``: this package's and the Temporal SDK's versions."""

    def of(package: str) -> str:
        try:
            return version(package)
        except PackageNotFoundError:
            return "unknown"

    return f"{program} {of('toolnexus-temporal')} (temporalio {of('temporalio')})"


def version_callback(program: str) -> Callable[[bool], None]:
    """The callback of a ``--version`` option of ``program``: prints :func:`version_line`
    and exits 0 (``typer.Option("--version", is_eager=True, callback=...)``)."""

    def show(value: bool) -> None:
        if value:
            typer.echo(version_line(program))
            raise typer.Exit()

    return show
