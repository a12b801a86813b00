"""The conversation store: transcripts live here, keyed by conversation id (== handle id),
never in workflow history (CONTRACT §2 ``conv_id``).

The workflow owns the *committed length* of each transcript; the store may hold an
uncommitted tail (from an attempt that failed after writing, or an interrupted turn), which
the next :meth:`ConversationStore.write` drops. A store that holds fewer messages than the
workflow committed has lost data: that is an error, never silently papered over.
"""

from __future__ import annotations

import asyncio
import contextlib
import sqlite3
import threading
from collections.abc import Iterator
from pathlib import Path
from typing import Final, Protocol

from toolnexus_temporal.workflows.contract.models import Message


class StoreError(RuntimeError):
    """The store cannot satisfy a read or write (for example it lost committed messages)."""


class StaleWriteError(StoreError):
    """A write carried an older fence than one already seen for the conversation: it comes
    from an LLM call the workflow has abandoned (an interrupted turn), so it must not land."""


class StoreConfigError(StoreError, ValueError):
    """A store URL or path that names no usable store (an unknown scheme, a malformed URL, a
    missing driver); the message names the scheme and the forms accepted."""


class StoreUnavailableError(ConnectionError):
    """The store's server cannot be reached or refuses the login (raised when the store opens,
    at worker start). Not a :class:`StoreError`: an outage is retried, not a lost transcript."""


def check_fence(conv_id: str, fence: int, seen: int | None) -> None:
    """Refuse a call or write of ``conv_id`` with ``fence`` when the store has seen a newer
    one (``seen``; None: none yet).

    Raises:
        StaleWriteError: ``seen`` is greater than ``fence``.
    """
    if seen is not None and seen > fence:
        raise StaleWriteError(
            f"conversation {conv_id!r}: write with fence {fence} refused, the store has "
            f"seen fence {seen} (this LLM call was abandoned by its workflow)"
        )


def check_committed(conv_id: str, base_len: int, count: int, where: str) -> None:
    """Refuse a transcript of ``conv_id`` that holds ``count`` of the ``base_len`` messages
    its workflow committed (``where``: the store, named in the message).

    Raises:
        StoreError: ``count`` differs from ``base_len``.
    """
    if count != base_len:
        raise StoreError(
            f"conversation {conv_id!r}: the workflow committed {base_len} message(s) "
            f"but the store at {where} holds {count}: wrong store for this worker, "
            "or it lost data"
        )


HEAD_ROWS: Final = 8
"""Rows a windowed read (``begin_call(..., since=N)``) takes from a transcript's start for its
head, the leading ``system`` messages; a head that fills them all makes the read whole."""

ELIDED: Final = Message(role="assistant", content="")
"""Stands in, in a windowed read, for each message after the head and before ``since``: the
messages the context's summary covers (``ContextSummary.upto``), which the model view never
sends (``workflows/contract/context.py``: it sends the head, the summary, then the turns from
``upto`` on). Only their places count, so one shared object fills them all."""


def window_rows(base_len: int, since: int) -> tuple[int, int]:
    """The rows a windowed read of the first ``base_len`` messages takes: ``(head_rows,
    since)``, the first ``head_rows`` and every row from ``since`` on; ``(0, 0)`` for a whole
    read (``since`` within the head's rows: nothing to skip)."""
    since = min(since, base_len)
    return (0, 0) if since <= HEAD_ROWS else (HEAD_ROWS, since)


def windowed(
    conv_id: str, base_len: int, since: int, bodies: list[str], where: str
) -> list[Message] | None:
    """The transcript of a windowed read: ``base_len`` messages, the head and those from
    ``since`` read, :data:`ELIDED` between them (``bodies``: the rows :func:`window_rows`
    names, oldest first; ``since`` as returned there). None when the head may run past the
    rows read (every one is a ``system`` message): then read the whole transcript.

    Why: an agent's transcript grows with its age (20,306 messages after 10,000 turns), and
    reading and parsing it whole before every LLM call made a turn 79 -> 231 ms over that year
    (issue 38); the model is sent only the head and what follows the summary.

    Raises:
        StoreError: the store holds fewer rows than the workflow committed (the skipped rows
            are checked by the call's :meth:`ConversationStore.write`).
    """
    head_rows = min(HEAD_ROWS, since)
    check_committed(conv_id, base_len, len(bodies) + since - head_rows, where)
    first = [Message.model_validate_json(b) for b in bodies[:head_rows]]
    head = 0
    while head < len(first) and first[head].role == "system":
        head += 1
    if head == head_rows:
        return None
    tail = [Message.model_validate_json(b) for b in bodies[head_rows:]]
    return [*first[:head], *[ELIDED] * (since - head), *tail]


class ConversationStore(Protocol):
    """What the LLM activity needs from a store. Implementations must be safe to share across
    concurrent activities of one worker.

    An LLM call writes once: it reads the recorded completion and the committed
    transcript, asks the model, then stores its new messages and the reply with the
    completion in one :meth:`write`. A store may also offer ``begin_call(conv_id, base_len,
    *, fence, since=0) -> (completion | None, transcript)`` (both built-in stores do): the
    reads in one round trip, with the fence checked before the model is paid, and only the
    head and the messages from ``since`` on read (:func:`windowed`)."""

    async def write(
        self,
        conv_id: str,
        base_len: int,
        messages: list[Message],
        *,
        fence: int = 0,
        completion: str | None = None,
    ) -> int:
        """Keep the first ``base_len`` messages, drop the rest, append ``messages``.

        Args:
            conv_id: the conversation.
            base_len: messages to keep.
            messages: messages to append.
            fence: the writer's fence (the workflow's LLM call sequence number); must not be
                lower than any fence already written for ``conv_id``.
            completion: recorded, in the same transaction, as the completion of call
                ``fence`` (opaque text; see :meth:`completion`). Older calls' records of
                ``conv_id`` are dropped: only the newest call can be retried.

        Returns:
            The new length.

        Raises:
            StaleWriteError: ``fence`` is older than the newest one seen.
            StoreError: fewer than ``base_len`` messages are stored.
        """
        ...

    async def read(self, conv_id: str, limit: int | None = None) -> list[Message]:
        """The first ``limit`` messages (all when None), oldest first."""
        ...

    async def completion(self, conv_id: str, fence: int) -> str | None:
        """The completion recorded by :meth:`write` for LLM call ``fence`` of ``conv_id``, or
        None (a retried call returns it instead of calling the model again)."""
        ...


class SqliteConversationStore:
    """A :class:`ConversationStore` in one SQLite file (the default for a single host).

    Each call runs in a worker thread on a connection of its own for the call, so the event
    loop never blocks and several processes on one host may share the file (SQLite WAL mode).
    A connection is kept for the next call when the call ends (at most ``POOL_MAX`` idle):
    closing the file's last connection checkpoints and removes the WAL, ~0.85 ms of CPU and
    ~5 ms of fsyncs per LLM call (four calls) when every call opened its own.
    For workers on many hosts use
    :class:`~toolnexus_temporal.activities.pgstore.PostgresConversationStore`.

    Args:
        path: the database file; its folder is created if missing.
    """

    POOL_MAX = 32
    """Idle connections kept for reuse (above: closed when their call ends)."""

    def __init__(self, path: str | Path) -> None:
        self.path = Path(path)
        self._idle: list[sqlite3.Connection] = []
        self._idle_lock = threading.Lock()
        self.path.parent.mkdir(parents=True, exist_ok=True)
        with self._connect() as db:
            db.execute("PRAGMA journal_mode=WAL")
            db.execute(
                "CREATE TABLE IF NOT EXISTS messages ("
                " conv_id TEXT NOT NULL, seq INTEGER NOT NULL, body TEXT NOT NULL,"
                " PRIMARY KEY (conv_id, seq))"
            )
            db.execute(
                "CREATE TABLE IF NOT EXISTS fences ("
                " conv_id TEXT PRIMARY KEY, fence INTEGER NOT NULL)"
            )
            db.execute(
                "CREATE TABLE IF NOT EXISTS completions ("
                " conv_id TEXT NOT NULL, fence INTEGER NOT NULL, body TEXT NOT NULL,"
                " PRIMARY KEY (conv_id, fence))"
            )

    def __repr__(self) -> str:
        return f"SqliteConversationStore({str(self.path)!r})"

    async def open(self) -> None:
        """Nothing to do (the file is ready once constructed); here for symmetry with the
        networked stores (see :func:`~toolnexus_temporal.activities.stores.open_store`)."""

    async def aclose(self) -> None:
        """Close the idle connections (a later call opens a new one)."""
        with self._idle_lock:
            idle, self._idle = self._idle, []
        for db in idle:
            db.close()

    def _connect(self) -> sqlite3.Connection:
        # check_same_thread=False: a pooled connection moves between worker threads, one
        # call (one thread) at a time (_pooled).
        return sqlite3.connect(self.path, timeout=30, isolation_level=None, check_same_thread=False)

    @contextlib.contextmanager
    def _pooled(self) -> Iterator[sqlite3.Connection]:
        """A connection for one call: an idle one, or a new one; back to the pool after a
        call that left no transaction open, else closed (which rolls it back)."""
        with self._idle_lock:
            db = self._idle.pop() if self._idle else None
        if db is None:
            db = self._connect()
        try:
            yield db
        finally:
            keep = not db.in_transaction
            if keep:
                with self._idle_lock:
                    keep = len(self._idle) < self.POOL_MAX
                    if keep:
                        self._idle.append(db)
            if not keep:
                db.close()

    async def write(
        self,
        conv_id: str,
        base_len: int,
        messages: list[Message],
        *,
        fence: int = 0,
        completion: str | None = None,
    ) -> int:
        """See :meth:`ConversationStore.write`."""
        return await asyncio.to_thread(self._write, conv_id, base_len, messages, fence, completion)

    def _write(
        self,
        conv_id: str,
        base_len: int,
        messages: list[Message],
        fence: int,
        completion: str | None = None,
    ) -> int:
        with self._pooled() as db:
            db.execute("BEGIN IMMEDIATE")
            row = db.execute("SELECT fence FROM fences WHERE conv_id = ?", (conv_id,)).fetchone()
            if row is not None and row[0] > fence:
                db.execute("ROLLBACK")
                check_fence(conv_id, fence, row[0])
            db.execute(
                "INSERT INTO fences (conv_id, fence) VALUES (?, ?)"
                " ON CONFLICT (conv_id) DO UPDATE SET fence = excluded.fence",
                (conv_id, fence),
            )
            (count,) = db.execute(
                "SELECT COUNT(*) FROM messages WHERE conv_id = ? AND seq < ?", (conv_id, base_len)
            ).fetchone()
            if count != base_len:
                db.execute("ROLLBACK")
                check_committed(conv_id, base_len, count, str(self.path))
            db.execute("DELETE FROM messages WHERE conv_id = ? AND seq >= ?", (conv_id, base_len))
            db.executemany(
                "INSERT INTO messages (conv_id, seq, body) VALUES (?, ?, ?)",
                [
                    (conv_id, base_len + i, m.model_dump_json(exclude_none=True))
                    for i, m in enumerate(messages)
                ],
            )
            if completion is not None:
                db.execute("DELETE FROM completions WHERE conv_id = ?", (conv_id,))
                db.execute(
                    "INSERT INTO completions (conv_id, fence, body) VALUES (?, ?, ?)",
                    (conv_id, fence, completion),
                )
            db.execute("COMMIT")
            return base_len + len(messages)

    async def read(self, conv_id: str, limit: int | None = None) -> list[Message]:
        """See :meth:`ConversationStore.read`."""
        return await asyncio.to_thread(self._read, conv_id, limit)

    def _read(self, conv_id: str, limit: int | None) -> list[Message]:
        with self._pooled() as db:
            rows = db.execute(
                "SELECT body FROM messages WHERE conv_id = ? AND seq < ? ORDER BY seq",
                (conv_id, limit if limit is not None else 2**62),
            ).fetchall()
        return [Message.model_validate_json(body) for (body,) in rows]

    async def completion(self, conv_id: str, fence: int) -> str | None:
        """See :meth:`ConversationStore.completion`."""
        return await asyncio.to_thread(self._completion, conv_id, fence)

    async def begin_call(
        self, conv_id: str, base_len: int, *, fence: int, since: int = 0
    ) -> tuple[str | None, list[Message]]:
        """What an LLM call reads before it asks the model, in one worker thread and without
        a write (the call's one write stores its new messages with the reply): the
        recorded completion of call ``fence`` (when there is one, nothing else is read), else
        the first ``base_len`` messages, once the fence is checked.

        Args:
            since: read only the head and the messages from ``since`` on (the context
                summary's ``upto``): the rest are :data:`ELIDED` (:func:`windowed`).

        Returns:
            ``(completion, [])`` when the call was answered before, else
            ``(None, transcript)``: the ``base_len`` committed messages, oldest first.

        Raises:
            StaleWriteError: ``fence`` is older than the newest one written (the call was
                abandoned: its write would be refused, so the model is not asked).
            StoreError: fewer than ``base_len`` messages are stored.
        """
        return await asyncio.to_thread(self._begin_call, conv_id, base_len, fence, since)

    def _begin_call(
        self, conv_id: str, base_len: int, fence: int, since: int = 0
    ) -> tuple[str | None, list[Message]]:
        head_rows, since = window_rows(base_len, since)
        with self._pooled() as db:
            recorded, seen = db.execute(
                "SELECT (SELECT body FROM completions WHERE conv_id = ? AND fence = ?),"
                " (SELECT fence FROM fences WHERE conv_id = ?)",
                (conv_id, fence, conv_id),
            ).fetchone()
            if recorded is not None:
                return str(recorded), []
            check_fence(conv_id, fence, seen)
            rows = db.execute(
                "SELECT body FROM messages WHERE conv_id = ? AND (seq < ? OR seq >= ?)"
                " AND seq < ? ORDER BY seq",
                (conv_id, head_rows, since, base_len),
            ).fetchall()
        if since:
            transcript = windowed(conv_id, base_len, since, [b for (b,) in rows], str(self.path))
            if transcript is None:
                return self._begin_call(conv_id, base_len, fence)
            return None, transcript
        check_committed(conv_id, base_len, len(rows), str(self.path))
        return None, [Message.model_validate_json(body) for (body,) in rows]

    def _completion(self, conv_id: str, fence: int) -> str | None:
        with self._pooled() as db:
            row = db.execute(
                "SELECT body FROM completions WHERE conv_id = ? AND fence = ?", (conv_id, fence)
            ).fetchone()
        return None if row is None else str(row[0])
