"""``AgentRuntime``: the host verbs over a ``temporalio.client.Client`` (CONTRACT §3).

Each verb is one Temporal message to the handle's workflow (workflow id == handle id, prefixed
by ``{scope}/`` when the runtime is scoped):

=========  ==========================  =====================================================
verb       Temporal message             result
=========  ==========================  =====================================================
spawn      update ``spawn`` on parent   Handle, or a SpawnError value (never raises)
wake       update ``admit_wake``        the Handle, refreshed: ``running`` when admitted
post       update ``admit_post``        the Handle, refreshed
wait       update ``wait``              TaskResult (blocks in the workflow, not by polling)
inspect    query ``view``               the Handle, refreshed
=========  ==========================  =====================================================
"""

from __future__ import annotations

from types import TracebackType
from typing import Any, Self

from temporalio.client import (
    Client,
    WorkflowHandle,
    WorkflowUpdateFailedError,
)
from temporalio.common import (
    SearchAttributePair,
    TypedSearchAttributes,
    WorkflowIDConflictPolicy,
)
from temporalio.exceptions import ApplicationError
from temporalio.service import RPCError, RPCStatusCode

from client.errors import HandleNotFoundError, SpawnError, TnxError, VerbRejectedError
from client.handle import Handle
from workflows.agent import AgentWorkflow
from workflows.models import (
    ROOT_ID,
    AgentInput,
    Budget,
    HandleState,
    HandleStatus,
    HandleView,
    InboxItem,
    RuntimeOptions,
    SpawnRequest,
    SpawnResult,
    TaskResult,
    TraceLine,
    WaitRequest,
    WaitResponse,
    WakeRequest,
    workflow_id_for,
)
from workflows.search_attributes import AGENT_DEPTH, AGENT_NAME, AGENT_STATE

HandleRef = Handle | str
"""A Handle, or a handle id such as ``"root/worker.1"``."""


class AgentRuntime:
    """The host-side runtime: verbs on handles whose state lives in Temporal workflows.

    Use ``async with AgentRuntime(client, ...) as rt:`` (or ``await rt.start()``), which
    starts the root workflow if it is not running yet. A worker (see ``worker.create_worker``
    and ``tnx-worker``) must serve ``task_queue`` with the agent registry.

    Args:
        client: a client built with ``pydantic_data_converter`` (``worker.connect``).
        task_queue: the task queue every handle of this runtime runs on.
        scope: optional prefix of every workflow id (``{scope}/root/worker.1``) so several
            runtimes can share a namespace; None for bare ids.
        options: runtime options, fixed when the root workflow is first started.
        budget: the root's budget: the runtime-wide pools (default: unlimited tokens and tool
            calls, ``max_depth`` 3, ``max_concurrent`` 8).

    Attributes:
        root: the root Handle (depth 0), available after :meth:`start`.
    """

    def __init__(
        self,
        client: Client,
        *,
        task_queue: str = "tnx",
        scope: str | None = None,
        options: RuntimeOptions | None = None,
        budget: Budget | None = None,
    ) -> None:
        if scope is not None and (not scope or scope.startswith("/") or scope.endswith("/")):
            raise ValueError(f"scope {scope!r} must be a non-empty id prefix without edge slashes")
        self.client = client
        self.task_queue = task_queue
        self.scope = scope
        self.options = options or RuntimeOptions()
        self.budget = budget or Budget()
        self._root: Handle | None = None

    # ------------------------------------------------------------------ lifecycle

    async def start(self) -> Self:
        """Start the root workflow, or attach to the running one (its options then apply).

        Returns:
            self, with :attr:`root` set.
        """
        state = HandleState(
            id=ROOT_ID,
            scope=self.scope,
            task_queue=self.task_queue,
            budget=self.budget,
            pool_tokens=self.budget.max_tokens,
            pool_tool_calls=self.budget.max_tool_calls,
            options=self.options,
        )
        handle = await self.client.start_workflow(
            AgentWorkflow.run,
            AgentInput(state=state),
            id=self.workflow_id(ROOT_ID),
            task_queue=self.task_queue,
            id_conflict_policy=WorkflowIDConflictPolicy.USE_EXISTING,
            search_attributes=TypedSearchAttributes(
                [
                    SearchAttributePair(AGENT_STATE, "idle"),
                    SearchAttributePair(AGENT_NAME, ROOT_ID),
                    SearchAttributePair(AGENT_DEPTH, 0),
                ]
            ),
            static_summary="toolnexus root handle",
        )
        view = await handle.query(AgentWorkflow.view)
        self._root = Handle.from_view(view)
        return self

    async def __aenter__(self) -> Self:
        return await self.start()

    async def __aexit__(
        self,
        exc_type: type[BaseException] | None,
        exc: BaseException | None,
        tb: TracebackType | None,
    ) -> None:
        return None

    @property
    def root(self) -> Handle:
        """The root handle.

        Raises:
            TnxError: :meth:`start` has not run.
        """
        if self._root is None:
            raise TnxError("AgentRuntime.start() has not run (or use `async with`)")
        return self._root

    def workflow_id(self, handle_id: str) -> str:
        """The workflow id of a handle id in this runtime."""
        return workflow_id_for(self.scope, handle_id)

    # ------------------------------------------------------------------ verbs

    async def spawn(
        self, parent: HandleRef, name: str, budget: Budget | None = None
    ) -> Handle | SpawnError:
        """Spawn a child of ``parent`` (CONTRACT §3 spawn). Never raises for a refused spawn.

        Args:
            parent: the parent handle (``rt.root`` for a top-level agent).
            name: the agent name in the worker's registry.
            budget: overrides the def's budget; pools are carved as min(own, parent's live
                remainder).

        Returns:
            The child Handle (state ``idle``, id ``{parent.id}/{name}.{n}``), or a SpawnError
            whose ``error`` is the contract's text (``unknown agent "x" (known: a, b)``, ...).

        Raises:
            HandleNotFoundError: the parent's workflow does not exist.
        """
        result = await self._update(
            parent, "spawn", SpawnRequest(name=name, budget=budget), SpawnResult
        )
        if result.handle is None:
            return SpawnError(parent=_id(parent), name=name, error=result.error or "spawn failed")
        if isinstance(parent, Handle):
            parent.children.append(result.handle.id)
        return Handle.from_view(result.handle)

    async def wake(self, h: HandleRef, prompt: str | None = None) -> Handle:
        """Wake a handle (CONTRACT §3 wake). Admission is atomic with the call: when it
        returns, the handle says ``running`` (or it was already running or suspended, a no-op).

        Returns:
            The handle, refreshed (a new Handle when given an id).

        Raises:
            VerbRejectedError: closed handle, or the root.
            HandleNotFoundError: no such handle.
        """
        status = await self._update(h, "admit_wake", WakeRequest(prompt=prompt), HandleStatus)
        return await self._apply(h, status)

    async def post(self, h: HandleRef, item: InboxItem | str) -> Handle:
        """Append an item to a handle's inbox; never changes its state (CONTRACT §3 post).

        Args:
            h: the handle.
            item: an InboxItem, or a string (an ``external`` item).

        Raises:
            VerbRejectedError: ``inbox closed`` or ``inbox full`` (loud, never silent).
            HandleNotFoundError: no such handle.
        """
        payload = InboxItem(text=item) if isinstance(item, str) else item
        status = await self._update(h, "admit_post", payload, HandleStatus)
        return await self._apply(h, status)

    async def wait(self, h: HandleRef, timeout_ms: int | None = None) -> TaskResult:
        """The next result, or at once the last one when the handle is settled (CONTRACT §3).

        Blocks inside the workflow (an update), not by polling. A timeout returns status
        ``timeout`` and the agent keeps running.

        Raises:
            HandleNotFoundError: no such handle.
        """
        resp: WaitResponse = await self._update(
            h, "wait", WaitRequest(timeout_ms=timeout_ms), WaitResponse
        )
        await self._apply(h, resp.status, resp.result)
        return resp.result

    async def run_turn(self, h: HandleRef, prompt: str | None = None) -> TaskResult:
        """``wake`` then ``wait``."""
        await self.wake(h, prompt)
        return await self.wait(h)

    async def inspect(self, h: HandleRef) -> Handle:
        """Read a handle's current view (CONTRACT §3 inspect); refreshes ``h`` in place.

        Raises:
            HandleNotFoundError: no such handle.
        """
        view = await self._query(h, "view", HandleView)
        return _refresh(h, view)

    async def trace(self, h: HandleRef) -> list[TraceLine]:
        """The trace lines of one handle, oldest first (CONTRACT §7)."""
        lines: list[TraceLine] = await self._query(h, "trace", list[TraceLine])
        return lines

    # ------------------------------------------------------------------ plumbing

    async def _apply(
        self, h: HandleRef, status: HandleStatus, result: TaskResult | None = None
    ) -> Handle:
        """Refresh a Handle from a verb's status; an id gets a full view (one query)."""
        if isinstance(h, Handle):
            h.apply_status(status, result)
            return h
        return await self.inspect(h)

    def _handle(self, h: HandleRef) -> WorkflowHandle[Any, Any]:
        return self.client.get_workflow_handle(self.workflow_id(_id(h)))

    async def _update(self, h: HandleRef, name: str, arg: Any, result_type: type[Any]) -> Any:
        try:
            return await self._handle(h).execute_update(name, arg, result_type=result_type)
        except WorkflowUpdateFailedError as err:
            cause = err.cause
            message = cause.message if isinstance(cause, ApplicationError) else str(cause)
            raise VerbRejectedError(_id(h), name, message) from err
        except RPCError as err:
            raise _rpc_error(h, err) from err

    async def _query(self, h: HandleRef, name: str, result_type: Any) -> Any:
        try:
            return await self._handle(h).query(name, result_type=result_type)
        except RPCError as err:
            raise _rpc_error(h, err) from err


def _id(h: HandleRef) -> str:
    return h.id if isinstance(h, Handle) else h


def _refresh(h: HandleRef, view: HandleView) -> Handle:
    if isinstance(h, Handle):
        h.apply(view)
        return h
    return Handle.from_view(view)


def _rpc_error(h: HandleRef, err: RPCError) -> Exception:
    if err.status == RPCStatusCode.NOT_FOUND:
        return HandleNotFoundError(_id(h))
    return err
