"""The ``tnx`` command line.

Commands::

    tnx demo [--prompt TEXT] [--address HOST:PORT] [--llm-base-url URL] [--model NAME]
             [--data-dir PATH] [--keep-server]
    tnx server start|stop|status [--data-dir PATH]
    tnx codec-server [--port N] [--keys ID:B64,...] [--cors-origin URL]   (README "Production")

    tnx ls [ID] [--watch [--interval S]] the tree under ID (default: the root)
    tnx inspect ID [--transcript] [--model-view]  every field of a handle (and its transcript)
    tnx trace [ID] [--all]               the subtree's trace lines, merged, with dates (each
                                         handle's 20 newest closed children; --all: every one)
    tnx spawn PARENT NAME [--budget JSON]
    tnx post ID TEXT [--from X] [--channel Y]
    tnx wake ID [PROMPT]
    tnx wait ID [--timeout-ms N] [--follow] [--after SEQ]
    tnx interrupt ID
    tnx close ID [--force] [--reason TEXT]
    tnx recover ID                       start an agent the server terminated again
    tnx fork ID --turn N [--budget JSON] [--model NAME] [--prompt TEXT]   a new agent from
                                         ID's first N turns, under the same parent
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

This module only declares the commands and their options (the common options of the host
verbs in :mod:`~toolnexus_temporal.cli.hostcmd`, the ``demo`` command in
:mod:`~toolnexus_temporal.cli.demo_cmd`, ``schedule``/``pause`` in
:mod:`~toolnexus_temporal.cli.tick_cmd`, ``pending``/``answer``/``audit`` in
:mod:`~toolnexus_temporal.cli.queue_cmd`, ``server`` in :mod:`~toolnexus_temporal.cli.server`).
Each command imports its implementation when it runs: the host verbs'
:mod:`~toolnexus_temporal.cli.verbs` and :mod:`~toolnexus_temporal.cli.queue`,
:mod:`~toolnexus_temporal.cli.demo`, :mod:`~toolnexus_temporal.cli.replaycheck`,
:mod:`~toolnexus_temporal.cli.codec_server`, all over :mod:`~toolnexus_temporal.cli.ops` (over
:class:`~toolnexus_temporal.client.AgentRuntime`), the look in
:mod:`~toolnexus_temporal.cli.render`. So ``tnx --version`` and ``tnx --help`` load typer,
rich's console and these declarations only: no host library, worker, LLM or telemetry module
(``tests/test_layout.py``; ``bench/cli_start.py`` times it).
"""

from __future__ import annotations

import sys
from pathlib import Path
from typing import Annotated

import typer
from rich.markup import escape

from toolnexus_temporal.cli import queue_cmd, tick_cmd
from toolnexus_temporal.cli.appstyle import APP_SETTINGS, version_callback
from toolnexus_temporal.cli.demo_cmd import demo
from toolnexus_temporal.cli.hostcmd import IdArg, TreeIdArg, err_console, host_commands
from toolnexus_temporal.cli.options import (
    DEFAULT_CODEC_HOST,
    DEFAULT_CODEC_ORIGINS,
    DEFAULT_CODEC_PORT,
    TRACE_CLOSED,
    Options,
)
from toolnexus_temporal.cli.server import server_app

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


@app.command("codec-server")
def codec_server_command(
    host: Annotated[str, typer.Option(help="Address to listen on.")] = DEFAULT_CODEC_HOST,
    port: Annotated[
        int, typer.Option(min=0, max=65535, help="TCP port to listen on (0: any free port).")
    ] = DEFAULT_CODEC_PORT,
    keys: Annotated[
        str | None,
        typer.Option(
            "--keys",
            envvar="TNX_CODEC_KEYS",
            show_envvar=True,
            help="Key entries id:base64key,... (the first encodes, all decode).",
        ),
    ] = None,
    key_file: Annotated[
        Path | None,
        typer.Option(
            "--key-file", envvar="TNX_CODEC_KEY_FILE", show_envvar=True, help="File of key entries."
        ),
    ] = None,
    cors_origin: Annotated[
        list[str] | None,
        typer.Option(
            "--cors-origin",
            envvar="TNX_CODEC_CORS_ORIGINS",
            help="Web UI origin allowed by CORS (repeat for several; '*' for any; "
            f"default: {', '.join(DEFAULT_CODEC_ORIGINS)}).",
        ),
    ] = None,
    auth_token: Annotated[
        str | None,
        typer.Option(
            "--auth-token",
            envvar="TNX_CODEC_AUTH_TOKEN",
            help="Require 'Authorization: Bearer TOKEN' on /encode and /decode.",
        ),
    ] = None,
    namespace: Annotated[
        list[str] | None,
        typer.Option(
            "--namespace", help="Serve only these X-Namespace values (repeat; default: any)."
        ),
    ] = None,
) -> None:
    """Serve Temporal's codec-server protocol (/encode, /decode) with the payload codec's keys,
    so the web UI and `temporal --codec-endpoint` show decrypted payloads."""
    from toolnexus_temporal.cli import codec_server

    codec_server.serve_command(host, port, keys, key_file, cors_origin, auth_token, namespace)


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
    from toolnexus_temporal.cli import verbs

    verbs.ls(opts, handle_id, watch, interval)


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
    from toolnexus_temporal.cli import verbs

    verbs.inspect(opts, handle_id, transcript, model_view)


@host_command("trace")
def trace_command(
    opts: Options,
    handle_id: TreeIdArg = None,
    every: Annotated[
        bool,
        typer.Option(
            "--all",
            help=f"Every closed child too (default: each handle's {TRACE_CLOSED} newest "
            "closed children; a note counts the others).",
        ),
    ] = False,
) -> None:
    """Show the merged trace lines of ID's subtree (default: the whole tree): its open
    handles and each handle's newest closed children (--all: every closed child; each is a
    replay of its history on the worker)."""
    from toolnexus_temporal.cli import verbs

    verbs.trace(opts, handle_id, every)


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
            help='Budget override, e.g. \'{"max_turns": 2, "max_tokens": 5000, '
            '"max_cost_usd": "0.50"}\' (max_cost_usd: USD, exact decimal).',
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
    from toolnexus_temporal.cli import verbs

    verbs.spawn(opts, parent, name, budget, prompt, notify)


@host_command("post")
def post_command(
    opts: Options,
    handle_id: IdArg,
    text: Annotated[str, typer.Argument(metavar="TEXT", help="The message.")],
    sender: Annotated[str, typer.Option("--from", help="Sender of the item.")] = "external",
    channel: Annotated[str, typer.Option("--channel", help="Channel of the item.")] = "external",
) -> None:
    """Append an item to a handle's inbox; exit 1 when rejected (inbox full or closed)."""
    from toolnexus_temporal.cli import verbs

    verbs.post(opts, handle_id, text, sender, channel)


@host_command("wake")
def wake_command(
    opts: Options,
    handle_id: IdArg,
    prompt: Annotated[
        str | None, typer.Argument(metavar="PROMPT", help="What to ask (optional).")
    ] = None,
    policy: Annotated[
        str | None,
        typer.Option(
            "--policy",
            metavar="POLICY",
            help="When the handle is busy: enqueue (wait for the next turn), interrupt (stop "
            "the turn in flight), reject (AgentBusy, exit 1) or debounce:MS (one turn for "
            "the messages of MS ms). Default: the agent's double_texting.",
        ),
    ] = None,
) -> None:
    """Wake a handle with its inbox and PROMPT; returns once it is running (or the message
    waits: a busy handle keeps it for the turn that answers it)."""
    from toolnexus_temporal.cli import verbs

    verbs.wake(opts, handle_id, prompt, policy)


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
    from toolnexus_temporal.cli import verbs

    verbs.wait(opts, handle_id, timeout_ms, follow, after)


@host_command("interrupt")
def interrupt_command(opts: Options, handle_id: IdArg) -> None:
    """Abort a handle's running turn; returns once it is idle (no-op when not running)."""
    from toolnexus_temporal.cli import verbs

    verbs.interrupt(opts, handle_id)


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
    from toolnexus_temporal.cli import verbs

    verbs.close(opts, handle_id, force, reason)


@host_command("recover")
def recover_command(opts: Options, handle_id: IdArg) -> None:
    """Start an agent the server terminated (history limits, `temporal workflow terminate`)
    again from its last state: idle, or parked on the same Request, which `tnx answer` then
    resumes. Refused (exit 1) for an agent that runs or is closed."""
    from toolnexus_temporal.cli import verbs

    verbs.recover(opts, handle_id)


@host_command("fork")
def fork_command(
    opts: Options,
    handle_id: IdArg,
    turn: Annotated[
        int,
        typer.Option(
            "--turn",
            metavar="N",
            help="Keep ID's first N turns (from 1; its last only once it is idle or closed).",
        ),
    ],
    budget: Annotated[
        str | None,
        typer.Option(
            "--budget", metavar="JSON", help="The fork's budget (default: its definition's)."
        ),
    ] = None,
    model: Annotated[
        str | None,
        typer.Option("--model", metavar="NAME", help="The fork's model instead of its def's."),
    ] = None,
    prompt: Annotated[
        str | None,
        typer.Option("--prompt", metavar="TEXT", help="Also wake the fork with TEXT."),
    ] = None,
) -> None:
    """A new agent under ID's parent whose conversation is ID's first N turns; print its id.
    ID is untouched (closed or not); its children and pending Request are not copied."""
    from toolnexus_temporal.cli import verbs

    verbs.fork(opts, handle_id, turn, budget, model, prompt)


host_command("schedule")(tick_cmd.schedule_command)
host_command("unschedule")(tick_cmd.unschedule_command)
host_command("pause")(tick_cmd.pause_command)
host_command("unpause")(tick_cmd.unpause_command)
host_command("pending")(queue_cmd.pending_command)
host_command("answer")(queue_cmd.answer_command)
host_command("audit")(queue_cmd.audit_command)


@host_command("replay-check")
def replay_check_command(
    opts: Options,
    query: Annotated[
        str | None,
        typer.Option(help='Extra visibility condition, ANDed in, e.g. AgentName="coder".'),
    ] = None,
    limit: Annotated[
        int | None, typer.Option(min=1, help="Check at most N workflows (default: all).")
    ] = None,
    sandbox: Annotated[
        bool, typer.Option("--sandbox", help="Replay inside Temporal's sandbox (stricter).")
    ] = False,
    registry: Annotated[
        str | None,
        typer.Option(
            help="The registry the new workers will run (MODULE:NAME): name the running agents"
            " whose definitions reference tools or agents it lacks.",
        ),
    ] = None,
) -> None:
    """Replay every running agent workflow (in --scope, if given) against the workflow code
    installed here: run it before deploying new code. Exit code 0: all replay; 1: some would
    break (NONDETERMINISTIC, REPLAY FAILED, or UNSUPPORTED PROTOCOL: an agent of a protocol
    generation this build no longer has); 2: some histories could not be fetched. Also prints
    the protocol generations and patch ids the running agents use."""
    from toolnexus_temporal.cli import replaycheck

    replaycheck.run_command(opts, query, limit, sandbox, registry)


def main() -> None:
    """Console entry point ``tnx``.

    After a host verb, the process ends without interpreter finalization (see
    :func:`toolnexus_temporal.cli.ops.hard_exit`): the Temporal SDK's native threads can abort it.
    """
    try:
        app()
    except SystemExit as done:
        ops = sys.modules.get("toolnexus_temporal.cli.ops")  # loaded by the verbs that connect
        if ops is None or not ops.client_used():
            raise
        code = done.code
        if code is not None and not isinstance(code, int):
            err_console.print(escape(str(code)))
            code = 1
        ops.hard_exit(code or 0)


if __name__ == "__main__":
    main()
