"""The SQLite store's connection reuse and its one-thread start of an LLM call
(``SqliteConversationStore.begin_call``, issue 28): the same outcome as its three steps run
one by one. A real SQLite file, no server."""

from __future__ import annotations

from pathlib import Path

import pytest

from toolnexus_temporal.activities.store import SqliteConversationStore, StaleWriteError
from toolnexus_temporal.workflows.contract.models import Message


def msg(text: str, role: str = "user") -> Message:
    return Message(role=role, content=text)  # type: ignore[arg-type]


async def test_begin_call_writes_then_reads_back_the_transcript(tmp_path: Path) -> None:
    store = SqliteConversationStore(tmp_path / "s.sqlite")
    await store.write("c", 0, [msg("q1"), msg("a1", "assistant")], fence=1, completion="r1")
    recorded, stored_len, transcript = await store.begin_call("c", 2, [msg("q2")], fence=2)
    assert recorded is None and stored_len == 3
    assert [m.content for m in transcript] == ["q1", "a1", "q2"]
    assert [m.content for m in await store.read("c")] == ["q1", "a1", "q2"]
    # A retry of call 1 finds its completion and changes nothing.
    assert await store.begin_call("c", 0, [msg("other")], fence=1) == ("r1", 0, [])
    assert len(await store.read("c")) == 3
    with pytest.raises(StaleWriteError):  # the fence moved on to 2
        await store.begin_call("c", 0, [msg("late")], fence=0)


async def test_begin_call_stops_before_writing_when_the_check_raises(tmp_path: Path) -> None:
    store = SqliteConversationStore(tmp_path / "s.sqlite")

    def past_deadline() -> None:
        raise TimeoutError("deadline")

    with pytest.raises(TimeoutError):
        await store.begin_call("c", 0, [msg("q")], fence=1, before_write=past_deadline)
    assert await store.read("c") == []


async def test_connections_are_reused_and_closed(tmp_path: Path) -> None:
    store = SqliteConversationStore(tmp_path / "s.sqlite")
    for i in range(5):
        await store.write("c", i, [msg(f"m{i}")], fence=1)
    assert len(store._idle) == 1  # one call at a time: one connection, kept
    with pytest.raises(StaleWriteError):  # a refused write rolls back: its connection is kept
        await store.write("c", 0, [msg("x")], fence=0)
    assert len(store._idle) == 1 and not store._idle[0].in_transaction
    await store.aclose()
    assert store._idle == []
    assert [m.content for m in await store.read("c")] == [f"m{i}" for i in range(5)]
