"""What the host verbs of ``tnx`` do once parsed: one function per verb, called by its
command in :mod:`~toolnexus_temporal.cli.app` (or :mod:`~toolnexus_temporal.cli.tick_cmd`)
with the parsed options. Imported when a verb runs, never by ``tnx --help``: this module
loads the host library.
"""

from __future__ import annotations

import time
from dataclasses import dataclass

import typer
from rich.markup import escape
from rich.text import Text

from toolnexus_temporal.cli import args, live, ops, render, replayed
from toolnexus_temporal.cli.hostcmd import emit, err_console, list_width, out, said, show
from toolnexus_temporal.cli.ops import CliError, Options
from toolnexus_temporal.cli.options import TRACE_CLOSED
from toolnexus_temporal.cli.tick_cmd import schedule_input
from toolnexus_temporal.cli.watch import ended_of, listed_json, tree_read, watch_tree
from toolnexus_temporal.cli.workercheck import worker_read_or_spare
from toolnexus_temporal.client.errors import InvalidCursorError, NoWorkerError, SpawnError
from toolnexus_temporal.client.handle import Handle
from toolnexus_temporal.client.listed import ListedRow
from toolnexus_temporal.client.reads import TraceRead
from toolnexus_temporal.client.runtime import AgentRuntime
from toolnexus_temporal.client.stream import Cursor
from toolnexus_temporal.workflows.contract.clock import format_duration
from toolnexus_temporal.workflows.contract.context import ModelView
from toolnexus_temporal.workflows.contract.messages import PostResult
from toolnexus_temporal.workflows.contract.models import InboxItem, Message
from toolnexus_temporal.workflows.contract.names import ROOT_ID


def ls(opts: Options, handle_id: str | None, watch: bool, interval: float) -> None:
    """`tnx ls`: see its command for the options."""
    target = args.tree_ref(opts, handle_id)
    if watch:
        watch_tree(opts, target, interval)
        return

    handles, rows, missing = ops.run(opts, lambda rt: tree_read(rt, target), worker="optional")
    if missing is not None:
        _print_listed(opts, rows, missing)
    elif opts.json:
        ended = ended_of(rows)
        docs = args.dump(handles)
        for doc in docs:
            if doc["id"] in ended:  # a query still answers with the state it had then
                doc["workflow_ended"] = ended[doc["id"]]
        emit(docs)
    else:
        show(render.tree_table(handles, width=list_width(), shown=opts.shown, ended=ended_of(rows)))


def _print_listed(opts: Options, rows: list[ListedRow], missing: NoWorkerError) -> None:
    """``tnx ls`` with no worker: the tree as visibility has it, and a note saying so (on
    stderr; ``--json``: one object per handle with ``"source": "visibility"``)."""
    now_ms = int(time.time() * 1000)
    if opts.json:
        emit([{**listed_json(row), "source": "visibility", "as_of_ms": now_ms} for row in rows])
    else:
        show(render.listed_table(rows, now_ms, width=list_width(), shown=opts.shown))
    visibility_note(
        opts,
        missing,
        now_ms,
        "each agent's state as it last published it (turns, tokens, pools and inbox need a worker)",
    )


def visibility_note(opts: Options, missing: NoWorkerError, now_ms: int, what: str) -> None:
    """The stderr note of a read that fell back to visibility: why (no worker), when it was
    read, and ``what`` it holds."""
    err_console.print(
        "[yellow]note[/yellow]: "
        + escape(ops.no_worker_note(missing, opts))
        + f"; read from visibility as of {render.clock(now_ms)}: {what}",
        style="dim",
    )


def _print_listed_one(opts: Options, row: ListedRow, missing: NoWorkerError | None) -> None:
    """``tnx inspect`` with no worker: what visibility has of the handle, and a note."""
    now_ms = int(time.time() * 1000)
    if opts.json:
        emit({**listed_json(row), "source": "visibility", "as_of_ms": now_ms})
    else:
        show(render.listed_handle_table(row, now_ms, shown=opts.shown))
    if missing is not None:
        visibility_note(
            opts,
            missing,
            now_ms,
            "the state the agent last published (its transcript, usage, trace and inbox need a "
            "worker)",
        )


@dataclass
class _Inspected:
    """What ``tnx inspect`` read: the handle (a query, or rebuilt from history: ``as_of_ms``
    set) or, when history cannot be replayed here, its visibility ``row``; the transcript
    and model view asked for; the NoWorkerError when no worker answered."""

    handle: Handle | None = None
    row: ListedRow | None = None
    messages: list[Message] | None = None
    view: ModelView | None = None
    missing: NoWorkerError | None = None
    as_of_ms: int | None = None
    ended: str | None = None
    child_states: dict[str, str] | None = None


async def _inspect_read(
    rt: AgentRuntime, target: str, transcript: bool, model_view: bool
) -> _Inspected:
    """``tnx inspect``'s read: queries when a worker answers; else the handle replayed from
    its history (:mod:`.replayed`); else (the local code cannot replay it), without
    ``--transcript``/``--model-view``, its visibility row."""

    async def attached() -> _Inspected:
        await replayed.attach(rt)
        h = await rt.inspect(target)
        return _Inspected(
            h,
            messages=await rt.transcript(h) if transcript else None,
            view=await rt.model_view(h) if model_view else None,
        )

    found, spare = await worker_read_or_spare(rt, attached, lambda: replayed.replay(rt, [target]))
    if not isinstance(found, NoWorkerError):
        found.ended = ended_of([await rt.listed_one(target)]).get(target)
        if found.handle is not None:
            found.child_states = await _child_states(rt, target, found.handle.children)
        return found
    try:
        node = (await spare)[target]
    except CliError:
        if transcript or model_view:
            raise
        return _Inspected(row=await rt.listed_one(target), missing=found)
    h = Handle.from_view(node.view)
    return _Inspected(
        h,
        child_states=await _child_states(rt, target, h.children),
        messages=await replayed.transcript(rt, node) if transcript else None,
        view=await replayed.model_view(rt, node) if model_view else None,
        missing=found,
        as_of_ms=node.as_of_ms,
        ended=ended_of([await rt.listed_one(target)]).get(target),
    )


async def _child_states(rt: AgentRuntime, target: str, children: list[str]) -> dict[str, str]:
    """Each child's state as ``tnx ls`` shows it (``idle paused``, ``closed``), from
    visibility (no worker needed): ``tnx inspect``'s children line (walk 7: a paused child
    showed as a bare id). Empty with no children."""
    if not children:
        return {}
    rows = await rt.listed(target)
    paused = {row.id for row in rows if row.paused and row.state != "closed"}
    return {row.id: row.state + (" paused" if row.id in paused else "") for row in rows}


def inspect(opts: Options, handle_id: str, transcript: bool, model_view: bool) -> None:
    """`tnx inspect`: see its command for the options."""
    target = args.ref(opts, handle_id)
    store = args.open_store(opts.store) if transcript or model_view else None
    got = ops.run(
        opts,
        lambda rt: _inspect_read(rt, target, transcript, model_view),
        store=store,
        worker="optional",
    )
    if got.row is not None:
        _print_listed_one(opts, got.row, got.missing)
        return
    assert got.handle is not None
    h, messages, view = got.handle, got.messages, got.view
    if opts.json:
        doc = args.dump(h)
        if messages is not None:
            doc["transcript"] = args.dump(messages)
        if view is not None:
            doc["model_view"] = view.model_dump(mode="json", exclude_none=True)
        if got.ended is not None:
            doc["workflow_ended"] = got.ended
        if got.as_of_ms is not None:
            doc.update(source="history", as_of_ms=got.as_of_ms)
        emit(doc)
    else:
        _print_inspected(opts, h, messages, view, got.ended, got.child_states)
    if got.missing is not None and got.as_of_ms is not None:
        replayed.history_note(
            opts, got.missing, got.as_of_ms, "the handle's state after its last workflow task"
        )


def _print_inspected(
    opts: Options,
    h: Handle,
    messages: list[Message] | None,
    view: ModelView | None,
    ended: str | None = None,
    child_states: dict[str, str] | None = None,
) -> None:
    """``tnx inspect``'s tables: the handle, then the transcript and the model view when
    asked for."""
    show(render.handle_table(h, shown=opts.shown, ended=ended, child_states=child_states))
    if messages is not None:
        out.print()
        out.print(f"[bold]transcript[/bold] ({len(messages)} message(s))")
        show(render.transcript_table(messages))
    if view is not None:
        out.print()
        out.print(
            f"[bold]model view[/bold] ({len(view.messages)} message(s), ~{view.estimate_tokens} "
            f"tokens estimated; summarized {view.summarized}, dropped {view.dropped}, "
            f"clipped {view.clipped})"
        )
        show(render.transcript_table(view.messages))


def trace(opts: Options, handle_id: str | None, every: bool = False) -> None:
    """`tnx trace`: see its command for the options. Each handle's :data:`~.options.
    TRACE_CLOSED` newest closed children are read (all with ``every``: ``--all``), and a note
    on stderr counts the others and says how to see them (issue 38: an old agent's closed
    children are each a replay on the worker). With no worker, the lines are replayed from
    each handle's workflow history (:mod:`.replayed`), with a note on stderr.

    Only the first query (the attach) must answer within the read's grace: a worker that
    answers it serves the rest of the read, however long (``--all`` on an old agent), rather
    than the read going on from history as if no worker ran."""
    target = args.tree_ref(opts, handle_id)
    closed = None if every else TRACE_CLOSED

    async def read(rt: AgentRuntime) -> tuple[TraceRead, NoWorkerError | None, int]:
        found, spare = await worker_read_or_spare(
            rt,
            lambda: replayed.attach(rt),
            lambda: replayed.replay_trace_tree(rt, target or ROOT_ID, closed),
        )
        if not isinstance(found, NoWorkerError):
            try:
                return await rt.trace_read(target, closed=closed), None, 0
            except NoWorkerError as gone:  # the worker stopped during the read
                found = gone
                spare = replayed.replay_trace_tree(rt, target or ROOT_ID, closed)
        tree, omitted = await spare
        lines = replayed.merged_trace(tree)
        return TraceRead(lines, omitted), found, replayed.as_of_ms(tree)

    traced, missing, as_of = ops.run(opts, read, worker="optional")
    lines = traced.lines
    if opts.json:
        dumped = args.dump(lines)
        if missing is not None:
            dumped = [{**line, "source": "history", "as_of_ms": as_of} for line in dumped]
        emit(dumped)
    else:
        show(render.trace_table(lines, shown=opts.shown))
    if traced.omitted:
        _omitted_note(opts, handle_id, traced.omitted)
    if missing is not None:
        replayed.history_note(
            opts, missing, as_of, "each handle's trace up to its last workflow task"
        )


def _omitted_note(opts: Options, handle_id: str | None, omitted: list[str]) -> None:
    """``tnx trace``'s note (stderr) on the closed children it did not read: how many, the
    oldest and newest of them, and the commands that show them."""
    again = "tnx trace" + (f" {handle_id}" if handle_id else "")
    first, last = escape(opts.shown(omitted[0])), escape(opts.shown(omitted[-1]))
    which = first if len(omitted) == 1 else f"{first} … {last}"
    err_console.print(
        f"[yellow]note[/yellow]: {len(omitted)} older closed "
        + ("child" if len(omitted) == 1 else "children")
        + f" not shown ({which}; each handle shows its {TRACE_CLOSED} newest closed children):"
        f" `{escape(again)} --all` shows every one, `tnx trace CHILD_ID` one",
        style="dim",
        soft_wrap=True,
    )


def spawn(
    opts: Options, parent: str, name: str, budget: str | None, prompt: str | None, notify: bool
) -> None:
    """`tnx spawn`: see its command for the options."""
    override = args.parse_budget(budget)
    target = args.ref(opts, parent)
    spawned = ops.run(
        opts,
        lambda rt: rt.spawn(target, name, override, prompt=prompt, notify=notify),
        # only `spawn root NAME` starts a runtime: a deeper PARENT needs its runtime to
        # exist (walk 9: `spawn root/worker.1` made a runtime beside the scoped ones)
        create=target == ROOT_ID,
    )
    if isinstance(spawned, SpawnError):
        if opts.json:
            emit(args.dump(spawned))
        raise CliError(render.scoped_ids(str(spawned), opts.shown))  # ids as tnx prints them
    if opts.json:
        emit(args.dump(spawned))
    else:
        out.print(escape(opts.shown(spawned.id)), soft_wrap=True)


def post(opts: Options, handle_id: str, text: str, sender: str, channel: str) -> None:
    """`tnx post`: see its command for the options."""
    target = args.ref(opts, handle_id)
    try:
        item = InboxItem(from_=sender, channel=channel, text=text)
    except ValueError as err:
        raise CliError(f"invalid item: {args.error_line(err)}", ops.EXIT_ENV) from err
    result: PostResult = ops.run(opts, lambda rt: rt.post(target, item))
    if opts.json:
        emit(args.dump(result))
    if not result.ok:
        raise CliError(f"post to {opts.shown(target)!r} rejected: {result.error}")
    if not opts.json:
        out.print(
            f"post {escape(opts.shown(target))} → ok (inbox {result.status.inbox_count}, "
            f"state {result.status.state})",
            soft_wrap=True,
        )


def wake(opts: Options, handle_id: str, prompt: str | None, policy: str | None = None) -> None:
    """`tnx wake`: see its command for the options."""
    from toolnexus_temporal.workflows.contract.policy import policy_error

    error = None if policy is None else policy_error(policy)
    if error is not None:  # before connecting: nothing is sent
        raise CliError(f"invalid --policy: {error}", ops.EXIT_ENV)
    target = args.ref(opts, handle_id)
    h = ops.run(opts, lambda rt: rt.wake(target, prompt, policy=policy, via="tnx"))
    if opts.json:
        emit(args.dump(h))
    else:
        said("wake", h, opts)


def wait(
    opts: Options, handle_id: str, timeout_ms: int | None, follow: bool, after: str | None
) -> None:
    """`tnx wait`: see its command for the options."""
    target = args.ref(opts, handle_id)
    if after is not None:
        try:
            Cursor.parse(after)
        except InvalidCursorError as err:
            raise CliError(f"invalid --after: {err.reason}", ops.EXIT_ENV) from err
    limit = None if timeout_ms is None else timeout_ms / 1000 + ops.VERB_TIMEOUT_S
    streamed = False
    if follow or after is not None or (out.is_terminal and not opts.json):
        result, streamed = ops.run(
            opts,
            lambda rt: live.follow(
                rt,
                target,
                timeout_ms,
                console=out,
                show_text=follow,
                json_lines=opts.json,
                after=after,
                shown=opts.shown,
            ),
            timeout_s=limit,
        )
    else:
        result = ops.run(opts, lambda rt: rt.wait(target, timeout_ms=timeout_ms), timeout_s=limit)
    if opts.json:
        if not follow and after is None:
            emit(args.dump(result))
    else:
        out.print(render.result_summary(result, opts.shown))
        if result.pending is not None:
            out.print(Text(f"request: {result.pending.prompt}"))
        shown = streamed and not result.is_error
        if (
            result.text
            and not shown
            and (result.pending is None or result.text != result.pending.prompt)
        ):
            out.print(Text(result.text, style="red" if result.is_error else ""))
    if result.status not in render.OK_STATUSES:
        raise typer.Exit(ops.EXIT_NO)


def interrupt(opts: Options, handle_id: str) -> None:
    """`tnx interrupt`: see its command for the options."""
    target = args.ref(opts, handle_id)
    h = ops.run(opts, lambda rt: rt.interrupt(target))
    if opts.json:
        emit(args.dump(h))
    else:
        said("interrupt", h, opts)


def close(opts: Options, handle_id: str, force: bool, reason: str | None) -> None:
    """`tnx close`: see its command for the options."""
    target = args.ref(opts, handle_id)
    h = ops.run(opts, lambda rt: rt.close(target, force=force, reason=reason))
    if opts.json:
        emit(args.dump(h))
    else:
        said("close", h, opts)


def recover(opts: Options, handle_id: str) -> None:
    """`tnx recover`: see its command for the options."""
    target = args.ref(opts, handle_id)
    h = ops.run(opts, lambda rt: rt.recover(target), worker="optional")
    if opts.json:
        emit(args.dump(h))
    else:
        said("recover", h, opts)
        if h.pending_req is not None:
            out.print(
                Text(f"pending request {opts.shown(h.pending_req.id)}: {h.pending_req.prompt}")
            )


def fork(
    opts: Options,
    handle_id: str,
    turn: int,
    budget: str | None,
    model: str | None,
    prompt: str | None,
) -> None:
    """`tnx fork`: see its command for the options."""
    override = args.parse_budget(budget)
    target = args.ref(opts, handle_id)
    h = ops.run(opts, lambda rt: rt.fork(target, turn, budget=override, model=model, prompt=prompt))
    if opts.json:
        emit(args.dump(h))
    else:
        out.print(escape(opts.shown(h.id)), soft_wrap=True)


def schedule(
    opts: Options,
    handle_id: str,
    every: str | None,
    cron: str | None,
    prompt: str | None,
    inbox_only: bool,
) -> None:
    """`tnx schedule`: see its command for the options."""
    if handle_id == "ls":
        if every or cron or prompt or inbox_only:
            raise CliError("tnx schedule ls takes no schedule options", ops.EXIT_ENV)
        handles = [h for h in ops.run(opts, lambda rt: rt.list()) if h.tick and h.state != "closed"]
        if opts.json:
            emit(args.dump(handles))
            return
        if not handles:  # walk 6: a header alone read like a failed read
            out.print(
                "no agent has a tick schedule (tnx schedule ID --every 1h to give one)",
                soft_wrap=True,
            )
            return
        rows: list[list[render.Cell]] = [
            [escape(opts.shown(h.id)), h.state, render.tick_line(h)] for h in handles
        ]
        show(render.listing(["ID", "STATE", "SCHEDULE"], rows, list_width()))
        return
    seconds = schedule_input(every, cron, prompt)
    target = args.ref(opts, handle_id)

    async def verb(rt: AgentRuntime) -> Handle:
        try:
            return await rt.schedule(
                target, every=seconds, cron=cron, prompt=prompt, wake=not inbox_only
            )
        except ValueError as err:
            raise CliError(f"invalid schedule: {args.error_line(err)}", ops.EXIT_ENV) from err

    h = ops.run(opts, verb)
    if opts.json:
        emit(args.dump(h))
    else:
        line = render.tick_line(h)
        if every and h.tick is not None and h.tick.every_ms is not None:  # as the user wrote it
            line = line.replace(
                f"every {format_duration(h.tick.every_ms)}", f"every {every.strip()}", 1
            )
        out.print(f"schedule {escape(opts.shown(h.id))} → {escape(line)}", soft_wrap=True)


def unschedule(opts: Options, handle_id: str) -> None:
    """`tnx unschedule`: see its command for the options."""
    target = args.ref(opts, handle_id)
    h = ops.run(opts, lambda rt: rt.unschedule(target))
    if opts.json:
        emit(args.dump(h))
    else:
        out.print(f"unschedule {escape(opts.shown(h.id))} → no ticks", soft_wrap=True)


def pause(opts: Options, handle_id: str, subtree: bool, now: bool) -> None:
    """`tnx pause`: see its command for the options."""
    target = args.ref(opts, handle_id)
    h = ops.run(opts, lambda rt: rt.pause(target, now=now, subtree=subtree))
    if opts.json:
        emit(args.dump(h))
    else:
        out.print(f"pause {escape(opts.shown(h.id))} → {h.state}, paused", soft_wrap=True)


def unpause(opts: Options, handle_id: str, subtree: bool) -> None:
    """`tnx unpause`: see its command for the options."""
    target = args.ref(opts, handle_id)
    h = ops.run(opts, lambda rt: rt.unpause(target, subtree=subtree))
    if opts.json:
        emit(args.dump(h))
    else:
        out.print(f"unpause {escape(opts.shown(h.id))} → {h.state}", soft_wrap=True)
