"""The ``tnx demo`` command: its options, over :func:`~toolnexus_temporal.cli.demo.run_demo`.
Registered on the ``tnx`` application by :mod:`~toolnexus_temporal.cli.app`
(``app.command()(demo)``); :data:`console` is where it prints.
"""

from __future__ import annotations

import asyncio
from pathlib import Path
from typing import Annotated

import typer
from rich.console import Console

from toolnexus_temporal.cli.options import DEFAULT_DATA_DIR, DEFAULT_PROMPT
from toolnexus_temporal.cli.server import PortOption, UiPortOption

console = Console(highlight=False, soft_wrap=True)
"""Where ``tnx demo`` prints."""


def demo(
    prompt: Annotated[str, typer.Option(help="The coordinator's prompt.")] = DEFAULT_PROMPT,
    address: Annotated[
        str | None,
        typer.Option(
            help="Temporal frontend host:port to use (else TEMPORAL_ADDRESS, else the address "
            "of the profile of Temporal's config file, with its TLS and API key); "
            "default: start the embedded dev server."
        ),
    ] = None,
    llm_base_url: Annotated[
        str | None,
        typer.Option(
            help="OpenAI-compatible base URL (else OPENAI_BASE_URL); "
            "default: a scripted server that plays the tour."
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
    port: PortOption = None,
    ui_port: UiPortOption = None,
    local_model: Annotated[
        bool,
        typer.Option(
            "--local-model",
            help="Use a real model on loopback: llama-server with SmolLM2-135M "
            "(build once: bash scripts/build-llama-server.sh).",
        ),
    ] = False,
) -> None:
    """Tour the runtime in under a minute: a coordinator delegating to two workers through
    task, an approval that parks and is approved with edited arguments (with the tnx answer
    --approve/--edit and temporal workflow signal lines), the trace and the answer's record,
    usage, budgets and cost per agent, a ticking
    monitor, a background child and the web UI links (the approval queue among them)."""
    from toolnexus_temporal.cli.demo import run_demo

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
