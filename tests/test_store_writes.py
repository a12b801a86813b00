"""One conversation-store write (one transaction) per LLM call (issue 35 item 3), for the
SQLite and the PostgreSQL store, with the durability the two writes had: a call whose reply
was never stored (the worker died between the model's answer and the write) is asked again
and stored once; a retry of a call whose write landed is answered from the store; the model
is sent the committed transcript plus the call's new messages (never an uncommitted tail);
a store that lost committed messages, or a call its workflow abandoned, is refused before
the model is paid.

The LLM activity runs outside any workflow (``ActivityEnvironment``) against a scripted
provider (``httpx.MockTransport``); the PostgreSQL runs use the embedded server
(``tests/pg.py``) and are marked ``postgres``.
"""

from __future__ import annotations

import asyncio
import json
import threading
from collections.abc import AsyncIterator
from pathlib import Path
from typing import Any

import httpx
import pytest
from temporalio.exceptions import ApplicationError
from temporalio.testing import ActivityEnvironment

from tests.pg import PgServer
from toolnexus_temporal.activities import LlmConfig, SqliteConversationStore
from toolnexus_temporal.activities.llm import LlmActivities
from toolnexus_temporal.client.testing import render, text
from toolnexus_temporal.workflows.contract.messages import LlmCallInput
from toolnexus_temporal.workflows.contract.models import Message

CONV = "default/w-1/root@run-1"


class WorkerDied(Exception):
    """Stands for a worker killed after the model answered, before the store write."""


class Counting:
    """Counts the store's write transactions (``commits``); ``die_before_write`` makes the
    next write raise :class:`WorkerDied` before it starts."""

    commits = 0
    die_before_write = False

    def _dying(self) -> None:
        if self.die_before_write:
            self.die_before_write = False
            raise WorkerDied


class CountingSqlite(Counting, SqliteConversationStore):
    """Counts the COMMIT statements of every connection (all writes run in BEGIN ... COMMIT;
    a write outside one would show as ``autocommitted``)."""

    def __init__(self, path: Path) -> None:
        self._lock = threading.Lock()
        self.autocommitted = 0
        super().__init__(path)

    def _connect(self) -> Any:
        db = super()._connect()
        db.set_trace_callback(lambda sql: self._trace(db, sql))
        return db

    def _trace(self, db: Any, sql: str) -> None:
        verb = sql.lstrip().split(None, 1)[0].upper() if sql.strip() else ""
        with self._lock:
            if verb == "COMMIT":
                self.commits += 1
            elif verb in ("INSERT", "DELETE", "UPDATE", "REPLACE") and not db.in_transaction:
                self.autocommitted += 1

    def _write(self, *args: Any, **kwargs: Any) -> int:
        self._dying()
        return super()._write(*args, **kwargs)


def _counting_pg(url: str) -> Any:
    from toolnexus_temporal.activities.pgstore import PostgresConversationStore

    class CountingPg(Counting, PostgresConversationStore):
        """Counts ``_write``: each runs in one transaction of its own (``write``)."""

        autocommitted = 0

        async def _write(self, *args: Any, **kwargs: Any) -> int:
            self._dying()
            self.commits += 1
            return await super()._write(*args, **kwargs)

    return CountingPg(url)


@pytest.fixture(params=["sqlite", pytest.param("postgres", marks=pytest.mark.postgres)])
async def store(request: pytest.FixtureRequest, tmp_path: Path) -> AsyncIterator[Any]:
    """Each built-in store, empty, counting its writes."""
    if request.param == "sqlite":
        made: Any = CountingSqlite(tmp_path / "s.sqlite")
    else:
        server: PgServer = request.getfixturevalue("postgres_server")
        made = _counting_pg(server.create_database())
        await made.open()
    try:
        yield made
    finally:
        await made.aclose()


class Provider:
    """Answers every request with ``reply-<n>``; keeps each request's message texts."""

    def __init__(self) -> None:
        self.sent: list[list[str]] = []

    async def handle(self, request: httpx.Request) -> httpx.Response:
        body = json.loads(request.content)
        self.sent.append([m.get("content") or "" for m in body["messages"]])
        reply = text(f"reply-{len(self.sent)}", prompt_tokens=4, completion_tokens=3)
        return render(reply, "openai", stream=False)


def _acts(store: Any, provider: Provider) -> LlmActivities:
    return LlmActivities(
        LlmConfig(base_url="http://mock.local/v1", model="m"),
        store,
        transport=httpx.MockTransport(provider.handle),
    )


def _call(fence: int, base_len: int, *texts: str) -> LlmCallInput:
    return LlmCallInput(
        conv_id=CONV,
        base_len=base_len,
        fence=fence,
        new_messages=[Message(role="user", content=t) for t in texts],
    )


async def _run(acts: LlmActivities, inp: LlmCallInput) -> Any:
    return await ActivityEnvironment().run(acts.llm_call, inp)


async def _texts(store: Any) -> list[str | None]:
    return [m.content for m in await store.read(CONV)]


async def test_one_store_write_per_llm_call(store: Any) -> None:
    provider = Provider()
    acts = _acts(store, provider)
    first = await _run(acts, _call(1, 0, "q1"))
    assert (first.stored_len, store.commits) == (2, 1)
    second = await _run(acts, _call(2, 2, "tool-out", "q2"))
    assert (second.stored_len, store.commits) == (5, 2)
    assert await _texts(store) == ["q1", "reply-1", "tool-out", "q2", "reply-2"]
    assert provider.sent == [["q1"], ["q1", "reply-1", "tool-out", "q2"]]
    assert store.autocommitted == 0


async def test_a_retry_after_the_write_is_answered_from_the_store(store: Any) -> None:
    provider = Provider()
    acts = _acts(store, provider)
    first = await _run(acts, _call(1, 0, "q1"))
    again = await _run(acts, _call(1, 0, "q1"))  # its completion was lost on the way back
    assert again == first and len(provider.sent) == 1 and store.commits == 1
    assert await _texts(store) == ["q1", "reply-1"]


async def test_a_reply_never_stored_is_asked_again_and_stored_once(store: Any) -> None:
    provider = Provider()
    acts = _acts(store, provider)
    await _run(acts, _call(1, 0, "q1"))
    store.die_before_write = True
    with pytest.raises(ApplicationError, match="WorkerDied"):
        await _run(acts, _call(2, 2, "q2"))
    assert await _texts(store) == ["q1", "reply-1"]  # nothing of call 2, nothing lost
    retried = await _run(acts, _call(2, 2, "q2"))  # Temporal's retry: the input again
    assert retried.stored_len == 4 and len(provider.sent) == 3
    assert await _texts(store) == ["q1", "reply-1", "q2", "reply-3"]
    assert provider.sent[2] == ["q1", "reply-1", "q2"]


async def test_the_model_sees_the_committed_transcript_not_a_tail(store: Any) -> None:
    """Call 2 stored its reply but its turn was interrupted (never committed): call 3 starts
    from the committed length; the tail is replaced in call 3's one write."""
    provider = Provider()
    acts = _acts(store, provider)
    await _run(acts, _call(1, 0, "q1"))
    await _run(acts, _call(2, 2, "q2"))
    result = await _run(acts, _call(3, 2, "q3"))
    assert provider.sent[2] == ["q1", "reply-1", "q3"]
    assert result.stored_len == 4 and store.commits == 3
    assert await _texts(store) == ["q1", "reply-1", "q3", "reply-3"]


async def test_lost_messages_are_refused_before_the_model_is_paid(store: Any) -> None:
    provider = Provider()
    acts = _acts(store, provider)
    with pytest.raises(ApplicationError) as err:
        await _run(acts, _call(1, 3, "q"))  # the workflow committed 3, the store holds 0
    assert err.value.type == "StoreError" and "holds 0" in err.value.message
    assert provider.sent == [] and store.commits == 0


async def test_an_abandoned_call_is_refused_before_the_model_is_paid(store: Any) -> None:
    provider = Provider()
    acts = _acts(store, provider)
    await _run(acts, _call(3, 0, "q1"))
    with pytest.raises(ApplicationError) as err:
        await _run(acts, _call(2, 0, "late"))  # fence 2 < 3: its workflow moved on
    assert err.value.type == "StoreError" and "fence 2 refused" in err.value.message
    assert len(provider.sent) == 1 and store.commits == 1
    assert await _texts(store) == ["q1", "reply-1"]


async def test_concurrent_calls_of_many_conversations_write_once_each(store: Any) -> None:
    provider = Provider()
    acts = _acts(store, provider)

    async def one(i: int) -> Any:
        return await ActivityEnvironment().run(
            acts.llm_call,
            LlmCallInput(
                conv_id=f"{CONV}-{i}",
                base_len=0,
                fence=1,
                new_messages=[Message(role="user", content=f"q{i}")],
            ),
        )

    results = await asyncio.gather(*(one(i) for i in range(20)))
    assert all(r.stored_len == 2 for r in results) and store.commits == 20


async def test_a_reply_too_long_for_a_result_is_shortened_and_stored_whole(
    store: Any, monkeypatch: pytest.MonkeyPatch
) -> None:
    """The completion is serialized once: stored whole, and measured for the result."""
    from toolnexus_temporal.activities import llm

    monkeypatch.setattr(llm, "REPLY_MAX_BYTES", 600)
    long = "x" * 2000

    async def handle(request: httpx.Request) -> httpx.Response:
        return render(text(long, prompt_tokens=4, completion_tokens=3), "openai", stream=False)

    acts = LlmActivities(
        LlmConfig(base_url="http://mock.local/v1", model="m"),
        store,
        transport=httpx.MockTransport(handle),
    )
    for _ in range(2):  # the call, then its retry answered from the store
        result = await _run(acts, _call(1, 0, "q"))
        assert len(result.model_dump_json()) <= 600 and "[reply shortened" in result.message.content
    assert (await store.read(CONV))[1].content == long and store.commits == 1
