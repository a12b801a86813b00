"""Temporal Cloud billable actions, counted from a workflow's history events.

Pure functions over ``temporalio.api.history.v1.HistoryEvent`` lists (what
``fetch_history()`` returns and what ``bench.history`` already reads). The rules follow
Temporal's published list, "Temporal Cloud Actions" (https://docs.temporal.io/cloud/actions,
source ``docs/evaluate/cloud/actions.mdx`` of temporalio/documentation), one action per:

* **workflow started**: ``WorkflowExecutionStarted`` of a client start, 1. A run started by
  **continue-as-new** (its started event names ``continued_execution_run_id``) is 1, charged
  on that started event as the web UI shows it; the old run's ``WorkflowExecutionContinuedAsNew``
  is 0, so a history segment that holds both counts it once.
* **child workflow**: ``StartChildWorkflowExecutionInitiated`` in the parent is 2 ("one for
  durably storing the intent to start a Child Workflow and one for the attempt to start it");
  the child's own first ``WorkflowExecutionStarted`` (it names ``parent_workflow_execution``)
  is that second action, so 0 there: a spawn counted over parent and child is 2, not 3. A
  child's run continued as new keeps its parent and is 1 (continue-as-new).
* **search attribute upsert**: each ``UpsertWorkflowSearchAttributes`` event (one command) is 1,
  however many attributes it sets; one that sets only ``TemporalChangeVersion`` is exempt (0).
  Attributes given at start are not charged (they are no event of their own). A memo change
  (``WorkflowPropertiesModified``) is not on the list: 0.
* **workflow options updated**: ``WorkflowExecutionOptionsUpdated``, 1.
* **reset**: ``WorkflowTaskFailed`` with cause ``RESET_WORKFLOW``, 1.
* **timer started**: ``TimerStarted``, 1 (the SDK's implicit timers, ``wait_condition`` with a
  timeout, are timers too).
* **signal**: the page charges one action per signal sent, from a client or from a workflow, and
  shows a workflow-to-workflow signal's action "only in the signaled Event history". So
  ``WorkflowExecutionSignaled`` is 1 (client or workflow sender alike) and the sender's
  ``SignalExternalWorkflowExecutionInitiated`` is 0: counted over sender and receiver, one
  signal is one action. A signal to a workflow outside the histories counted is not seen.
  (A Signal-With-Start that starts the workflow is billed 1 in all; from history alone it reads
  as a start plus a signal, 2. No contender here uses it.)
* **update**: ``WorkflowExecutionUpdateAccepted``, 1 per update; its ``Completed`` is 0. A
  rejected update is billed too but never written to history: not counted here.
* **activity started or retried**: ``ActivityTaskScheduled`` is 1 (the first attempt); the
  retries are on ``ActivityTaskStarted.attempt`` ("subtract 1, because the first attempt is not
  a retry"): ``attempt - 1`` more. Heartbeats are billed but not in history: not counted.
* **local activities and other markers**: "Temporal Cloud counts all RecordMarkers from each
  Workflow Task as one action": every ``MarkerRecorded`` event of one workflow task (a local
  activity's, a side effect's, a version marker's alike; grouped by the marker's
  ``workflow_task_completed_event_id``) is 1 in all; local-activity retries are added from that
  task's ``WorkflowTaskCompleted.metering_metadata.nonfirst_local_activity_execution_attempts``.
* **Nexus**: ``NexusOperationScheduled`` and ``NexusOperationCancelRequested``, 1 each.
* **queries**: billed ("an Action occurs for every Query", the built-in
  ``__temporal_workflow_metadata`` excepted) but a query writes no history event, so the bench
  **cannot count them from history**; neither heartbeats nor rejected updates.

Everything else (workflow tasks, activity completions, timer fired, update completed, the
close events, signal-external confirmations) is 0. Actions during replay are never billed.
"""

from __future__ import annotations

from collections import Counter
from collections.abc import Iterable
from typing import Final

from temporalio.api.enums.v1 import EventType, WorkflowTaskFailedCause
from temporalio.api.history.v1 import HistoryEvent

SOURCE: Final = "https://docs.temporal.io/cloud/actions"
"""The published list these rules follow."""

EXEMPT_SEARCH_ATTRIBUTES: Final = frozenset({"TemporalChangeVersion"})
"""Search attributes whose upsert is not billed (Temporal's own versioning attribute)."""

E = EventType

ONE_EACH: Final[dict[int, str]] = {
    E.EVENT_TYPE_TIMER_STARTED: "timer started",
    E.EVENT_TYPE_WORKFLOW_EXECUTION_SIGNALED: "signal",
    E.EVENT_TYPE_WORKFLOW_EXECUTION_UPDATE_ACCEPTED: "update",
    E.EVENT_TYPE_ACTIVITY_TASK_SCHEDULED: "activity started",
    E.EVENT_TYPE_WORKFLOW_EXECUTION_OPTIONS_UPDATED: "workflow options updated",
    E.EVENT_TYPE_NEXUS_OPERATION_SCHEDULED: "nexus operation",
    E.EVENT_TYPE_NEXUS_OPERATION_CANCEL_REQUESTED: "nexus operation",
}
"""Event types that are one action each, by the action's name in the counts."""


def event_actions(event: HistoryEvent) -> Counter[str]:
    """The actions of one event on its own, by kind (markers excepted: they are counted per
    workflow task by :func:`count_actions`, which a lone event cannot tell).

    Args:
        event: one history event.

    Returns:
        Action counts by kind (``workflow started``, ``child workflow``, ``upsert``, ...);
        empty for an event that is not billed.
    """
    out: Counter[str] = Counter()
    kind = event.event_type
    if kind in ONE_EACH:
        out[ONE_EACH[kind]] += 1
    elif kind == E.EVENT_TYPE_WORKFLOW_EXECUTION_STARTED:
        attrs = event.workflow_execution_started_event_attributes
        if attrs.continued_execution_run_id:  # charged here, as the UI shows it
            out["continue-as-new"] += 1  # a child's next run too: it keeps its parent
        elif not attrs.HasField("parent_workflow_execution"):
            out["workflow started"] += 1
    elif kind == E.EVENT_TYPE_START_CHILD_WORKFLOW_EXECUTION_INITIATED:
        out["child workflow"] += 2
    elif kind == E.EVENT_TYPE_UPSERT_WORKFLOW_SEARCH_ATTRIBUTES:
        fields = event.upsert_workflow_search_attributes_event_attributes.search_attributes
        if set(fields.indexed_fields) - EXEMPT_SEARCH_ATTRIBUTES:
            out["upsert"] += 1
    elif kind == E.EVENT_TYPE_ACTIVITY_TASK_STARTED:
        retries = event.activity_task_started_event_attributes.attempt - 1
        if retries > 0:
            out["activity retried"] += retries
    elif kind == E.EVENT_TYPE_WORKFLOW_TASK_COMPLETED:
        meta = event.workflow_task_completed_event_attributes.metering_metadata
        if meta.nonfirst_local_activity_execution_attempts:
            out["local activity retried"] += meta.nonfirst_local_activity_execution_attempts
    elif kind == E.EVENT_TYPE_WORKFLOW_TASK_FAILED:
        cause = event.workflow_task_failed_event_attributes.cause
        if cause == WorkflowTaskFailedCause.WORKFLOW_TASK_FAILED_CAUSE_RESET_WORKFLOW:
            out["reset"] += 1
    return out


def count_actions(events: Iterable[HistoryEvent]) -> Counter[str]:
    """The billable actions of a list of events (one run, a segment of one, or segments of
    several workflows: markers are grouped by the workflow task that recorded them, keyed on
    that task's event id and the marker's run, so pass one workflow's events in order).

    Args:
        events: history events, as ``fetch_history().events`` gives them.

    Returns:
        Action counts by kind; ``sum(counts.values())`` is the total.
    """
    out: Counter[str] = Counter()
    marker_tasks: set[tuple[int, int]] = set()
    last_task_completed = run = 0
    for event in events:
        if event.event_type == E.EVENT_TYPE_WORKFLOW_EXECUTION_STARTED:
            run += 1  # event ids start again in a run continued as new
        if event.event_type == E.EVENT_TYPE_WORKFLOW_TASK_COMPLETED:
            last_task_completed = event.event_id
        if event.event_type == E.EVENT_TYPE_MARKER_RECORDED:
            task = event.marker_recorded_event_attributes.workflow_task_completed_event_id
            # a marker names its workflow task; else the task completed just before it
            key = (run, task or last_task_completed)
            if key not in marker_tasks:
                marker_tasks.add(key)
                out["markers"] += 1
            continue
        out.update(event_actions(event))
    return out


def total(events: Iterable[HistoryEvent]) -> int:
    """The number of billable actions in ``events`` (see :func:`count_actions`)."""
    return sum(count_actions(events).values())
