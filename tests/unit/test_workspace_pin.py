"""The workspace pin (``workflows/turn/workspace.py``): it travels in the carried state of a
continue-as-new, a lost worker is told from other activity failures, and each handle gets
its own directory name."""

from __future__ import annotations

from temporalio.exceptions import (
    ActivityError,
    ApplicationError,
    CancelledError,
    TimeoutError,
    TimeoutType,
)

from tests.unit.fakes import handle
from toolnexus_temporal.activities.workspace import workspace_dir_name
from toolnexus_temporal.workflows.contract.state import AgentInput
from toolnexus_temporal.workflows.contract.workspace import WorkspaceState
from toolnexus_temporal.workflows.turn.workspace import loss_of, worker_gone


def failed(cause: BaseException) -> ActivityError:
    err = ActivityError(
        "activity error",
        scheduled_event_id=5,
        started_event_id=0,
        identity="",
        activity_type="tnx.tool_call",
        activity_id="7",
        retry_state=None,
    )
    err.__cause__ = cause
    return err


def test_the_pin_is_carried_by_continue_as_new() -> None:
    s = handle()
    s.workspace = WorkspaceState(
        task_queue="tq.ws.0123456789ab", worker="w1", path="/ws/x", claims=2, lost=1
    )
    carried = AgentInput.model_validate_json(AgentInput(state=s).model_dump_json())
    assert carried.state.workspace == s.workspace
    # a handle that never claimed one carries nothing (no history bytes)
    assert "workspace" not in AgentInput(state=handle()).model_dump_json()


def test_only_timeouts_that_mean_the_worker_is_gone_count() -> None:
    not_started = failed(
        TimeoutError("t", type=TimeoutType.SCHEDULE_TO_START, last_heartbeat_details=[])
    )
    died = failed(TimeoutError("t", type=TimeoutType.HEARTBEAT, last_heartbeat_details=[]))
    assert loss_of(not_started) == TimeoutType.SCHEDULE_TO_START and worker_gone(not_started)
    assert loss_of(died) == TimeoutType.HEARTBEAT and not worker_gone(died)
    too_slow = failed(TimeoutError("t", type=TimeoutType.START_TO_CLOSE, last_heartbeat_details=[]))
    for other in (too_slow, failed(ApplicationError("boom")), failed(CancelledError("x"))):
        assert loss_of(other) is None and not worker_gone(other)


def test_each_handle_gets_its_own_safe_directory_name() -> None:
    a, b = workspace_dir_name("t-1/root/dev.1"), workspace_dir_name("t-1/root/dev_1")
    assert a != b and "/" not in a and a.startswith("t-1_root_dev.1-")
    assert len(workspace_dir_name("x" * 500)) == 80 + 1 + 12
    assert workspace_dir_name("..").startswith("..-")  # never the parent: a suffix follows
