"""Option parsing and output of the ``tnx`` host verbs: handle ids as the runtime wants them,
``--budget`` and JSON-object options, the ``--store`` to read transcripts from, the JSON dump
of results, and the environment's empty values. Every failure is a :class:`~.ops.CliError`
(exit 2).
"""

from __future__ import annotations

import json
import os
from collections.abc import Iterable
from pathlib import Path
from typing import Any

from pydantic import BaseModel, ValidationError

from toolnexus_temporal.activities.store import (
    SqliteConversationStore,
    StoreConfigError,
    StoreError,
    StoreUnavailableError,
)
from toolnexus_temporal.activities.stores import open_store as open_store_url
from toolnexus_temporal.cli.ops import EXIT_ENV, CliError, Options
from toolnexus_temporal.client.queries import scope_error
from toolnexus_temporal.client.reads import TranscriptReader
from toolnexus_temporal.workflows.contract.models import ALL_FIELDS, Budget
from toolnexus_temporal.workflows.contract.names import ROOT_ID


def ref(opts: Options, handle_id: str) -> str:
    """A handle id as the runtime wants it: a workflow id given by mistake (``{scope}/root/…``)
    loses its scope prefix.

    Raises:
        CliError: an empty id (exit 2).
    """
    handle_id = handle_id.strip().rstrip("/")
    if opts.scope and handle_id.startswith(f"{opts.scope}/"):
        handle_id = handle_id[len(opts.scope) + 1 :]
    if not handle_id:
        raise CliError("a handle id such as root/worker.1 is needed", EXIT_ENV)
    return handle_id


def scope_in(handle_id: str | None) -> str | None:
    """The runtime scope a pasted workflow id names: ``demo/root/assistant.2`` → ``demo`` (what
    the web UI and ``temporal workflow list`` show for a scoped runtime), None for a handle id
    (``root/...``) or when the part before ``/root`` is not a valid scope."""
    if handle_id is None:
        return None
    head, sep, _ = handle_id.strip().partition(f"/{ROOT_ID}")
    rest = handle_id.strip()[len(head) + len(sep) :]
    if not sep or not head or (rest and not rest.startswith("/")) or head.startswith(ROOT_ID):
        return None
    return head if scope_error(head) is None else None


def tree_ref(opts: Options, handle_id: str | None) -> str | None:
    """:func:`ref` for an optional id; None (the root) stays None."""
    return None if handle_id is None else ref(opts, handle_id)


def parse_budget(raw: str | None) -> Budget | None:
    """``--budget`` JSON (``{"max_turns": 2, "max_tokens": 5000}``) as a Budget.

    Raises:
        CliError: not JSON, or not a valid Budget (exit 2).
    """
    if raw is None:
        return None
    try:
        return Budget.model_validate_json(raw)
    except ValidationError as err:
        raise CliError(f"invalid --budget: {validation_message(err)}", EXIT_ENV) from err


def parse_json_object(raw: str | None, option: str) -> dict[str, Any] | None:
    """A JSON-object option (``--data``), or None.

    Raises:
        CliError: not JSON, or not an object (exit 2).
    """
    if raw is None:
        return None
    try:
        value = json.loads(raw)
    except ValueError as err:
        raise CliError(f"invalid {option}: not JSON ({err})", EXIT_ENV) from err
    if not isinstance(value, dict):
        raise CliError(f"invalid {option}: a JSON object is needed", EXIT_ENV)
    return value


def error_line(err: Exception) -> str:
    """An error as one line: a pydantic ``ValidationError`` by :func:`validation_message`
    (no model name, no URL), any other error's text with its lines joined."""
    if isinstance(err, ValidationError):
        return validation_message(err)
    return " ".join(str(err).split())


def validation_message(err: ValidationError) -> str:
    """A pydantic error as one line: ``field: message; field: message``."""
    parts = []
    for item in err.errors():
        where = ".".join(str(p) for p in item["loc"]) or "value"
        parts.append(f"{where}: {item['msg']}")
    return "; ".join(parts)


class _UrlStoreReader:
    """Reads a networked store (a ``postgresql://`` URL) with a store opened for the one read
    and closed after it."""

    def __init__(self, url: str) -> None:
        self.url = url

    async def read(self, conv_id: str, limit: int | None = None) -> list[Any]:
        store: Any = open_store_url(self.url)
        try:
            await store.open()
            return list(await store.read(conv_id, limit))
        except (StoreUnavailableError, StoreError) as err:  # never a driver's own error
            raise CliError(str(err), EXIT_ENV) from None
        finally:
            await store.aclose()


def open_store(path: Path | str | None) -> TranscriptReader:
    """The conversation store at ``path`` (a SQLite file, which must exist: reading never
    creates one) or a store URL (``postgresql://...``, read when the transcript is needed).

    Raises:
        CliError: no path, no file there, or an unknown URL scheme (exit 2).
    """
    if path is None or not str(path):
        raise CliError("no conversation store: pass --store or set TNX_STORE", EXIT_ENV)
    if isinstance(path, str) and "://" in path:
        if path.split("://", 1)[0].lower() == "sqlite":
            path = Path(path.split("://", 1)[1])
        else:
            try:
                open_store_url(path)  # checks the scheme and the URL; connects later
            except StoreConfigError as err:
                raise CliError(f"invalid --store: {err}", EXIT_ENV) from None
            return _UrlStoreReader(path)
    path = Path(path)
    path = path.expanduser()
    if not path.is_file():
        raise CliError(
            f"no conversation store at {path} (pass --store or set TNX_STORE to the "
            "worker's store file)",
            EXIT_ENV,
        )
    return SqliteConversationStore(path)


# ---------------------------------------------------------------------------- JSON


def dump(value: BaseModel | Iterable[BaseModel]) -> Any:
    """A model, or a list of models, as JSON-ready data (``mode="json", by_alias=True``), every
    field included (the wire leaves zero defaults out: see ``WireModel``)."""
    full = {ALL_FIELDS: True}
    if isinstance(value, BaseModel):
        return value.model_dump(mode="json", by_alias=True, context=full)
    return [item.model_dump(mode="json", by_alias=True, context=full) for item in value]


# ---------------------------------------------------------------------------- environment


def store_path_from_env(value: Path | str | None) -> Path | str | None:
    """``--store`` as given (a URL stays a string, anything else is a path); an empty value
    (``TNX_STORE=``) means unknown."""
    if value is None or str(value) in ("", "."):
        return None
    return value if isinstance(value, str) and "://" in value else Path(value)


def env_scope(value: str | None) -> str | None:
    """``--scope`` as given; an empty value (``TNX_SCOPE=``) means no scope."""
    return value or None


def debug() -> bool:
    """``TNX_DEBUG`` is set: unexpected errors show their traceback."""
    return bool(os.environ.get("TNX_DEBUG"))
