"""Running ``tnx`` in the tests: ``Cli`` runs the real executable (``TNX``) as a subprocess
against a test runtime and returns each ``Run``; ``cli_env`` is the environment an in-process
run (typer's ``CliRunner``) reads. ``ENV_KEYS`` are the prefixes of the caller's variables
neither lets through."""

from __future__ import annotations

import asyncio
import json
import os
import sys
from dataclasses import dataclass
from pathlib import Path
from typing import Any

from temporalio.client import Client

from toolnexus_temporal.client import AgentRuntime

TNX = Path(sys.executable).parent / "tnx"


ENV_KEYS = ("TEMPORAL_", "TNX_")


@dataclass
class Run:
    """One finished ``tnx`` run."""

    args: tuple[str, ...]
    code: int
    out: str
    err: str

    def json(self) -> Any:
        return json.loads(self.out)

    def __str__(self) -> str:
        return f"tnx {' '.join(self.args)} -> {self.code}\nstdout:\n{self.out}\nstderr:\n{self.err}"


class Cli:
    """Runs ``tnx`` against a test runtime (its address, scope and task queue, via the
    environment variables the CLI reads)."""

    def __init__(self, env: Any, rt: AgentRuntime, store: Path | None = None) -> None:
        base = {k: v for k, v in os.environ.items() if not k.startswith(ENV_KEYS)}
        self.environ = {
            **base,
            "TEMPORAL_ADDRESS": env.client.service_client.config.target_host,
            "TNX_SCOPE": rt.scope or "",
            "TNX_TASK_QUEUE": rt.task_queue,
            "COLUMNS": "100",
        }
        if store is not None:
            self.environ["TNX_STORE"] = str(store)

    async def __call__(self, *args: str, columns: int = 100) -> Run:
        proc = await asyncio.create_subprocess_exec(
            str(TNX),
            *args,
            env={**self.environ, "COLUMNS": str(columns)},
            stdout=asyncio.subprocess.PIPE,
            stderr=asyncio.subprocess.PIPE,
        )
        out, err = await asyncio.wait_for(proc.communicate(), 90)
        assert proc.returncode is not None
        run = Run(args, proc.returncode, out.decode(), err.decode())
        assert "Traceback" not in run.err, run
        return run

    async def ok(self, *args: str, columns: int = 100) -> Run:
        run = await self(*args, columns=columns)
        assert run.code == 0, run
        return run


def cli_env(client: Client, scope: str, task_queue: str) -> dict[str, str | None]:
    """The environment a ``tnx`` run reads: this test's server, scope and task queue (and
    nothing of the caller's)."""
    env: dict[str, str | None] = {k: None for k in os.environ if k.startswith(ENV_KEYS)}
    env.update(
        {
            "TEMPORAL_ADDRESS": client.service_client.config.target_host,
            "TNX_SCOPE": scope,
            "TNX_TASK_QUEUE": task_queue,
            "COLUMNS": "200",
        }
    )
    return env
