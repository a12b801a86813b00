"""Ticks and pause from the shell: ``tnx schedule ID --every 1h | --cron "..."``, ``tnx
schedule ls``, ``tnx unschedule ID``, ``tnx pause ID [--subtree] [--now]``, ``tnx unpause ID
[--subtree]``. Each is one :class:`~toolnexus_temporal.client.AgentRuntime` call
(``schedule``, ``unschedule``, ``pause``, ``unpause``); registered as host verbs by
:mod:`~toolnexus_temporal.cli.app`. This module holds the commands' options (light: ``tnx
--help`` imports it); what they do is in :mod:`~toolnexus_temporal.cli.verbs`.
"""

from __future__ import annotations

import re
from typing import Annotated, Final

import typer

from toolnexus_temporal.cli.hostcmd import IdArg
from toolnexus_temporal.cli.options import EXIT_ENV, CliError, Options

_DURATION: Final = re.compile(r"^\s*(\d+(?:\.\d+)?)\s*(ms|s|m|h|d)?\s*$")
_UNIT_S: Final = {"ms": 0.001, "s": 1.0, "m": 60.0, "h": 3600.0, "d": 86_400.0}


def parse_every(text: str) -> float:
    """``--every``: ``90`` or ``90s``, ``500ms``, ``5m``, ``1h``, ``2d``, in seconds.

    Raises:
        CliError: not a duration (exit 2).
    """
    match = _DURATION.match(text)
    if match is None:
        raise CliError(
            f"--every {text!r} is not a duration (e.g. 30s, 5m, 1h, 1d; from 1s to 366d)",
            EXIT_ENV,
        )
    return float(match.group(1)) * _UNIT_S[match.group(2) or "s"]


def schedule_input(every: str | None, cron: str | None, prompt: str | None) -> float | None:
    """Check ``tnx schedule``'s options before anything is sent, in the CLI's words: one line
    naming the option, what was given and the allowed range (issue 37 item 6).

    Returns:
        ``--every`` in seconds, or None for ``--cron``.

    Raises:
        CliError: not exactly one of ``--every``/``--cron``; a duration that is not one, or
            outside 1s..366d; a cron expression croniter refuses; a prompt over its length
            (exit 2).
    """
    from toolnexus_temporal.workflows.contract.clock import format_duration
    from toolnexus_temporal.workflows.contract.cron import cron_error
    from toolnexus_temporal.workflows.contract.models import MAX_TEXT, MAX_WAIT_MS, TICK_MIN_MS

    if (every is None) == (cron is None):
        raise CliError("give exactly one of --every and --cron", EXIT_ENV)
    if prompt is not None and len(prompt) > MAX_TEXT:
        raise CliError(f"--prompt: at most {MAX_TEXT:,} characters (got {len(prompt):,})", EXIT_ENV)
    if cron is not None:
        error = cron_error(cron)
        if error is not None:
            raise CliError(f"--cron: {error}", EXIT_ENV)
        return None
    assert every is not None
    seconds = parse_every(every)
    if not TICK_MIN_MS <= round(seconds * 1000) <= MAX_WAIT_MS:
        low, high = format_duration(TICK_MIN_MS), format_duration(MAX_WAIT_MS)
        raise CliError(f"--every {every.strip()}: must be {low} to {high}", EXIT_ENV)
    return seconds


def schedule_command(
    opts: Options,
    handle_id: Annotated[
        str,
        typer.Argument(metavar="ID|ls", help="Handle id, or `ls`: the handles with a schedule."),
    ],
    every: Annotated[
        str | None,
        typer.Option("--every", metavar="DURATION", help="Tick every DURATION (30s, 5m, 1h)."),
    ] = None,
    cron: Annotated[
        str | None,
        typer.Option("--cron", metavar="EXPR", help='A cron expression, in UTC ("0 * * * *").'),
    ] = None,
    prompt: Annotated[
        str | None, typer.Option("--prompt", metavar="TEXT", help="The prompt of a tick's wake.")
    ] = None,
    inbox_only: Annotated[
        bool,
        typer.Option("--inbox-only", help="Ticks only land in the inbox; they never wake it."),
    ] = False,
) -> None:
    """Put a tick schedule on a handle (a durable timer in its own workflow), or list the
    handles that have one (`tnx schedule ls`)."""
    from toolnexus_temporal.cli import verbs

    verbs.schedule(opts, handle_id, every, cron, prompt, inbox_only)


def unschedule_command(
    opts: Options,
    handle_id: IdArg,
) -> None:
    """Remove a handle's tick schedule (its definition's too)."""
    from toolnexus_temporal.cli import verbs

    verbs.unschedule(opts, handle_id)


Subtree = Annotated[
    bool, typer.Option("--subtree", help="Every open handle under ID too (ID may be root).")
]


def pause_command(
    opts: Options,
    handle_id: IdArg,
    subtree: Subtree = False,
    now: Annotated[
        bool, typer.Option("--now", help="Interrupt a running turn rather than let it finish.")
    ] = False,
) -> None:
    """Pause a handle: it keeps taking posts and ticks but starts no turn until unpaused."""
    from toolnexus_temporal.cli import verbs

    verbs.pause(opts, handle_id, subtree, now)


def unpause_command(
    opts: Options,
    handle_id: IdArg,
    subtree: Subtree = False,
) -> None:
    """Unpause a handle: a wake held while it was paused runs now."""
    from toolnexus_temporal.cli import verbs

    verbs.unpause(opts, handle_id, subtree)
