"""The way back for an agent the server terminated (issue 23 item 6): start it again from its
last state.

Temporal terminates a run that passes its history limits (``Workflow history size exceeds
limit``: 50 MB by default) and an operator can terminate one by hand; either way no workflow
code runs, so the agent's state and its pending Request would be lost. :func:`recover` reads
them back and starts a new run of the same workflow id with them:

1. the latest run of the id must be ``TERMINATED`` (a running, completed, failed or timed
   out one is refused, :class:`~.errors.RecoverRefusedError`);
2. the ``recovery`` query on that run (a worker replays its history up to the termination
   and answers from the state there: ``lifecycle/carry.py``): the state as a continue-as-new
   would carry it, a parked turn included, so the same Request with the same id is pending
   again and its Answer re-runs the tool and goes on with the LLM loop (no model call
   already made is made again);
3. the nonces the query masks, from the run's history (its start input and the children it
   started);
4. a new run with that input, on the same task queue, with the same search attributes and
   static summary and details. It traces ``recovered``, runs no ``on_spawn`` hook and
   reports to its parent at once (whose books said closed since the termination).

Host side only: the client's describe, query, history and start calls.
"""

from __future__ import annotations

from temporalio.api.enums.v1 import EventType
from temporalio.client import WorkflowExecutionStatus, WorkflowQueryFailedError
from temporalio.common import (
    TypedSearchAttributes,
    WorkflowIDConflictPolicy,
    WorkflowIDReusePolicy,
)
from temporalio.exceptions import WorkflowAlreadyStartedError
from temporalio.service import RPCError

from toolnexus_temporal.client.codec import readable_query_failure
from toolnexus_temporal.client.errors import RecoverRefusedError
from toolnexus_temporal.client.handlers import AgentWorkflowStub as AgentWorkflow
from toolnexus_temporal.client.retry import riding_outage
from toolnexus_temporal.client.rpc import HandleRpc, rpc_error
from toolnexus_temporal.workflows.contract.models import HandleView
from toolnexus_temporal.workflows.contract.names import ALL_SEARCH_ATTRIBUTES
from toolnexus_temporal.workflows.contract.state import AgentInput

_REFUSALS = {
    WorkflowExecutionStatus.RUNNING: "it is running: nothing to recover",
    WorkflowExecutionStatus.COMPLETED: "it is closed (its workflow completed)",
    WorkflowExecutionStatus.CANCELED: "it is closed (its workflow was cancelled)",
    WorkflowExecutionStatus.CONTINUED_AS_NEW: "it continued as new: nothing to recover",
    WorkflowExecutionStatus.FAILED: "its workflow failed (a bug or an unsupported protocol):"
    " recover starts only a terminated one again",
    WorkflowExecutionStatus.TIMED_OUT: "its workflow timed out: recover starts only a"
    " terminated one again",
}


async def recover(rpc: HandleRpc, hid: str) -> HandleView:
    """Start the handle ``hid``, whose latest run was terminated, again from its last state
    (see the module docstring).

    Returns:
        The view of the new run (``suspended`` on the same Request when it was parked).

    Raises:
        HandleNotFoundError: no workflow exists for ``hid``.
        RecoverRefusedError: its latest run was not terminated (running, closed, failed, ...),
            its last state had a turn in flight (an LLM call or a tool running), its
            history does not replay on this code, or another ``recover`` started it first.
        NoWorkerError: no worker serves its task queue (a worker replays the terminated run
            to read its state).
    """
    wf = rpc.handle(hid)
    try:
        desc = await riding_outage(wf.describe)
    except RPCError as err:
        raise rpc_error(hid, err) from err
    if desc.status != WorkflowExecutionStatus.TERMINATED:
        status = desc.status
        reason = _REFUSALS.get(status, "its workflow is not terminated") if status else "?"
        raise RecoverRefusedError(hid, reason)
    run = rpc.client.get_workflow_handle(desc.id, run_id=desc.run_id)
    try:
        point = await rpc.guarded(lambda: riding_outage(lambda: run.query(AgentWorkflow.recovery)))
    except RPCError as err:
        raise rpc_error(hid, err) from err
    except WorkflowQueryFailedError as err:  # its history does not replay on this code
        cause = await readable_query_failure(rpc.client, err)
        raise RecoverRefusedError(hid, f"its terminated run does not replay: {cause}") from err
    if point.input is None:
        raise RecoverRefusedError(hid, f"its last state cannot be resumed ({point.why})")
    state = point.input.state
    own, nonces = await _nonces(rpc, desc.id, desc.run_id)
    # The rule that writes the state lives on the workflow side's pure floor (rules/), loaded
    # here only when a recover runs: importing the host library loads contract/ alone.
    from toolnexus_temporal.workflows.rules.roster import restarted

    restarted(state, desc.run_id, own, nonces)
    summary, details = await desc.static_summary(), await desc.static_details()
    ours = {key.name for key in ALL_SEARCH_ATTRIBUTES}  # not the server's own (BuildIds, ...)
    attributes = TypedSearchAttributes(
        [pair for pair in desc.typed_search_attributes if pair.key.name in ours]
    )
    try:
        await riding_outage(
            lambda: rpc.client.start_workflow(
                AgentWorkflow.run,
                AgentInput(state=state),
                id=desc.id,
                task_queue=desc.task_queue,
                id_reuse_policy=WorkflowIDReusePolicy.ALLOW_DUPLICATE,
                id_conflict_policy=WorkflowIDConflictPolicy.FAIL,
                search_attributes=attributes,
                static_summary=summary,
                static_details=details,
            )
        )
    except WorkflowAlreadyStartedError as err:
        raise RecoverRefusedError(hid, "it was started again meanwhile") from err
    return await rpc.query(hid, AgentWorkflow.view)


async def _nonces(
    rpc: HandleRpc, workflow_id: str, run_id: str
) -> tuple[str | None, dict[str, str]]:
    """The nonces the ``recovery`` query masks (``trust.py``), from the run's start input and
    the children it started: the handle's own, and its children's by child id."""
    converter = rpc.client.data_converter
    nonces: dict[str, str] = {}
    own: str | None = None
    history = rpc.client.get_workflow_handle(workflow_id, run_id=run_id)
    async for event in history.fetch_history_events():
        if event.event_type == EventType.EVENT_TYPE_WORKFLOW_EXECUTION_STARTED:
            payloads = event.workflow_execution_started_event_attributes.input.payloads
            (start,) = await converter.decode(payloads, [AgentInput])
            own = start.state.nonce
            for child, info in start.state.roster.children_info.items():
                if info.nonce is not None:
                    nonces[child] = info.nonce
        elif event.event_type == EventType.EVENT_TYPE_START_CHILD_WORKFLOW_EXECUTION_INITIATED:
            started = event.start_child_workflow_execution_initiated_event_attributes
            (child_input,) = await converter.decode(started.input.payloads, [AgentInput])
            if child_input.state.nonce is not None:
                nonces[child_input.state.id] = child_input.state.nonce
    return own, nonces
