"""The PostgreSQL store in a running runtime (issue 13 item 1): a worker on a store chosen by
URL runs turns with tools and an approval, the transcript is read back from PostgreSQL; the
worker opens the store at start (one clear error when it cannot) and closes it at the end;
``tnx-worker --store`` / ``TNX_STORE_URL`` choose it."""

from __future__ import annotations

import socket
import uuid
from typing import Any

import psycopg
import pytest
from temporalio.client import Client
from typer.testing import CliRunner

from tests.approving import approvals_registry
from tests.cli_support import Cli
from tests.conftest import MODEL
from toolnexus_temporal.activities import LlmConfig, StoreUnavailableError
from toolnexus_temporal.activities.pgstore import PostgresConversationStore
from toolnexus_temporal.cli.worker_cmd import app as worker_app
from toolnexus_temporal.client import AgentDef, Answer, Handle
from toolnexus_temporal.client.testing import ScriptedLLM, text, tool_calls
from toolnexus_temporal.worker import create_worker

pytestmark = pytest.mark.postgres

LLM = LlmConfig(base_url="http://mock.local/v1", model=MODEL)


async def store_sessions(url: str) -> int:
    """Sessions of the store's pool (``application_name`` tnx-store) on ``url``'s database."""
    async with await psycopg.AsyncConnection.connect(url, autocommit=True) as conn:
        cur = await conn.execute(
            "SELECT count(*) FROM pg_stat_activity"
            " WHERE application_name = 'tnx-store' AND datname = current_database()"
        )
        row = await cur.fetchone()
    assert row is not None
    return int(row[0])


def closed_port() -> int:
    with socket.socket() as probe:
        probe.bind(("127.0.0.1", 0))
        return int(probe.getsockname()[1])


async def test_turns_with_tools_and_an_approval_on_the_postgres_store(
    make_runtime: Any, postgres_db: str, client: Client, env: Any
) -> None:
    worker = AgentDef(name="worker", tools=["lookup", "ask_approval"])
    llm = ScriptedLLM(
        {
            MODEL: [
                tool_calls(("lookup", {"q": "alpha"})),
                tool_calls(("ask_approval", {})),
                text("done, approved"),
                text("second turn"),
            ]
        }
    )
    async with make_runtime(
        approvals_registry(worker), llm.transport(), conv_store=postgres_db
    ) as rt:
        assert await store_sessions(postgres_db) >= 1  # opened at worker start
        h = await rt.spawn(rt.root, "worker")
        assert isinstance(h, Handle)
        await rt.wake(h, "look it up, then do the risky thing")
        r = await rt.wait(h)
        assert r.status == "pending" and h.pending_req is not None
        await rt.resume(Answer(id=h.pending_req.id, ok=True, data={"by": "host"}))
        r = await rt.wait(h)
        assert (r.status, r.text) == ("done", "done, approved")
        await rt.wake(h, "again")
        r = await rt.wait(h)
        assert (r.status, r.text) == ("done", "second turn")
        assert llm.calls() == 4

        async with PostgresConversationStore(postgres_db) as reader:
            rt.store = reader
            transcript = await rt.transcript(h)
        roles = [m.role for m in transcript]
        assert roles == [
            "system", "user", "assistant", "tool", "assistant", "tool", "assistant",
            "user", "assistant",
        ] or roles == [
            "user", "assistant", "tool", "assistant", "tool", "assistant", "user", "assistant",
        ], roles  # fmt: skip
        contents = [m.content for m in transcript]
        assert "look it up, then do the risky thing" in contents
        assert "data(alpha)" in contents
        assert contents[-3:] == ["done, approved", "again", "second turn"]
        assert any("approved" in (c or "") and "host" in (c or "") for c in contents)

        tnx = Cli(env, rt)  # the CLI reads the same transcript through TNX_STORE_URL
        tnx.environ["TNX_STORE_URL"] = postgres_db
        shown = (await tnx.ok("inspect", h.id, "--transcript", "--json")).json()
        assert [m["content"] for m in shown["transcript"]] == contents

        async with await psycopg.AsyncConnection.connect(postgres_db) as conn:
            cur = await conn.execute("SELECT conv_id, count(*) FROM tnx_messages GROUP BY 1")
            rows = await cur.fetchall()
        workflow_id = rt.workflow_id(h.id)
        assert [(conv.split("@")[0], n) for conv, n in rows] == [
            (f"{client.namespace}/{workflow_id}", len(transcript))
        ]
    assert await store_sessions(postgres_db) == 0  # the worker closed the pool it opened


async def test_an_unreachable_store_fails_once_at_worker_start(client: Client) -> None:
    url = f"postgresql://tnx:s3cret@127.0.0.1:{closed_port()}/tnx"
    with pytest.raises(StoreUnavailableError, match="cannot reach the PostgreSQL") as caught:
        async with create_worker(client, registry=approvals_registry(), llm=LLM, store=url):
            raise AssertionError("no worker without its store")
    assert "s3cret" not in str(caught.value)


async def test_a_store_object_is_opened_but_left_to_its_owner(
    client: Client, postgres_db: str
) -> None:
    store = PostgresConversationStore(postgres_db)
    # its own task queue, and run: a worker built and never run stays registered in the SDK
    # core on its task queue until it is garbage-collected (test_docs' shell examples use the
    # default queue `tnx` in the same process)
    queue = f"tq-{uuid.uuid4().hex[:8]}"
    async with (
        create_worker(
            client, registry=approvals_registry(), llm=LLM, store=store, task_queue=queue
        ) as w,
        w,
    ):
        assert await store_sessions(postgres_db) >= 1
    assert await store.read("default/x@y") == []  # still open
    await store.aclose()
    assert await store_sessions(postgres_db) == 0


def test_tnx_worker_store_option_and_env() -> None:
    wide = {"COLUMNS": "400"}  # one line per message in typer's error box
    runner = CliRunner(env=wide)
    base = [
        "--registry", "toolnexus_temporal.cli.demo:REGISTRY",
        "--llm-base-url", "http://127.0.0.1:9/v1", "--model", "m",
        "--address", "127.0.0.1:9",
    ]  # fmt: skip
    bad = runner.invoke(worker_app, [*base, "--store", "mysql://u:pw@db/tnx"])
    assert bad.exit_code == 2
    assert "'mysql' is not supported" in bad.output and "pw@" not in bad.output
    from_env = runner.invoke(
        worker_app, base, env={"TNX_STORE_URL": "redis://cache/0", "COLUMNS": "400"}
    )
    assert from_env.exit_code == 2 and "'redis' is not supported" in from_env.output
    old_var = runner.invoke(worker_app, base, env={"TNX_STORE": "ftp://files/x", **wide})
    assert old_var.exit_code == 2 and "'ftp' is not supported" in old_var.output
    url = f"postgresql://tnx@127.0.0.1:{closed_port()}/tnx"
    down = runner.invoke(worker_app, [*base, "--store", url])
    assert down.exit_code == 1, down.output
    assert down.output.count("cannot reach the PostgreSQL conversation store") == 1
    assert "Traceback" not in down.output
