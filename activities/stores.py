"""Choosing a conversation store by URL (``tnx-worker --store``, ``TNX_STORE_URL``,
``create_worker(store=...)``).

Forms accepted by :func:`open_store`:

* ``postgresql://user:password@host:5432/dbname`` or ``postgres://...`` (any libpq URL,
  query parameters included, e.g. ``?host=/run/postgresql`` for a unix socket or
  ``?sslmode=require``): :class:`~toolnexus_temporal.activities.pgstore.PostgresConversationStore`,
  shared by workers on many hosts (needs the ``postgres`` extra);
* ``sqlite:///absolute/path.sqlite``, or a plain file path (relative or absolute):
  :class:`~toolnexus_temporal.activities.store.SqliteConversationStore`, one host only (the
  embedded default, ``.tnx/conversations.sqlite``).
"""

from __future__ import annotations

from pathlib import Path
from typing import Any
from urllib.parse import unquote, urlsplit

from toolnexus_temporal.activities.store import (
    ConversationStore,
    SqliteConversationStore,
    StoreConfigError,
)

POSTGRES_SCHEMES = ("postgresql", "postgres")
"""URL schemes of the PostgreSQL store."""

FORMS = "postgresql://user:password@host:port/dbname, postgres://..., sqlite:///path or a path"
"""The store forms, for error messages."""


def open_store(url_or_path: str | Path) -> ConversationStore:
    """The conversation store named by ``url_or_path`` (module docstring: the forms), not yet
    opened: ``await store.open()`` connects (``create_worker`` does it at worker start).

    Args:
        url_or_path: a store URL, or the path of a SQLite file.

    Returns:
        A :class:`SqliteConversationStore` or a ``PostgresConversationStore``.

    Raises:
        StoreConfigError: an empty value, an unknown URL scheme (named in the message), a
            ``sqlite://`` URL with a host, or the PostgreSQL driver is not installed.
    """
    if isinstance(url_or_path, Path):
        return SqliteConversationStore(url_or_path.expanduser())
    text = url_or_path.strip()
    if not text:
        raise StoreConfigError(f"empty conversation store URL: use {FORMS}")
    if "://" not in text:
        return SqliteConversationStore(Path(text).expanduser())
    scheme = text.split("://", 1)[0].lower()
    if scheme in POSTGRES_SCHEMES:
        return _postgres(scheme + text[len(scheme) :])  # libpq wants the scheme lower-case
    if scheme == "sqlite":
        parts = urlsplit(text)
        if parts.netloc or not parts.path or parts.path == "/":
            raise StoreConfigError(
                f"conversation store URL {text!r}: a sqlite URL is sqlite:///absolute/path "
                "(three slashes, no host); or pass the file path itself"
            )
        return SqliteConversationStore(Path(unquote(parts.path)))
    raise StoreConfigError(
        f"conversation store URL scheme {scheme!r} is not supported (in {_redact(text)!r}): "
        f"use {FORMS}"
    )


def _postgres(url: str) -> ConversationStore:
    try:
        from toolnexus_temporal.activities.pgstore import PostgresConversationStore
    except ImportError as err:
        raise StoreConfigError(
            f"the PostgreSQL conversation store needs psycopg and psycopg_pool ({err}): "
            "pip install 'toolnexus-temporal[postgres]'"
        ) from None
    return PostgresConversationStore(url)


def _redact(url: str) -> str:
    parts = urlsplit(url)
    if parts.password is None:
        return url
    netloc = parts.netloc.replace(f":{parts.password}@", ":***@", 1)
    return parts._replace(netloc=netloc).geturl()


async def open_checked(store: Any) -> None:
    """``await store.open()`` when the store has one (networked stores connect there; a user's
    own store without ``open`` is used as is).

    Raises:
        StoreUnavailableError: the store's server cannot be reached.
        StoreError: the store refuses to open (say, a newer schema).
    """
    opener = getattr(store, "open", None)
    if opener is not None:
        await opener()


async def close_store(store: Any) -> None:
    """``await store.aclose()`` when the store has one."""
    closer = getattr(store, "aclose", None)
    if closer is not None:
        await closer()
