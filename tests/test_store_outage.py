"""A PostgreSQL restart or failover costs a turn only a delay (issue 23 item 2).

Before the fix: after the database ended every pooled connection, the next turn ended
``error`` ("AdminShutdown") with the model never called, each of the LLM call's attempts drawing
another dead connection; a reply that arrived while the database was down was paid twice (the
retried attempt asked the model again) or the turn ended ``error``; a transcript read during or
just after the outage raised a raw psycopg error.

Each test has its own PostgreSQL server (:class:`tests.pg.PgServer`), since it stops it.
"""

from __future__ import annotations

import asyncio
from collections.abc import AsyncIterator, Iterator
from typing import Any

import httpx
import psycopg
import pytest

from tests.cli_support import Cli
from tests.helpers import eventually, spawn
from tests.pg import PgServer
from toolnexus_temporal.activities import StoreUnavailableError
from toolnexus_temporal.activities.pgstore import PostgresConversationStore
from toolnexus_temporal.client import AgentDef, RuntimeOptions
from toolnexus_temporal.client.testing import ScriptedLLM, text

pytestmark = pytest.mark.postgres

AGENTS = {"worker": AgentDef(name="worker")}
TOKENS = 5
"""Tokens of one scripted reply (3 prompt + 2 completion)."""


@pytest.fixture
def own_pg() -> Iterator[PgServer]:
    """A PostgreSQL server of this test alone (it is stopped and started again)."""
    server = PgServer()
    try:
        server.start()
    except (RuntimeError, OSError) as err:
        server.stop()
        pytest.skip(f"no embedded PostgreSQL server: {err}")
    try:
        yield server
    finally:
        server.stop()


@pytest.fixture
async def own_db(own_pg: PgServer) -> AsyncIterator[str]:
    """A fresh database on :func:`own_pg`."""
    yield own_pg.create_database()


async def terminate_store_sessions(url: str) -> int:
    """End every session of the store's pools (``application_name`` tnx-store), as a restart or
    a failover does; returns how many were ended."""
    async with await psycopg.AsyncConnection.connect(url, autocommit=True) as conn:
        cur = await conn.execute(
            "SELECT count(pg_terminate_backend(pid)) FROM pg_stat_activity"
            " WHERE application_name = 'tnx-store'"
        )
        row = await cur.fetchone()
    assert row is not None
    return int(row[0])


class HeldReply:
    """An LLM handler whose first call blocks until ``release`` is set (the test stops the
    database meanwhile), then answers; later calls answer at once. ``calls`` counts calls."""

    def __init__(self, reply: str) -> None:
        self.reply = reply
        self.calls = 0
        self.entered = asyncio.Event()
        self.release = asyncio.Event()

    async def handle(self, request: httpx.Request) -> httpx.Response:
        self.calls += 1
        self.entered.set()
        await self.release.wait()
        return httpx.Response(200, json=text(self.reply))


async def test_a_turn_after_every_pooled_connection_was_ended_asks_the_model_once(
    make_runtime: Any, own_db: str
) -> None:
    # 8 pooled connections: more dead ones than the LLM call has attempts (4)
    store = PostgresConversationStore(own_db, min_size=8)
    llm = ScriptedLLM({"stub-model": [text("first"), text("second")]})
    options = RuntimeOptions(llm_initial_retry_ms=100)
    try:
        async with make_runtime(AGENTS, llm.transport(), conv_store=store, options=options) as rt:
            h = await spawn(rt, rt.root, "worker")
            first = await rt.run_turn(h, "one")
            assert (first.status, first.text) == ("done", "first")
            assert await terminate_store_sessions(own_db) >= 8
            second = await rt.run_turn(h, "two")
            assert (second.status, second.text) == ("done", "second"), second
            assert llm.calls() == 2  # once per turn
            rt.store = store
            transcript = [m.content for m in await rt.transcript(h)]
            assert transcript[-4:] == ["one", "first", "two", "second"]
    finally:
        await store.aclose()


@pytest.mark.parametrize(
    "outage_s", [pytest.param(6.0, id="6s"), pytest.param(60.0, id="60s", marks=pytest.mark.stress)]
)
async def test_a_reply_received_while_the_database_is_down_is_paid_once(
    make_runtime: Any, own_pg: PgServer, own_db: str, outage_s: float
) -> None:
    llm = HeldReply("answered during the outage")
    async with make_runtime(AGENTS, httpx.MockTransport(llm.handle), conv_store=own_db) as rt:
        h = await spawn(rt, rt.root, "worker")
        await rt.wake(h, "work")
        await asyncio.wait_for(llm.entered.wait(), 30)  # the model is writing its reply
        await asyncio.to_thread(own_pg.halt)  # every session ends, nothing listens
        llm.release.set()  # the reply arrives while the database is down
        await asyncio.sleep(outage_s)  # the scenario: the outage lasts this long
        await asyncio.to_thread(own_pg.resume)
        result = await asyncio.wait_for(rt.wait(h), 120)  # hang guard only
        assert (result.status, result.text) == ("done", "answered during the outage"), result
        assert llm.calls == 1  # asked once, paid once
        assert (await rt.inspect(h)).usage_total == TOKENS  # counted once
        async with PostgresConversationStore(own_db) as reader:
            rt.store = reader
            transcript = [m.content for m in await rt.transcript(h)]
        assert transcript[-2:] == ["work", "answered during the outage"]


async def test_a_reply_is_carried_across_attempts_until_the_store_is_back(
    make_runtime: Any, client: Any, own_pg: PgServer, own_db: str
) -> None:
    # Attempts of 6 s: each waits for the store until 2 s before its timeout, then fails
    # (retryably); the reply rides from attempt to attempt on the heartbeat details.
    options = RuntimeOptions(llm_timeout_ms=6_000, llm_initial_retry_ms=200)
    llm = HeldReply("stored by a later attempt")
    async with make_runtime(
        AGENTS, httpx.MockTransport(llm.handle), conv_store=own_db, options=options
    ) as rt:
        h = await spawn(rt, rt.root, "worker")
        await rt.wake(h, "work")
        await asyncio.wait_for(llm.entered.wait(), 30)
        await asyncio.to_thread(own_pg.halt)
        llm.release.set()
        workflow = client.get_workflow_handle(rt.workflow_id(h.id))

        async def attempt() -> int:
            pending = (await workflow.describe()).raw_description.pending_activities
            return max((p.attempt for p in pending), default=0)

        # the outage lasts until the call is on its third attempt (two failed after the reply)
        await eventually(lambda: attempt_at_least(attempt, 3), within_s=60, what="attempt 3")
        await asyncio.to_thread(own_pg.resume)
        result = await asyncio.wait_for(rt.wait(h), 60)  # hang guard only
        assert (result.status, result.text) == ("done", "stored by a later attempt"), result
        assert llm.calls == 1
        assert (await rt.inspect(h)).usage_total == TOKENS
        async with PostgresConversationStore(own_db) as reader:
            rt.store = reader
            transcript = [m.content for m in await rt.transcript(h)]
        assert transcript[-2:] == ["work", "stored by a later attempt"]


async def attempt_at_least(attempt: Any, n: int) -> bool:
    return int(await attempt()) >= n


async def test_a_transcript_read_during_and_after_an_outage_raises_no_driver_error(
    make_runtime: Any, env: Any, own_pg: PgServer, own_db: str
) -> None:
    llm = ScriptedLLM({"stub-model": [text("stored")]})
    reader = PostgresConversationStore(own_db, timeout_s=2.0)
    try:
        async with make_runtime(AGENTS, llm.transport(), conv_store=own_db) as rt:
            h = await spawn(rt, rt.root, "worker")
            assert (await rt.run_turn(h, "hello")).text == "stored"
            rt.store = reader
            before = await rt.transcript(h)  # the reader's pool has a live connection now
            await asyncio.to_thread(own_pg.halt)
            with pytest.raises(StoreUnavailableError) as down:
                await rt.transcript(h)
            message = str(down.value)
            assert not isinstance(down.value, psycopg.Error) and down.value.__cause__ is None
            assert "\n" not in message and own_db.rsplit("/", 1)[1] in message, message
            tnx = Cli(env, rt)
            tnx.environ["TNX_STORE_URL"] = own_db
            shown = await tnx("inspect", h.id, "--transcript")  # no traceback (Cli checks)
            assert shown.code == 2 and "PostgreSQL conversation store" in shown.err, shown
            assert "psycopg" not in shown.err, shown
            await asyncio.to_thread(own_pg.resume)
            after = await rt.transcript(h)  # the reader's pooled connection died: a fresh one
            assert [m.content for m in after] == [m.content for m in before]
    finally:
        await reader.aclose()
