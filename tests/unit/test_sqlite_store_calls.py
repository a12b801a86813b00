"""The SQLite store's connection reuse and its one-thread start of an LLM call
(``SqliteConversationStore.begin_call``, issues 28 and 35): the reads an LLM call makes before
it asks the model, in one thread and writing nothing. A real SQLite file, no server."""

from __future__ import annotations

from pathlib import Path

import pytest

from toolnexus_temporal.activities.store import (
    SqliteConversationStore,
    StaleWriteError,
    StoreError,
)
from toolnexus_temporal.workflows.contract.models import Message


def msg(text: str, role: str = "user") -> Message:
    return Message(role=role, content=text)  # type: ignore[arg-type]


async def test_begin_call_reads_the_committed_transcript_and_writes_nothing(
    tmp_path: Path,
) -> None:
    store = SqliteConversationStore(tmp_path / "s.sqlite")
    await store.write("c", 0, [msg("q1"), msg("a1", "assistant"), msg("tail")], fence=1)
    await store.write("c", 2, [msg("q2"), msg("a2", "assistant")], fence=2, completion="r2")
    recorded, transcript = await store.begin_call("c", 2, fence=3)
    assert recorded is None and [m.content for m in transcript] == ["q1", "a1"]
    assert len(await store.read("c")) == 4  # nothing written, the tail kept for the write
    # A retry of call 2 finds its completion and reads nothing more.
    assert await store.begin_call("c", 0, fence=2) == ("r2", [])
    with pytest.raises(StaleWriteError):  # the fence moved on to 2
        await store.begin_call("c", 0, fence=1)
    with pytest.raises(StoreError, match="committed 5 message"):
        await store.begin_call("c", 5, fence=3)


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
