"""Connecting to Temporal, and the typed calls the host library makes to handle workflows: the
one module of the host library that talks to the Temporal client.

Every update and query names its handler on
:class:`~toolnexus_temporal.client.handlers.AgentWorkflowStub` by method reference
(``wf.execute_update(AgentWorkflowStub.turn, req)``, ``wf.query(AgentWorkflowStub.view)``): the
wire name is the durable name the stub declares (``@workflow.update(name=names.UPDATE_TURN)``;
:mod:`toolnexus_temporal.workflows.contract.names`), and the argument and result types come from
its annotations: no ``Any`` results, and no import of the workflow's implementation.

:class:`HandleRpc` adds what every verb needs around one call: typed errors
(:class:`~toolnexus_temporal.client.errors.HandleNotFoundError`,
:class:`~toolnexus_temporal.client.errors.VerbRejectedError`), a retry with backoff of the
refusals that happen before the workflow accepted an update, a per-workflow limit on the
short updates in flight, every call riding out a server outage (:mod:`.retry`), and
:class:`~toolnexus_temporal.client.errors.UpdateLimitError` for an update refused for a
limit, which the verbs answer with their signal form (:mod:`.fallback`).
"""

from __future__ import annotations

import asyncio
import uuid
from collections.abc import Awaitable, Callable
from typing import Any, Final, NoReturn, TypeAlias, TypeVar, overload

from temporalio.api.common.v1 import WorkflowExecution
from temporalio.api.workflowservice.v1 import GetWorkflowExecutionHistoryReverseRequest
from temporalio.client import (
    Client,
    WorkflowExecutionStatus,
    WorkflowHandle,
    WorkflowQueryFailedError,
    WorkflowUpdateFailedError,
    WorkflowUpdateHandle,
    WorkflowUpdateRPCTimeoutOrCancelledError,
    WorkflowUpdateStage,
)
from temporalio.exceptions import ApplicationError
from temporalio.service import RPCError, RPCStatusCode
from temporalio.workflow import UpdateMethodMultiParam

from toolnexus_temporal.client.codec import readable_query_failure
from toolnexus_temporal.client.errors import (
    AgentBusy,
    HandleNotFoundError,
    UpdateLimitError,
    VerbRejectedError,
    WorkflowTaskFailingError,
)
from toolnexus_temporal.client.handlers import AgentWorkflowStub
from toolnexus_temporal.client.reachability import WorkerProbe, guarded
from toolnexus_temporal.client.retry import (
    OUTAGE_DELAY_MAX_S,
    OUTAGE_RETRY_S,
    is_connection_error,
    is_failing_workflow_task,
    is_refused_update,
    is_update_limit,
    rejected_at_once,
    riding_busy_queries,
    riding_outage,
)
from toolnexus_temporal.workflows.contract.models import HandleView
from toolnexus_temporal.workflows.contract.names import (
    AGENT_BUSY,
    HISTORY_FULL,
    UPDATE_ANSWER,
    UPDATE_POST,
    UPDATE_SPAWN,
    WAITERS_FULL,
    workflow_id_for,
)

_A = TypeVar("_A")
_R = TypeVar("_R")

AgentHandle: TypeAlias = WorkflowHandle[AgentWorkflowStub, HandleView]
"""A handle's workflow, typed: its run returns the final HandleView."""

Update: TypeAlias = UpdateMethodMultiParam[[AgentWorkflowStub, _A], _R]
"""An update handler of AgentWorkflowStub taking ``_A`` and returning ``_R``
(``AgentWorkflowStub.admit_post``: ``Update[InboxItem, PostResult]``)."""

AsyncUpdate: TypeAlias = UpdateMethodMultiParam[[AgentWorkflowStub, _A], Awaitable[_R]]
"""An ``async`` update handler: the SDK types a handler registered with ``name=`` as returning
its coroutine (``AgentWorkflowStub.turn``: ``AsyncUpdate[TurnRequest, WaitResponse]``); the
overloads of :meth:`HandleRpc.update` and :meth:`HandleRpc.start_update` give the result it
resolves to, which is what the workflow sends."""

Query: TypeAlias = Callable[[AgentWorkflowStub], _R]
"""A query handler of AgentWorkflowStub returning ``_R`` (``AgentWorkflowStub.view``)."""

QueryOf: TypeAlias = Callable[[AgentWorkflowStub, _A], _R]
"""A query handler of AgentWorkflowStub taking an ``_A`` (``AgentWorkflowStub.message``)."""

HISTORY_FULL_WAIT_S: Final = 10.0
"""How long a post refused because its run's history is full (``names.HISTORY_FULL``) is
sent again (backoff as for a refused update) before the refusal is returned, s."""

UPDATE_BACKOFF_S: Final = 30.0
"""How long an update the server refused before accepting it is retried, s (see ``_call``)."""

FAILING_TASK_WAIT_S: Final = 60.0
"""How long an update refused because the workflow's tasks keep failing ("Workflow Task in
failed state") is retried, s: the server retries a failing workflow task with a backoff
(measured: a worker fixed a moment ago got the task 15-22 s later)."""

FALLBACK_AFTER_S: Final = 1.0
"""How long a verb with a signal form retries a refusal for an update limit before it uses
the signal, s."""

SHORT_UPDATES: Final = frozenset({UPDATE_SPAWN, UPDATE_POST, UPDATE_ANSWER})
"""Updates that complete within a workflow task or two."""

SHORT_UPDATES_IN_FLIGHT: Final = 6
"""How many short updates one runtime sends to one workflow at once. The server admits 10
updates in flight per workflow (long ones such as ``turn`` and ``wait`` count too); past that
it refuses, and a workflow flooded with updates loses workflow tasks ("workflow update was
aborted"). Queuing in the client is cheaper than both."""


def update_name(update: Update[Any, Any]) -> str:
    """The name an update handler is registered under (``@workflow.update(name="turn")``):
    what goes on the wire, and the ``verb`` of a :class:`VerbRejectedError`."""
    return update._defn.name or "update"  # None only for a dynamic handler


class HandleRpc:
    """Typed updates and queries to the handle workflows of one runtime.

    Args:
        client: a client built with the pydantic data converter (:func:`connect`).
        scope: the runtime's workflow id prefix (``{scope}/root/...``), None for bare ids.
    """

    def __init__(self, client: Client, scope: str | None) -> None:
        self.client = client
        self.scope = scope
        self._gates: dict[str, _Gate] = {}
        """Per workflow id: this runtime's short updates in flight (SHORT_UPDATES_IN_FLIGHT)."""
        self.probe: WorkerProbe | None = None
        """Checks for a worker once a query waits (:func:`.reachability.guarded`); None: never."""

    def workflow_id(self, handle_id: str) -> str:
        """The workflow id of a handle id (``{scope}/{handle_id}`` when scoped)."""
        return workflow_id_for(self.scope, handle_id)

    def handle(self, handle_id: str) -> AgentHandle:
        """The typed workflow handle of a handle id (no RPC)."""
        return self.client.get_workflow_handle_for(
            AgentWorkflowStub.run, self.workflow_id(handle_id)
        )

    @overload
    async def update(
        self,
        handle_id: str,
        update: AsyncUpdate[_A, _R],
        arg: _A,
        *,
        limit_wait_s: float = UPDATE_BACKOFF_S,
    ) -> _R: ...

    @overload
    async def update(
        self,
        handle_id: str,
        update: Update[_A, _R],
        arg: _A,
        *,
        limit_wait_s: float = UPDATE_BACKOFF_S,
    ) -> _R: ...

    async def update(
        self,
        handle_id: str,
        update: Update[Any, Any],
        arg: Any,
        *,
        limit_wait_s: float = UPDATE_BACKOFF_S,
    ) -> Any:
        """Run an update to completion (``wf.execute_update(update, arg)``).

        Args:
            handle_id: the handle whose workflow gets it.
            update: the handler, e.g. ``AgentWorkflowStub.admit_post``.
            arg: its one argument.
            limit_wait_s: how long a refusal for an update limit is retried, s (a verb with
                a signal form falls back to it sooner).

        Returns:
            The handler's result.

        Raises:
            VerbRejectedError: the workflow refused it, or the handle is closed.
            UpdateLimitError: refused for an update limit past ``limit_wait_s``.
            HandleNotFoundError: no such workflow.
        """
        wf = self.handle(handle_id)
        call = self._call(
            handle_id,
            update,
            lambda update_id: wf.execute_update(update, arg, id=update_id),
            limit_wait_s,
        )
        if update_name(update) not in SHORT_UPDATES:
            return await call
        wid = self.workflow_id(handle_id)
        gate = self._gates.setdefault(wid, _Gate())
        gate.users += 1
        try:
            async with gate.slots:
                return await call
        finally:
            gate.users -= 1
            if gate.users == 0:
                del self._gates[wid]

    @overload
    async def start_update(
        self, handle_id: str, update: AsyncUpdate[_A, _R], arg: _A
    ) -> WorkflowUpdateHandle[_R]: ...

    @overload
    async def start_update(
        self, handle_id: str, update: Update[_A, _R], arg: _A
    ) -> WorkflowUpdateHandle[_R]: ...

    async def start_update(
        self, handle_id: str, update: Update[Any, Any], arg: Any
    ) -> WorkflowUpdateHandle[Any]:
        """Send an update and return once the workflow has accepted it
        (``wf.start_update(update, arg, wait_for_stage=ACCEPTED)``); :meth:`result` awaits it.
        A refusal for an update limit is retried for ``FALLBACK_AFTER_S`` (the caller then
        uses the verb's signal form).

        An update the workflow's validator rejected comes back from the server already
        completed with its failure (the SDK returns a handle for it, not an error): that
        rejection is raised here, by the verb that sent it, never later by a wait.

        Raises:
            VerbRejectedError: the workflow refused it (validator), or the handle is closed.
            UpdateLimitError: refused for an update limit.
            HandleNotFoundError: no such workflow.
        """
        wf = self.handle(handle_id)

        async def send(update_id: str) -> WorkflowUpdateHandle[Any]:
            started = await wf.start_update(
                update, arg, id=update_id, wait_for_stage=WorkflowUpdateStage.ACCEPTED
            )
            if rejected_at_once(started):
                await started.result()  # raises WorkflowUpdateFailedError, no RPC
            return started

        return await self._call(handle_id, update, send, FALLBACK_AFTER_S)

    async def result(
        self, handle_id: str, update: Update[Any, Any], started: WorkflowUpdateHandle[_R]
    ) -> _R:
        """Await the result of an update :meth:`start_update` sent (no RPC deadline).

        Raises:
            VerbRejectedError: the update failed, or the handle closed meanwhile.
            HandleNotFoundError: no such workflow.
        """
        return await self._call(handle_id, update, lambda _: started.result(rpc_timeout=None))

    async def query(self, handle_id: str, query: Query[_R]) -> _R:
        """Run a query (``wf.query(query)``), e.g. ``AgentWorkflowStub.view``.

        Raises:
            HandleNotFoundError: no such workflow.
            NoWorkerError: the query waited :data:`.reachability.PROBE_AFTER_S` and no worker
                polls the task queue (only with a :attr:`probe`).
            WorkflowTaskFailingError: a worker fails the workflow's tasks (the server refuses
                queries meanwhile), with the last failure when it can be read.
        """
        wf = self.handle(handle_id)
        return await self._query(handle_id, query, lambda: wf.query(query))

    async def query_of(self, handle_id: str, query: QueryOf[_A, _R], arg: _A) -> _R:
        """Run a query with an argument (``wf.query(query, arg)``), e.g.
        ``AgentWorkflowStub.message`` with a message id.

        Raises: as :meth:`query`.
        """
        wf = self.handle(handle_id)
        return await self._query(handle_id, query, lambda: wf.query(query, arg))

    async def _query(self, handle_id: str, query: object, call: Callable[[], Awaitable[_R]]) -> _R:
        """``call()`` (a query), with the retries and errors of :meth:`query`."""
        try:
            return await self.guarded(lambda: riding_busy_queries(lambda: riding_outage(call)))
        except RPCError as err:
            if is_failing_workflow_task(err):
                verb = getattr(query, "__name__", "query")
                raise await self.failing_task_error(handle_id, verb) from err
            raise rpc_error(handle_id, err) from err
        except WorkflowQueryFailedError as err:  # with a codec, the message is encrypted
            raise await readable_query_failure(self.client, err) from err

    async def guarded(self, call: Callable[[], Awaitable[_R]]) -> _R:
        """``call()`` (a query), given up with NoWorkerError once it waits and no worker
        polls (:func:`.reachability.guarded` with :attr:`probe`)."""
        return await guarded(call, self.probe)

    async def signal(self, handle_id: str, name: str, arg: Any) -> None:
        """Send a public signal (``wake``, ``post``, ``interrupt``, ``close``, ``answer``):
        the fallback of a verb whose update was refused for a limit (signals take no update
        slot). Rides out an outage.

        Raises:
            VerbRejectedError: the handle is closed (its workflow has completed).
            HandleNotFoundError: no such workflow.
        """
        wf = self.handle(handle_id)
        try:
            await riding_outage(lambda: wf.signal(name, arg))
        except RPCError as err:
            if err.status == RPCStatusCode.NOT_FOUND and await self.exists(handle_id):
                raise VerbRejectedError(handle_id, name, "handle closed") from err
            raise rpc_error(handle_id, err) from err

    async def closed_reason(self, handle_id: str) -> str | None:
        """None while the handle's workflow runs; else ``handle closed``, or
        :data:`TERMINATED` when its latest run was terminated (recoverable).

        Raises:
            HandleNotFoundError: no such workflow.
        """
        try:
            desc = await riding_outage(self.handle(handle_id).describe)
        except RPCError as err:
            raise rpc_error(handle_id, err) from err
        if desc.status == WorkflowExecutionStatus.RUNNING:
            return None
        if desc.status == WorkflowExecutionStatus.TERMINATED:
            return TERMINATED
        return "handle closed"

    async def is_closed(self, handle_id: str) -> bool:
        """True when the handle's workflow has completed (the handle is closed).

        Raises:
            HandleNotFoundError: no such workflow.
        """
        try:
            desc = await riding_outage(self.handle(handle_id).describe)
        except RPCError as err:
            raise rpc_error(handle_id, err) from err
        return desc.status != WorkflowExecutionStatus.RUNNING

    async def exists(self, handle_id: str) -> bool:
        """True when a workflow exists for the handle (running or completed)."""
        try:
            await riding_outage(self.handle(handle_id).describe)
        except RPCError as err:
            if err.status == RPCStatusCode.NOT_FOUND:
                return False
            raise
        return True

    async def _call(
        self,
        handle_id: str,
        update: Update[Any, Any],
        send: Callable[[str], Awaitable[_R]],
        limit_wait_s: float = UPDATE_BACKOFF_S,
    ) -> _R:
        """Run one update RPC with typed errors; ``send`` gets the update id to use.

        Every retry re-asks under the same update id, so an update the server did record is
        answered from its outcome rather than run twice:

        * refusals before the workflow accepted anything, retried with backoff (50 ms
          doubling to 2 s, up to ``UPDATE_BACKOFF_S`` in all): RESOURCE_EXHAUSTED, UNAVAILABLE
          "workflow update was aborted" (the server dropped the workflow task carrying it;
          Temporal documents it as retryable), FAILED_PRECONDITION "unexpected workflow task
          failure" (for example a continue-as-new that raced a new event), "Workflow Task in
          failed state" (a worker fails the workflow's tasks: the server retries them with a
          backoff, so a worker fixed a moment ago gets it 15-22 s later): for
          ``FAILING_TASK_WAIT_S``, then :class:`WorkflowTaskFailingError` with the last
          failure;
        * an update limit (the server's, or the handle's cap on held waits) for
          ``limit_wait_s``, then :class:`UpdateLimitError` (the caller's signal fallback);
        * a post refused because its run's history is full, for ``HISTORY_FULL_WAIT_S``
          (the run continues as new meanwhile, when it can), then :class:`VerbRejectedError`;
        * a server that cannot be reached, for ``OUTAGE_RETRY_S`` (see :mod:`.retry`);
        * an RPC deadline that passes while the update waits, however long it takes.
        """
        update_id = str(uuid.uuid4())
        delay, waited, outage = 0.05, 0.0, 0.0
        while True:
            try:
                return await send(update_id)
            except RPCError as err:
                if is_update_limit(err):
                    if waited >= limit_wait_s:
                        raise UpdateLimitError(handle_id, update_name(update), str(err)) from err
                elif is_connection_error(err) and "update was aborted" not in str(err):
                    if outage >= OUTAGE_RETRY_S:
                        raise rpc_error(handle_id, err) from err
                    outage += delay
                    delay = min(delay * 2, OUTAGE_DELAY_MAX_S)
                    await asyncio.sleep(delay)
                    continue
                elif is_failing_workflow_task(err):
                    if waited >= FAILING_TASK_WAIT_S:
                        verb = update_name(update)
                        raise await self.failing_task_error(handle_id, verb) from err
                elif not is_refused_update(err) or waited >= UPDATE_BACKOFF_S:
                    await self._update_error(handle_id, update, err)
            except WorkflowUpdateFailedError as err:
                cause = err.cause
                if isinstance(cause, ApplicationError) and cause.type == WAITERS_FULL:
                    raise UpdateLimitError(handle_id, update_name(update), cause.message) from err
                full = isinstance(cause, ApplicationError) and cause.type == HISTORY_FULL
                if not full or waited >= HISTORY_FULL_WAIT_S:  # full: until it continued as new
                    await self._update_error(handle_id, update, err)
            except WorkflowUpdateRPCTimeoutOrCancelledError:
                # The RPC's deadline passed while the update waited to be accepted or to
                # complete (a worker busy with a thousand agents woken at once): the same
                # update id is asked again, so it is admitted at most once and its outcome,
                # once there, is returned. A cancellation of this call itself propagates.
                task = asyncio.current_task()
                if task is not None and task.cancelling():
                    raise
            await asyncio.sleep(delay)
            waited += delay
            delay = min(delay * 2, 2.0)

    async def failing_task_error(self, handle_id: str, verb: str) -> WorkflowTaskFailingError:
        """The typed error for a call refused because the workflow's tasks keep failing,
        with the last recorded workflow task failure (decoded with this client's
        converter) when it can be read."""
        return WorkflowTaskFailingError(
            handle_id, verb, await last_task_failure(self.client, self.workflow_id(handle_id))
        )

    async def _update_error(
        self, handle_id: str, update: Update[Any, Any], err: RPCError | WorkflowUpdateFailedError
    ) -> NoReturn:
        """Map a failed update to the verb's typed error."""
        verb = update_name(update)
        if isinstance(err, WorkflowUpdateFailedError):
            cause = err.cause
            message = cause.message if isinstance(cause, ApplicationError) else str(cause)
            if isinstance(cause, ApplicationError) and cause.type == AGENT_BUSY:
                raise AgentBusy(handle_id, verb, message) from err
            raise VerbRejectedError(handle_id, verb, message) from err
        # NOT_FOUND for an update to a completed workflow; "aborted by closing workflow" for
        # one that raced the close: both mean the handle is closed.
        if err.status != RPCStatusCode.NOT_FOUND or await self.exists(handle_id):
            reason = await self.closed_reason(handle_id)
            if reason is not None:
                raise VerbRejectedError(handle_id, verb, reason) from err
        raise rpc_error(handle_id, err) from err


TERMINATED = (
    "handle closed: its workflow was terminated (`tnx recover ID`, AgentRuntime.recover,"
    " starts it again from its last state)"
)
"""The reason a verb gives for a handle whose latest run was terminated (``recover.py``)."""


class _Gate:
    """The short updates one runtime has in flight (or waiting) for one workflow."""

    def __init__(self) -> None:
        self.slots = asyncio.Semaphore(SHORT_UPDATES_IN_FLIGHT)
        self.users = 0


def rpc_error(handle_id: str, err: RPCError) -> Exception:
    """The typed error for a failed RPC: HandleNotFoundError for NOT_FOUND,
    WorkflowTaskFailingError for "Workflow Task in failed state", else ``err``."""
    if err.status == RPCStatusCode.NOT_FOUND:
        return HandleNotFoundError(handle_id)
    if is_failing_workflow_task(err):
        return WorkflowTaskFailingError(handle_id, "call")
    return err


REASON_CHARS: Final = 300
"""How much of a workflow task failure :func:`last_task_failure` keeps."""


async def last_task_failure(client: Client, workflow_id: str) -> str:
    """The last ``WorkflowTaskFailed`` event's failure of ``workflow_id``'s current run, as
    text (message, then its causes' messages), decoded with ``client``'s converter; ``""``
    when there is none in the last 50 events or it cannot be read (never raises: it only
    words an error)."""
    request = GetWorkflowExecutionHistoryReverseRequest(
        namespace=client.namespace,
        execution=WorkflowExecution(workflow_id=workflow_id),
        maximum_page_size=50,
    )
    try:
        resp = await client.workflow_service.get_workflow_execution_history_reverse(request)
        for event in resp.history.events:
            if not event.HasField("workflow_task_failed_event_attributes"):
                continue
            failure = event.workflow_task_failed_event_attributes.failure
            try:
                err: BaseException | None = await client.data_converter.decode_failure(failure)
            except Exception as why:
                return f"{failure.message} (cannot decode it: {why})"[:REASON_CHARS]
            parts: list[str] = []
            while err is not None and len(parts) < 4:
                parts.append(str(getattr(err, "message", None) or err))
                err = err.__cause__
            return ": ".join(parts)[:REASON_CHARS]
    except Exception:
        return ""
    return ""
