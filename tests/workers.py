"""Workers and servers the tests start, in one place.

``start_worker_process`` is the one starter of a worker subprocess (``tnx-worker``, or a
worker module such as ``python -m tests.crash_worker``): it runs from the repository root with
the repository on ``PYTHONPATH`` (so ``--registry tests.registries:...`` imports) and waits for
the worker's first line. ``start_tnx_worker`` builds the usual ``tnx-worker`` command line and
``stop_worker`` stops one with SIGTERM (it must exit 0). ``worker_on`` is an in-process worker.
``free_port`` is the one copy of "a loopback port free right now"; ``start_server`` starts a dev
server of a test's own on a port and database it keeps (to stop and start it again)."""

from __future__ import annotations

import asyncio
import os
import signal
import socket
import sys
from collections.abc import AsyncIterator, Callable, Mapping
from contextlib import asynccontextmanager
from pathlib import Path
from typing import IO, Any

from temporalio.client import Client
from temporalio.contrib.pydantic import pydantic_data_converter
from temporalio.testing import WorkflowEnvironment

from tests.conftest import temporal_binary
from tests.registries import APPROVALS
from toolnexus_temporal.activities import LlmConfig, SqliteConversationStore
from toolnexus_temporal.client.testing import ScriptedLLM
from toolnexus_temporal.worker import create_worker
from toolnexus_temporal.workflows.contract.names import ALL_SEARCH_ATTRIBUTES

ROOT = Path(__file__).resolve().parent.parent
"""The repository root: the working directory and ``PYTHONPATH`` of a worker subprocess."""

TNX_WORKER = Path(sys.executable).parent / "tnx-worker"
"""The ``tnx-worker`` executable of this venv."""


def free_port() -> int:
    """A loopback port free right now (bound to 127.0.0.1 port 0, read, released)."""
    with socket.socket() as sock:
        sock.bind(("127.0.0.1", 0))
        return int(sock.getsockname()[1])


async def start_worker_process(
    *argv: str,
    ready: bytes | Callable[[bytes], bool] | None = b"worker on",
    env: Mapping[str, str] | None = None,
    stderr: int | IO[Any] = asyncio.subprocess.STDOUT,
    within_s: float = 60,
) -> asyncio.subprocess.Process:
    """Start the worker command ``argv`` from the repository root, its stdout piped.

    ``env`` is the environment to start from (``os.environ`` when ``None``); ``PYTHONPATH``
    is set to the repository root on top of it. ``stderr`` goes to stdout unless given (a
    file, or ``asyncio.subprocess.PIPE``). The worker's first line, read within ``within_s``
    seconds, must start with ``ready`` (bytes) or satisfy it (a predicate); with ``None``
    nothing is read and the caller reads the output itself. Raises ``AssertionError`` on
    another first line (the line is the message), ``TimeoutError`` when none comes."""
    proc = await asyncio.create_subprocess_exec(
        *argv,
        cwd=ROOT,
        env={**(os.environ if env is None else env), "PYTHONPATH": str(ROOT)},
        stdout=asyncio.subprocess.PIPE,
        stderr=stderr,
    )
    if ready is None:
        return proc
    assert proc.stdout is not None
    line = await asyncio.wait_for(proc.stdout.readline(), within_s)
    if callable(ready):
        assert ready(line), line
    else:
        assert line.startswith(ready), line
    return proc


async def start_tnx_worker(
    address: str,
    task_queue: str,
    base_url: str,
    store: Path,
    registry: str = "tests.registries:APPROVALS",
    *,
    model: str = "stub-model",
    args: tuple[str, ...] = (),
    ready: bytes | Callable[[bytes], bool] | None = b"worker on",
    env: Mapping[str, str] | None = None,
) -> asyncio.subprocess.Process:
    """``tnx-worker --registry REGISTRY --address ADDRESS --task-queue TASK_QUEUE
    --llm-base-url BASE_URL --model MODEL --store STORE ARGS...``, started by
    :func:`start_worker_process` (``ready``, ``env`` as there)."""
    return await start_worker_process(
        str(TNX_WORKER),
        *("--registry", registry, "--address", address, "--task-queue", task_queue),
        *("--llm-base-url", base_url, "--model", model, "--store", str(store)),
        *args,
        ready=ready,
        env=env,
    )


async def stop_worker(proc: asyncio.subprocess.Process) -> None:
    """SIGTERM the worker; it must exit 0 within 30 s."""
    proc.send_signal(signal.SIGTERM)
    assert await asyncio.wait_for(proc.wait(), 30) == 0


async def start_server(port: int, db: Path) -> WorkflowEnvironment:
    """A dev server of the test's own on ``port``, keeping its state in the SQLite file
    ``db`` (so that one started again on the same port and file carries on); the caller
    shuts it down."""
    return await WorkflowEnvironment.start_local(
        port=port,
        dev_server_existing_path=temporal_binary(),
        data_converter=pydantic_data_converter,
        search_attributes=ALL_SEARCH_ATTRIBUTES,
        dev_server_log_level="error",
        dev_server_extra_args=["--db-filename", str(db)],
    )


@asynccontextmanager
async def worker_on(
    client: Client, task_queue: str, llm: ScriptedLLM, store: Path
) -> AsyncIterator[None]:
    """An in-process worker serving ``task_queue`` with the APPROVALS registry."""
    async with (
        create_worker(
            client,
            registry=APPROVALS,
            llm=LlmConfig(base_url="http://mock.local/v1", model="stub-model"),
            task_queue=task_queue,
            store=SqliteConversationStore(store),
            transport=llm.transport(),
        ) as worker,
        worker,
    ):
        yield
