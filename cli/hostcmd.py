"""What every host verb of the ``tnx`` command (:mod:`~toolnexus_temporal.cli.app`) shares:
the common options (:data:`COMMON_OPTIONS`, handed over as one
:class:`~toolnexus_temporal.cli.options.Options`), the ``host_command`` decorator that adds them
and turns errors into one line and an exit code (:func:`host_commands`), where they print
(:data:`out`, :data:`err_console`; :func:`emit`, :func:`said`, :func:`fail_line`) and the
handle id arguments (``IdArg``, ``TreeIdArg``).

Light (``tnx --help`` imports it): typer, rich's console and :mod:`.options`; what a verb
needs to run (:mod:`.ops`, :mod:`.args`, the host library) loads when it runs.
"""

from __future__ import annotations

import functools
import inspect as pyinspect
import io
import json
import re
import sys
from collections.abc import Callable
from contextvars import ContextVar
from typing import TYPE_CHECKING, Annotated, Any, Final

import typer
from rich.console import Console, RenderableType
from rich.markup import escape

from toolnexus_temporal.cli import options
from toolnexus_temporal.cli.connection_opts import CONNECTION_OPTIONS
from toolnexus_temporal.cli.options import CliError, Options

if TYPE_CHECKING:
    from toolnexus_temporal.client.handle import Handle

out = Console(highlight=False)
"""Where the host verbs print tables (fitted to the terminal width) and text. Piped or
redirected it wraps nothing (``soft_wrap``): a result, a legend or a header line is written
whole, as the docs say."""
out.soft_wrap = not out.is_terminal

PIPED_WIDTH: Final = 100_000
"""The width lists are printed at when stdout is not a terminal (a pipe, a file): wide enough
that no row is cut or wrapped (a table is as wide as its content, never padded to this)."""


def list_width() -> int | None:
    """The width a list (``render.listing``) is laid out for: the terminal's, or None when
    piped (always a table, printed whole at :data:`PIPED_WIDTH`)."""
    return out.width if out.is_terminal else None


def show(renderable: RenderableType) -> None:
    """Print a list or table on stdout: fitted to a terminal, whole when piped (a console
    :data:`PIPED_WIDTH` wide on the same file: rich caps a print's ``width`` at its console's,
    80 columns when piped, and cut every row past it)."""
    if out.is_terminal:
        out.print(renderable)
        return
    buffer = io.StringIO()
    Console(file=buffer, width=PIPED_WIDTH, highlight=False).print(renderable)
    # a table pads each row to its widest; piped, the padding at a line's end is only noise
    out.file.write("".join(line.rstrip() + "\n" for line in buffer.getvalue().splitlines()))
    out.file.flush()


err_console = Console(stderr=True, highlight=False, soft_wrap=True)
"""Where every command prints its one-line errors."""

PANEL = "Connection and output"
"""Help panel of the common options."""


def _common_option(
    name: str,
    kind: Any,
    default: Any,
    flag: str,
    help_text: str,
    envvar: str | list[str] | None = None,
) -> pyinspect.Parameter:
    """One of :data:`COMMON_OPTIONS`: keyword-only parameter ``name`` of type ``kind``, the
    option ``flag`` (read from ``envvar`` when given) in the :data:`PANEL` help panel."""
    option = typer.Option(flag, envvar=envvar, help=help_text, rich_help_panel=PANEL)
    return pyinspect.Parameter(
        name, pyinspect.Parameter.KEYWORD_ONLY, default=default, annotation=Annotated[kind, option]
    )


COMMON_OPTIONS: list[pyinspect.Parameter] = [
    *CONNECTION_OPTIONS,
    _common_option(
        "task_queue",
        str,
        options.DEFAULT_TASK_QUEUE,
        "--task-queue",
        "Task queue a new root runs on (spawn root NAME when there is none); an existing "
        "runtime's is read from its root.",
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
        str,
        str(options.DEFAULT_STORE),
        "--store",
        "The workers' conversation store, a SQLite file or a postgresql:// URL (read by "
        "inspect --transcript).",
        envvar=["TNX_STORE_URL", "TNX_STORE"],
    ),
    _common_option(
        "json_output",
        bool,
        False,
        "--json",
        "Print one JSON document on stdout instead of tables.",
    ),
]
"""The options every host verb takes, in one place: the connection flags
(:data:`~toolnexus_temporal.cli.connection_opts.CONNECTION_OPTIONS`, resolved into the
``cluster`` of the Options) and the runtime's; :func:`host_command` adds them to each command
and hands them over as one :class:`~toolnexus_temporal.cli.options.Options`."""

HostVerb = Callable[..., None]


def host_commands(app: typer.Typer) -> Callable[[str], Callable[[HostVerb], HostVerb]]:
    """The ``host_command(name)`` decorator of ``app``: it registers ``func(opts: Options,
    ...)`` as the command ``name``: the command gets the :data:`COMMON_OPTIONS`, and every
    :class:`~toolnexus_temporal.cli.options.CliError` it raises becomes one line on stderr and its
    exit code (never a traceback)."""

    def host_command(name: str) -> Callable[[HostVerb], HostVerb]:
        def register(func: HostVerb) -> HostVerb:
            own = [
                p
                for p in pyinspect.signature(func, eval_str=True).parameters.values()
                if p.name != "opts"
            ]

            @functools.wraps(func)
            def command(**kwargs: Any) -> None:
                from toolnexus_temporal.cli import args, render
                from toolnexus_temporal.cli.connection_opts import load_cluster
                from toolnexus_temporal.client.errors import ClusterConfigError

                try:
                    cluster = load_cluster(kwargs)
                except ClusterConfigError as err:
                    raise fail_line(str(err), options.EXIT_ENV) from None
                opts = Options(
                    address=cluster.address.value,
                    namespace=cluster.namespace.value,
                    task_queue=kwargs.pop("task_queue"),
                    # the id argument names the scope: ID, or spawn's PARENT (walk 8)
                    scope=args.scope_of(
                        kwargs.pop("scope"), kwargs.get("handle_id") or kwargs.get("parent")
                    ),
                    store=args.store_path_from_env(kwargs.pop("store")),
                    json=kwargs.pop("json_output"),
                    cluster=cluster,
                )
                token = JSON_IDS.set(opts.shown if opts.scope else None)
                try:
                    func(opts, **kwargs)
                except CliError as err:
                    raise fail_line(err.message, err.code) from None
                except KeyboardInterrupt:
                    raise fail_line("interrupted", 130) from None
                except (typer.Exit, typer.Abort):
                    raise
                except Exception as err:
                    if args.debug():
                        raise
                    raise fail_line(
                        f"unexpected {type(err).__name__}: {render.one_line(err)} "
                        "(set TNX_DEBUG=1 for the traceback)",
                        options.EXIT_ENV,
                    ) from None
                finally:
                    JSON_IDS.reset(token)

            params = [*own, *COMMON_OPTIONS]
            setattr(command, "__signature__", pyinspect.Signature(params))  # noqa: B010
            command.__annotations__ = {p.name: p.annotation for p in params}
            app.command(name=name)(command)
            return command

        return register

    return host_command


def fail_line(message: str, code: int) -> typer.Exit:
    """Print ``message`` as one error line on stderr; the ``typer.Exit`` to raise."""
    err_console.print(f"[bold red]error[/bold red]: {escape(message)}")
    return typer.Exit(code)


JSON_IDS: ContextVar[Callable[[str], str] | None] = ContextVar("JSON_IDS", default=None)
"""How the running command prints ids (``Options.shown``: with the runtime's scope), for
:func:`emit`; None for an unscoped runtime (ids print as they are). Set by the command
wrapper of :func:`host_commands`."""

ID_KEYS: Final = frozenset(
    {"id", "parent", "children", "handle_id", "request_id", "answered", "request", "pending_id"}
)
"""The JSON keys whose handle or Request ids :func:`emit` prints as ``tnx`` prints ids."""

_HANDLE_REF = re.compile(r"^root(?:/[A-Za-z0-9_-]+\.\d+)*(?:#\d+)?$")


def scoped_doc(doc: Any, shown: Callable[[str], str]) -> Any:
    """``doc`` with every handle or Request id under an :data:`ID_KEYS` key (``root/ops.1``,
    ``root/ops.1#2``; a string or a list of them, at any depth; and in a trace ``line``) as
    ``shown`` prints it, so
    ``--json`` output has the one id form the text does and pastes back (issue 37 item 1;
    walk 8). Other strings (a tool call's ``id``, an agent's ``name``) stay as they are."""
    if isinstance(doc, dict):
        return {key: _scoped_value(key, value, shown) for key, value in doc.items()}
    if isinstance(doc, list):
        return [scoped_doc(item, shown) for item in doc]
    return doc


def _scoped_value(key: str, value: Any, shown: Callable[[str], str]) -> Any:
    if key == "line" and isinstance(value, str):  # a trace line: its ids as the text's
        from toolnexus_temporal.cli.render import scoped_ids

        return scoped_ids(value, shown)
    if key in ID_KEYS:
        if isinstance(value, str) and _HANDLE_REF.match(value):
            return shown(value)
        if isinstance(value, list) and all(isinstance(v, str) for v in value):
            return [shown(v) if _HANDLE_REF.match(v) else v for v in value]
    return scoped_doc(value, shown)


def emit(doc: Any) -> None:
    """Print one JSON document on stdout, its ids as the command prints ids
    (:func:`scoped_doc` with :data:`JSON_IDS`)."""
    shown = JSON_IDS.get()
    if shown is not None:
        doc = scoped_doc(doc, shown)
    sys.stdout.write(json.dumps(doc, indent=2, ensure_ascii=False) + "\n")
    sys.stdout.flush()


def said(verb: str, h: Handle, opts: Options) -> None:
    """Print ``{verb} {id} → {state}`` (the id as :meth:`Options.shown` prints it)."""
    out.print(f"{verb} {escape(opts.shown(h.id))} → {h.state}", soft_wrap=True)


IdArg = Annotated[str, typer.Argument(metavar="ID", help="Handle id, e.g. root/worker.1.")]
TreeIdArg = Annotated[
    str | None, typer.Argument(metavar="ID", help="Handle id (default: the root).")
]
