"""The ``tnx`` command line.

Commands::

    tnx demo [--prompt TEXT] [--address HOST:PORT] [--llm-base-url URL] [--model NAME]
             [--data-dir PATH] [--keep-server]
    tnx server start|stop|status [--data-dir PATH]
    tnx codec-server [--port N] [--keys ID:B64,...] [--cors-origin URL]   (README "Production")

    tnx ls [ID] [--watch [--interval S]] the tree under ID (default: the root)
    tnx inspect ID [--transcript] [--model-view]  every field of a handle (and its transcript)
    tnx trace [ID]                       the subtree's trace lines, merged, with dates
    tnx spawn PARENT NAME [--budget JSON]
    tnx post ID TEXT [--from X] [--channel Y]
    tnx wake ID [PROMPT]
    tnx wait ID [--timeout-ms N] [--follow] [--after SEQ]
    tnx interrupt ID
    tnx close ID [--force] [--reason TEXT]
    tnx recover ID                       start an agent the server terminated again
    tnx schedule ID --every 1h|--cron EXPR [--prompt TEXT] [--inbox-only]   a tick schedule
    tnx schedule ls                      the handles with a tick schedule, their next tick
    tnx unschedule ID
    tnx pause ID [--subtree] [--now]     no turn starts; posts and ticks still land
    tnx unpause ID [--subtree]
    tnx replay-check [--query Q] [--limit N] [--sandbox]   replay running agents on this code
    tnx pending                          the approval queue (no worker needed)
    tnx answer ID --approve|--decline [--data JSON] [--request REQUEST]

A verb that needs a worker checks first that one polls the root's task queue and fails at
once with a hint when none does (:mod:`~toolnexus_temporal.cli.workercheck`).

Every host verb also takes the common options of :data:`COMMON_OPTIONS`: the connection flags
(``--address``, ``--namespace``, ``--profile``, ``--api-key``, ``--tls-*``, ...; over the
``TEMPORAL_*`` variables and the config file's profile:
:mod:`~toolnexus_temporal.cli.connection_opts`) and ``--task-queue``, ``--scope``, ``--store``,
``--json``; ``--json`` prints one
JSON document on stdout (the pydantic dump of the Handle, TaskResult, PostResult, list of
handles or trace lines). Errors are one line on stderr; exit codes are described in
:mod:`toolnexus_temporal.cli.ops`.

This module only parses options and prints (the common options of the host verbs in
:mod:`~toolnexus_temporal.cli.hostcmd`, the ``demo`` command in
:mod:`~toolnexus_temporal.cli.demo_cmd`); the logic lives in
:mod:`~toolnexus_temporal.cli.demo`, :mod:`~toolnexus_temporal.cli.server` and
:mod:`~toolnexus_temporal.cli.ops` (over :class:`~toolnexus_temporal.client.AgentRuntime`), the
look in :mod:`~toolnexus_temporal.cli.render`.
"""

from __future__ import annotations

from typing import Annotated

import typer
from rich.markup import escape
from rich.text import Text

from toolnexus_temporal.cli import args, live, ops, queue_cmd, render, replaycheck, tick_cmd
from toolnexus_temporal.cli.appstyle import APP_SETTINGS, version_callback
from toolnexus_temporal.cli.codec_server import codec_server_command
from toolnexus_temporal.cli.demo_cmd import demo
from toolnexus_temporal.cli.hostcmd import (
    IdArg,
    TreeIdArg,
    emit,
    err_console,
    host_commands,
    list_width,
    out,
    said,
    show,
)
from toolnexus_temporal.cli.ops import CliError, Options
from toolnexus_temporal.cli.server import server_app
from toolnexus_temporal.cli.watch import watch_tree
from toolnexus_temporal.client.errors import InvalidCursorError, SpawnError
from toolnexus_temporal.client.handle import Handle
from toolnexus_temporal.client.runtime import AgentRuntime
from toolnexus_temporal.client.stream import Cursor
from toolnexus_temporal.workflows.contract.context import ModelView
from toolnexus_temporal.workflows.contract.messages import PostResult
from toolnexus_temporal.workflows.contract.models import InboxItem, Message

app = typer.Typer(
    name="tnx",
    help="toolnexus-temporal: LLM agents whose every Handle is a Temporal workflow.",
    no_args_is_help=True,
    pretty_exceptions_show_locals=False,
    **APP_SETTINGS,
)
"""The ``tnx`` application."""

TnxVersion = Annotated[
    bool,
    typer.Option(
        "--version",
        is_eager=True,
        callback=version_callback("tnx"),
        help="Print the version and exit.",
    ),
]


@app.callback()
def _tnx(version: TnxVersion = False) -> None:
    """toolnexus-temporal: LLM agents whose every Handle is a Temporal workflow."""


app.add_typer(server_app, name="server")

app.command()(demo)
app.command("codec-server")(codec_server_command)

host_command = host_commands(app)
"""Registers a host verb on :data:`app` (:func:`~toolnexus_temporal.cli.hostcmd.host_commands`)."""


# ---------------------------------------------------------------------------- host verbs


@host_command("ls")
def ls_command(
    opts: Options,
    handle_id: TreeIdArg = None,
    watch: Annotated[
        bool, typer.Option("--watch", help="Refresh every --interval seconds until Ctrl-C.")
    ] = False,
    interval: Annotated[
        float, typer.Option("--interval", min=0.1, help="Seconds between refreshes (--watch).")
    ] = 2.0,
) -> None:
    """List the tree under ID (default: the root): state (`paused` too), how long a pending
    request has waited, turns, tokens, pools, inbox, the next tick."""
    target = args.tree_ref(opts, handle_id)
    if watch:
        watch_tree(opts, target, interval)
        return
    handles = ops.run(opts, lambda rt: rt.list(target))
    if opts.json:
        emit(args.dump(handles))
    else:
        show(render.tree_table(handles, width=list_width()))


@host_command("inspect")
def inspect_command(
    opts: Options,
    handle_id: IdArg,
    transcript: Annotated[
        bool,
        typer.Option("--transcript", help="Also show the committed transcript (needs --store)."),
    ] = False,
    model_view: Annotated[
        bool,
        typer.Option(
            "--model-view",
            help="Also show what the model is sent of it under the context policy (needs --store).",
        ),
    ] = False,
) -> None:
    """Show every field of a handle (and its transcript with --transcript, the model's view of
    it with --model-view)."""
    target = args.ref(opts, handle_id)
    store = args.open_store(opts.store) if transcript or model_view else None

    async def verb(rt: AgentRuntime) -> tuple[Handle, list[Message] | None, ModelView | None]:
        h = await rt.inspect(target)
        return (
            h,
            await rt.transcript(h) if transcript else None,
            await rt.model_view(h) if model_view else None,
        )

    h, messages, view = ops.run(opts, verb, store=store)
    if opts.json:
        doc = args.dump(h)
        if messages is not None:
            doc["transcript"] = args.dump(messages)
        if view is not None:
            doc["model_view"] = view.model_dump(mode="json", exclude_none=True)
        emit(doc)
        return
    show(render.handle_table(h))
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


@host_command("trace")
def trace_command(opts: Options, handle_id: TreeIdArg = None) -> None:
    """Show the merged trace lines of ID's subtree (default: the whole tree)."""
    target = args.tree_ref(opts, handle_id)
    lines = ops.run(opts, lambda rt: rt.trace(target))
    if opts.json:
        emit(args.dump(lines))
    else:
        show(render.trace_table(lines))


@host_command("spawn")
def spawn_command(
    opts: Options,
    parent: Annotated[str, typer.Argument(metavar="PARENT", help="Parent handle id (root).")],
    name: Annotated[str, typer.Argument(metavar="NAME", help="Agent name in the registry.")],
    budget: Annotated[
        str | None,
        typer.Option(
            "--budget",
            metavar="JSON",
            help='Budget override, e.g. \'{"max_turns": 2, "max_tokens": 5000}\'.',
        ),
    ] = None,
    prompt: Annotated[
        str | None,
        typer.Option(
            "--prompt",
            metavar="TEXT",
            help="Also wake the new agent with TEXT, in the same message (see `tnx wait`).",
        ),
    ] = None,
    notify: Annotated[
        bool,
        typer.Option(
            "--notify",
            help=(
                "A background child that reports back: each settled turn reaches PARENT "
                "(a spawned agent, not the root) once, as a `child` inbox item that wakes it."
            ),
        ),
    ] = False,
) -> None:
    """Spawn agent NAME under PARENT (the root is created if missing); print the new id."""
    override = args.parse_budget(budget)
    target = args.ref(opts, parent)
    spawned = ops.run(
        opts, lambda rt: rt.spawn(target, name, override, prompt=prompt, notify=notify), create=True
    )
    if isinstance(spawned, SpawnError):
        if opts.json:
            emit(args.dump(spawned))
        raise CliError(str(spawned))
    if opts.json:
        emit(args.dump(spawned))
    else:
        out.print(escape(spawned.id), soft_wrap=True)


@host_command("post")
def post_command(
    opts: Options,
    handle_id: IdArg,
    text: Annotated[str, typer.Argument(metavar="TEXT", help="The message.")],
    sender: Annotated[str, typer.Option("--from", help="Sender of the item.")] = "external",
    channel: Annotated[str, typer.Option("--channel", help="Channel of the item.")] = "external",
) -> None:
    """Append an item to a handle's inbox; exit 1 when rejected (inbox full or closed)."""
    target = args.ref(opts, handle_id)
    try:
        item = InboxItem(from_=sender, channel=channel, text=text)
    except ValueError as err:
        raise CliError(f"invalid item: {render.one_line(err)}", ops.EXIT_ENV) from err
    result: PostResult = ops.run(opts, lambda rt: rt.post(target, item))
    if opts.json:
        emit(args.dump(result))
    if not result.ok:
        raise CliError(f"post to {target!r} rejected: {result.error}")
    if not opts.json:
        out.print(
            f"post {escape(target)} → ok (inbox {result.status.inbox_count}, "
            f"state {result.status.state})",
            soft_wrap=True,
        )


@host_command("wake")
def wake_command(
    opts: Options,
    handle_id: IdArg,
    prompt: Annotated[
        str | None, typer.Argument(metavar="PROMPT", help="What to ask (optional).")
    ] = None,
) -> None:
    """Wake a handle with its inbox and PROMPT; returns once it is running."""
    target = args.ref(opts, handle_id)
    h = ops.run(opts, lambda rt: rt.wake(target, prompt))
    if opts.json:
        emit(args.dump(h))
    else:
        said("wake", h)


@host_command("wait")
def wait_command(
    opts: Options,
    handle_id: IdArg,
    timeout_ms: Annotated[
        int | None,
        typer.Option("--timeout-ms", min=0, help="Give up after N ms (status timeout)."),
    ] = None,
    follow: Annotated[
        bool,
        typer.Option(
            "--follow",
            "-f",
            help="Print the model's text and tool calls as they stream (--json: JSON lines).",
        ),
    ] = False,
    after: Annotated[
        str | None,
        typer.Option(
            "--after",
            metavar="SEQ",
            help="Continue a follow after the event SEQ (the seq of --json events, or the"
            " one an interrupted follow printed): every later event once.",
        ),
    ] = None,
) -> None:
    """Wait for a handle's result: the next one while it runs, else at once its last one; exit 0
    when done or pending, 1 otherwise. On a terminal a live status line shows the running turn."""
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
            ),
            timeout_s=limit,
        )
    else:
        result = ops.run(opts, lambda rt: rt.wait(target, timeout_ms=timeout_ms), timeout_s=limit)
    if opts.json:
        if not follow and after is None:
            emit(args.dump(result))
    else:
        out.print(render.result_summary(result))
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


@host_command("interrupt")
def interrupt_command(opts: Options, handle_id: IdArg) -> None:
    """Abort a handle's running turn; returns once it is idle (no-op when not running)."""
    target = args.ref(opts, handle_id)
    h = ops.run(opts, lambda rt: rt.interrupt(target))
    if opts.json:
        emit(args.dump(h))
    else:
        said("interrupt", h)


@host_command("close")
def close_command(
    opts: Options,
    handle_id: IdArg,
    force: Annotated[
        bool, typer.Option("--force", help="Abort a running turn at once (no grace).")
    ] = False,
    reason: Annotated[
        str | None, typer.Option("--reason", help="Why (to the on_close hook and the trace).")
    ] = None,
) -> None:
    """Close a handle and its subtree; returns once all are closed (all stays readable)."""
    target = args.ref(opts, handle_id)
    h = ops.run(opts, lambda rt: rt.close(target, force=force, reason=reason))
    if opts.json:
        emit(args.dump(h))
    else:
        said("close", h)


@host_command("recover")
def recover_command(opts: Options, handle_id: IdArg) -> None:
    """Start an agent the server terminated (history limits, `temporal workflow terminate`)
    again from its last state: idle, or parked on the same Request, which `tnx answer` then
    resumes. Refused (exit 1) for an agent that runs or is closed."""
    target = args.ref(opts, handle_id)
    h = ops.run(opts, lambda rt: rt.recover(target), worker="optional")
    if opts.json:
        emit(args.dump(h))
    else:
        said("recover", h)
        if h.pending_req is not None:
            out.print(Text(f"pending request {h.pending_req.id}: {h.pending_req.prompt}"))


host_command("schedule")(tick_cmd.schedule_command)
host_command("unschedule")(tick_cmd.unschedule_command)
host_command("pause")(tick_cmd.pause_command)
host_command("unpause")(tick_cmd.unpause_command)
host_command("pending")(queue_cmd.pending_command)
host_command("answer")(queue_cmd.answer_command)
host_command("audit")(queue_cmd.audit_command)
host_command("replay-check")(replaycheck.replay_check_command)


def main() -> None:
    """Console entry point ``tnx``.

    After a host verb, the process ends without interpreter finalization (see
    :func:`toolnexus_temporal.cli.ops.hard_exit`): the Temporal SDK's native threads can abort it.
    """
    try:
        app()
    except SystemExit as done:
        if not ops.client_used():
            raise
        code = done.code
        if code is not None and not isinstance(code, int):
            err_console.print(escape(str(code)))
            code = 1
        ops.hard_exit(code or 0)


if __name__ == "__main__":
    main()
