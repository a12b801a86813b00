"""Background children that report back (issue 25 item 2): a child started without blocking
its parent's turn, whose every settled turn reaches the parent once, as one inbox item.

A parent starts one with the ``task`` tool's ``"background": true`` (the call returns at
once with the child's id) or a host with ``rt.spawn(parent, name, notify=True)``. Such a
child reports its results (``report_results``, as a ``task`` child does) and is not
one-shot: it lives until it is closed (by the parent's model, a host, or the close cascade).

The rules:

* when a child report shows a new settled result (``result_seq`` grew: a finished turn, or a
  ``pending`` one parked on a Request), :func:`note` keeps one item
  ``[from=<child id> channel=child] [status] text`` for it in
  ``HandleState.background.waiting``, after those of earlier results: each settled result is
  its own item. That list is not the bounded inbox: a full inbox never refuses it, and it
  holds at most :data:`UNREAD_PER_CHILD` unread items, of :data:`UNREAD_BYTES_PER_CHILD`
  bytes together, per background child (so at most that times ``max_children``). Past that
  bound the oldest unread item of the child is dropped, and
  the first item the parent then reads of that child says how many earlier results were not
  kept (:func:`with_gaps`), as it does for results the parent never got a report of (a child
  that settled twice in one workflow task);
* the items join the inbox at the next wake (:func:`take_waiting`, called by
  ``inbox.drain``), after the posts; an interrupted turn returns them to the inbox with
  the posts (``inbox.restore_drained``), so they are read once;
* an idle parent is woken by the item (``BackgroundWake.wake_if_due``, through the same wake
  path as a host's wake: ``max_concurrent`` applies); a running or parked parent reads it at
  its next wake, and one is due as soon as its turn settles;
* the state is all in :class:`BackgroundState`, so continue-as-new carries it: an item
  noted and not yet read, and what was read (``delivered``), are never lost nor repeated;
* the model's tools (offered with ``task`` to an agent with a team): ``background_list``,
  ``background_wait`` (a result it returns is read: its item is not delivered again),
  ``background_post`` (post to an idle child and wake it) and ``background_close``.

These are the pure rules; the component (starting a child, waking the handle, the model's
tools) is :class:`~toolnexus_temporal.workflows.children.background.Background`. Budgets,
``max_concurrent`` and the close cascade apply as to any child (it is one); a child parked on
a Request surfaces it as any child does (the approval queue, ``tnx pending``), and its parent
gets a ``[pending]`` item. Deterministic; no I/O.
"""

from __future__ import annotations

import json
from typing import Final

from toolnexus_temporal.workflows.contract.limits import text_bytes
from toolnexus_temporal.workflows.contract.models import (
    MAX_TEXT,
    InboxItem,
    TaskResult,
    ToolCall,
)
from toolnexus_temporal.workflows.contract.names import CHILD_CHANNEL
from toolnexus_temporal.workflows.contract.state import BackgroundChild, ChildInfo, HandleState

LIST_TEXT_CHARS: Final = 200
"""Characters of a child's last result that ``background_list`` shows."""

UNREAD_PER_CHILD: Final = 16
"""The most unread result items kept per background child (issue 25 item 2: each settled
turn reaches the parent once). A child settling more turns than this while its parent does
not read them (a parent parked for days beside a child woken every minute) loses its
oldest unread items, and the parent is told how many (:func:`with_gaps`), so the parent's
state stays bounded."""

UNREAD_BYTES_PER_CHILD: Final = 4 * MAX_TEXT
"""The most text the unread items of one background child hold together, bytes of its JSON
(:func:`~toolnexus_temporal.workflows.contract.limits.text_bytes`): what its one item could
hold before items were kept per result (64,000 characters of up to 4 UTF-8 bytes). Past it the
oldest unread items of the child are dropped as past :data:`UNREAD_PER_CHILD` (its newest is
always kept): 16 results of 64,000 CJK characters were 3.2 MB of carried state, past the
server's 2 MiB for the continue-as-new input (``limits.BLOB_BYTES``)."""


def track(s: HandleState, child_id: str) -> None:
    """Make ``child_id`` (a child of ``s`` being spawned) a background child of ``s``: its
    settled results will reach ``s`` as inbox items. Called before the child's workflow
    starts, so that no report of it can come first."""
    s.background.followed.setdefault(child_id, BackgroundChild())


def is_background(s: HandleState, child_id: str) -> bool:
    """``child_id`` is a background child ``s`` still tracks."""
    return child_id in s.background.followed


def result_text(result: TaskResult) -> str:
    """A settled result as one line of text for the parent's model: ``[status] text``, a
    ``pending`` one with its Request (kind, prompt, id)."""
    if result.status == "pending" and result.pending is not None:
        req = result.pending
        return f"[pending] {req.kind}: {req.prompt} (request {req.id})"
    return f"[{result.status}] {result.text}"


def item_of(child_id: str, result: TaskResult) -> InboxItem:
    """The inbox item of a background child's settled ``result``, its text cut to the inbox
    item's limit."""
    return InboxItem.model_validate(
        {"from": child_id, "channel": CHILD_CHANNEL, "text": result_text(result)[:MAX_TEXT]}
    )


def with_gaps(s: HandleState, items: list[InboxItem]) -> list[InboxItem]:
    """``items`` (about to be read) with the first item of each child saying how many of its
    unread results have no item (``[done] (3 earlier results not kept) text``): those over
    :data:`UNREAD_PER_CHILD`, or never reported one by one."""
    out: list[InboxItem] = []
    seen: set[str] = set()
    for item in items:
        bg = s.background.followed.get(item.from_)
        if item.from_ not in seen and bg is not None:
            seen.add(item.from_)
            kept = sum(1 for i in items if i.from_ == item.from_)
            missing = bg.noted - bg.delivered - kept
            if missing > 0:
                status, _, rest = item.text.partition("] ")
                text = f"{status}] ({missing} earlier results not kept) {rest}"
                item = item.model_copy(update={"text": text[:MAX_TEXT]})
        out.append(item)
    return out


def note(s: HandleState, child_id: str) -> bool:
    """After a report of ``child_id``: keep the item of its new settled result for the next
    wake, after its unread older ones (the oldest dropped past :data:`UNREAD_PER_CHILD`
    items or :data:`UNREAD_BYTES_PER_CHILD` bytes; the newest is always kept).

    Returns:
        True when an item was noted (a background child with a result newer than the last
        one noted), else False.
    """
    bg = s.background.followed.get(child_id)
    info = s.roster.children_info.get(child_id)
    if bg is None or info is None or info.last_result is None or info.result_seq <= bg.noted:
        return False
    bg.noted = info.result_seq
    bg.woken = False
    waiting = s.background.waiting
    waiting.append(item_of(child_id, info.last_result))
    mine = [n for n, i in enumerate(waiting) if i.from_ == child_id]
    size = sum(text_bytes(waiting[n].text) for n in mine)
    drop = 0
    while len(mine) - drop > 1 and (
        len(mine) - drop > UNREAD_PER_CHILD or size > UNREAD_BYTES_PER_CHILD
    ):
        size -= text_bytes(waiting[mine[drop]].text)
        drop += 1
    for n in reversed(mine[:drop]):
        del waiting[n]
    return True


def take_waiting(s: HandleState) -> list[InboxItem]:
    """The child items for the turn a wake admits (``inbox.drain``), oldest first: they
    leave ``waiting`` and count as read."""
    items = with_gaps(s, s.background.waiting)
    s.background.waiting = []
    for item in items:
        bg = s.background.followed.get(item.from_)
        if bg is not None:
            bg.delivered = bg.noted
    return items


def consume(s: HandleState, child_id: str, limit: int = MAX_TEXT) -> tuple[list[InboxItem], int]:
    """A background tool gives the model ``child_id``'s unread results, oldest first, as
    many as fit ``limit`` characters together (at least one): those leave ``waiting`` and are
    not delivered again; the rest stay unread for the next call or wake (a tool's output is
    bounded like an inbox item, ``MAX_TEXT``).

    Returns:
        The items taken (:func:`with_gaps` applied; empty when all were read) and how many
        unread items are left.
    """
    mine = with_gaps(s, [i for i in s.background.waiting if i.from_ == child_id])
    taken: list[InboxItem] = []
    size = 0
    for item in mine:
        if taken and size + len(item.text) + 1 > limit:
            break
        taken.append(item)
        size += len(item.text) + 1
    left = len(mine) - len(taken)
    kept = [i for i in s.background.waiting if i.from_ == child_id][len(taken) :]
    s.background.waiting = [i for i in s.background.waiting if i.from_ != child_id] + kept
    bg = s.background.followed.get(child_id)
    if bg is not None:
        info = s.roster.children_info.get(child_id, ChildInfo())
        bg.noted = max(bg.noted, info.result_seq)
        bg.delivered = bg.noted - left
    return taken, left


def compact(s: HandleState) -> None:
    """At continue-as-new: closed background children (and those the roster no longer
    knows) leave ``children``; their waiting items stay until read."""
    infos = s.roster.children_info
    for child_id in list(s.background.followed):
        info = infos.get(child_id)
        if info is None or info.state == "closed":
            del s.background.followed[child_id]


def listing(s: HandleState) -> str:
    """``background_list``'s text: one line per background child, in spawn order:
    ``id: state, N result(s), last: [status] text`` (the text cut; the state reads
    ``idle (paused)`` for a paused child), and ``(K unread)`` when items of it wait."""
    if not s.background.followed:
        return "no background children"
    unread: dict[str, int] = {}
    for item in s.background.waiting:
        unread[item.from_] = unread.get(item.from_, 0) + 1
    lines = []
    for child_id in s.roster.children:
        if child_id not in s.background.followed:
            continue
        info = s.roster.children_info.get(child_id, ChildInfo())
        last = result_text(info.last_result)[:LIST_TEXT_CHARS] if info.last_result else "none"
        flag = f" ({unread[child_id]} unread)" if child_id in unread else ""
        state = f"{info.state} (paused)" if info.paused and info.state != "closed" else info.state
        lines.append(f"{child_id}: {state}, {info.result_seq} result(s), last: {last}{flag}")
    return "\n".join(lines)


def parse_args(call: ToolCall) -> dict[str, object] | None:
    """A tool call's JSON arguments as an object, or None when they are not one."""
    try:
        args = json.loads(call.arguments or "{}")
    except ValueError:
        return None
    return args if isinstance(args, dict) else None
