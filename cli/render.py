"""How the ``tnx`` commands look: the rich tables of ``ls``, ``inspect``, ``trace`` and
``pending``, and the small text helpers behind them (one line per cell, ``∞`` for an unlimited
pool, dates and times in local time with the UTC offset named, ages such as ``2d 3h``).

The lists (``ls``, ``pending``) never cut an id, a request id or a prompt: a list is a table
when it fits the width it is printed at, else one block per row (the id on its own line, then
``FIELD: value`` lines that wrap). Piped output is printed at an unbounded width
(:data:`~toolnexus_temporal.cli.hostcmd.PIPED_WIDTH`): plain, whole table rows. ``inspect``
and ``trace`` keep each cell on one line and cut long texts with ``…`` on a terminal (piped,
they are whole too).
"""

from __future__ import annotations

import re
import time
from collections.abc import Callable
from datetime import datetime, timedelta, tzinfo
from decimal import Decimal
from typing import Final

from rich import box
from rich.console import Group, RenderableType
from rich.table import Table
from rich.text import Text

from toolnexus_temporal.client.handle import Handle
from toolnexus_temporal.client.listed import ListedRow
from toolnexus_temporal.client.queued import QueuedAnswer
from toolnexus_temporal.client.roots import QueueRow
from toolnexus_temporal.workflows.contract.clock import format_duration, parse_time_ms
from toolnexus_temporal.workflows.contract.models import (
    AgentDef,
    Budget,
    Cost,
    McpServer,
    Message,
    TaskResult,
    TraceLine,
    usd_text,
)
from toolnexus_temporal.workflows.contract.names import BACKGROUND_TOOLS, TASK_TOOL

OK_STATUSES: Final = frozenset({"done", "pending"})
"""Results shown as a success (green); ``tnx wait`` exits 0 on them."""

INFINITY: Final = "∞"
"""How an unlimited pool is shown."""

NONE: Final = "—"

IdForm = Callable[[str], str]
"""How a table prints a handle id: :meth:`Options.shown
<toolnexus_temporal.cli.options.Options.shown>` (the workflow id, which pastes back into any
``tnx`` command); the tables' default prints the id as given."""


def _as_given(handle_id: str) -> str:
    return handle_id


"""How an absent value is shown."""

STATE_STYLES: Final = {
    "idle": "",
    "running": "green",
    "suspended": "yellow",
    "closed": "dim",
}
"""The rich style each handle state is shown in."""


# ---------------------------------------------------------------------------- text


def one_line(value: object) -> str:
    """Whitespace (newlines included) collapsed to single spaces."""
    return " ".join(str(value).split())


def truncate(value: str, width: int) -> str:
    """``value`` cut to ``width`` characters, ending in ``…`` when cut."""
    return value if len(value) <= width else value[: max(0, width - 1)] + "…"


def pool(value: int | None) -> str:
    """A pool's remainder, ``∞`` when unlimited."""
    return INFINITY if value is None else str(value)


def clock(at_ms: int) -> str:
    """``HH:MM:SS.mmm`` in local time."""
    return time.strftime("%H:%M:%S", time.localtime(at_ms / 1000)) + f".{at_ms % 1000:03d}"


def stamp(at_ms: int, tz: tzinfo | None = None) -> str:
    """``YYYY-MM-DD HH:MM:SS.mmm`` (ISO 8601 date and time) in ``tz`` (default: local
    time; :func:`zone` names it)."""
    at = datetime.fromtimestamp(at_ms / 1000, tz)
    return at.strftime("%Y-%m-%d %H:%M:%S") + f".{at_ms % 1000:03d}"


def zone(at_ms: int | None = None, tz: tzinfo | None = None) -> str:
    """The zone :func:`stamp` uses at ``at_ms`` (default: now; the offset changes with
    daylight saving): ``UTC+01:00`` or ``UTC`` for ``tz``, ``local time (UTC+01:00)`` for
    local time."""
    at_s = time.time() if at_ms is None else at_ms / 1000
    at = datetime.fromtimestamp(at_s, tz) if tz is not None else datetime.fromtimestamp(at_s)
    offset = (at.astimezone() if tz is None else at).utcoffset() or timedelta(0)
    minutes = int(offset.total_seconds() // 60)
    sign = "-" if minutes < 0 else "+"
    name = f"UTC{sign}{abs(minutes) // 60:02d}:{abs(minutes) % 60:02d}" if minutes else "UTC"
    return name if tz is not None else f"local time ({name})"


def age(ms: int) -> str:
    """A duration as its two largest units: ``45s``, ``12m 3s``, ``3h 12m``, ``2d 3h``
    (a negative one, from clock skew, as ``0s``)."""
    s = max(0, ms) // 1000
    d, rest = divmod(s, 86_400)
    h, rest = divmod(rest, 3600)
    m, s = divmod(rest, 60)
    if d:
        return f"{d}d {h}h"
    if h:
        return f"{h}h {m}m"
    return f"{m}m {s}s" if m else f"{s}s"


def waiting(since_ms: int | None, now_ms: int | None = None) -> str:
    """``waiting 2d 3h`` since ``since_ms`` (``—`` when unknown)."""
    if since_ms is None:
        return NONE
    now_ms = int(time.time() * 1000) if now_ms is None else now_ms
    return f"waiting {age(now_ms - since_ms)}"


def deadline(at_ms: int | None, now_ms: int | None = None) -> str:
    """A wall deadline as local time with what remains (``—`` for none)."""
    if at_ms is None:
        return NONE
    now_ms = int(time.time() * 1000) if now_ms is None else now_ms
    stamp = time.strftime("%Y-%m-%d %H:%M:%S", time.localtime(at_ms / 1000))
    left = at_ms - now_ms
    return f"{stamp} ({'in ' + duration(left) if left > 0 else 'passed'})"


def duration(ms: int) -> str:
    """``1h 2m 3s`` / ``2m 3s`` / ``3.4s``."""
    if ms < 60_000:
        return f"{ms / 1000:.1f}s"
    s = ms // 1000
    h, rest = divmod(s, 3600)
    m, s = divmod(rest, 60)
    return f"{h}h {m}m {s}s" if h else f"{m}m {s}s"


def _cell(value: object, style: str = "") -> Text:
    """One table cell: a single line, cut with ``…`` when it does not fit."""
    return Text(one_line(value), style=style, no_wrap=True, overflow="ellipsis")


def _state(state: str) -> Text:
    return _cell(state, STATE_STYLES.get(state, ""))


# ---------------------------------------------------------------------------- tables


Cell = str | Text


def listing(
    headers: list[str],
    rows: list[list[Cell]],
    width: int | None,
    *,
    right: frozenset[str] = frozenset(),
    caption: str | None = None,
) -> RenderableType:
    """A list that never cuts a cell: a table of one-line cells when its natural width fits
    ``width`` (None: always), else one block per row: the first cell bold on a line of its
    own, then ``HEADER: value`` lines, indented, that wrap rather than cut.

    Args:
        headers: the column names; the first column is the row's id.
        rows: the cells, one list per row, in the order of ``headers``.
        width: the width it is printed at, in terminal cells.
        right: the columns justified right in the table.
        caption: a line under the table (or after the blocks).
    """
    cells = [[cell if isinstance(cell, Text) else Text(cell) for cell in row] for row in rows]
    widths = [
        max([len(head), *(row[i].cell_len for row in cells)]) for i, head in enumerate(headers)
    ]
    if width is None or sum(widths) + 2 * (len(headers) - 1) <= width:
        # piped (``width`` None), the caption is a line of its own: a table's caption wraps
        # to the table's width
        table = Table(
            box=box.SIMPLE_HEAD,
            pad_edge=False,
            show_edge=False,
            collapse_padding=True,
            caption=caption if width is not None else None,
            caption_justify="left",
        )
        for head in headers:
            table.add_column(head, no_wrap=True, justify="right" if head in right else "left")
        for row in cells:
            table.add_row(*row)
        if width is None and caption:
            return Group(table, Text(caption, style="dim"))
        return table
    blocks: list[RenderableType] = []
    for row in cells:
        blocks.append(Text(row[0].plain.strip(), style="bold"))
        for head, cell in zip(headers[1:], row[1:], strict=True):
            line = Text(f"  {head.lower()}: ", style="dim")
            line.append_text(cell)
            blocks.append(line)
    if caption:
        blocks.append(Text(caption, style="dim"))
    return Group(*blocks)


def ended_cell(how: str, state: str) -> Text:
    """The STATE of a handle whose workflow ended outside the contract: ``terminated (was
    suspended)``, in red (``tnx recover ID`` starts a terminated one again)."""
    return Text(f"{how} (was {state})", style="red")


def tree_table(
    handles: list[Handle],
    now_ms: int | None = None,
    width: int | None = None,
    shown: IdForm = _as_given,
    ended: dict[str, str] | None = None,
) -> RenderableType:
    """``tnx ls``: one row per handle, ids indented by depth below the first one; a
    suspended handle shows how long its Request has waited (at ``now_ms``, default now); a
    paused one says so in STATE; one whose workflow ended outside the contract (``ended``:
    by id, ``terminated``...) says so instead of the state a query still answers; a COST
    column (:func:`cost_cell`) once some handle made a call; a NEXT TICK column (local time)
    when a handle ticks. A :func:`listing` at ``width``."""
    top = handles[0].depth if handles else 0
    ended = ended or {}
    rows: list[list[Cell]] = [
        [
            Text(
                "  " * (h.depth - top) + one_line(shown(h.id)),
                style="bold" if h.depth == top else "",
            ),
            ended_cell(ended[h.id], h.state)
            if h.id in ended
            else _cell(f"{h.state} paused", STATE_STYLES.get(h.state, ""))
            if h.paused and h.state != "closed"  # a closed one no longer runs (walk 8)
            else _state(h.state),
            waiting(h.pending_since_ms, now_ms) if h.pending_req and h.id not in ended else "",
            str(h.turns_total),
            str(h.usage_total),
            f"{pool(h.pool_tokens)}/{pool(h.pool_tool_calls)}",
            str(h.inbox_count),
        ]
        for h in handles
    ]
    headers = ["ID", "STATE", "WAITING", "TURNS", "TOKENS", "POOLS", "INBOX"]
    caption = f"POOLS: tokens / tool calls left ({INFINITY} = unlimited)"
    if any(h.cost != Cost() for h in handles):  # only once some call was made
        headers.insert(5, "COST")
        for row, h in zip(rows, handles, strict=True):
            row.insert(5, cost_cell(h.cost))
        caption += " · COST: USD of the subtree (? = a model without a price: unknown)"
    if any(h.next_tick_ms is not None for h in handles):  # only when something ticks
        headers.append("NEXT TICK")
        for row, h in zip(rows, handles, strict=True):
            row.append(clock(h.next_tick_ms) if h.next_tick_ms is not None else "")
    return listing(
        headers,
        rows,
        width,
        right=frozenset({"TURNS", "TOKENS", "COST", "POOLS", "INBOX"}),
        caption=caption,
    )


def listed_table(
    rows: list[ListedRow],
    now_ms: int | None = None,
    width: int | None = None,
    shown: IdForm = _as_given,
) -> RenderableType:
    """``tnx ls`` with no worker: the tree from visibility (:class:`ListedRow`), ids indented
    by depth below the first; how long a suspended handle has waited (at ``now_ms``); a NEXT
    TICK column (local time) when a handle ticks. A :func:`listing` at ``width``."""
    top = rows[0].depth if rows else 0
    cells: list[list[Cell]] = [
        [
            Text("  " * max(row.depth - top, 0) + one_line(shown(row.id))),
            _cell(f"{row.state} paused", STATE_STYLES.get(row.state, ""))
            if row.paused and row.state != "closed"
            else _state(row.state),
            waiting(int(row.waiting_since.timestamp() * 1000), now_ms)
            if row.waiting_since is not None and row.state == "suspended"
            else "",
        ]
        for row in rows
    ]
    headers = ["ID", "STATE", "WAITING"]
    if any(row.next_tick is not None for row in rows):
        headers.append("NEXT TICK")
        for line, row in zip(cells, rows, strict=True):
            tick = row.next_tick
            line.append(clock(int(tick.timestamp() * 1000)) if tick is not None else "")
    return listing(headers, cells, width)


def listed_handle_table(row: ListedRow, now_ms: int, shown: IdForm = _as_given) -> Table:
    """``tnx inspect`` with no worker: what visibility has of one handle (its search
    attributes), one line each."""
    grid = Table.grid(padding=(0, 2))
    grid.add_column(style="bold", no_wrap=True)
    grid.add_column(overflow="ellipsis")
    prompt = row.request_prompt or "(not in visibility)"
    pending = (
        f"{shown(row.request_id)} ({row.request_kind or '?'}): {prompt}" if row.request_id else NONE
    )
    since = row.waiting_since
    tick = row.next_tick
    rows: list[tuple[str, RenderableType]] = [
        ("id", _cell(shown(row.id), "bold")),
        ("name", _cell(row.name or NONE)),
        ("parent", _cell(shown(row.parent) if row.parent else NONE)),
        ("depth", _cell(row.depth)),
        ("state", _state(row.state)),
        ("paused", _cell("yes: no turn starts until unpaused" if row.paused else "no")),
        ("pending", _cell(pending)),
        (
            "waiting since",
            _cell(
                f"{stamp(int(since.timestamp() * 1000))} "
                f"({waiting(int(since.timestamp() * 1000), now_ms)})"
                if since is not None and row.request_id
                else NONE
            ),
        ),
        ("next tick", _cell(stamp(int(tick.timestamp() * 1000)) if tick is not None else NONE)),
    ]
    for label, value in rows:
        grid.add_row(label, value)
    return grid


def cost_cell(cost: Cost) -> str:
    """A cost in a narrow column: ``$0.000150``, ``?`` (no call priced: unknown, never 0) or
    ``$0.0012+?`` (some calls unpriced)."""
    if not cost.unpriced:
        return f"${usd_text(cost.priced_usd)}"
    return f"${usd_text(cost.priced_usd)}+?" if cost.priced_usd else "?"


def money_pool(usd: Decimal | None) -> str:
    """A money pool left: ``$1.25``, or the infinity sign (unlimited)."""
    return INFINITY if usd is None else f"${usd_text(usd)}"


def pending_table(
    handles: list[Handle],
    now_ms: int | None = None,
    width: int | None = None,
    shown: IdForm = _as_given,
) -> RenderableType:
    """``tnx pending``: one row per suspended handle and its request, with how long it has
    waited (at ``now_ms``, default now). A :func:`listing` at ``width``: nothing cut."""
    rows: list[list[Cell]] = []
    for h in handles:
        req = h.pending_req
        if req is None:
            continue
        path = (req.data or {}).get("path")
        rows.append(
            [
                one_line(shown(h.id)),
                waiting(h.pending_since_ms, now_ms),
                one_line(req.kind),
                one_line(req.prompt),
                one_line(req.url or NONE),
                scoped_ids("/".join(str(p) for p in path), shown)
                if isinstance(path, list)
                else NONE,
                deadline(parse_time_ms(req.expires_at) if req.expires_at else None, now_ms),
                one_line(h.escalated_to or NONE),
                one_line(shown(req.id)),
            ]
        )
    headers = ["ID", "WAITING", "KIND", "PROMPT", "URL", "PATH", "EXPIRES", "ESCALATED", "REQUEST"]
    return listing(headers, rows, width)


def queue_table(
    rows: list[QueueRow],
    now_ms: int | None = None,
    width: int | None = None,
    shown: IdForm = _as_given,
    queued: dict[str, list[QueuedAnswer]] | None = None,
) -> RenderableType:
    """``tnx pending`` with no worker: the approval queue from visibility (the search
    attributes of each suspended handle; the prompt is absent when a payload codec keeps it
    out of visibility), and a QUEUED ANSWER column when an Answer was sent to a row that no
    worker has applied yet (``queued``, by handle id: who sent it and when). A
    :func:`listing` at ``width``: nothing cut."""
    cells: list[list[Cell]] = []
    for row in rows:
        since, expires = row.waiting_since, row.expires_at
        cells.append(
            [
                one_line(shown(row.id)),
                waiting(int(since.timestamp() * 1000) if since else None, now_ms),
                one_line(row.kind or NONE),
                Text(one_line(row.prompt))
                if row.prompt is not None
                else Text("(not in visibility)", style="dim"),
                deadline(int(expires.timestamp() * 1000) if expires else None, now_ms),
                one_line(f"queue:{row.escalated_to}" if row.escalated_to else NONE),
                one_line(shown(row.request_id) if row.request_id else NONE),
            ]
        )
    headers = ["ID", "WAITING", "KIND", "PROMPT", "EXPIRES", "ESCALATED", "REQUEST"]
    if queued:
        headers.append("QUEUED ANSWER")
        for row, line in zip(rows, cells, strict=True):
            answers = queued.get(row.id, [])
            line.append(one_line("; ".join(a.line() for a in answers) or NONE))
    return listing(headers, cells, width)


def _defn_rows(defn: AgentDef | None) -> list[tuple[str, RenderableType]]:
    if defn is None:
        return [("definition", _cell("(the root handle: no agent definition)", "dim"))]
    limits = defn.budget.model_dump(exclude_none=True)
    budget = ", ".join(f"{key}={value}" for key, value in limits.items()) or "unlimited"
    if len(limits) < len(Budget.model_fields):
        budget += " (others unlimited)" if limits else ""
    hooks = ", ".join(
        f"{key}={value}"
        for key, value in (
            ("wait_for", defn.wait_for),
            ("on_spawn", defn.on_spawn),
            ("on_close", defn.on_close),
        )
        if value
    )
    rows: list[tuple[str, RenderableType]] = [
        ("definition", _cell(defn.name, "bold")),
        ("  description", _cell(defn.description or NONE)),
        ("  model", _cell(defn.model + (f" ({defn.style} wire)" if defn.style else ""))),
        ("  tools", _cell(_tools_line(defn))),
    ]
    if defn.mcp:
        rows.append(("  mcp", _cell(", ".join(_mcp_summary(server) for server in defn.mcp))))
    rows += [
        ("  team", _cell(", ".join(defn.team) or NONE)),
        ("  budget", _cell(budget)),
    ]
    if hooks:
        rows.append(("  hooks", _cell(hooks)))
    if defn.system_prompt:
        rows.append(("  system prompt", _cell(defn.system_prompt)))
    return rows


def _tools_line(defn: AgentDef) -> str:
    """The tools an agent is offered: its own, then the built-in delegation tools when it has
    a team (``task`` and the background ones, as the model sees them; walk 5 read ``tools
    —`` on a coordinator that calls ``task``), or a pointer to its MCP servers."""
    built_in = [TASK_TOOL, *BACKGROUND_TOOLS] if defn.team else []
    named = [*defn.tools, *(f"{t} (team)" for t in built_in)]
    # an MCP server's tool names come from the server at each LLM call (the activity lists
    # them); the workflow never holds them, so this says where they come from (walk 7)
    mcp = "none of its own; its MCP servers' (mcp below), as each lists them at every LLM call"
    return ", ".join(named) or (mcp if defn.mcp else NONE)


def _mcp_summary(server: McpServer) -> str:
    """``git (git_status, git_commit; approval: git_commit)``: an MCP server's name, the tools
    it offers (``all`` when unfiltered) and those that need an approval."""
    offered = ", ".join(server.tools) if server.tools is not None else "all"
    gated = f"; approval: {', '.join(server.approval)}" if server.approval else ""
    return f"{server.name} ({offered}{gated})"


def _result_rows(result: TaskResult | None, shown: IdForm) -> list[tuple[str, RenderableType]]:
    if result is None:
        return [("last result", _cell(NONE))]
    return [
        ("last result", result_summary(result, shown)),
        ("  text", _cell(result.text or "(empty)", "red" if result.is_error else "")),
    ]


def result_summary(result: TaskResult, shown: IdForm = _as_given) -> Text:
    """``done · turns 1 · tokens 23 · $0.000150`` (with the limit or the pending request when
    any; the cost as :meth:`Cost.text` says it)."""
    colour = "green" if result.status in OK_STATUSES else "red"
    line = Text(result.status, style=f"bold {colour}", no_wrap=True, overflow="ellipsis")
    extra = f" · turns {result.turns} · tokens {result.total_tokens} · {result.cost.text()}"
    if result.limit:
        extra += f" · limit {result.limit}"
    if result.pending is not None:
        extra += f" · request {shown(result.pending.id)} ({result.pending.kind})"
    line.append(extra)
    return line


def handle_table(
    h: Handle,
    now_ms: int | None = None,
    shown: IdForm = _as_given,
    ended: str | None = None,
    child_states: dict[str, str] | None = None,
) -> Table:
    """``tnx inspect``: every Handle field, one line each (long texts cut with ``…``); the
    pending Request with its date and how long it has waited (at ``now_ms``, default now),
    and the date and zone the view was read at; ``ended``: how its workflow ended outside
    the contract (``terminated``...), shown as its state with ``tnx recover``;
    ``child_states``: each child's state as ``tnx ls`` shows it (``idle paused``), by id."""
    grid = Table.grid(padding=(0, 2))
    grid.add_column(style="bold", no_wrap=True)
    grid.add_column(overflow="ellipsis")  # shrinks first; cells never wrap
    states = child_states or {}
    children = (  # with their states, paused included (walks 6 and 7)
        f"{len(h.children)}: "
        + ", ".join(shown(c) + (f" ({states[c]})" if c in states else "") for c in h.children)
        if h.children
        else "0"
    )
    now_ms = int(time.time() * 1000) if now_ms is None else now_ms
    pending = (
        f"{shown(h.pending_req.id)} ({h.pending_req.kind}): {h.pending_req.prompt}"
        if h.pending_req is not None
        else NONE
    )
    since = (
        f"{stamp(h.pending_since_ms)} ({waiting(h.pending_since_ms, now_ms)})"
        if h.pending_req is not None and h.pending_since_ms is not None
        else NONE
    )
    rows: list[tuple[str, RenderableType]] = [
        ("id", _cell(shown(h.id), "bold")),
        ("name", _cell(h.name)),
        *_defn_rows(h.defn),
        ("parent", _cell(shown(h.parent) if h.parent else NONE)),
        ("depth", _cell(h.depth)),
        (
            "state",
            Text(f"{ended} (was {h.state}): tnx recover {shown(h.id)}", style="red")
            if ended
            else _state(h.state),
        ),
        ("paused", _cell("yes: no turn starts until unpaused" if h.paused else "no")),
        ("ticks", _cell(tick_line(h))),
        ("children", _cell(children)),
        ("inbox", _cell(h.inbox_count)),
        ("waiting msgs", _cell(messages_line(h))),  # not the transcript's (walk 9)
        ("usage", _cell(f"{h.usage_total} tokens (this handle and its subtree)")),
        ("cost", _cell(f"{h.cost.text()} (this handle and its subtree)")),
        ("turns", _cell(h.turns_total)),
        ("tool calls", _cell(h.tool_calls_total)),
        (
            "pools",
            _cell(
                f"tokens {pool(h.pool_tokens)} · tool calls {pool(h.pool_tool_calls)}"
                f" · money {money_pool(h.pool_cost_usd)}"
            ),
        ),
        ("wall deadline", _cell(deadline(h.wall_deadline_ms))),
        ("pending request", _cell(pending)),
        ("  since", _cell(since)),
        *_result_rows(h.last_result, shown),
        ("last error", _cell(h.last_error or NONE, "red" if h.last_error else "")),
        ("conversation", _cell(conversation_line(h, shown))),
        ("read at", _cell(f"{stamp(now_ms)} {zone(now_ms)}", "dim")),
    ]
    for label, value in rows:
        grid.add_row(label, value)
    return grid


def conversation_line(h: Handle, shown: IdForm) -> str:
    """The transcript's size and the command that reads it (walk 6: the store key it showed,
    ``root/ops.1``, read like another agent's unscoped id)."""
    return f"{h.transcript_len} message(s) · read: tnx inspect {shown(h.id)} --transcript"


def messages_line(h: Handle) -> str:
    """Messages waiting for a turn, and when the debounce window that holds them ends."""
    if not h.messages_waiting:
        return "0"
    line = f"{h.messages_waiting} waiting for a turn"
    if h.window_ends_ms is not None:
        line += f" · debounce window ends {stamp(h.window_ends_ms)}"
    return line


def tick_line(h: Handle) -> str:
    """A handle's tick schedule and next fire time (local), or ``—``."""
    spec = h.tick
    if spec is None:
        return NONE
    every = spec.every_ms
    rule = f"every {format_duration(every)}" if every is not None else f'cron "{spec.cron}" (UTC)'
    if not spec.wake:
        rule += " (inbox only)"
    if h.next_tick_ms is not None:
        rule += f" · next {stamp(h.next_tick_ms)}"
    return rule


def transcript_table(messages: list[Message]) -> Table:
    """``tnx inspect --transcript``: one line per message."""
    table = Table(box=box.SIMPLE_HEAD, pad_edge=False, show_edge=False, collapse_padding=True)
    table.add_column("#", justify="right", no_wrap=True)
    table.add_column("ROLE", no_wrap=True)
    table.add_column("CONTENT", overflow="ellipsis")  # shrinks first; cells never wrap
    for index, message in enumerate(messages, 1):
        content = message.content or ""
        if message.tool_calls:
            calls = ", ".join(f"{c.name}({c.arguments})" for c in message.tool_calls)
            content = f"{content} → {calls}" if content else f"→ {calls}"
        if message.tool_call_id:
            content = f"[{message.tool_call_id}] {content}"
        table.add_row(str(index), message.role, _cell(content or "(empty)"))
    return table


HANDLE_ID: Final = re.compile(r"(?<![\w/.@-])root(?:(?:/[A-Za-z0-9_.-]+)+|(?=[:#]))(?!@)")
"""A handle id in a line of text, not already scoped: ``root/...``, or ``root`` before ``:``
or ``#`` (a trace line's subject, a Request id); never ``root@host`` or the word root."""


def scoped_ids(text: str, shown: IdForm) -> str:
    """``text`` with every handle id in it written as ``tnx`` prints ids (``shown``: with
    the runtime's scope), so an id copied from a trace line pastes back as printed."""
    return HANDLE_ID.sub(lambda m: shown(m.group(0)), text)


def trace_table(
    lines: list[TraceLine], tz: tzinfo | None = None, shown: IdForm = _as_given
) -> Table:
    """``tnx trace``: a ``YYYY-MM-DD HH:MM:SS.mmm`` column (in ``tz``, default local time,
    named in the caption) and the line, its handle ids as ``shown`` prints them."""
    grid = Table.grid(padding=(0, 2))
    grid.add_column(style="dim", no_wrap=True)
    grid.add_column(overflow="ellipsis")  # shrinks first; cells never wrap
    for line in lines:
        style = "red" if "REJECTED" in line.line else ""
        grid.add_row(stamp(line.at_ms, tz), _cell(scoped_ids(line.line, shown), style))
    if lines:
        grid.caption = f"times: {zone(lines[-1].at_ms, tz)}"
        grid.caption_justify = "left"
        grid.caption_style = "dim"
    return grid
