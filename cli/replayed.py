"""Reads with no worker (issue 37 item 4): each handle's state rebuilt from its workflow's
history, for ``tnx trace``, ``tnx audit`` and ``tnx inspect`` when no worker answers a query.

The latest run of each handle's workflow is replayed here, in the CLI's process, by a
``temporalio.worker.Replayer`` with what a worker registers (:data:`~toolnexus_temporal.worker.
WORKFLOWS` and its :func:`~toolnexus_temporal.worker.workflow_runner`) and the client's data
converter (a payload codec decodes the history as it does for the worker). The replayed
instance is then read through the workflow's own query methods (``view``, ``state``,
``trace``: pure functions of the state), as it stood after the history's last workflow task:
read just before the replayer evicts it, since an eviction ends the run's coroutines and what
that ends must not show. No activity runs and nothing is written: the workflow code replays
the decisions the worker made.

What this is not: a signal or update the server recorded after the last workflow task (an
Answer queued while no worker ran) is not applied yet, as no worker has run the task that
would take it; the state is the one a query answered when the last worker stopped.
"""

from __future__ import annotations

import asyncio
from collections.abc import AsyncIterator, Iterable, Sequence
from dataclasses import dataclass, field
from typing import Any, Final

from rich.markup import escape
from temporalio import workflow
from temporalio.api.enums.v1 import EventType
from temporalio.bridge.proto.workflow_activation import WorkflowActivation
from temporalio.bridge.proto.workflow_completion import WorkflowActivationCompletion
from temporalio.client import Client, WorkflowHistory
from temporalio.runtime import LoggingConfig, Runtime, TelemetryConfig, TelemetryFilter
from temporalio.service import RPCError, RPCStatusCode
from temporalio.worker import (
    ExecuteWorkflowInput,
    Interceptor,
    Replayer,
    WorkflowInboundInterceptor,
    WorkflowInstance,
    WorkflowInstanceDetails,
    WorkflowInterceptorClassInput,
    WorkflowRunner,
)

from toolnexus_temporal.cli.hostcmd import err_console
from toolnexus_temporal.cli.ops import EXIT_ENV, CliError, Options, no_worker_note
from toolnexus_temporal.cli.render import clock, one_line, truncate
from toolnexus_temporal.cli.workercheck import worker_read_or_spare
from toolnexus_temporal.client.audit import AuditRecord, audit_records
from toolnexus_temporal.client.errors import HandleNotFoundError, NoWorkerError, TnxError
from toolnexus_temporal.client.reads import children_read, merged_lines, pre_order
from toolnexus_temporal.client.runtime import AgentRuntime
from toolnexus_temporal.workflows.contract.context import ModelView
from toolnexus_temporal.workflows.contract.models import (
    HandleView,
    Message,
    TraceEntry,
    TraceLine,
)
from toolnexus_temporal.workflows.contract.state import HandleState

ATTACH_GRACE_S: Final = 1.0
"""How long the first query of a read (the root's ``view``, :func:`attach`) may go
unanswered before the read goes on from history (s). A worker answers a query in
milliseconds; a worker SIGKILLed a moment ago is still listed as polling (no last heartbeat
said it stopped), and the server holds a query for it rather than failing it at once until
no poll has begun for a while (``matching.queryPollerUnavailableWindow``, 20 s by default):
without this, the read would wait out :data:`~toolnexus_temporal.cli.workercheck.
READ_GRACE_S`, 3 s."""

_TASK_COMPLETED = EventType.EVENT_TYPE_WORKFLOW_TASK_COMPLETED
_TASK_SCHEDULED = EventType.EVENT_TYPE_WORKFLOW_TASK_SCHEDULED

_UPDATE_EVENTS = frozenset(
    {
        EventType.EVENT_TYPE_WORKFLOW_EXECUTION_UPDATE_ACCEPTED,
        EventType.EVENT_TYPE_WORKFLOW_EXECUTION_UPDATE_COMPLETED,
    }
)

_DONE_EVENTS = frozenset(
    {
        EventType.EVENT_TYPE_WORKFLOW_TASK_COMPLETED,
        EventType.EVENT_TYPE_WORKFLOW_EXECUTION_COMPLETED,
        EventType.EVENT_TYPE_WORKFLOW_EXECUTION_FAILED,
        EventType.EVENT_TYPE_WORKFLOW_EXECUTION_TIMED_OUT,
        EventType.EVENT_TYPE_WORKFLOW_EXECUTION_CANCELED,
        EventType.EVENT_TYPE_WORKFLOW_EXECUTION_TERMINATED,
        EventType.EVENT_TYPE_WORKFLOW_EXECUTION_CONTINUED_AS_NEW,
    }
)
"""The events after which the replayed state can have changed: a worker's completed task or
the run's end."""


@dataclass(frozen=True)
class Replayed:
    """One handle as its workflow's history has it, read through the workflow's own query
    methods after a local replay.

    Attributes:
        handle_id: the handle's id (``root/asker.1``).
        view: what the ``view`` query answers (``AgentRuntime.inspect``).
        state: what the ``state`` query answers (secrets masked).
        trace: what the ``trace`` query answers, oldest first.
        as_of_ms: when the server recorded the last event that could change the state (the
            last completed workflow task, or the run's end), ms since the Unix epoch.
        run_id: the run replayed (the workflow's latest).
    """

    handle_id: str
    view: HandleView
    state: HandleState
    trace: list[TraceEntry]
    as_of_ms: int
    run_id: str


@dataclass
class _Captured:
    """The replayed workflow instances by workflow id, and what their query methods answered
    just before each was evicted."""

    instances: dict[str, Any] = field(default_factory=dict)
    answers: dict[str, tuple[HandleView, HandleState, list[TraceEntry]]] = field(
        default_factory=dict
    )

    def read(self, workflow_id: str) -> None:
        """Keep what the instance's query methods answer now (copies: the eviction that
        follows may still write to the state)."""
        wf = self.instances.get(workflow_id)
        if wf is None:
            return
        self.answers[workflow_id] = (
            wf.view().model_copy(deep=True),
            wf.state().model_copy(deep=True),
            [entry.model_copy(deep=True) for entry in wf.trace()],
        )


class _ReadBeforeEviction(WorkflowInstance):
    """A workflow instance that has ``captured`` read its query methods before an eviction
    reaches it, and otherwise does what ``inner`` does."""

    def __init__(self, inner: WorkflowInstance, captured: _Captured) -> None:
        self._inner = inner
        self._captured = captured

    def activate(self, act: WorkflowActivation) -> WorkflowActivationCompletion:
        """The activation, run by the inner instance; an eviction read first."""
        if any(job.HasField("remove_from_cache") for job in act.jobs):
            self._captured.read(self._inner.get_info().workflow_id)
        return self._inner.activate(act)

    def get_serialization_context(self, command_info: Any) -> Any:
        """The inner instance's."""
        return self._inner.get_serialization_context(command_info)

    def get_external_store_context(self, command_info: Any) -> Any:
        """The inner instance's."""
        return self._inner.get_external_store_context(command_info)

    def get_info(self) -> workflow.Info:
        """The inner instance's."""
        return self._inner.get_info()

    def get_thread_id(self) -> int | None:
        """The inner instance's."""
        return self._inner.get_thread_id()


class _Runner(WorkflowRunner):
    """``inner`` (the worker's workflow runner) with each instance wrapped in
    :class:`_ReadBeforeEviction`."""

    def __init__(self, inner: WorkflowRunner, captured: _Captured) -> None:
        self._inner = inner
        self._captured = captured

    def prepare_workflow(self, defn: Any) -> None:
        """As the inner runner."""
        self._inner.prepare_workflow(defn)

    def create_instance(self, det: WorkflowInstanceDetails) -> WorkflowInstance:
        """The inner runner's instance, read before its eviction."""
        return _ReadBeforeEviction(self._inner.create_instance(det), self._captured)

    def set_worker_level_failure_exception_types(
        self, types: Sequence[type[BaseException]]
    ) -> None:
        """As the inner runner."""
        self._inner.set_worker_level_failure_exception_types(types)


def _interceptor(captured: _Captured) -> Interceptor:
    """A worker interceptor that keeps each replayed workflow's instance in ``captured``."""

    class Keep(WorkflowInboundInterceptor):
        async def execute_workflow(self, input: ExecuteWorkflowInput) -> Any:
            captured.instances[workflow.info().workflow_id] = workflow.instance()
            return await super().execute_workflow(input)

    class Capture(Interceptor):
        def workflow_interceptor_class(
            self, input: WorkflowInterceptorClassInput
        ) -> type[WorkflowInboundInterceptor]:
            return Keep

    return Capture()


async def attach(rt: AgentRuntime) -> None:
    """``rt.start(create=False)`` (one ``view`` query of the root) within
    :data:`ATTACH_GRACE_S`: the first call of every read this module serves, inside
    :func:`~toolnexus_temporal.cli.workercheck.worker_read`, which takes its timeout as "no
    worker".

    Raises:
        TimeoutError: no answer within :data:`ATTACH_GRACE_S`.
        HandleNotFoundError: no root workflow.
    """
    await asyncio.wait_for(rt.start(create=False), ATTACH_GRACE_S)


_quiet_runtime: Runtime | None = None


def _quiet() -> Runtime:
    """A core runtime that logs only errors (the core warns of every failing replay; the
    read reports it in one line), made once per process."""
    global _quiet_runtime
    if _quiet_runtime is None:
        quiet = LoggingConfig(filter=TelemetryFilter(core_level="ERROR", other_level="ERROR"))
        _quiet_runtime = Runtime(telemetry=TelemetryConfig(logging=quiet))
    return _quiet_runtime


async def _history(client: Client, handle_id: str, workflow_id: str) -> WorkflowHistory:
    """The latest run's history of ``workflow_id``.

    Raises:
        HandleNotFoundError: no such workflow.
    """
    try:
        return await client.get_workflow_handle(workflow_id).fetch_history()
    except RPCError as err:
        if err.status == RPCStatusCode.NOT_FOUND:
            raise HandleNotFoundError(handle_id) from None
        raise


def settled(history: WorkflowHistory) -> WorkflowHistory:
    """``history`` as the last worker left it: up to its last completed workflow task and
    the events that task's completion wrote (its commands, the updates it accepted or
    completed), without what came in after it (a queued signal, a fired timer, an
    activity's result): replayed, those would run a task no worker ran (the replayer runs
    one for events after the last task). A run no worker ever took keeps its first task
    (its start input only).
    """
    events = list(history.events)
    done = [i for i, e in enumerate(events) if e.event_type == _TASK_COMPLETED]
    if not done:
        first = next((i for i, e in enumerate(events) if e.event_type == _TASK_SCHEDULED), None)
        return WorkflowHistory(
            history.workflow_id, events if first is None else events[: first + 1]
        )
    cut = done[-1] + 1
    task = events[done[-1]].event_id
    while cut < len(events) and _written_by(events[cut], task):
        cut += 1
    return WorkflowHistory(history.workflow_id, events[:cut])


def _written_by(event: Any, task_event_id: int) -> bool:
    """Whether ``event`` was written by the completion of workflow task ``task_event_id``
    (a command's event names it; an update's acceptance or completion comes with it)."""
    if event.event_type in _UPDATE_EVENTS:
        return True
    kind = event.WhichOneof("attributes")
    attrs = getattr(event, kind) if kind else None
    return getattr(attrs, "workflow_task_completed_event_id", None) == task_event_id


def _as_of_ms(history: WorkflowHistory) -> int:
    """When the last event that could change the replayed state was recorded (ms)."""
    for event in reversed(history.events):
        if event.event_type in _DONE_EVENTS:
            return event.event_time.ToMilliseconds()
    return history.events[0].event_time.ToMilliseconds() if history.events else 0


async def replay(rt: AgentRuntime, handle_ids: Iterable[str]) -> dict[str, Replayed]:
    """Each handle of ``handle_ids`` rebuilt from its workflow's latest run (histories fetched
    at once, replayed one after another; about 10 ms a handle plus the fetch).

    Args:
        rt: the runtime (its client: the server, the data converter; its scope: the
            workflow ids). Needs no worker and no attach.
        handle_ids: the handles.

    Returns:
        ``Replayed`` by handle id.

    Raises:
        HandleNotFoundError: no workflow for one of them.
        CliError: a history that the local workflow code does not replay (the workers run
            other code: ``tnx replay-check`` says which).
        RPCError: a history could not be fetched.
    """
    ids = list(dict.fromkeys(handle_ids))
    if not ids:
        return {}
    client = rt.client
    fetched = await asyncio.gather(*(_history(client, h, rt.workflow_id(h)) for h in ids))
    histories = [settled(history) for history in fetched]
    from toolnexus_temporal import worker  # the workflow code: only when replaying

    captured = _Captured()
    runner = _Runner(worker.workflow_runner(), captured)
    replayer = Replayer(
        workflows=list(worker.WORKFLOWS),
        namespace=client.namespace,  # read by the workflow (``store_key``)
        data_converter=client.data_converter,
        workflow_runner=runner,
        unsandboxed_workflow_runner=runner,
        interceptors=[_interceptor(captured)],
        runtime=_quiet(),
    )

    async def each() -> AsyncIterator[WorkflowHistory]:
        for history in histories:
            yield history

    async with replayer.workflow_replay_iterator(each()) as results:
        async for result in results:
            if result.replay_failure is not None:
                raise _replay_error(result.history.workflow_id, result.replay_failure)
            if result.history.workflow_id not in captured.answers:  # no eviction came
                captured.read(result.history.workflow_id)
    found = {}
    for hid, history in zip(ids, histories, strict=True):
        answers = captured.answers.get(history.workflow_id)
        if answers is None:  # the replay never ran the workflow's code
            raise _replay_error(history.workflow_id, RuntimeError("no workflow task replayed"))
        view, state, trace = answers
        found[hid] = Replayed(hid, view, state, trace, _as_of_ms(history), history.run_id)
    return found


def _replay_error(workflow_id: str, failure: Exception) -> CliError:
    """A history that did not replay here, as one line: encrypted payloads and no codec
    keys (the same words as every other read), else the start of the failure."""
    raw = str(failure)
    if "binary/encrypted" in raw:
        return CliError(
            "the agents' payloads are encrypted (payload codec): set TNX_CODEC_KEYS or "
            "TNX_CODEC_KEY_FILE to the workers' keys",
            EXIT_ENV,
        )
    return CliError(
        f"cannot rebuild {workflow_id!r} from its history with the local workflow code "
        f"({truncate(one_line(raw), 200)}); start a worker, or check the code with "
        "`tnx replay-check`",
        EXIT_ENV,
    )


async def replay_tree(rt: AgentRuntime, handle_id: str) -> list[Replayed]:
    """``handle_id``'s subtree rebuilt from history, pre-order with children in spawn order
    (as ``AgentRuntime.list``): each level's children are read from the replayed views of the
    level above.

    Raises:
        As :func:`replay`.
    """
    return (await replay_trace_tree(rt, handle_id, None))[0]


async def replay_trace_tree(
    rt: AgentRuntime, handle_id: str, closed: int | None
) -> tuple[list[Replayed], list[str]]:
    """:func:`replay_tree` as ``AgentRuntime.trace_read`` reads a tree: with ``closed``,
    only each handle's ``closed`` newest closed children are replayed
    (:func:`~toolnexus_temporal.client.reads.children_read`, from the replayed state).

    Returns:
        The handles replayed, pre-order; the closed children left out, in tree order.

    Raises:
        As :func:`replay`.
    """
    found: dict[str, Replayed] = {}
    children: dict[str, list[str]] = {}
    omitted: dict[str, list[str]] = {}
    level = [handle_id]
    while level:
        replayed = await replay(rt, level)
        found.update(replayed)
        nxt: list[str] = []
        for hid in level:
            node = replayed[hid]
            children[hid], omitted[hid] = children_read(node.view, node.state, closed)
            nxt.extend(c for c in children[hid] if c not in found and c not in nxt)
        level = nxt
    order = pre_order(handle_id, children)
    return [found[hid] for hid in order], [c for hid in order for c in omitted[hid]]


def merged_trace(tree: list[Replayed]) -> list[TraceLine]:
    """The trace lines of ``tree`` (pre-order, as :func:`replay_tree`) merged as
    ``AgentRuntime.trace`` merges the ``trace`` queries: by workflow time, then tree order,
    then each handle's sequence number (:func:`~toolnexus_temporal.client.reads.
    merged_lines`)."""
    return merged_lines(node.trace for node in tree)


async def transcript(rt: AgentRuntime, node: Replayed) -> list[Message]:
    """``AgentRuntime.transcript`` of a replayed handle: its committed messages from the
    runtime's conversation store.

    Raises:
        As ``AgentRuntime.transcript`` (no store; a store that is not the workers').
    """
    if rt.store is None:
        raise TnxError("AgentRuntime(store=...) is needed to read transcripts")
    if node.view.store_key is None:
        return []
    return await rt._committed(node.view.store_key, node.view.transcript_len)


async def model_view(rt: AgentRuntime, node: Replayed) -> ModelView:
    """``AgentRuntime.model_view`` of a replayed handle: what the model is sent of its
    committed transcript on its next call, under its context policy and summary.

    Raises:
        As ``AgentRuntime.model_view``.
    """
    return await rt.model_view_of(node.state)


def as_of_ms(nodes: Iterable[Replayed]) -> int:
    """The newest :attr:`Replayed.as_of_ms` of ``nodes`` (0 for none)."""
    return max((node.as_of_ms for node in nodes), default=0)


def history_note(opts: Options, missing: NoWorkerError, at_ms: int, what: str) -> None:
    """The stderr note of a read rebuilt from history: why (no worker, and how to start
    one), as of when (the newest replayed event, local time), and ``what`` it shows."""
    err_console.print(
        "[yellow]note[/yellow]: "
        + escape(no_worker_note(missing, opts))
        + f"; as of {clock(at_ms)}, no worker running: {escape(what)}, replayed from the"
        " workflow history",
        style="dim",
    )


async def audit_read(
    rt: AgentRuntime, target: str, subtree: bool
) -> tuple[list[AuditRecord], NoWorkerError | None, int]:
    """``tnx audit``'s read: ``AgentRuntime.audit`` (``state`` queries) when a worker
    answers; else the same records from each handle's replayed state, joined with the same
    history events (``client/audit.py``).

    Returns:
        The records, in order of answer time; the NoWorkerError when no worker answered
        (else None); the :func:`as_of_ms` of the replayed handles (0 with a worker).

    Raises:
        As :func:`replay`; RPCError: a history could not be read.
    """

    async def attached() -> list[AuditRecord]:
        await attach(rt)
        return await rt.audit(target, subtree=subtree)

    async def from_history() -> tuple[list[AuditRecord], int]:
        if subtree:
            nodes = await replay_tree(rt, target)
        else:
            nodes = list((await replay(rt, [target])).values())
        ids = [node.handle_id for node in nodes]
        entries = [(n.handle_id, entry) for n in nodes for entry in n.state.approval.audit]
        return await audit_records(rt.client, rt.workflow_id, ids, entries), as_of_ms(nodes)

    found, spare = await worker_read_or_spare(rt, attached, from_history)
    if not isinstance(found, NoWorkerError):
        return found, None, 0
    records, as_of = await spare
    return records, found, as_of
