"""How ``tnx`` and ``tnx-worker`` present themselves: plain help and ``--version``.

Help is click's plain formatter (``rich_markup_mode=None``): at any width, option names,
environment variable names and paths wrap, never cut (rich's help tables cut them with
``…`` at 80 columns), and piped help is plain text.
"""

from __future__ import annotations

from collections.abc import Callable
from importlib.metadata import PackageNotFoundError, version
from typing import Any, Final

import typer

APP_SETTINGS: Final[dict[str, Any]] = {"rich_markup_mode": None, "add_completion": False}
"""The settings every ``typer.Typer`` of the command line is built with."""


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
