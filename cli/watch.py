"""``tnx ls --watch``: the tree, refreshed every ``--interval`` seconds until Ctrl-C.

On a terminal the table is redrawn in place (rich ``Live``); otherwise (a pipe, a log file)
each refresh is printed in full under a dated header line, and with ``--json`` each refresh
is one JSON line ``{"at_ms": ..., "handles": [...]}``. One connection serves every refresh;
a refresh that fails (a worker gone, the server restarting) shows its error and the next
one tries again. With no worker running, each refresh shows the tree as visibility has it
(:func:`tree_read`, as ``tnx ls`` does), under a line saying so. Ctrl-C ends the watch with
exit code 0.
"""

from __future__ import annotations

import asyncio
import json
import sys
import time
from contextlib import nullcontext
from datetime import datetime

from rich.console import Group, RenderableType
from rich.live import Live
from rich.markup import escape
from rich.text import Text
from temporalio.service import RPCError

from toolnexus_temporal.cli import args, ops, render
from toolnexus_temporal.cli.hostcmd import list_width, out, show
from toolnexus_temporal.cli.ops import Options
from toolnexus_temporal.cli.workercheck import worker_read
from toolnexus_temporal.client.errors import NoWorkerError, TnxError
from toolnexus_temporal.client.handle import Handle
from toolnexus_temporal.client.listed import ENDED_OUTSIDE, ListedRow
from toolnexus_temporal.client.runtime import AgentRuntime


async def tree_read(
    rt: AgentRuntime, target: str | None
) -> tuple[list[Handle], list[ListedRow], NoWorkerError | None]:
    """The tree under ``target`` (None: the root) for ``tnx ls``: the handles (``state``
    queries) when a worker answers, else the :class:`NoWorkerError` that says why (a worker
    SIGKILLed a moment ago: 1 s, see :data:`~toolnexus_temporal.cli.replayed.
    ATTACH_GRACE_S`); and either way the rows visibility has (which say whether a handle's
    workflow ended outside the contract: :func:`ended_of`)."""
    from toolnexus_temporal.cli.replayed import attach

    async def attached() -> list[Handle]:
        await attach(rt)
        return await rt.list(target)

    found = await worker_read(rt, attached)
    if isinstance(found, NoWorkerError):
        return [], await rt.listed(target), found
    return found, await rt.listed(target), None


def ended_of(rows: list[ListedRow]) -> dict[str, str]:
    """The handles whose workflow ended outside the contract (terminated, failed, ...), by
    id: a query still answers with the state they had then."""
    return {row.id: row.state for row in rows if row.state in ENDED_OUTSIDE}


def watch_tree(opts: Options, target: str | None, interval_s: float) -> None:
    """Show the tree under ``target`` (None: the root) every ``interval_s`` seconds until
    Ctrl-C (then return normally).

    Raises:
        CliError: the first connection or attach fails (as for ``tnx ls``).
    """
    try:
        ops.run(
            opts,
            lambda rt: _watch(rt, opts, target, interval_s),
            timeout_s=None,
            worker="optional",
        )
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
                handles, rows, missing = await tree_read(rt, target)
                body: RenderableType = render.tree_table(
                    handles, now_ms, width=list_width(), shown=opts.shown, ended=ended_of(rows)
                )
                doc: object = {"at_ms": now_ms, "handles": args.dump(handles)}
                if missing is not None:  # no worker: the tree as visibility has it
                    note = f"{missing} — from visibility as of {render.clock(now_ms)}"
                    body = Group(
                        Text(render.one_line(note), style="yellow"),
                        render.listed_table(rows, now_ms, width=list_width(), shown=opts.shown),
                    )
                    doc = {
                        "at_ms": now_ms,
                        "source": "visibility",
                        "note": render.one_line(note),
                        "handles": [listed_json(row) for row in rows],
                    }
            except (TnxError, RPCError) as err:
                body = Text(f"error: {render.one_line(err)}", style="red")
                doc = {"at_ms": now_ms, "error": render.one_line(err)}
            title = header(opts.shown(target or "root"), interval_s, now_ms)
            if opts.json:
                sys.stdout.write(json.dumps(doc, ensure_ascii=False) + "\n")
                sys.stdout.flush()
            elif live is not None:
                top = Text(title, style="dim")
                live.update(Group(top, body), refresh=True)
            else:
                out.print(escape(f"— {title}"), style="dim")
                show(body)
                sys.stdout.flush()
            await asyncio.sleep(interval_s)


def listed_json(row: ListedRow) -> dict[str, object]:
    """A visibility row as ``--json`` prints it."""
    return {
        "id": row.id,
        "name": row.name,
        "parent": row.parent,
        "state": row.state,
        "depth": row.depth,
        "paused": row.paused,
        "request": (
            {"id": row.request_id, "kind": row.request_kind, "prompt": row.request_prompt}
            if row.request_id
            else None
        ),
        "since_ms": _ms(row.waiting_since),
        "next_tick_ms": _ms(row.next_tick),
    }


def _ms(at: datetime | None) -> int | None:
    return int(at.timestamp() * 1000) if at is not None else None
