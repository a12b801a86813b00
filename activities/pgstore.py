"""The PostgreSQL conversation store: one database shared by workers on many hosts.

Same contract as :class:`~toolnexus_temporal.activities.store.SqliteConversationStore` (see
``store.py``): the workflow sends new messages plus the committed length, writes are fenced by
the LLM call's sequence number, the completion of the newest call is kept for retries, and a
store holding fewer messages than the workflow committed raises :class:`StoreError`.

Tables (all prefixed ``tnx_``, in the connection's default schema):

* ``tnx_store_schema(id, version)``: one row, the schema version this database is at;
* ``tnx_conversations(conv_id, fence)``: one row per conversation, the newest fence seen; every
  write locks it (``SELECT ... FOR UPDATE``) so writers of one conversation, on any host, run
  one after another and the fence check and the write are one atomic step;
* ``tnx_messages(conv_id, seq, body)``: the transcript, ``body`` a message as JSON text;
* ``tnx_completions(conv_id, fence, body)``: the newest LLM call's completion.

Every write is one transaction: a worker killed (or a task cancelled) mid-write leaves the
conversation as it was. The schema is created and upgraded under a transaction-level advisory
lock, so workers starting at once never race on ``CREATE TABLE``.

A restart or failover of the server (issue 23 item 2) ends every pooled connection. An
operation that finds its connection dead (the server ended it) drops every dead connection of
the pool (``AsyncConnectionPool.check``) and runs again on a fresh one, at most
``DEAD_CONNECTION_RETRIES`` times: every operation is idempotent (a write keeps ``base_len``
messages, replaces the rest and is fenced), so running one again whose commit was lost is
safe. While the server is down an operation waits up to ``timeout_s`` for a connection, the
pool trying to reconnect every ``RECONNECT_EVERY_S`` or so, then raises
:class:`StoreUnavailableError`. No psycopg or psycopg_pool exception leaves this module: an
outage (``OperationalError``, a read-only standby) is a :class:`StoreUnavailableError`, any
other driver error a :class:`StoreError`, each one line naming the URL without its password.

Needs the ``postgres`` extra: ``pip install 'toolnexus-temporal[postgres]'`` (psycopg 3 and
psycopg_pool).
"""

from __future__ import annotations

import asyncio
import contextlib
import time
from collections.abc import Awaitable, Callable
from typing import Any, LiteralString, TypeVar

import psycopg
from psycopg.conninfo import conninfo_to_dict
from psycopg_pool import AsyncConnectionPool, PoolTimeout

from toolnexus_temporal.activities.store import (
    StoreConfigError,
    StoreError,
    StoreUnavailableError,
    check_committed,
    check_fence,
    window_rows,
    windowed,
)
from toolnexus_temporal.workflows.contract.models import Message

T = TypeVar("T")

SCHEMA_VERSION = 1
"""The schema version this code writes; a database at a newer version is refused."""

SCHEMA_LOCK_KEY = 0x746E785F73746F72  # "tnx_stor"
"""The advisory lock key taken while the schema is created or upgraded."""

MIGRATIONS: dict[int, tuple[LiteralString, ...]] = {
    1: (
        "CREATE TABLE IF NOT EXISTS tnx_conversations ("
        " conv_id TEXT PRIMARY KEY, fence BIGINT NOT NULL)",
        "CREATE TABLE IF NOT EXISTS tnx_messages ("
        " conv_id TEXT NOT NULL, seq INTEGER NOT NULL, body TEXT NOT NULL,"
        " PRIMARY KEY (conv_id, seq))",
        "CREATE TABLE IF NOT EXISTS tnx_completions ("
        " conv_id TEXT NOT NULL, fence BIGINT NOT NULL, body TEXT NOT NULL,"
        " PRIMARY KEY (conv_id, fence))",
    ),
}
"""Statements that bring the schema from version ``n - 1`` to ``n`` (each idempotent)."""

APP_NAME = {"application_name": "tnx-store"}
"""The ``application_name`` of the pool's sessions (``pg_stat_activity``) unless the URL
sets one."""

CONNECT_TIMEOUT_S = 10
"""Seconds allowed for one connection attempt (the first when the store opens, and each of the
pool's), unless the URL sets ``connect_timeout``."""

POOL_TIMEOUT_S = 30.0
"""Seconds an operation waits for a pooled connection (the default ``timeout_s``) before it
raises :class:`StoreUnavailableError`."""

RECONNECT_EVERY_S = 2.0
"""While the server is down, seconds between two attempts of the pool to connect, about: one
attempt gives up after this long (psycopg_pool's backoff would otherwise space them out to
minutes, and a server back after 40 s was used 30 s later), and an operation still waiting asks
for a new one."""

DEAD_CONNECTION_RETRIES = 2
"""Times an operation runs again on a fresh connection after its connection was found dead."""

UNAVAILABLE_SQLSTATES = frozenset({"25006", "57P01", "57P02", "57P03"})
"""SQLSTATEs that mean the server is going away or not serving writes yet, whatever their
psycopg class: read-only transaction (a standby not promoted yet), admin, crash shutdown,
cannot connect now (starting up)."""


def redact_url(url: str) -> str:
    """``url`` without its password, for messages: ``postgresql://user@host:port/db``."""
    try:
        params = conninfo_to_dict(url)
    except psycopg.ProgrammingError:
        return "postgresql://<unparsable URL>"
    host = params.get("host") or "localhost"
    port = f":{params['port']}" if params.get("port") else ""
    user = f"{params['user']}@" if params.get("user") else ""
    if str(host).startswith("/"):
        return f"postgresql://{user}/{params.get('dbname', '')}?host={host}{port}"
    return f"postgresql://{user}{host}{port}/{params.get('dbname', '')}"


class PostgresConversationStore:
    """A :class:`~toolnexus_temporal.activities.store.ConversationStore` in PostgreSQL, for
    workers on many hosts (module docstring: tables, locking, schema upgrades).

    Open it before use (``await store.open()``, or ``async with store:``; the first operation
    opens it too): that connects once, creates or upgrades the schema and starts the pool.
    ``create_worker`` opens it at worker start so an unreachable server is one clear error.

    Args:
        url: a libpq connection URL or conninfo string, e.g.
            ``postgresql://user:password@db.example:5432/tnx`` or
            ``postgresql:///tnx?host=/run/postgresql`` (unix socket).
        min_size: pooled connections kept open.
        max_size: pooled connections at most (concurrent store operations of this process).
        timeout_s: seconds an operation waits for a connection (the server down, or every
            connection busy) before it raises :class:`StoreUnavailableError`.

    Raises:
        StoreConfigError: ``url`` is not a libpq URL or conninfo string, or ``timeout_s`` is
            not positive.
        StoreUnavailableError: (from :meth:`open` and every operation) the server cannot be
            reached, refuses the login, or gave no connection in ``timeout_s``; the message
            names the URL without its password. The operation can be retried.
        StoreError: (from :meth:`open`) the database's schema is newer than this code; (from
            an operation) the database refused it for another reason than an outage.
    """

    def __init__(
        self,
        url: str,
        *,
        min_size: int = 1,
        max_size: int = 20,
        timeout_s: float = POOL_TIMEOUT_S,
    ) -> None:
        try:
            params = conninfo_to_dict(url)
        except psycopg.ProgrammingError as err:
            raise StoreConfigError(
                f"conversation store URL {redact_url(url)!r} is not a PostgreSQL URL: "
                f"{_one_line(err)}"
            ) from None
        if not timeout_s > 0:
            raise StoreConfigError(f"timeout_s must be positive seconds, got {timeout_s!r}")
        self.url = url
        self.timeout_s = timeout_s
        kwargs: dict[str, Any] = {"autocommit": True}
        if "application_name" not in params:
            kwargs.update(APP_NAME)
        if "connect_timeout" not in params:
            kwargs["connect_timeout"] = CONNECT_TIMEOUT_S
        self._pool_args: dict[str, Any] = {
            "min_size": min_size,
            "max_size": max_size,
            "kwargs": kwargs,
            "timeout": timeout_s,
            "reconnect_timeout": RECONNECT_EVERY_S,
            "name": "tnx-store",
        }
        self._pool_or_none: AsyncConnectionPool | None = None
        self._lock = asyncio.Lock()

    @property
    def _opened(self) -> bool:
        return self._pool_or_none is not None

    @property
    def _pool(self) -> AsyncConnectionPool:
        if self._pool_or_none is None:
            raise StoreUnavailableError(f"{self!r} is closed")
        return self._pool_or_none

    def __repr__(self) -> str:
        return f"PostgresConversationStore({redact_url(self.url)!r})"

    async def open(self) -> None:
        """Connect, create or upgrade the schema, start the pool and wait for its first
        ``min_size`` connections (idempotent).

        Raises:
            StoreUnavailableError: the server cannot be reached or refuses the login.
            StoreError: the database's schema version is newer than this code's.
        """
        async with self._lock:
            if self._opened:
                return
            try:
                conn = await psycopg.AsyncConnection.connect(
                    self.url, autocommit=True, connect_timeout=CONNECT_TIMEOUT_S
                )
            except psycopg.Error as err:
                raise StoreUnavailableError(
                    f"cannot reach the PostgreSQL conversation store {redact_url(self.url)}: "
                    f"{_one_line(err)}"
                ) from None
            async with conn:
                try:
                    await ensure_schema(conn)
                except psycopg.Error as err:
                    if _is_outage(err):
                        raise StoreUnavailableError(
                            f"the PostgreSQL conversation store {redact_url(self.url)} went "
                            f"away while its tables were set up: {_one_line(err)}"
                        ) from None
                    raise StoreError(
                        f"cannot set up the conversation store's tables in "
                        f"{redact_url(self.url)}: {_one_line(err)}"
                    ) from None
            pool = AsyncConnectionPool(self.url, open=False, **self._pool_args)
            try:  # ready when open returns: its first connection is made (min_size)
                await pool.open(wait=True, timeout=CONNECT_TIMEOUT_S)
            except PoolTimeout:
                await pool.close()
                raise StoreUnavailableError(
                    f"the PostgreSQL conversation store {redact_url(self.url)} accepted one "
                    f"connection but its pool got none in {CONNECT_TIMEOUT_S} s"
                ) from None
            self._pool_or_none = pool

    async def aclose(self) -> None:
        """Close the pool (in-flight operations finish first); :meth:`open` opens it again."""
        async with self._lock:
            pool, self._pool_or_none = self._pool_or_none, None
            if pool is not None:
                await pool.close()

    async def __aenter__(self) -> PostgresConversationStore:
        await self.open()
        return self

    async def __aexit__(self, *exc: object) -> None:
        await self.aclose()

    async def write(
        self,
        conv_id: str,
        base_len: int,
        messages: list[Message],
        *,
        fence: int = 0,
        completion: str | None = None,
    ) -> int:
        """See :meth:`ConversationStore.write`; one transaction, the conversation row locked.

        Raises:
            StaleWriteError: ``fence`` is older than the newest one seen.
            StoreError: fewer than ``base_len`` messages are stored, or the database refused
                the write.
            StoreUnavailableError: the server is down or unreachable (class docstring); the
                write may be run again (the same call writes the same result).
        """
        bodies = [m.model_dump_json(exclude_none=True) for m in messages]

        async def run(conn: psycopg.AsyncConnection[Any]) -> int:
            async with conn.transaction():
                return await self._write(conn, conv_id, base_len, bodies, fence, completion)

        return await self._run(run)

    async def _write(
        self,
        conn: psycopg.AsyncConnection[Any],
        conv_id: str,
        base_len: int,
        bodies: list[str],
        fence: int,
        completion: str | None,
    ) -> int:
        await conn.execute(
            "INSERT INTO tnx_conversations (conv_id, fence) VALUES (%s, %s)"
            " ON CONFLICT (conv_id) DO NOTHING",
            (conv_id, fence),
        )
        cur = await conn.execute(
            "SELECT fence FROM tnx_conversations WHERE conv_id = %s FOR UPDATE", (conv_id,)
        )
        row = await cur.fetchone()
        seen = fence if row is None else int(row[0])
        check_fence(conv_id, fence, seen)
        if seen != fence:
            await conn.execute(
                "UPDATE tnx_conversations SET fence = %s WHERE conv_id = %s", (fence, conv_id)
            )
        cur = await conn.execute(
            "SELECT COUNT(*) FROM tnx_messages WHERE conv_id = %s AND seq < %s",
            (conv_id, base_len),
        )
        count_row = await cur.fetchone()
        count = 0 if count_row is None else int(count_row[0])
        check_committed(conv_id, base_len, count, redact_url(self.url))
        await conn.execute(
            "DELETE FROM tnx_messages WHERE conv_id = %s AND seq >= %s", (conv_id, base_len)
        )
        if bodies:
            await conn.execute(
                "INSERT INTO tnx_messages (conv_id, seq, body)"
                " SELECT %s, %s + s.i - 1, s.body"
                " FROM unnest(%s::text[]) WITH ORDINALITY AS s(body, i)",
                (conv_id, base_len, bodies),
            )
        if completion is not None:
            await conn.execute("DELETE FROM tnx_completions WHERE conv_id = %s", (conv_id,))
            await conn.execute(
                "INSERT INTO tnx_completions (conv_id, fence, body) VALUES (%s, %s, %s)",
                (conv_id, fence, completion),
            )
        return base_len + len(bodies)

    async def read(self, conv_id: str, limit: int | None = None) -> list[Message]:
        """See :meth:`ConversationStore.read`.

        Raises:
            StoreUnavailableError: the server is down or unreachable (class docstring).
            StoreError: the database refused the read.
        """

        async def run(conn: psycopg.AsyncConnection[Any]) -> list[Any]:
            cur = await conn.execute(
                "SELECT body FROM tnx_messages WHERE conv_id = %s AND seq < %s ORDER BY seq",
                (conv_id, limit if limit is not None else 2**31 - 1),
            )
            return await cur.fetchall()

        rows = await self._run(run)
        return [Message.model_validate_json(body) for (body,) in rows]

    async def completion(self, conv_id: str, fence: int) -> str | None:
        """See :meth:`ConversationStore.completion`.

        Raises:
            StoreUnavailableError: the server is down or unreachable (class docstring).
            StoreError: the database refused the read.
        """

        async def run(conn: psycopg.AsyncConnection[Any]) -> Any:
            cur = await conn.execute(
                "SELECT body FROM tnx_completions WHERE conv_id = %s AND fence = %s",
                (conv_id, fence),
            )
            return await cur.fetchone()

        row = await self._run(run)
        return None if row is None else str(row[0])

    async def begin_call(
        self, conv_id: str, base_len: int, *, fence: int, since: int = 0
    ) -> tuple[str | None, list[Message]]:
        """See :meth:`~toolnexus_temporal.activities.store.SqliteConversationStore
        .begin_call`: the recorded completion of call ``fence``, else the ``base_len``
        committed messages (only the head and those from ``since`` on when ``since`` is
        given), in one query (one round trip, no transaction).

        Raises:
            StaleWriteError: ``fence`` is older than the newest one written.
            StoreError: fewer than ``base_len`` messages are stored, or the database refused
                the read.
            StoreUnavailableError: the server is down or unreachable (class docstring).
        """
        head_rows, window_since = window_rows(base_len, since)

        async def run(conn: psycopg.AsyncConnection[Any]) -> Any:
            cur = await conn.execute(
                "SELECT (SELECT body FROM tnx_completions WHERE conv_id = %s AND fence = %s),"
                " (SELECT fence FROM tnx_conversations WHERE conv_id = %s),"
                " ARRAY(SELECT body FROM tnx_messages WHERE conv_id = %s"
                " AND (seq < %s OR seq >= %s) AND seq < %s ORDER BY seq)",
                (conv_id, fence, conv_id, conv_id, head_rows, window_since, base_len),
            )
            return await cur.fetchone()

        recorded, seen, bodies = await self._run(run)
        if recorded is not None:
            return str(recorded), []
        check_fence(conv_id, fence, seen)
        if window_since:
            where = redact_url(self.url)
            transcript = windowed(conv_id, base_len, window_since, list(bodies), where)
            if transcript is None:
                return await self.begin_call(conv_id, base_len, fence=fence)
            return None, transcript
        check_committed(conv_id, base_len, len(bodies), redact_url(self.url))
        return None, [Message.model_validate_json(body) for body in bodies]

    async def _run(self, op: Callable[[psycopg.AsyncConnection[Any]], Awaitable[T]]) -> T:
        """``op`` on a pooled connection (module docstring: dead connections, outages, the
        errors raised)."""
        if not self._opened:
            await self.open()
        pool = self._pool
        deadline = time.monotonic() + self.timeout_s
        dead = 0
        while True:
            conn: psycopg.AsyncConnection[Any] | None = None
            try:
                # In slices: each new wait asks the pool for a new connection attempt.
                wait_s = min(RECONNECT_EVERY_S, max(deadline - time.monotonic(), 0.001))
                async with pool.connection(timeout=wait_s) as conn:
                    return await op(conn)
            except PoolTimeout:
                if conn is not None:  # not from the pool (it only raises it at checkout)
                    raise self._unavailable("timed out") from None
                if time.monotonic() >= deadline:
                    raise self._unavailable(
                        f"no connection in {self.timeout_s:g} s (the server is down, "
                        "unreachable, or every pooled connection is busy)"
                    ) from None
            except psycopg.Error as err:
                if conn is not None and conn.closed and dead < DEAD_CONNECTION_RETRIES:
                    dead += 1  # the server ended it (a restart, a failover): drop the others
                    with contextlib.suppress(psycopg.Error):  # a pool closed meanwhile
                        await pool.check()
                    continue
                if _is_outage(err):
                    raise self._unavailable(_one_line(err, type(err).__name__)) from None
                raise StoreError(
                    f"the PostgreSQL conversation store {redact_url(self.url)} refused the "
                    f"operation: {_one_line(err, type(err).__name__)}"
                ) from None

    def _unavailable(self, why: str) -> StoreUnavailableError:
        return StoreUnavailableError(
            f"the PostgreSQL conversation store {redact_url(self.url)} is unavailable: {why}"
        )


async def ensure_schema(conn: psycopg.AsyncConnection[Any]) -> int:
    """Create or upgrade the store's tables on ``conn`` to :data:`SCHEMA_VERSION`, under an
    advisory lock so concurrent callers (workers starting at once) run one after another.

    Returns:
        The schema version the database was at before (0: new).

    Raises:
        StoreError: the database is at a newer version than this code supports.
    """
    async with conn.transaction():
        await conn.execute("SELECT pg_advisory_xact_lock(%s)", (SCHEMA_LOCK_KEY,))
        await conn.execute(
            "CREATE TABLE IF NOT EXISTS tnx_store_schema ("
            " id INTEGER PRIMARY KEY CHECK (id = 1), version INTEGER NOT NULL)"
        )
        cur = await conn.execute("SELECT version FROM tnx_store_schema WHERE id = 1")
        row = await cur.fetchone()
        before = 0 if row is None else int(row[0])
        if before > SCHEMA_VERSION:
            raise StoreError(
                f"the conversation store's schema is at version {before}, newer than this "
                f"toolnexus-temporal supports ({SCHEMA_VERSION}): upgrade the package"
            )
        for version in range(before + 1, SCHEMA_VERSION + 1):
            for statement in MIGRATIONS[version]:
                await conn.execute(statement)
        if before != SCHEMA_VERSION:
            await conn.execute(
                "INSERT INTO tnx_store_schema (id, version) VALUES (1, %s)"
                " ON CONFLICT (id) DO UPDATE SET version = excluded.version",
                (SCHEMA_VERSION,),
            )
    return before


def _is_outage(err: psycopg.Error) -> bool:
    """Whether ``err`` means the server is away (an outage, retried) rather than a refusal."""
    return isinstance(err, psycopg.OperationalError | psycopg.InterfaceError) or (
        err.sqlstate in UNAVAILABLE_SQLSTATES
    )


def _one_line(err: BaseException, prefix: str = "") -> str:
    text = str(err).strip() or type(err).__name__
    line = " ".join(line.strip() for line in text.splitlines() if line.strip())
    return f"{prefix}: {line}" if prefix else line
