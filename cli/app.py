"""The ``tnx`` command line.

Commands::

    tnx demo [--prompt TEXT] [--address HOST:PORT] [--llm-base-url URL] [--model NAME]
             [--data-dir PATH] [--keep-server]
    tnx server start|stop|status [--data-dir PATH]

    tnx ls [ID]                          the tree under ID (default: the root)
    tnx inspect ID [--transcript]        every field of a handle (and its transcript)
    tnx trace [ID]                       the subtree's trace lines, merged, with times
    tnx spawn PARENT NAME [--budget JSON]
    tnx post ID TEXT [--from X] [--channel Y]
    tnx wake ID [PROMPT]
    tnx wait ID [--timeout-ms N]
    tnx interrupt ID
    tnx close ID [--force] [--reason TEXT]

Every host verb also takes the common options of :data:`COMMON_OPTIONS` (``--address``,
``--namespace``, ``--task-queue``, ``--scope``, ``--store``, ``--json``); ``--json`` prints one
JSON document on stdout (the pydantic dump of the Handle, TaskResult, PostResult, list of
handles or trace lines). Errors are one line on stderr; exit codes are described in
:mod:`toolnexus_temporal.cli.ops`.

This module only parses options and prints; the logic lives in
:mod:`~toolnexus_temporal.cli.demo`, :mod:`~toolnexus_temporal.cli.server` and
:mod:`~toolnexus_temporal.cli.ops` (over :class:`~toolnexus_temporal.client.AgentRuntime`), the
look in :mod:`~toolnexus_temporal.cli.render`.
"""

from __future__ import annotations

import asyncio
import functools
import inspect as pyinspect
import json
import sys
from collections.abc import Callable
from pathlib import Path
from typing import Annotated, Any

import typer
from rich.console import Console
from rich.markup import escape
from rich.text import Text

from toolnexus_temporal.cli import ops, render
from toolnexus_temporal.cli.demo import DEFAULT_DATA_DIR, DEFAULT_PROMPT, run_demo
from toolnexus_temporal.cli.ops import CliError, Options
from toolnexus_temporal.cli.server import server_app
from toolnexus_temporal.client.errors import SpawnError
from toolnexus_temporal.client.handle import Handle
from toolnexus_temporal.client.runtime import AgentRuntime
from toolnexus_temporal.workflows.messages import AnswerResult, PostResult
from toolnexus_temporal.workflows.models import Answer, InboxItem, Message, TaskResult

console = Console(highlight=False, soft_wrap=True)
"""Where ``tnx demo`` prints."""

app = typer.Typer(
    name="tnx",
    help="toolnexus-temporal: LLM agents whose every Handle is a Temporal workflow.",
    no_args_is_help=True,
    add_completion=False,
    pretty_exceptions_show_locals=False,
)
"""The ``tnx`` application."""

app.add_typer(server_app, name="server")


@app.command()
def demo(
    prompt: Annotated[str, typer.Option(help="What to ask the agent.")] = DEFAULT_PROMPT,
    address: Annotated[
        str | None,
        typer.Option(
            help="Temporal frontend host:port to use (else TEMPORAL_ADDRESS); "
            "default: start the embedded dev server."
        ),
    ] = None,
    llm_base_url: Annotated[
        str | None,
        typer.Option(
            help="OpenAI-compatible base URL (else OPENAI_BASE_URL); "
            "default: a scripted server that echoes the prompt."
        ),
    ] = None,
    model: Annotated[
        str | None,
        typer.Option(help="Model for a real endpoint (else TNX_MODEL, OPENAI_MODEL)."),
    ] = None,
    data_dir: Annotated[
        Path,
        typer.Option(help="State directory: temporal/ (dev server) and conversations.sqlite."),
    ] = DEFAULT_DATA_DIR,
    keep_server: Annotated[
        bool,
        typer.Option(
            "--keep-server",
            help="Leave the dev server this demo starts running (stop: tnx server stop).",
        ),
    ] = False,
    port: Annotated[int, typer.Option(help="Frontend gRPC port of the dev server.")] = 7233,
    ui_port: Annotated[int, typer.Option(help="Web UI port of the dev server.")] = 8233,
    local_model: Annotated[
        bool,
        typer.Option(
            "--local-model",
            help="Use a real model on loopback: llama-server with SmolLM2-135M "
            "(build once: bash scripts/build-llama-server.sh).",
        ),
    ] = False,
) -> None:
    """Spawn one agent, wake it with a prompt and show its result, trace and web UI link."""
    try:
        code = asyncio.run(
            run_demo(
                prompt=prompt,
                address=address,
                llm_base_url=llm_base_url,
                model=model,
                data_dir=data_dir,
                console=console,
                keep_server=keep_server,
                port=port,
                ui_port=ui_port,
                local_model=local_model,
            )
        )
    except KeyboardInterrupt:
        console.print("[yellow]interrupted[/yellow]")
        code = 130
    raise typer.Exit(code)


# ---------------------------------------------------------------------------- host verbs

out = Console(highlight=False)
"""Where the host verbs print tables (fitted to the terminal width)."""

err_console = Console(stderr=True, highlight=False, soft_wrap=True)
"""Where every command prints its one-line errors."""

PANEL = "Connection and output"
"""Help panel of the common options."""


def _common_option(
    name: str, kind: Any, default: Any, flag: str, help_text: str, envvar: str | None = None
) -> pyinspect.Parameter:
    """One of :data:`COMMON_OPTIONS`: keyword-only parameter ``name`` of type ``kind``, the
    option ``flag`` (read from ``envvar`` when given) in the :data:`PANEL` help panel."""
    option = typer.Option(flag, envvar=envvar, help=help_text, rich_help_panel=PANEL)
    return pyinspect.Parameter(
        name, pyinspect.Parameter.KEYWORD_ONLY, default=default, annotation=Annotated[kind, option]
    )


COMMON_OPTIONS: list[pyinspect.Parameter] = [
    _common_option(
        "address",
        str,
        ops.DEFAULT_ADDRESS,
        "--address",
        "Temporal frontend host:port.",
        envvar="TEMPORAL_ADDRESS",
    ),
    _common_option(
        "namespace",
        str,
        ops.DEFAULT_NAMESPACE,
        "--namespace",
        "Temporal namespace.",
        envvar="TEMPORAL_NAMESPACE",
    ),
    _common_option(
        "task_queue",
        str,
        ops.DEFAULT_TASK_QUEUE,
        "--task-queue",
        "Task queue of the runtime (used when spawn creates the root).",
        envvar="TNX_TASK_QUEUE",
    ),
    _common_option(
        "scope",
        str | None,
        None,
        "--scope",
        "Workflow id prefix of the runtime ({scope}/root/...); default: none.",
        envvar="TNX_SCOPE",
    ),
    _common_option(
        "store",
        Path,
        ops.DEFAULT_STORE,
        "--store",
        "The workers' SQLite conversation store (read by inspect --transcript).",
        envvar="TNX_STORE",
    ),
    _common_option(
        "json_output",
        bool,
        False,
        "--json",
        "Print one JSON document on stdout instead of tables.",
    ),
]
"""The options every host verb takes, in one place: :func:`host_command` adds them to each
command and hands them over as one :class:`~toolnexus_temporal.cli.ops.Options`."""

HostVerb = Callable[..., None]


def host_command(name: str) -> Callable[[HostVerb], HostVerb]:
    """Register ``func(opts: Options, ...)`` as the command ``name``: the command gets the
    :data:`COMMON_OPTIONS`, and every :class:`~toolnexus_temporal.cli.ops.CliError` it raises
    becomes one line on stderr and its exit code (never a traceback)."""

    def register(func: HostVerb) -> HostVerb:
        own = [
            p
            for p in pyinspect.signature(func, eval_str=True).parameters.values()
            if p.name != "opts"
        ]

        @functools.wraps(func)
        def command(**kwargs: Any) -> None:
            opts = Options(
                address=kwargs.pop("address"),
                namespace=kwargs.pop("namespace"),
                task_queue=kwargs.pop("task_queue"),
                scope=ops.env_scope(kwargs.pop("scope")),
                store=ops.store_path_from_env(kwargs.pop("store")),
                json=kwargs.pop("json_output"),
            )
            try:
                func(opts, **kwargs)
            except CliError as err:
                raise _fail_line(err.message, err.code) from None
            except KeyboardInterrupt:
                raise _fail_line("interrupted", 130) from None
            except (typer.Exit, typer.Abort):
                raise
            except Exception as err:
                if ops.debug():
                    raise
                raise _fail_line(
                    f"unexpected {type(err).__name__}: {render.one_line(err)} "
                    "(set TNX_DEBUG=1 for the traceback)",
                    ops.EXIT_ENV,
                ) from None

        params = [*own, *COMMON_OPTIONS]
        setattr(command, "__signature__", pyinspect.Signature(params))  # noqa: B010
        command.__annotations__ = {p.name: p.annotation for p in params}
        app.command(name=name)(command)
        return command

    return register


def _fail_line(message: str, code: int) -> typer.Exit:
    err_console.print(f"[bold red]error[/bold red]: {escape(message)}")
    return typer.Exit(code)


def _emit(doc: Any) -> None:
    """Print one JSON document on stdout."""
    sys.stdout.write(json.dumps(doc, indent=2, ensure_ascii=False) + "\n")
    sys.stdout.flush()


def _said(verb: str, h: Handle) -> None:
    out.print(f"{verb} {escape(h.id)} → {h.state}", soft_wrap=True)


IdArg = Annotated[str, typer.Argument(metavar="ID", help="Handle id, e.g. root/worker.1.")]
TreeIdArg = Annotated[
    str | None, typer.Argument(metavar="ID", help="Handle id (default: the root).")
]


@host_command("ls")
def ls_command(opts: Options, handle_id: TreeIdArg = None) -> None:
    """List the tree under ID (default: the root): state, turns, tokens, pools, inbox."""
    target = ops.tree_ref(opts, handle_id)
    handles = ops.run(opts, lambda rt: rt.list(target))
    if opts.json:
        _emit(ops.dump(handles))
    else:
        out.print(render.tree_table(handles))


@host_command("inspect")
def inspect_command(
    opts: Options,
    handle_id: IdArg,
    transcript: Annotated[
        bool,
        typer.Option("--transcript", help="Also show the committed transcript (needs --store)."),
    ] = False,
) -> None:
    """Show every field of a handle (and its transcript with --transcript)."""
    target = ops.ref(opts, handle_id)
    store = ops.open_store(opts.store) if transcript else None

    async def verb(rt: AgentRuntime) -> tuple[Handle, list[Message] | None]:
        h = await rt.inspect(target)
        return h, (await rt.transcript(h) if transcript else None)

    h, messages = ops.run(opts, verb, store=store)
    if opts.json:
        doc = ops.dump(h)
        if messages is not None:
            doc["transcript"] = ops.dump(messages)
        _emit(doc)
        return
    out.print(render.handle_table(h))
    if messages is not None:
        out.print()
        out.print(f"[bold]transcript[/bold] ({len(messages)} message(s))")
        out.print(render.transcript_table(messages))


@host_command("trace")
def trace_command(opts: Options, handle_id: TreeIdArg = None) -> None:
    """Show the merged trace lines of ID's subtree (default: the whole tree)."""
    target = ops.tree_ref(opts, handle_id)
    lines = ops.run(opts, lambda rt: rt.trace(target))
    if opts.json:
        _emit(ops.dump(lines))
    else:
        out.print(render.trace_table(lines))


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
) -> None:
    """Spawn agent NAME under PARENT (the root is created if missing); print the new id."""
    override = ops.parse_budget(budget)
    target = ops.ref(opts, parent)
    spawned = ops.run(opts, lambda rt: rt.spawn(target, name, override, prompt=prompt), create=True)
    if isinstance(spawned, SpawnError):
        if opts.json:
            _emit(ops.dump(spawned))
        raise CliError(str(spawned))
    if opts.json:
        _emit(ops.dump(spawned))
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
    target = ops.ref(opts, handle_id)
    try:
        item = InboxItem(from_=sender, channel=channel, text=text)
    except ValueError as err:
        raise CliError(f"invalid item: {render.one_line(err)}", ops.EXIT_ENV) from err
    result: PostResult = ops.run(opts, lambda rt: rt.post(target, item))
    if opts.json:
        _emit(ops.dump(result))
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
    target = ops.ref(opts, handle_id)
    h = ops.run(opts, lambda rt: rt.wake(target, prompt))
    if opts.json:
        _emit(ops.dump(h))
    else:
        _said("wake", h)


@host_command("wait")
def wait_command(
    opts: Options,
    handle_id: IdArg,
    timeout_ms: Annotated[
        int | None,
        typer.Option("--timeout-ms", min=0, help="Give up after N ms (status timeout)."),
    ] = None,
) -> None:
    """Wait for a handle's result: the next one while it runs, else at once its last one; exit 0
    when done or pending, 1 otherwise."""
    target = ops.ref(opts, handle_id)
    limit = None if timeout_ms is None else timeout_ms / 1000 + ops.VERB_TIMEOUT_S
    result: TaskResult = ops.run(
        opts, lambda rt: rt.wait(target, timeout_ms=timeout_ms), timeout_s=limit
    )
    if opts.json:
        _emit(ops.dump(result))
    else:
        out.print(render.result_summary(result))
        if result.pending is not None:
            out.print(Text(f"request: {result.pending.prompt}"))
        if result.text and (result.pending is None or result.text != result.pending.prompt):
            out.print(Text(result.text, style="red" if result.is_error else ""))
    if result.status not in render.OK_STATUSES:
        raise typer.Exit(ops.EXIT_NO)


@host_command("interrupt")
def interrupt_command(opts: Options, handle_id: IdArg) -> None:
    """Abort a handle's running turn; returns once it is idle (no-op when not running)."""
    target = ops.ref(opts, handle_id)
    h = ops.run(opts, lambda rt: rt.interrupt(target))
    if opts.json:
        _emit(ops.dump(h))
    else:
        _said("interrupt", h)


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
    target = ops.ref(opts, handle_id)
    h = ops.run(opts, lambda rt: rt.close(target, force=force, reason=reason))
    if opts.json:
        _emit(ops.dump(h))
    else:
        _said("close", h)


@host_command("pending")
def pending_command(opts: Options) -> None:
    """The approval queue: every suspended agent with its pending request (found through the
    AgentState search attribute; the web UI's search box takes the same query)."""
    handles = ops.run(opts, lambda rt: rt.pending())
    if opts.json:
        _emit(
            [
                {"id": h.id, "request": ops.dump(h.pending_req) if h.pending_req else None}
                for h in handles
            ]
        )
        return
    if not handles:
        out.print("no suspended agents", soft_wrap=True)
        return
    out.print(render.pending_table(handles))
    out.print(
        "answer with: tnx answer ID --approve | --decline [--data JSON]   "
        '(web UI / temporal CLI: signal \'answer\' with {"id": REQUEST, "ok": true})',
        soft_wrap=True,
        style="dim",
    )


@host_command("answer")
def answer_command(
    opts: Options,
    handle_id: IdArg,
    approve: Annotated[bool, typer.Option("--approve", help="Answer ok.")] = False,
    decline: Annotated[bool, typer.Option("--decline", help="Answer not ok (declined).")] = False,
    data: Annotated[
        str | None, typer.Option("--data", help="JSON object for the tool, e.g. '{\"otp\": 1}'")
    ] = None,
) -> None:
    """Answer the pending request of ID (or of the deepest agent below it waiting on the same
    request); the parked turn continues where it stopped."""
    if approve == decline:
        raise _fail_line("give exactly one of --approve or --decline", ops.EXIT_ENV)
    payload = ops.parse_json_object(data, "--data")
    target = ops.ref(opts, handle_id)

    async def deliver(rt: AgentRuntime) -> AnswerResult:
        h = await rt.inspect(target)
        if h.pending_req is None:
            raise ops.CliError(f"{h.id} has no pending request (state {h.state})")
        answer = Answer(
            id=h.pending_req.id,
            ok=approve,
            data=payload,
            reason=None if approve else "declined",
        )
        return await rt.answer(target, answer)

    result = ops.run(opts, deliver)
    if opts.json:
        _emit(ops.dump(result))
    else:
        out.print(
            f"answered → delivered to {escape(result.answered or '?')} "
            f"({'approved' if approve else 'declined'})",
            soft_wrap=True,
        )


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
