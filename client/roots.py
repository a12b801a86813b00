"""Finding and starting a runtime's root handle, and listing its handles by visibility.

A root workflow that has ended (closed or terminated) is
replaced by a new run when a runtime starts; a terminated root's children keep running
(ABANDON children), and a new root would not know them. :func:`start_root` refuses then
(:class:`~.errors.OrphanedHandlesError`) rather than orphan them silently.
"""

from __future__ import annotations

import asyncio
from collections.abc import AsyncIterator
from dataclasses import dataclass
from datetime import datetime
from typing import Any

from temporalio.api.operatorservice.v1 import ListSearchAttributesRequest
from temporalio.client import WorkflowExecutionStatus, WorkflowHandle
from temporalio.common import (
    SearchAttributeIndexedValueType,
    SearchAttributePair,
    TypedSearchAttributes,
    WorkflowIDConflictPolicy,
)
from temporalio.service import RPCError, RPCStatusCode

from toolnexus_temporal.client.errors import OrphanedHandlesError, SearchAttributesMissingError
from toolnexus_temporal.client.handlers import AgentWorkflowStub
from toolnexus_temporal.client.queries import prefix_clause
from toolnexus_temporal.client.retry import riding_outage
from toolnexus_temporal.client.rpc import HandleRpc
from toolnexus_temporal.workflows.contract.handler_docs import no_worker_hint
from toolnexus_temporal.workflows.contract.models import Budget, HandleView, RuntimeOptions
from toolnexus_temporal.workflows.contract.names import (
    AGENT_DEPTH,
    AGENT_ESCALATED_TO,
    AGENT_NAME,
    AGENT_REQUEST_EXPIRES,
    AGENT_REQUEST_ID,
    AGENT_REQUEST_KIND,
    AGENT_REQUEST_PROMPT,
    AGENT_STATE,
    AGENT_WAITING_SINCE,
    ALL_SEARCH_ATTRIBUTES,
    APPROVAL_QUEUE,
    PROTOCOL,
    ROOT_ID,
    id_in_scope,
)
from toolnexus_temporal.workflows.contract.state import AgentInput, HandleState, UsageState


async def start_root(
    rpc: HandleRpc, task_queue: str, budget: Budget, options: RuntimeOptions
) -> HandleView:
    """Start the root handle's workflow, or attach to the one running (whose own budget
    and options then hold), and read its view.

    Args:
        rpc: the runtime's typed calls.
        task_queue: the task queue of every handle of the runtime.
        budget: the root's budget: its pools are the runtime-wide pools.
        options: the runtime options.

    Raises:
        SearchAttributesMissingError: the namespace lacks a search attribute the workflows
            upsert (see :func:`check_search_attributes`).
        OrphanedHandlesError: the root's workflow has ended while handles of its tree
            still run (see :func:`check_no_orphans`).
    """
    state = HandleState(
        id=ROOT_ID,
        scope=rpc.scope,
        task_queue=task_queue,
        budget=budget,
        pool_tokens_limit=budget.max_tokens,
        pool_tool_calls_limit=budget.max_tool_calls,
        pool_cost_limit=budget.max_cost_usd,
        usage=UsageState(
            pool_tokens=budget.max_tokens,
            pool_tool_calls=budget.max_tool_calls,
            pool_cost_usd=budget.max_cost_usd,
        ),
        options=options,
        protocol=PROTOCOL,
    )
    await check_search_attributes(rpc)
    for attempt in range(ROOT_START_ATTEMPTS):
        await check_no_orphans(rpc)
        wf = await _start(rpc, state, task_queue)
        # rpc.query: a worker that is slow to take the new root's first workflow task (a loaded
        # machine) times the query out; it is asked again, not raised (a flake seen in CI).
        carried = await rpc.query(ROOT_ID, AgentWorkflowStub.state)
        if attempt == ROOT_START_ATTEMPTS - 1 or not (carried.closing or carried.state == "closed"):
            return await rpc.query(ROOT_ID, AgentWorkflowStub.view)
        # The running root is closing (a close or a cancellation request just reached it):
        # attaching would give a runtime whose every spawn is refused. Wait for that run to
        # end, then start a new one.
        await asyncio.wait_for(wf.result(), ROOT_CLOSE_WAIT_S)
    raise AssertionError("unreachable")


ROOT_START_ATTEMPTS = 3
"""How many closing roots :func:`start_root` waits out before it gives up."""

ROOT_CLOSE_WAIT_S = 120.0
"""How long :func:`start_root` waits for a closing root's run to end (s)."""


async def _start(rpc: HandleRpc, state: HandleState, task_queue: str) -> WorkflowHandle[Any, Any]:
    """Start the root workflow, or attach to the running one (``USE_EXISTING``)."""
    return await riding_outage(
        lambda: rpc.client.start_workflow(
            AgentWorkflowStub.run,
            AgentInput(state=state),
            id=rpc.workflow_id(ROOT_ID),
            task_queue=task_queue,
            id_conflict_policy=WorkflowIDConflictPolicy.USE_EXISTING,
            search_attributes=TypedSearchAttributes(
                [
                    SearchAttributePair(AGENT_STATE, "idle"),
                    SearchAttributePair(AGENT_NAME, ROOT_ID),
                    SearchAttributePair(AGENT_DEPTH, 0),
                ]
            ),
            static_summary="toolnexus root handle",
            static_details=root_details(task_queue),
        )
    )


def root_details(task_queue: str) -> str:
    """The static details of the root's workflow (shown by the web UI, also with no worker):
    what the root is, the approval queue's query and what a blank Current Details means."""
    return (
        "The root handle of a toolnexus runtime: it holds the runtime-wide pools and is the"
        " parent of the top-level agents; it never runs a model.\n\n"
        f"Approval queue: list `{APPROVAL_QUEUE}` (add the columns `AgentRequestKind`,"
        " `AgentRequestPrompt`, `AgentWaitingSince`); an agent's Current Details give the answer"
        " to send (Signal `answer`).\n\n" + no_worker_hint(task_queue)
    )


_TYPE_NAMES = {
    SearchAttributeIndexedValueType.KEYWORD: "Keyword",
    SearchAttributeIndexedValueType.TEXT: "Text",
    SearchAttributeIndexedValueType.INT: "Int",
    SearchAttributeIndexedValueType.DATETIME: "Datetime",
    SearchAttributeIndexedValueType.BOOL: "Bool",
}


async def check_search_attributes(rpc: HandleRpc) -> None:
    """Before a runtime starts: the namespace knows every search attribute the workflows
    upsert (``names.ALL_SEARCH_ATTRIBUTES``). An unknown one would fail the workflow task of
    every agent that parks, over and over. A server that does not let this
    client list them (permission denied, unimplemented, any other refusal after the outage
    retries) is not checked.

    Raises:
        SearchAttributesMissingError: some are missing (the message has the commands).
    """
    namespace = rpc.client.namespace
    request = ListSearchAttributesRequest(namespace=namespace)
    try:
        listed = await riding_outage(
            lambda: rpc.client.operator_service.list_search_attributes(request)
        )
    except RPCError:
        return  # cannot tell (no permission, not implemented, ...): the start goes on
    known = listed.custom_attributes
    missing = sorted(key.name for key in ALL_SEARCH_ATTRIBUTES if key.name not in known)
    if missing:
        types = {key.name: _TYPE_NAMES[key.indexed_value_type] for key in ALL_SEARCH_ATTRIBUTES}
        raise SearchAttributesMissingError(namespace, missing, types)


async def check_no_orphans(rpc: HandleRpc) -> None:
    """Before a new root run replaces an ended root: no handle of the old tree may still
    run (a terminated root's children keep running; a new root would not know them).

    Raises:
        OrphanedHandlesError: running handles were found (visibility may lag a moment).
    """
    try:
        desc = await riding_outage(rpc.handle(ROOT_ID).describe)
    except RPCError as err:
        if err.status == RPCStatusCode.NOT_FOUND:
            return
        raise
    if desc.status == WorkflowExecutionStatus.RUNNING:
        return
    prefix = rpc.workflow_id(f"{ROOT_ID}/")
    query = f'{prefix_clause(prefix)} AND ExecutionStatus="Running"'
    running: list[str] = []
    async for wf in rpc.client.list_workflows(query, limit=20):
        # Visibility lags (more so under load): a child the cascade closed a moment ago may
        # still be listed as running. The describe call is consistent: ask it.
        if await _still_running(rpc, wf.id):
            running.append(wf.id)
    if running:
        terminated = desc.status == WorkflowExecutionStatus.TERMINATED
        raise OrphanedHandlesError(rpc.scope, sorted(running), terminated)


async def _still_running(rpc: HandleRpc, workflow_id: str) -> bool:
    """Whether the latest run of ``workflow_id`` is running, by a consistent describe."""
    try:
        desc = await riding_outage(rpc.client.get_workflow_handle(workflow_id).describe)
    except RPCError as err:
        if err.status == RPCStatusCode.NOT_FOUND:
            return False
        raise
    return desc.status == WorkflowExecutionStatus.RUNNING


@dataclass(frozen=True, slots=True)
class QueueRow:
    """One row of the approval queue as visibility has it (no worker needed).

    Attributes:
        id: the handle id (``root/ops.1``), without the runtime's scope.
        request_id: ``AgentRequestId`` without the runtime's scope (the attribute carries
            it, as ``tnx`` prints ids), the ``id`` an Answer carries (None when the handle
            parked before its attributes were upserted).
        kind: ``AgentRequestKind`` (``approval``, ``input``, ...).
        prompt: ``AgentRequestPrompt``, cut to ``REQUEST_PROMPT_CHARS`` characters; None
            when the prompt is kept out of visibility (a payload codec is on).
        waiting_since: ``AgentWaitingSince`` (UTC), when the handle parked.
        expires_at: ``AgentRequestExpires`` (UTC), the Request's deadline; None: none.
        escalated_to: ``AgentEscalatedTo``, the operator queue it escalated to; None: none.
    """

    id: str
    request_id: str | None
    kind: str | None
    prompt: str | None
    waiting_since: datetime | None
    expires_at: datetime | None = None
    escalated_to: str | None = None

    @classmethod
    def from_attributes(cls, hid: str, attrs: TypedSearchAttributes, scope: str | None) -> QueueRow:
        """The row of handle ``hid`` of runtime ``scope`` from its workflow's search
        attributes."""
        request_id = attrs.get(AGENT_REQUEST_ID)
        return cls(
            id=hid,
            request_id=id_in_scope(scope, request_id) if request_id else None,
            kind=attrs.get(AGENT_REQUEST_KIND),
            prompt=attrs.get(AGENT_REQUEST_PROMPT),
            waiting_since=attrs.get(AGENT_WAITING_SINCE),
            expires_at=attrs.get(AGENT_REQUEST_EXPIRES),
            escalated_to=attrs.get(AGENT_ESCALATED_TO),
        )


def approval_queue_query(scope: str | None) -> str:
    """The visibility query of a runtime's approval queue: :data:`~toolnexus_temporal.
    workflows.contract.names.APPROVAL_QUEUE`, narrowed to ``scope``'s workflow ids (the web
    UI's search box takes it as it is)."""
    if scope:
        return f"{APPROVAL_QUEUE} AND {prefix_clause(scope + '/')}"
    return APPROVAL_QUEUE


async def suspended(rpc: HandleRpc) -> AsyncIterator[QueueRow]:
    """The approval queue of this runtime from visibility alone: one row per live suspended
    handle (:data:`~toolnexus_temporal.workflows.contract.names.APPROVAL_QUEUE`; visibility
    is eventually consistent: it may lag a moment)."""
    prefix = f"{rpc.scope}/" if rpc.scope else ""
    async for wf in rpc.client.list_workflows(approval_queue_query(rpc.scope)):
        hid = wf.id.removeprefix(prefix)
        if rpc.scope or hid.startswith(f"{ROOT_ID}/"):
            yield QueueRow.from_attributes(hid, wf.typed_search_attributes, rpc.scope)
