"""What the ``tnx`` command signatures need, and nothing heavier: the defaults ``--help``
shows, the exit codes, :class:`CliError` and the :class:`Options` every host verb gets.

``tnx --version`` and ``tnx --help`` import this module, never the host library or the
worker (``tests/test_layout.py``): the commands' implementations (:mod:`.ops`, :mod:`.verbs`,
:mod:`.queue`, ...) load only when a command runs. :mod:`.ops` re-exports these names.
"""

from __future__ import annotations

from dataclasses import dataclass
from pathlib import Path
from typing import TYPE_CHECKING, Final

if TYPE_CHECKING:
    from toolnexus_temporal.client.cluster import ClusterConfig

DEFAULT_ADDRESS: Final = "127.0.0.1:7233"
"""Temporal frontend used when neither ``--address`` nor ``TEMPORAL_ADDRESS`` is set."""

DEFAULT_NAMESPACE: Final = "default"
"""Namespace used when neither ``--namespace`` nor ``TEMPORAL_NAMESPACE`` is set."""

DEFAULT_TASK_QUEUE: Final = "tnx"
"""Task queue used when neither ``--task-queue`` nor ``TNX_TASK_QUEUE`` is set."""

DEFAULT_STORE: Final = Path(".tnx/conversations.sqlite")
"""Conversation store read by ``inspect --transcript`` when neither ``--store`` nor
``TNX_STORE`` is set."""

DEFAULT_PROMPT: Final = "Ship the latest billing release: find what changed, then deploy it."
"""The demo coordinator's prompt when none is given (``tnx demo --prompt``)."""

DEFAULT_DATA_DIR: Final = Path(".tnx")
"""Where the demo keeps its state: ``temporal/`` (the dev server) and ``conversations.sqlite``."""

DEFAULT_CODEC_HOST: Final = "127.0.0.1"
"""Address ``tnx codec-server`` listens on when none is given (loopback only)."""

DEFAULT_CODEC_PORT: Final = 8081
"""Port ``tnx codec-server`` listens on when none is given."""

DEFAULT_CODEC_ORIGINS: Final = ("http://localhost:8233", "http://127.0.0.1:8233")
"""Web UI origins ``tnx codec-server`` allows by CORS when none are given: the dev server's
UI, under both names a browser may have been given (the origin is whatever host was typed)."""

TRACE_CLOSED: Final = 20
"""The closed children of each handle whose lines ``tnx trace`` reads without ``--all``: the
newest by spawn order (``AgentRuntime.trace_read(closed=...)``); a note counts the others.
Each closed child's query is a replay of its history on the worker (issue 38)."""

EXIT_NO: Final = 1
"""Exit code of a verb that answered "no" (see :mod:`.ops`)."""

EXIT_ENV: Final = 2
"""Exit code of an environment failure (see :mod:`.ops`)."""


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
        cluster: the resolved connection (TLS, API key, ...; ``address`` and ``namespace``
            are its values); None: resolve ``address``/``namespace`` over the environment and
            the profile when connecting.
    """

    address: str = DEFAULT_ADDRESS
    namespace: str = DEFAULT_NAMESPACE
    task_queue: str = DEFAULT_TASK_QUEUE
    scope: str | None = None
    store: Path | str | None = DEFAULT_STORE
    json: bool = False
    cluster: ClusterConfig | None = None

    def shown(self, handle_id: str) -> str:
        """The one form in which the CLI prints a handle id: its workflow id
        (``demo/root/coordinator.1`` under ``--scope demo``, ``root/coordinator.1`` with no
        scope), which every ``tnx`` command takes back as printed, ``--scope`` given or not
        (:func:`toolnexus_temporal.cli.args.scope_in`, :func:`~toolnexus_temporal.cli.args.ref`)
        and which the web UI and ``temporal workflow`` show."""
        return f"{self.scope}/{handle_id}" if self.scope else handle_id

    def where(self) -> str:
        """``namespace 'x' at host:port, scope 'y'``: the context of a lookup, for messages."""
        scope = f"scope {self.scope!r}" if self.scope else "no scope"
        return f"namespace {self.namespace!r} at {self.address}, {scope}"
