"""The logic behind the host verbs of the ``tnx`` CLI: connect, attach an :class:`AgentRuntime`,
run one verb, and turn every expected failure into a :class:`CliError` (one readable line and
an exit code). How results look is :mod:`toolnexus_temporal.cli.render`.

Nothing here re-implements the runtime: each command is one ``AgentRuntime`` call (plus the
attach). Exit codes:

* 0: the verb succeeded (``wait``: the result is ``done`` or ``pending``);
* 1: the verb answered "no": unknown handle, rejected verb, refused spawn, rejected post,
  a ``wait`` result other than ``done``/``pending``, no runtime root to attach to;
* 2: the environment failed: cannot connect, unknown namespace, Temporal errors, no answer
  in time (no worker serving the task queue), bad option values.
"""

from __future__ import annotations

import asyncio
import contextlib
import json
import logging
import os
import sys
from collections.abc import Awaitable, Callable, Iterable
from dataclasses import dataclass
from pathlib import Path
from typing import Any, Final, TypeVar

from pydantic import BaseModel, ValidationError
from temporalio.api.workflowservice.v1 import DescribeNamespaceRequest
from temporalio.client import WorkflowUpdateRPCTimeoutOrCancelledError
from temporalio.service import RPCError, RPCStatusCode

from toolnexus_temporal.activities.store import (
    SqliteConversationStore,
    StoreConfigError,
    StoreUnavailableError,
)
from toolnexus_temporal.activities.stores import open_store as open_store_url
from toolnexus_temporal.cli.render import one_line, truncate
from toolnexus_temporal.client.errors import HandleNotFoundError, TnxError, VerbRejectedError
from toolnexus_temporal.client.reads import TranscriptReader
from toolnexus_temporal.client.rpc import connect
from toolnexus_temporal.client.runtime import AgentRuntime
from toolnexus_temporal.workflows.models import ALL_FIELDS, Budget
from toolnexus_temporal.workflows.names import ROOT_ID

T = TypeVar("T")

DEFAULT_ADDRESS: Final = "127.0.0.1:7233"
"""Temporal frontend used when neither ``--address`` nor ``TEMPORAL_ADDRESS`` is set."""

DEFAULT_NAMESPACE: Final = "default"
"""Namespace used when neither ``--namespace`` nor ``TEMPORAL_NAMESPACE`` is set."""

DEFAULT_TASK_QUEUE: Final = "tnx"
"""Task queue used when neither ``--task-queue`` nor ``TNX_TASK_QUEUE`` is set."""

DEFAULT_STORE: Final = Path(".tnx/conversations.sqlite")
"""Conversation store read by ``inspect --transcript`` when neither ``--store`` nor
``TNX_STORE`` is set."""

CONNECT_TIMEOUT_S: Final = 10.0
"""Seconds allowed for connecting to Temporal."""

VERB_TIMEOUT_S: Final = 60.0
"""Seconds a verb may take before the CLI gives up (no worker serves the task queue, most
likely). ``wait`` adds its own ``--timeout-ms`` and has no limit without one."""

EXIT_NO: Final = 1
"""Exit code of a verb that answered "no" (see the module docstring)."""

EXIT_ENV: Final = 2
"""Exit code of an environment failure (see the module docstring)."""


class CliError(Exception):
    """An expected failure: ``message`` is one readable line, ``code`` the exit code."""

    def __init__(self, message: str, code: int = EXIT_NO) -> None:
        super().__init__(message)
        self.message = message
        self.code = code


@dataclass(frozen=True)
class Options:
    """The options every host verb takes (``--address``, ``--namespace``, ``--task-queue``,
    ``--scope``, ``--store``, ``--json``).

    Attributes:
        address: Temporal frontend ``host:port``.
        namespace: Temporal namespace.
        task_queue: the runtime's task queue (used when ``spawn`` creates the root).
        scope: the runtime's workflow id prefix, None for bare ids.
        store: the conversation store, a SQLite path or a store URL (only ``inspect
            --transcript`` reads it).
        json: print one JSON document on stdout instead of tables.
    """

    address: str = DEFAULT_ADDRESS
    namespace: str = DEFAULT_NAMESPACE
    task_queue: str = DEFAULT_TASK_QUEUE
    scope: str | None = None
    store: Path | str | None = DEFAULT_STORE
    json: bool = False

    def where(self) -> str:
        """``namespace 'x' at host:port, scope 'y'``: the context of a lookup, for messages."""
        scope = f"scope {self.scope!r}" if self.scope else "no scope"
        return f"namespace {self.namespace!r} at {self.address}, {scope}"


# ---------------------------------------------------------------------------- running verbs


_client_used = False


def client_used() -> bool:
    """True once :func:`run` has connected a Temporal client in this process."""
    return _client_used


def hard_exit(code: int) -> None:
    """Flush stdout and stderr, then end the process at once with ``code``.

    After a Temporal client was used, interpreter finalization can abort the process
    (``Fatal Python error: PyGILState_Release`` and SIGABRT) when a thread of the SDK's Rust
    core touches Python objects while the interpreter is being torn down
    (temporalio/sdk-python#300). A CLI command has nothing left to clean up at that point,
    so it skips finalization.
    """
    for stream in (sys.stdout, sys.stderr):
        with contextlib.suppress(Exception):
            stream.flush()
    os._exit(code)


def run(
    opts: Options,
    verb: Callable[[AgentRuntime], Awaitable[T]],
    *,
    create: bool = False,
    store: TranscriptReader | None = None,
    timeout_s: float | None = VERB_TIMEOUT_S,
) -> T:
    """Connect, attach the runtime, run ``verb`` on it and return its result.

    Args:
        opts: the common options.
        verb: one AgentRuntime call.
        create: start the root workflow when it does not exist (``spawn``); otherwise only
            attach (``AgentRuntime.start(create=False)``) and fail when there is no root.
        store: the conversation store to give the runtime (``inspect --transcript``).
        timeout_s: give up after this many seconds (None: never).

    Raises:
        CliError: every expected failure, as one readable line and an exit code.
    """
    logger = logging.getLogger("temporalio")
    before = logger.level
    logger.setLevel(logging.ERROR)  # the SDK's warnings are not for CLI users
    try:
        return asyncio.run(_run(opts, verb, create=create, store=store, timeout_s=timeout_s))
    finally:
        logger.setLevel(before)


async def _run(
    opts: Options,
    verb: Callable[[AgentRuntime], Awaitable[T]],
    *,
    create: bool,
    store: TranscriptReader | None,
    timeout_s: float | None,
) -> T:
    global _client_used
    _client_used = True
    try:
        client = await asyncio.wait_for(
            connect(opts.address, opts.namespace), timeout=CONNECT_TIMEOUT_S
        )
    except TimeoutError as err:
        raise CliError(
            f"cannot connect to Temporal at {opts.address}: no answer in {CONNECT_TIMEOUT_S:g}s",
            EXIT_ENV,
        ) from err
    except RuntimeError as err:
        raise CliError(_connect_message(opts.address, str(err)), EXIT_ENV) from err
    try:
        rt = AgentRuntime(client, task_queue=opts.task_queue, scope=opts.scope, store=store)
    except ValueError as err:
        raise CliError(f"invalid --scope: {err}", EXIT_ENV) from err

    async def attach_and_run() -> T:
        try:
            await rt.start(create=create)
        except HandleNotFoundError as err:
            await _check_namespace(rt, opts)
            raise CliError(
                f"no runtime to attach to: no {ROOT_ID!r} handle in {opts.where()} "
                f"(`tnx spawn {ROOT_ID} NAME` creates it)"
            ) from err
        return await verb(rt)

    try:
        return await asyncio.wait_for(attach_and_run(), timeout=timeout_s)
    except CliError:
        raise
    except TimeoutError as err:
        raise CliError(
            f"no answer in {timeout_s:g}s from the agent workflows in {opts.where()}: "
            f"is a worker serving task queue {opts.task_queue!r}?",
            EXIT_ENV,
        ) from err
    except HandleNotFoundError as err:
        await _check_namespace(rt, opts)
        raise CliError(f"{err} ({opts.where()})") from err
    except VerbRejectedError as err:
        raise CliError(str(err)) from err
    except TnxError as err:
        raise CliError(str(err)) from err
    except WorkflowUpdateRPCTimeoutOrCancelledError as err:
        raise CliError(
            f"no answer from the agent workflow: {err} "
            f"(is a worker serving task queue {opts.task_queue!r}?)",
            EXIT_ENV,
        ) from err
    except RPCError as err:
        hint = ""
        if "poller" in err.message:
            hint = f" (is a worker serving task queue {opts.task_queue!r}? see tnx-worker)"
        raise CliError(
            f"Temporal at {opts.address} answered {err.status.name}: {one_line(err.message)}{hint}",
            EXIT_ENV,
        ) from err


def _connect_message(address: str, raw: str) -> str:
    if "Connection refused" in raw or "ConnectionRefused" in raw:
        return (
            f"cannot connect to Temporal at {address}: connection refused "
            "(is the server running? `tnx server start`, or pass --address)"
        )
    return f"cannot connect to Temporal at {address}: {truncate(one_line(raw), 300)}"


async def _check_namespace(rt: AgentRuntime, opts: Options) -> None:
    """Turn a "not found" caused by a missing namespace into that message (exit 2)."""
    try:
        await rt.client.workflow_service.describe_namespace(
            DescribeNamespaceRequest(namespace=opts.namespace)
        )
    except RPCError as err:
        if err.status == RPCStatusCode.NOT_FOUND:
            raise CliError(
                f"namespace {opts.namespace!r} does not exist at {opts.address}", EXIT_ENV
            ) from err
        # Anything else: keep the original "not found" message.


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
        except StoreUnavailableError as err:
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
