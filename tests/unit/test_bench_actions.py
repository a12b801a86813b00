"""Temporal Cloud billable actions from history (bench/actions.py): each rule of the published
list on hand-built events."""

from __future__ import annotations

from collections.abc import Callable
from typing import Any

from temporalio.api.enums.v1 import EventType, WorkflowTaskFailedCause
from temporalio.api.history.v1 import HistoryEvent

from bench.actions import count_actions, total
from bench.history import TurnCost, summarize

E = EventType


def ev(kind: int, set_attrs: Callable[[HistoryEvent], Any] | None = None) -> HistoryEvent:
    event = HistoryEvent(event_type=kind)  # type: ignore[arg-type]
    if set_attrs is not None:
        set_attrs(event)
    return event


def numbered(*events: HistoryEvent) -> list[HistoryEvent]:
    for i, event in enumerate(events, start=1):
        event.event_id = i
    return list(events)


def task(completed_extra: Callable[[HistoryEvent], Any] | None = None) -> list[HistoryEvent]:
    return [
        ev(E.EVENT_TYPE_WORKFLOW_TASK_SCHEDULED),
        ev(E.EVENT_TYPE_WORKFLOW_TASK_STARTED),
        ev(E.EVENT_TYPE_WORKFLOW_TASK_COMPLETED, completed_extra),
    ]


def started(parent: bool = False, continued: bool = False) -> HistoryEvent:
    def fill(e: HistoryEvent) -> None:
        a = e.workflow_execution_started_event_attributes
        a.workflow_type.name = "W"
        if parent:
            a.parent_workflow_execution.workflow_id = "parent"
        if continued:
            a.continued_execution_run_id = "old-run"

    return ev(E.EVENT_TYPE_WORKFLOW_EXECUTION_STARTED, fill)


def test_a_client_start_is_one_action_and_workflow_tasks_are_none() -> None:
    events = numbered(started(), *task(), *task())
    assert count_actions(events) == {"workflow started": 1}


def test_continue_as_new_is_one_action_on_the_new_runs_start() -> None:
    old_tail = [ev(E.EVENT_TYPE_WORKFLOW_EXECUTION_CONTINUED_AS_NEW)]
    new_head = [started(continued=True), *task()]
    assert count_actions(old_tail) == {}
    assert count_actions([*old_tail, *new_head]) == {"continue-as-new": 1}
    # a child agent's next run keeps its parent: still one action
    assert count_actions([started(parent=True, continued=True)]) == {"continue-as-new": 1}


def test_a_child_is_two_actions_in_the_parent_and_none_in_its_own_start() -> None:
    parent = [
        ev(E.EVENT_TYPE_START_CHILD_WORKFLOW_EXECUTION_INITIATED),
        ev(E.EVENT_TYPE_CHILD_WORKFLOW_EXECUTION_STARTED),
    ]
    child = [started(parent=True), *task()]
    assert total(parent) == 2
    assert total(child) == 0


def upsert(*names: str) -> HistoryEvent:
    def fill(e: HistoryEvent) -> None:
        fields = e.upsert_workflow_search_attributes_event_attributes.search_attributes
        for name in names:
            fields.indexed_fields[name].data = b'"x"'

    return ev(E.EVENT_TYPE_UPSERT_WORKFLOW_SEARCH_ATTRIBUTES, fill)


def test_each_upsert_command_is_one_action_however_many_attributes() -> None:
    assert count_actions([upsert("AgentState"), upsert("AgentState", "AgentNextTick")]) == {
        "upsert": 2
    }


def test_an_upsert_of_temporal_change_version_alone_is_exempt() -> None:
    assert total([upsert("TemporalChangeVersion")]) == 0
    assert total([upsert("TemporalChangeVersion", "AgentState")]) == 1


def test_a_memo_change_is_not_an_action() -> None:
    assert total([ev(E.EVENT_TYPE_WORKFLOW_PROPERTIES_MODIFIED)]) == 0


def test_timers_started_count_fired_ones_do_not() -> None:
    events = [ev(E.EVENT_TYPE_TIMER_STARTED), ev(E.EVENT_TYPE_TIMER_FIRED)]
    assert count_actions(events) == {"timer started": 1}


def test_a_signal_is_one_action_on_the_receiving_side_only() -> None:
    sender = [
        ev(E.EVENT_TYPE_SIGNAL_EXTERNAL_WORKFLOW_EXECUTION_INITIATED),
        ev(E.EVENT_TYPE_EXTERNAL_WORKFLOW_EXECUTION_SIGNALED),
    ]
    from_workflow = ev(
        E.EVENT_TYPE_WORKFLOW_EXECUTION_SIGNALED,
        lambda e: setattr(
            e.workflow_execution_signaled_event_attributes.external_workflow_execution,
            "workflow_id",
            "sender",
        ),
    )
    from_client = ev(E.EVENT_TYPE_WORKFLOW_EXECUTION_SIGNALED)
    assert total(sender) == 0
    assert count_actions([*sender, from_workflow, from_client]) == {"signal": 2}


def test_an_update_is_one_action_accepted_not_completed() -> None:
    events = [
        ev(E.EVENT_TYPE_WORKFLOW_EXECUTION_UPDATE_ACCEPTED),
        ev(E.EVENT_TYPE_WORKFLOW_EXECUTION_UPDATE_COMPLETED),
    ]
    assert count_actions(events) == {"update": 1}


def test_an_activity_is_one_action_plus_its_retries() -> None:
    def attempt(n: int) -> HistoryEvent:
        return ev(
            E.EVENT_TYPE_ACTIVITY_TASK_STARTED,
            lambda e: setattr(e.activity_task_started_event_attributes, "attempt", n),
        )

    first_try = [ev(E.EVENT_TYPE_ACTIVITY_TASK_SCHEDULED), attempt(1)]
    third_try = [ev(E.EVENT_TYPE_ACTIVITY_TASK_SCHEDULED), attempt(3)]
    assert count_actions(first_try) == {"activity started": 1}
    assert count_actions(third_try) == {"activity started": 1, "activity retried": 2}
    done = ev(E.EVENT_TYPE_ACTIVITY_TASK_COMPLETED)
    assert total([*first_try, done]) == 1


def marker(task_id: int = 0) -> HistoryEvent:
    return ev(
        E.EVENT_TYPE_MARKER_RECORDED,
        lambda e: setattr(
            e.marker_recorded_event_attributes, "workflow_task_completed_event_id", task_id
        ),
    )


def test_the_markers_of_one_workflow_task_are_one_action() -> None:
    # three local activities in one task, one in the next: two actions
    events = numbered(*task(), marker(), marker(), marker(), *task(), marker())
    events[3].marker_recorded_event_attributes.workflow_task_completed_event_id = 3
    events[4].marker_recorded_event_attributes.workflow_task_completed_event_id = 3
    assert count_actions(events) == {"markers": 2}


def test_local_activity_retries_come_from_the_task_metering() -> None:
    def retried(e: HistoryEvent) -> None:
        meta = e.workflow_task_completed_event_attributes.metering_metadata
        meta.nonfirst_local_activity_execution_attempts = 2

    events = numbered(*task(retried), marker(3))
    assert count_actions(events) == {"markers": 1, "local activity retried": 2}


def test_markers_of_two_runs_with_the_same_task_id_are_two_actions() -> None:
    run1 = numbered(started(), *task(), marker(4))
    run2 = numbered(started(continued=True), *task(), marker(4))
    assert count_actions([*run1, *run2]) == {
        "workflow started": 1,
        "continue-as-new": 1,
        "markers": 2,
    }


def test_a_reset_and_nexus_and_options_updates_count() -> None:
    reset = ev(
        E.EVENT_TYPE_WORKFLOW_TASK_FAILED,
        lambda e: setattr(
            e.workflow_task_failed_event_attributes,
            "cause",
            WorkflowTaskFailedCause.WORKFLOW_TASK_FAILED_CAUSE_RESET_WORKFLOW,
        ),
    )
    other_failure = ev(E.EVENT_TYPE_WORKFLOW_TASK_FAILED)
    events = [
        reset,
        other_failure,
        ev(E.EVENT_TYPE_NEXUS_OPERATION_SCHEDULED),
        ev(E.EVENT_TYPE_NEXUS_OPERATION_CANCEL_REQUESTED),
        ev(E.EVENT_TYPE_WORKFLOW_EXECUTION_OPTIONS_UPDATED),
    ]
    assert count_actions(events) == {
        "reset": 1,
        "nexus operation": 2,
        "workflow options updated": 1,
    }


def test_the_floors_plain_turn_is_two_actions_and_its_tool_turn_four() -> None:
    """The floor's turn: an update, then one activity per LLM call or tool call."""

    def activity() -> list[HistoryEvent]:
        return [
            ev(E.EVENT_TYPE_ACTIVITY_TASK_SCHEDULED),
            ev(
                E.EVENT_TYPE_ACTIVITY_TASK_STARTED,
                lambda e: setattr(e.activity_task_started_event_attributes, "attempt", 1),
            ),
            ev(E.EVENT_TYPE_ACTIVITY_TASK_COMPLETED),
        ]

    update = [
        ev(E.EVENT_TYPE_WORKFLOW_TASK_SCHEDULED),
        ev(E.EVENT_TYPE_WORKFLOW_TASK_STARTED),
        ev(E.EVENT_TYPE_WORKFLOW_TASK_COMPLETED),
        ev(E.EVENT_TYPE_WORKFLOW_EXECUTION_UPDATE_ACCEPTED),
    ]
    done = [*task(), ev(E.EVENT_TYPE_WORKFLOW_EXECUTION_UPDATE_COMPLETED)]
    plain = [*update, *activity(), *done]
    assert len(plain) == 11 and total(plain) == 2
    tool = [*update, *activity(), *task(), *activity(), *task(), *activity(), *done]
    assert total(tool) == 4


def test_turn_costs_carry_the_actions_into_the_summary() -> None:
    costs = [
        TurnCost.of([ev(E.EVENT_TYPE_WORKFLOW_EXECUTION_UPDATE_ACCEPTED), upsert("A")]),
        TurnCost.of([ev(E.EVENT_TYPE_WORKFLOW_EXECUTION_UPDATE_ACCEPTED)]),
        TurnCost.of([ev(E.EVENT_TYPE_WORKFLOW_EXECUTION_UPDATE_ACCEPTED), upsert("A")]),
    ]
    assert [c.actions for c in costs] == [2, 1, 2]
    s = summarize(costs)
    assert s["actions_median"] == 2 and s["actions_min"] == 1
    assert s["action_kinds_median_turn"] == {"update": 1, "upsert": 1}
