"""``tnx ls --watch``: the tree, refreshed every ``--interval`` seconds until Ctrl-C.

On a terminal the table is redrawn in place (rich ``Live``); otherwise (a pipe, a log file)
each refresh is printed in full under a dated header line, and with ``--json`` each refresh
is one JSON line ``{"at_ms": ..., "handles": [...]}``. One connection serves every refresh;
a refresh that fails (a worker gone, the server restarting) shows its error and the next
one tries again. Ctrl-C ends the watch with exit code 0.
"""

from __future__ import annotations

import asyncio
import json
import sys
import time
from contextlib import nullcontext

from rich.console import Group, RenderableType
from rich.live import Live
from rich.markup import escape
from rich.text import Text
from temporalio.service import RPCError

from toolnexus_temporal.cli import args, ops, render
from toolnexus_temporal.cli.hostcmd import list_width, out, show
from toolnexus_temporal.cli.ops import Options
from toolnexus_temporal.client.errors import TnxError
from toolnexus_temporal.client.runtime import AgentRuntime


def watch_tree(opts: Options, target: str | None, interval_s: float) -> None:
    """Show the tree under ``target`` (None: the root) every ``interval_s`` seconds until
    Ctrl-C (then return normally).

    Raises:
        CliError: the first connection or attach fails (as for ``tnx ls``).
    """
    try:
        ops.run(opts, lambda rt: _watch(rt, opts, target, interval_s), timeout_s=None)
    except KeyboardInterrupt:
        return


def header(target: str | None, interval_s: float, now_ms: int) -> str:
    """``tnx ls ID · every 2s · 2026-12-01 10:00:00.000 local time (UTC+01:00) · Ctrl-C
    stops``."""
    return (
        f"tnx ls {target or 'root'} · every {interval_s:g}s · "
        f"{render.stamp(now_ms)} {render.zone(now_ms)} · Ctrl-C stops"
    )


async def _watch(rt: AgentRuntime, opts: Options, target: str | None, interval_s: float) -> None:
    live = (
        Live(console=out, auto_refresh=False, redirect_stdout=False)
        if out.is_terminal and not opts.json
        else None
    )
    with live if live is not None else nullcontext():
        while True:
            now_ms = int(time.time() * 1000)
            try:
                handles = await rt.list(target)
                body: RenderableType = render.tree_table(
                    handles, now_ms, width=list_width(), shown=opts.shown
                )
                doc: object = {"at_ms": now_ms, "handles": args.dump(handles)}
            except (TnxError, RPCError) as err:
                body = Text(f"error: {render.one_line(err)}", style="red")
                doc = {"at_ms": now_ms, "error": render.one_line(err)}
            if opts.json:
                sys.stdout.write(json.dumps(doc, ensure_ascii=False) + "\n")
                sys.stdout.flush()
            elif live is not None:
                top = Text(header(target, interval_s, now_ms), style="dim")
                live.update(Group(top, body), refresh=True)
            else:
                out.print(escape(f"— {header(target, interval_s, now_ms)}"), style="dim")
                show(body)
                sys.stdout.flush()
            await asyncio.sleep(interval_s)
