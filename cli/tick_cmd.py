"""Ticks and pause from the shell: ``tnx schedule ID --every 1h | --cron "..."``, ``tnx
schedule ls``, ``tnx unschedule ID``, ``tnx pause ID [--subtree] [--now]``, ``tnx unpause ID
[--subtree]``. Each is one :class:`~toolnexus_temporal.client.AgentRuntime` call
(``schedule``, ``unschedule``, ``pause``, ``unpause``); registered as host verbs by
:mod:`~toolnexus_temporal.cli.app`.
"""

from __future__ import annotations

import re
from typing import Annotated, Final

import typer
from rich.markup import escape

from toolnexus_temporal.cli import args, ops, render
from toolnexus_temporal.cli.hostcmd import IdArg, emit, list_width, out, show
from toolnexus_temporal.cli.ops import CliError, Options
from toolnexus_temporal.client.handle import Handle
from toolnexus_temporal.client.runtime import AgentRuntime

_DURATION: Final = re.compile(r"^\s*(\d+(?:\.\d+)?)\s*(ms|s|m|h|d)?\s*$")
_UNIT_S: Final = {"ms": 0.001, "s": 1.0, "m": 60.0, "h": 3600.0, "d": 86_400.0}


def parse_every(text: str) -> float:
    """``--every``: ``90`` or ``90s``, ``500ms``, ``5m``, ``1h``, ``2d``, in seconds.

    Raises:
        CliError: not a duration (exit 2).
    """
    match = _DURATION.match(text)
    if match is None:
        raise CliError(f"--every {text!r} is not a duration (e.g. 30s, 5m, 1h, 1d)", ops.EXIT_ENV)
    return float(match.group(1)) * _UNIT_S[match.group(2) or "s"]


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
    if handle_id == "ls":
        if every or cron or prompt or inbox_only:
            raise CliError("tnx schedule ls takes no schedule options", ops.EXIT_ENV)
        handles = [h for h in ops.run(opts, lambda rt: rt.list()) if h.tick and h.state != "closed"]
        if opts.json:
            emit(args.dump(handles))
            return
        rows: list[list[render.Cell]] = [
            [escape(h.id), h.state, render.tick_line(h)] for h in handles
        ]
        show(render.listing(["ID", "STATE", "SCHEDULE"], rows, list_width()))
        return
    if (every is None) == (cron is None):
        raise CliError("give exactly one of --every and --cron", ops.EXIT_ENV)
    seconds = None if every is None else parse_every(every)
    target = args.ref(opts, handle_id)

    async def verb(rt: AgentRuntime) -> Handle:
        try:
            return await rt.schedule(
                target, every=seconds, cron=cron, prompt=prompt, wake=not inbox_only
            )
        except ValueError as err:
            raise CliError(f"invalid schedule: {render.one_line(err)}", ops.EXIT_ENV) from err

    h = ops.run(opts, verb)
    if opts.json:
        emit(args.dump(h))
    else:
        out.print(f"schedule {escape(h.id)} → {render.tick_line(h)}", soft_wrap=True)


def unschedule_command(
    opts: Options,
    handle_id: IdArg,
) -> None:
    """Remove a handle's tick schedule (its definition's too)."""
    target = args.ref(opts, handle_id)
    h = ops.run(opts, lambda rt: rt.unschedule(target))
    if opts.json:
        emit(args.dump(h))
    else:
        out.print(f"unschedule {escape(h.id)} → no ticks", soft_wrap=True)


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
    target = args.ref(opts, handle_id)
    h = ops.run(opts, lambda rt: rt.pause(target, now=now, subtree=subtree))
    if opts.json:
        emit(args.dump(h))
    else:
        out.print(f"pause {escape(h.id)} → {h.state}, paused", soft_wrap=True)


def unpause_command(
    opts: Options,
    handle_id: IdArg,
    subtree: Subtree = False,
) -> None:
    """Unpause a handle: a wake held while it was paused runs now."""
    target = args.ref(opts, handle_id)
    h = ops.run(opts, lambda rt: rt.unpause(target, subtree=subtree))
    if opts.json:
        emit(args.dump(h))
    else:
        out.print(f"unpause {escape(h.id)} → {h.state}", soft_wrap=True)
