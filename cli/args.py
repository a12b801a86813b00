"""Option parsing and output of the ``tnx`` host verbs: handle ids as the runtime wants them,
``--budget`` and JSON-object options, the ``--store`` to read transcripts from, the JSON dump
of results, and the environment's empty values. Every failure is a :class:`~.ops.CliError`
(exit 2).
"""

from __future__ import annotations

import json
import os
import sys
from collections.abc import Iterable
from pathlib import Path
from typing import Any

from pydantic import BaseModel, ValidationError
from pydantic_core import ErrorDetails

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


def ref(opts: Options, handle_id: str, *, request: bool = False) -> str:
    """A handle id as the runtime wants it: a workflow id given by mistake (``{scope}/root/…``)
    loses its scope prefix; a Request id (``root/ops.1#2``, as ``tnx pending`` prints it)
    names its agent (walk 9), unless ``request`` (``tnx answer --request``) keeps it.

    Raises:
        CliError: an empty id, or a workflow id of another scope than ``--scope`` (exit 2;
            walk 5 got "no handle" for an id that exists in its own scope).
    """
    handle_id = handle_id.strip().rstrip("/")
    if opts.scope and handle_id.startswith(f"{opts.scope}/"):
        handle_id = handle_id[len(opts.scope) + 1 :]
    elif (named := scope_in(handle_id)) is not None and named != opts.scope:
        given = f"--scope {opts.scope}" if opts.scope else "--scope ''"
        raise CliError(
            f"{handle_id!r} is an id of scope {named!r}, but {given} was given: drop "
            f"--scope (the id names its scope) or pass --scope {named}",
            EXIT_ENV,
        )
    if not request and "#" in handle_id:
        handle_id = handle_id.rpartition("#")[0]
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
        CliError: one line in the CLI's words (exit 2): ``--budget: not valid JSON: ...``,
            ``--budget: unknown key "max_tokenz" (allowed: max_turns, ...)``, ``--budget:
            max_turns must be at least 1, got 0``.
    """
    if raw is None:
        return None
    try:
        value = json.loads(raw)
    except json.JSONDecodeError as err:
        where = f"line {err.lineno} column {err.colno}" if err.lineno > 1 else f"column {err.colno}"
        raise CliError(f"--budget: not valid JSON: {err.msg} at {where}", EXIT_ENV) from None
    keys = list(Budget.model_fields)
    if not isinstance(value, dict):
        raise CliError(
            f'--budget: must be a JSON object such as {{"max_turns": 2}} (keys: {", ".join(keys)})',
            EXIT_ENV,
        )
    unknown = [key for key in value if key not in keys]
    if unknown:
        raise CliError(
            f"--budget: unknown key {json.dumps(unknown[0])} (allowed: {', '.join(keys)})",
            EXIT_ENV,
        )
    try:
        return Budget.model_validate_json(raw)
    except ValidationError as err:
        first = err.errors()[0]
        key = ".".join(str(p) for p in first["loc"])
        given = json.dumps(first.get("input"), default=str)
        raise CliError(f"--budget: {key} {_must(first)}, got {given}", EXIT_ENV) from None


_MUST = {
    "greater_than_equal": "must be at least {ge}",
    "greater_than": "must be more than {gt}",
    "less_than_equal": "must be at most {le}",
    "less_than": "must be less than {lt}",
    "decimal_max_places": "must have at most {decimal_places} decimal places",
}
"""What a pydantic check of a number wants, in the CLI's words (by the error's type)."""


def _must(item: ErrorDetails) -> str:
    """``must be at least 1``: what the value of a pydantic error should be."""
    kind = item["type"]
    if kind in _MUST:
        return _MUST[kind].format(**item.get("ctx", {}))
    if kind.startswith("int_"):
        return "must be a whole number or null (no limit)"
    if kind.startswith("decimal_"):
        return 'must be a decimal number such as "0.50" or null (no limit)'
    return item["msg"][:1].lower() + item["msg"][1:]


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


def scope_of(value: str | None, handle_id: str | None) -> str | None:
    """The scope a command runs in: ``--scope`` when given on the command line; else the
    scope a pasted workflow id names (``demo/root/x.1``, as the web UI and ``tnx`` print
    ids), before ``TNX_SCOPE`` (an ambient default, where ``value`` then comes from); else
    ``TNX_SCOPE``. An id of another scope than a ``--scope`` given is refused by :func:`ref`.
    """
    named = scope_in(handle_id)
    given = any(a == "--scope" or a.startswith("--scope=") for a in sys.argv[1:])
    if named is not None and not given:
        return named
    return env_scope(value) or named


def env_scope(value: str | None) -> str | None:
    """``--scope`` as given; an empty value (``TNX_SCOPE=``) means no scope."""
    return value or None


def debug() -> bool:
    """``TNX_DEBUG`` is set: unexpected errors show their traceback."""
    return bool(os.environ.get("TNX_DEBUG"))
