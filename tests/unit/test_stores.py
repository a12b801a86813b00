"""Choosing the conversation store by URL or path (``activities/stores.py`` open_store): the
forms accepted, and a clear typed error naming the scheme for anything else. No server."""

from __future__ import annotations

from pathlib import Path

import pytest

from toolnexus_temporal.activities import StoreConfigError, StoreError, open_store
from toolnexus_temporal.activities.pgstore import PostgresConversationStore, redact_url
from toolnexus_temporal.activities.store import SqliteConversationStore


def test_plain_paths_and_sqlite_urls_open_sqlite(tmp_path: Path, monkeypatch) -> None:
    monkeypatch.chdir(tmp_path)
    rel = open_store("data/conv.sqlite")
    assert isinstance(rel, SqliteConversationStore) and rel.path == Path("data/conv.sqlite")
    assert (tmp_path / "data").is_dir()
    absolute = open_store(f"sqlite://{tmp_path}/a/b.sqlite")
    assert isinstance(absolute, SqliteConversationStore)
    assert absolute.path == tmp_path / "a" / "b.sqlite"
    spaced = open_store(f"sqlite://{tmp_path}/with%20space.sqlite")
    assert isinstance(spaced, SqliteConversationStore)
    assert spaced.path == tmp_path / "with space.sqlite"
    as_path = open_store(tmp_path / "p.sqlite")
    assert isinstance(as_path, SqliteConversationStore)


@pytest.mark.parametrize(
    "url",
    [
        "postgresql://tnx:pw@db.example:5432/tnx",
        "postgres://tnx@db.example/tnx?sslmode=require",
        "postgresql:///tnx?host=/run/postgresql",
        "POSTGRESQL://db/tnx",
    ],
)
def test_postgres_urls_open_postgres_without_connecting(url: str) -> None:
    store = open_store(url)
    assert isinstance(store, PostgresConversationStore)
    assert store.url.lower() == url.lower()
    assert "pw" not in repr(store)


@pytest.mark.parametrize(
    ("value", "names"),
    [
        ("mysql://root:hunter2@db/tnx", "scheme 'mysql' is not supported"),
        ("redis://cache:6379/0", "scheme 'redis' is not supported"),
        ("https://example.com/store", "scheme 'https' is not supported"),
        ("sqlite://host/file.sqlite", "sqlite:///absolute/path"),
        ("sqlite:///", "sqlite:///absolute/path"),
        ("", "empty conversation store URL"),
        ("   ", "empty conversation store URL"),
        ("postgresql://db/tnx?bogus_option=1", "is not a PostgreSQL URL"),
    ],
)
def test_bad_values_are_a_typed_error_naming_the_problem(value: str, names: str) -> None:
    with pytest.raises(StoreConfigError, match=names) as caught:
        open_store(value)
    assert isinstance(caught.value, StoreError) and isinstance(caught.value, ValueError)
    assert "hunter2" not in str(caught.value)
    if "scheme" in names or "empty" in names:
        assert "postgresql://" in str(caught.value)  # the forms that work are listed


def test_redact_url_drops_the_password() -> None:
    assert redact_url("postgresql://u:secret@h:6/db") == "postgresql://u@h:6/db"
    assert redact_url("host=/tmp port=5 dbname=x password=secret") == (
        "postgresql:///x?host=/tmp:5"
    )
