"""``tnx replay-check``: replay the histories of the running agent workflows against the code
installed here, before deploying it (README "Before a deploy: replay-check").

A change to workflow code that alters the commands an existing history recorded breaks every
running agent that reaches that point (a non-determinism error: its workflow tasks fail and
retry until the old code is back). Replaying the running histories with the new code finds
them first. The check lists the running ``AgentWorkflow`` executions with a visibility query,
downloads their histories a few at a time and feeds them, as an async iterator, to one
``temporalio.worker.Replayer`` built like the worker (:func:`toolnexus_temporal.worker.
replayer`: the same workflow classes, the client's data converter, the worker's runner).

It also reads, from each history, the protocol generation the agent runs (its start input's
``state.protocol``) and the ``workflow.patched`` ids its markers name, and reports them per
namespace: the retirement rule of ``workflows/contract/versions.py`` (a generation or patch id goes
only when no running agent uses it) is checked here. An agent whose generation this build no
longer has (``names.RETIRED_PROTOCOLS``, or one it never had) is ``UNSUPPORTED PROTOCOL``.

Exit codes of the command: 0 every listed workflow replays; 1 at least one would break
(non-deterministic, its replay failed otherwise, or its protocol generation is not this
build's); 2 nothing would break as far as it could see, but some histories could not be
fetched (or Temporal could not be reached).
"""

from __future__ import annotations

import asyncio
import re
from collections import deque
from collections.abc import AsyncIterator
from dataclasses import dataclass, field
from typing import Any, Final, Literal

import typer
from rich.markup import escape
from temporalio.api.enums.v1 import EventType
from temporalio.client import Client, WorkflowExecution, WorkflowHistory
from temporalio.runtime import LoggingConfig, Runtime, TelemetryConfig, TelemetryFilter
from temporalio.workflow import NondeterminismError

from toolnexus_temporal.activities.registry import Registry, RegistryError
from toolnexus_temporal.cli import ops
from toolnexus_temporal.cli.hostcmd import emit, out
from toolnexus_temporal.cli.ops import Options
from toolnexus_temporal.cli.render import one_line, truncate
from toolnexus_temporal.client.queries import prefix_clause
from toolnexus_temporal.workflows.contract.names import PROTOCOLS, WORKFLOW_TYPE
from toolnexus_temporal.workflows.contract.versions import protocol_error

BASE_QUERY: Final = f'WorkflowType="{WORKFLOW_TYPE}" AND ExecutionStatus="Running"'
"""The visibility query of every check: the running agent workflows."""

FETCH_AHEAD: Final = 8
"""Histories downloaded at once while the replayer works through the earlier ones."""

Status = Literal["ok", "nondeterministic", "failed", "unsupported", "missing", "fetch_failed"]
"""``ok`` replays; ``nondeterministic`` the new code emits other commands than the history
recorded; ``failed`` the replay failed otherwise (e.g. the code raised in a workflow task);
``unsupported`` the agent runs a protocol generation this build does not have; ``missing``
its definition names tools or agents the registry given with ``--registry`` lacks;
``fetch_failed`` its history could not be downloaded (not checked)."""

LABELS: Final[dict[Status, str]] = {
    "ok": "OK",
    "nondeterministic": "NONDETERMINISTIC",
    "failed": "REPLAY FAILED",
    "unsupported": "UNSUPPORTED PROTOCOL",
    "missing": "MISSING IN REGISTRY",
    "fetch_failed": "FETCH FAILED",
}
"""How each status is printed."""


@dataclass(frozen=True)
class ReplayOutcome:
    """The result for one running workflow.

    Attributes:
        workflow_id: the workflow id (``{scope}/root/worker.1``).
        run_id: the run replayed (the current run; earlier runs of a continued-as-new agent
            are closed and never replay again).
        status: see :data:`Status`.
        detail: the first line of the error (empty when ``ok``).
        protocol: the protocol generation of the agent (None: its input was unreadable).
        patches: the ``workflow.patched`` ids its history's markers name, sorted.
    """

    workflow_id: str
    run_id: str
    status: Status
    detail: str = ""
    protocol: int | None = None
    patches: tuple[str, ...] = ()

    @property
    def label(self) -> str:
        """``OK``, ``NONDETERMINISTIC``, ``REPLAY FAILED`` or ``FETCH FAILED``."""
        return LABELS[self.status]


@dataclass
class ReplayReport:
    """Every outcome of one check, in listing order.

    Attributes:
        query: the visibility query used.
        total: how many executions the query matched (``count_workflows``), None if unknown.
        outcomes: one per listed workflow (at most ``limit``).
    """

    query: str
    total: int | None = None
    outcomes: list[ReplayOutcome] = field(default_factory=list)

    def count(self, status: Status) -> int:
        """How many outcomes have ``status``."""
        return sum(1 for o in self.outcomes if o.status == status)

    @property
    def breaking(self) -> list[ReplayOutcome]:
        """The workflows the local code would break (non-deterministic or failed)."""
        return [
            o
            for o in self.outcomes
            if o.status in ("nondeterministic", "failed", "unsupported", "missing")
        ]

    def protocols(self) -> dict[int | None, int]:
        """Agents per protocol generation (None: unreadable), lowest first."""
        found: dict[int | None, int] = {}
        for o in self.outcomes:
            if o.status != "fetch_failed":
                found[o.protocol] = found.get(o.protocol, 0) + 1
        return dict(sorted(found.items(), key=lambda kv: -1 if kv[0] is None else kv[0]))

    def patches(self) -> dict[str, int]:
        """Agents per ``workflow.patched`` id their histories name, by id."""
        found: dict[str, int] = {}
        for o in self.outcomes:
            for patch in o.patches:
                found[patch] = found.get(patch, 0) + 1
        return dict(sorted(found.items()))

    def versions_line(self, namespace: str) -> str:
        """``namespace default: protocol 4: 12 agent(s); patch ids: none``."""
        gens = ", ".join(
            f"protocol {'?' if p is None else p}: {n} agent(s)"
            + ("" if p in PROTOCOLS else " (not this build's)")
            for p, n in self.protocols().items()
        )
        patches = ", ".join(f"{p}: {n}" for p, n in self.patches().items()) or "none"
        return f"namespace {namespace}: {gens or 'no agents'}; patch ids: {patches}"

    @property
    def exit_code(self) -> int:
        """0 all replay, 1 some would break, 2 none would break but some were not fetched."""
        if self.breaking:
            return 1
        return 2 if self.count("fetch_failed") else 0

    def summary(self) -> str:
        """One line: ``replay-check: 12 workflow(s): 11 OK, 1 NONDETERMINISTIC, ...``."""
        parts = [f"{self.count(s)} {LABELS[s]}" for s in LABELS if self.count(s) or s == "ok"]
        checked = len(self.outcomes)
        unchecked = ""
        if self.total is not None and self.total > checked:
            unchecked = f" ({self.total - checked} more running, not listed: raise --limit)"
        verdict = "deploy would break running agents" if self.breaking else "safe to deploy"
        if not self.breaking and self.count("fetch_failed"):
            verdict = "incomplete: some histories were not checked"
        return (
            f"replay-check: {checked} running workflow(s): {', '.join(parts)}{unchecked}: {verdict}"
        )


def visibility_query(*, scope: str | None = None, query: str | None = None) -> str:
    """:data:`BASE_QUERY`, narrowed to ``scope``'s workflow ids and by an extra ``query``.

    Args:
        scope: a runtime's workflow id prefix: ``WorkflowId STARTS_WITH "{scope}/"``.
        query: any visibility condition, ANDed in parentheses (``AgentName="coder"``).

    Raises:
        ValueError: ``scope`` holds a character no query can carry (``client/queries.py``).
    """
    parts = [BASE_QUERY]
    if scope:
        parts.append(prefix_clause(f"{scope}/"))
    if query and query.strip():
        parts.append(f"({query.strip()})")
    return " AND ".join(parts)


_CORE_MESSAGE = re.compile(r'message: "((?:[^"\\]|\\.)*)"')
"""The failure message inside the SDK core's ``Failure { failure: Some(Failure { message: ...``."""


def _first_line(err: BaseException) -> str:
    """The readable part of a replay error: the core's failure message when there is one
    (``[TMPRL1100] Nondeterminism error: Timer machine does not handle this event: ...``),
    else the error's first line."""
    raw = str(err).strip()
    found = _CORE_MESSAGE.search(raw)
    lines = raw.splitlines()
    if found:  # the core quotes it Rust-style: \n and \" escaped
        quoted = found.group(1).replace('\\"', '"').replace("\\n", "\n")
        lines = quoted.strip().splitlines()
    return truncate(one_line(lines[0] if lines else type(err).__name__), 300)


_quiet_runtime: Runtime | None = None


def _quiet() -> Runtime:
    """A core runtime that logs only errors: the core warns once per failing replay, and the
    report already carries each failure."""
    global _quiet_runtime
    if _quiet_runtime is None:
        quiet = LoggingConfig(filter=TelemetryFilter(core_level="ERROR", other_level="ERROR"))
        _quiet_runtime = Runtime(telemetry=TelemetryConfig(logging=quiet))
    return _quiet_runtime


async def _histories(
    client: Client,
    listing: AsyncIterator[WorkflowExecution],
    failed: list[ReplayOutcome],
    ahead: int,
) -> AsyncIterator[WorkflowHistory]:
    """The histories of ``listing`` in order, ``ahead`` downloads in flight; a download that
    fails is appended to ``failed`` and skipped."""

    async def fetch(ex: WorkflowExecution) -> WorkflowHistory:
        return await client.get_workflow_handle(ex.id, run_id=ex.run_id).fetch_history()

    pending: deque[tuple[WorkflowExecution, asyncio.Task[WorkflowHistory]]] = deque()

    async def drain_one() -> WorkflowHistory | None:
        ex, task = pending.popleft()
        try:
            return await task
        except Exception as err:
            failed.append(ReplayOutcome(ex.id, ex.run_id, "fetch_failed", _first_line(err)))
            return None

    try:
        async for ex in listing:
            pending.append((ex, asyncio.create_task(fetch(ex))))
            if len(pending) >= ahead and (history := await drain_one()) is not None:
                yield history
        while pending:
            if (history := await drain_one()) is not None:
                yield history
    finally:
        for _, task in pending:
            task.cancel()


async def replay_check(
    client: Client,
    *,
    scope: str | None = None,
    query: str | None = None,
    limit: int | None = None,
    sandboxed: bool = False,
    workflows: tuple[type, ...] = (),
    fetch_ahead: int = FETCH_AHEAD,
    registry: Registry | None = None,
) -> ReplayReport:
    """Replay every running agent workflow matched by :func:`visibility_query` against the
    local workflow code.

    Args:
        client: connected with the data converter the workers use (:func:`connect`).
        scope: only this runtime's workflows (``{scope}/...``).
        query: an extra visibility condition.
        limit: check at most this many workflows (None: all).
        sandboxed: replay inside Temporal's sandbox (stricter, slower).
        workflows: replay these classes instead of the worker's (tests).
        fetch_ahead: histories downloaded at once.
        registry: the registry the new workers will run: an agent whose definition names a
            tool, team member, interpreter or hook it lacks is ``missing`` (it would get
            error results for them).

    Returns:
        The report; a history that cannot be downloaded is a ``fetch_failed`` outcome.

    Raises:
        temporalio.service.RPCError: the listing itself fails (bad query, no namespace).
        ValueError: ``limit`` or ``fetch_ahead`` below 1.
    """
    if limit is not None and limit < 1:
        raise ValueError(f"limit must be at least 1, got {limit}")
    if fetch_ahead < 1:
        raise ValueError(f"fetch_ahead must be at least 1, got {fetch_ahead}")
    q = visibility_query(scope=scope, query=query)
    report = ReplayReport(query=q, total=(await client.count_workflows(q)).count)
    fetch_failed: list[ReplayOutcome] = []
    listing = client.list_workflows(q, limit=limit)
    histories = _histories(client, listing, fetch_failed, fetch_ahead)
    from toolnexus_temporal import worker  # the worker's code: only when checking

    replayer = worker.replayer(
        client.data_converter, sandboxed=sandboxed, workflows=workflows, runtime=_quiet()
    )
    async with replayer.workflow_replay_iterator(histories) as results:
        async for result in results:
            h, err = result.history, result.replay_failure
            protocol, patches, defn = await versions_of(client, h)
            status: Status = "ok"
            detail = ""
            unsupported = None if protocol is None else protocol_error(protocol)
            missing = [] if registry is None else missing_in(registry, defn)
            if unsupported is not None:
                status, detail = "unsupported", unsupported
            elif missing:
                status = "missing"
                detail = f"its definition names {', '.join(missing)}: not in the local registry"
            elif err is not None:
                status = "nondeterministic" if isinstance(err, NondeterminismError) else "failed"
                detail = _first_line(err)
            report.outcomes.append(
                ReplayOutcome(h.workflow_id, h.run_id, status, detail, protocol, patches)
            )
    report.outcomes.extend(fetch_failed)
    return report


async def versions_of(
    client: Client, history: WorkflowHistory
) -> tuple[int | None, tuple[str, ...], dict[str, Any] | None]:
    """The protocol generation an agent's history runs (its start input's ``state.protocol``,
    read from the decoded JSON so that an input of an older shape still tells it; 1 when the
    field is absent, as before it existed; None when the input cannot be decoded) and the
    ``workflow.patched`` ids its markers name (Temporal's core records each as a
    ``core_patch`` marker whose ``patch-data`` is ``{"id": ..., "deprecated": ...}``), and
    its agent definition as the input holds it (None for the root or an unreadable input)."""
    converter = client.data_converter
    protocol: int | None = None
    defn: dict[str, Any] | None = None
    patches: set[str] = set()
    for event in history.events:
        if event.event_type == EventType.EVENT_TYPE_WORKFLOW_EXECUTION_STARTED:
            payloads = event.workflow_execution_started_event_attributes.input.payloads
            try:
                (inp,) = await converter.decode(list(payloads[:1]))
                found_protocol = inp["state"].get("protocol", 1)
                protocol = found_protocol if isinstance(found_protocol, int) else None
                found_defn = inp["state"].get("defn")
                defn = found_defn if isinstance(found_defn, dict) else None
            except Exception:
                protocol = None  # not an agent's input (a mismatched codec key, a bad start)
        elif event.event_type == EventType.EVENT_TYPE_MARKER_RECORDED:
            attrs = event.marker_recorded_event_attributes
            data = attrs.details.get("patch-data")
            if attrs.marker_name != "core_patch" or data is None or not data.payloads:
                continue
            try:
                (found,) = await converter.decode(list(data.payloads[:1]))
            except Exception:
                continue
            if isinstance(found, dict) and isinstance(found.get("id"), str):
                patches.add(found["id"])
    return protocol, tuple(sorted(patches)), defn


def missing_in(registry: Registry, defn: dict[str, Any] | None) -> list[str]:
    """What the agent definition ``defn`` (as a running agent holds it) names that
    ``registry`` lacks: its tools, MCP servers, team members, interpreter and hooks."""
    if defn is None:
        return []
    missing = [f"tool {t!r}" for t in defn.get("tools", []) if t not in registry.tools]
    missing += [
        f"MCP server {m.get('name')!r}"
        for m in defn.get("mcp", [])
        if isinstance(m, dict) and m.get("name") not in registry.mcp_servers
    ]
    missing += [f"agent {a!r}" for a in defn.get("team", []) if a not in registry.agents]
    wait_for = defn.get("wait_for")
    if wait_for and wait_for not in registry.interpreters:
        missing.append(f"interpreter {wait_for!r}")
    for hook in (defn.get("on_spawn"), defn.get("on_close")):
        if hook and hook not in registry.hooks:
            missing.append(f"hook {hook!r}")
    return missing


# ---------------------------------------------------------------------------- the command


def run_command(
    opts: Options, query: str | None, limit: int | None, sandbox: bool, registry: str | None
) -> None:
    """`tnx replay-check` (its options: :mod:`~toolnexus_temporal.cli.app`): replay, print
    the report, exit with its code."""

    local: Registry | None = None
    if registry is not None:
        try:
            local = Registry.load(registry)
        except RegistryError as err:
            raise ops.CliError(f"invalid --registry: {err}", ops.EXIT_ENV) from None
    report = ops.run_client(
        opts,
        lambda client: replay_check(
            client, scope=opts.scope, query=query, limit=limit, sandboxed=sandbox, registry=local
        ),
    )
    if opts.json:
        emit(
            {
                "query": report.query,
                "total": report.total,
                "summary": report.summary(),
                "exit_code": report.exit_code,
                "namespace": opts.namespace,
                "protocols": {str(p): n for p, n in report.protocols().items()},
                "patches": report.patches(),
                "workflows": [
                    {
                        "workflow_id": o.workflow_id,
                        "run_id": o.run_id,
                        "status": o.label,
                        "protocol": o.protocol,
                        "patches": list(o.patches),
                    }
                    | ({"error": o.detail} if o.detail else {})
                    for o in report.outcomes
                ],
            }
        )
    else:
        for o in report.outcomes:
            detail = f": {o.detail}" if o.detail else ""
            out.print(f"{o.label:<20} {escape(o.workflow_id)}{escape(detail)}", soft_wrap=True)
        out.print(escape(report.versions_line(opts.namespace)), soft_wrap=True)
        out.print(report.summary(), soft_wrap=True)
    if report.exit_code:
        raise typer.Exit(report.exit_code)
