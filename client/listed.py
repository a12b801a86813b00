"""A runtime's tree read from visibility alone, no worker needed (issue 37 item 4).

``AgentRuntime.list`` asks each handle's workflow for its view (a query), which needs a worker
on the task queue. When none runs, what Temporal itself keeps is still readable: each handle's
workflow, its status, and the search attributes the workflow upserted (``AgentState``,
``AgentDepth``, ``AgentPaused``, ``AgentWaitingSince``, ``AgentNextTick``, the pending
Request). :func:`listed` reads those, so ``tnx ls`` can answer as of the last upsert.
Counters that live only in the workflow's state (turns, tokens, pools, inbox) are not there.
"""

from __future__ import annotations

import re
from dataclasses import dataclass
from datetime import datetime
from typing import Final

from temporalio.client import WorkflowExecutionStatus

from toolnexus_temporal.client.queries import quoted
from toolnexus_temporal.client.rpc import HandleRpc
from toolnexus_temporal.workflows.contract.names import (
    AGENT_DEPTH,
    AGENT_NAME,
    AGENT_NEXT_TICK,
    AGENT_PARENT,
    AGENT_PAUSED,
    AGENT_REQUEST_ID,
    AGENT_REQUEST_KIND,
    AGENT_REQUEST_PROMPT,
    AGENT_STATE,
    AGENT_WAITING_SINCE,
    id_in_scope,
)

LISTED_MAX: Final = 1_000
"""The most handles :func:`listed` reads (visibility pages of 100 each)."""

_ENDED: Final = {
    WorkflowExecutionStatus.COMPLETED: "closed",
    WorkflowExecutionStatus.TERMINATED: "terminated",
    WorkflowExecutionStatus.FAILED: "failed",
    WorkflowExecutionStatus.CANCELED: "cancelled",
    WorkflowExecutionStatus.TIMED_OUT: "timed out",
}
"""The state shown for a handle whose workflow has ended, by its status: a closed handle's
workflow completes; the others ended outside the contract (``temporal workflow terminate``)."""

ENDED_OUTSIDE: Final = frozenset(state for state in _ENDED.values() if state != "closed")
"""The states of a handle whose workflow ended outside the contract (terminated, failed,
cancelled, timed out): a query still answers with the state it had, so ``tnx ls`` and ``tnx
inspect`` say how it ended (``tnx recover`` starts a terminated one again)."""


@dataclass(frozen=True)
class ListedRow:
    """One handle as visibility has it.

    Attributes:
        id: the handle id (``root/ops.1``), without the runtime's scope.
        name: ``AgentName``: its AgentDef's name (``root`` for the root).
        parent: ``AgentParent`` without the runtime's scope (the attribute carries it, as
            ``tnx`` prints ids): its parent's handle id (None for the root).
        state: ``AgentState`` for a running workflow (``idle``, ``running``, ``suspended``),
            else what its end says (``closed``, ``terminated``, ...).
        depth: ``AgentDepth`` (0 for the root).
        paused: ``AgentPaused``.
        request_id: ``AgentRequestId`` without the runtime's scope: the pending Request, None
            when it waits for nothing.
        request_kind: ``AgentRequestKind``.
        request_prompt: ``AgentRequestPrompt`` (cut; None with a payload codec on).
        waiting_since: ``AgentWaitingSince`` (UTC), when it parked.
        next_tick: ``AgentNextTick`` (UTC), its next tick.
    """

    id: str
    name: str | None
    parent: str | None
    state: str
    depth: int
    paused: bool
    request_id: str | None
    request_kind: str | None
    request_prompt: str | None
    waiting_since: datetime | None
    next_tick: datetime | None


def tree_query(workflow_id: str, subtree: bool = True) -> str:
    """The visibility query of the handle ``workflow_id`` (and its subtree), latest runs
    only (a run that continued as new is left out)."""
    ids = f"WorkflowId={quoted(workflow_id)}"
    if subtree:
        ids = f"({ids} OR WorkflowId STARTS_WITH {quoted(workflow_id + '/')})"
    return f'WorkflowType="AgentWorkflow" AND ExecutionStatus!="ContinuedAsNew" AND {ids}'


_SEGMENT = re.compile(r"^(.*)\.(\d+)$")


def _tree_key(handle_id: str) -> list[tuple[str, int]]:
    """Sort key: parents before children, siblings by name then spawn number."""
    key: list[tuple[str, int]] = []
    for segment in handle_id.split("/"):
        match = _SEGMENT.match(segment)
        key.append((match.group(1), int(match.group(2))) if match else (segment, 0))
    return key


async def listed(rpc: HandleRpc, target: str, subtree: bool = True) -> list[ListedRow]:
    """Handle ``target`` and (``subtree``) its subtree from visibility, parents first (at most
    :data:`LISTED_MAX`). Visibility is eventually consistent: a change of a moment ago may
    show a moment later; a workflow upserts its attributes when its listed state changes.

    Raises:
        RPCError: visibility cannot be read (after riding out an outage in the SDK's retry).
    """
    prefix = f"{rpc.scope}/" if rpc.scope else ""
    rows: dict[str, ListedRow] = {}
    async for wf in rpc.client.list_workflows(
        tree_query(rpc.workflow_id(target), subtree), limit=LISTED_MAX
    ):
        hid = wf.id.removeprefix(prefix)
        if hid in rows:  # an older run of the same id (a root started again): newest first
            continue
        attrs = wf.typed_search_attributes
        status = wf.status or WorkflowExecutionStatus.RUNNING
        state = (
            attrs.get(AGENT_STATE) or "unknown"
            if status == WorkflowExecutionStatus.RUNNING
            else _ENDED.get(status, status.name.lower())
        )
        rows[hid] = ListedRow(
            id=hid,
            name=attrs.get(AGENT_NAME),
            parent=id_in_scope(rpc.scope, up) if (up := attrs.get(AGENT_PARENT)) else None,
            state=state,
            depth=attrs.get(AGENT_DEPTH) or hid.count("/"),
            paused=bool(attrs.get(AGENT_PAUSED)),
            request_id=id_in_scope(rpc.scope, rid)
            if (rid := attrs.get(AGENT_REQUEST_ID))
            else None,
            request_kind=attrs.get(AGENT_REQUEST_KIND),
            request_prompt=attrs.get(AGENT_REQUEST_PROMPT),
            waiting_since=attrs.get(AGENT_WAITING_SINCE),
            next_tick=attrs.get(AGENT_NEXT_TICK),
        )
    return sorted(rows.values(), key=lambda row: _tree_key(row.id))
