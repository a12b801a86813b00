"""Every verb exactly once across runs (issue 23 item 1): Temporal dedupes update ids per run
only, so an update sent again with its id after the handle continued as new (the host
library's same-id retry after an RPC deadline sends exactly this) must not be applied twice:
no second inbox item, no second turn (the model is not paid again), no second child."""

from __future__ import annotations

import json
from typing import Any

from temporalio.client import Client, WorkflowHandle

from tests.helpers import eventually, spawn
from toolnexus_temporal.client import AgentDef, Handle, InboxItem, RuntimeOptions
from toolnexus_temporal.client.testing import ScriptedLLM, text
from toolnexus_temporal.workflows.agent import AgentWorkflow
from toolnexus_temporal.workflows.contract.messages import (
    HandleStatus,
    PauseRequest,
    PostResult,
    ScheduleRequest,
    SpawnRequest,
    SpawnResult,
    TurnRequest,
    WaitResponse,
)
from toolnexus_temporal.workflows.contract.models import HandleView, TickSpec
from toolnexus_temporal.workflows.contract.names import (
    UPDATE_PAUSE,
    UPDATE_POST,
    UPDATE_SCHEDULE,
    UPDATE_SPAWN,
    UPDATE_TURN,
)

REGISTRY = {"w": AgentDef(name="w")}
OPTIONS = RuntimeOptions(continue_as_new_updates=3)
"""An idle handle continues as new after 3 updates in a run."""


async def continued(wf: WorkflowHandle[Any, Any], run_id: str, nudge: Any) -> str:
    """Send updates (``nudge``) until the workflow runs in a new run; its run id."""

    async def new_run() -> bool:
        return (await wf.describe()).run_id != run_id

    for _ in range(6):
        await nudge()
        try:
            await eventually(new_run, within_s=5)
            break
        except AssertionError:
            continue
    desc = await wf.describe()
    assert desc.run_id != run_id, "the handle did not continue as new"
    return str(desc.run_id)


def mentions(llm: ScriptedLLM, marker: str) -> int:
    """How often ``marker`` is in the last request's messages (the whole transcript)."""
    return json.dumps(llm.requests[-1]["messages"]).count(marker)


async def test_post_and_turn_sent_again_after_continue_as_new_apply_once(
    make_runtime, client: Client
) -> None:
    llm = ScriptedLLM({"stub-model": [text("first turn"), text("second turn")]}, repeat_last=True)
    async with make_runtime(REGISTRY, llm.transport(), options=OPTIONS) as rt:
        h = await spawn(rt, rt.root, "w")
        wf = client.get_workflow_handle(rt.workflow_id(h.id))
        run = str((await wf.describe()).run_id)
        item = InboxItem(from_="external", channel="webhook", text="MARK-once")
        posted = await wf.execute_update(UPDATE_POST, item, id="post-1", result_type=PostResult)
        assert posted.ok
        first = await wf.execute_update(
            UPDATE_TURN, TurnRequest(prompt="go"), id="turn-1", result_type=WaitResponse
        )
        assert first.result.text == "first turn"
        calls = len(llm.requests)
        n = 0

        async def nudge() -> None:
            nonlocal n
            n += 1
            other = InboxItem(from_="external", channel="webhook", text=f"nudge {n}")
            await wf.execute_update(UPDATE_POST, other, id=f"nudge-{n}", result_type=PostResult)

        await continued(wf, run, nudge)

        again = await wf.execute_update(UPDATE_POST, item, id="post-1", result_type=PostResult)
        assert again.ok
        inbox = [i.text for i in await wf.query(AgentWorkflow.inbox)]
        assert "MARK-once" not in inbox, inbox  # drained by the first turn, not appended again
        repeat = await wf.execute_update(
            UPDATE_TURN, TurnRequest(prompt="go"), id="turn-1", result_type=WaitResponse
        )
        assert repeat.result.text == "first turn" and len(llm.requests) == calls
        assert (await rt.run_turn(h, "next")).text == "second turn"
        assert mentions(llm, "MARK-once") == 1  # the model saw the item once, ever


async def test_a_spawn_sent_again_after_continue_as_new_makes_no_second_child(
    make_runtime, client: Client
) -> None:
    llm = ScriptedLLM({"stub-model": [text("ok")]}, repeat_last=True)
    async with make_runtime(REGISTRY, llm.transport(), options=OPTIONS) as rt:
        root = client.get_workflow_handle(rt.workflow_id(rt.root.id))
        run = str((await root.describe()).run_id)
        made = await root.execute_update(
            UPDATE_SPAWN, SpawnRequest(name="w"), id="spawn-1", result_type=SpawnResult
        )
        assert made.handle is not None
        n = 0

        async def nudge() -> None:
            nonlocal n
            n += 1
            await root.execute_update(
                UPDATE_SPAWN, SpawnRequest(name="nope"), id=f"nudge-{n}", result_type=SpawnResult
            )

        await continued(root, run, nudge)
        again = await root.execute_update(
            UPDATE_SPAWN, SpawnRequest(name="w"), id="spawn-1", result_type=SpawnResult
        )
        assert again.handle is not None and again.handle.id == made.handle.id
        children = (await rt.inspect(rt.root)).children
        assert children == [made.handle.id], children
        assert isinstance(await rt.spawn(rt.root, "w"), Handle)  # a new id spawns anew


async def test_schedule_and_pause_sent_again_after_continue_as_new_apply_once(
    make_runtime, client: Client
) -> None:
    """A ``schedule`` sent again restarted the fire time from now (a tick could slip by a
    whole interval at each retry); a ``pause`` sent again after an unpause paused the handle
    once more. Each is applied once, whatever run the repeat reaches."""
    llm = ScriptedLLM({"stub-model": [text("ok")]}, repeat_last=True)
    async with make_runtime(REGISTRY, llm.transport(), options=OPTIONS) as rt:
        h = await spawn(rt, rt.root, "w")
        wf = client.get_workflow_handle(rt.workflow_id(h.id))
        run = str((await wf.describe()).run_id)
        hourly = ScheduleRequest(tick=TickSpec(every_ms=3_600_000, prompt="hourly"))
        first = await wf.execute_update(
            UPDATE_SCHEDULE, hourly, id="schedule-1", result_type=HandleView
        )
        assert first.next_tick_ms is not None
        await wf.execute_update(
            UPDATE_PAUSE, PauseRequest(), id="pause-1", result_type=HandleStatus
        )
        await wf.execute_update(
            UPDATE_PAUSE, PauseRequest(paused=False), id="unpause-1", result_type=HandleStatus
        )
        n = 0

        async def nudge() -> None:
            nonlocal n
            n += 1
            other = InboxItem(from_="external", channel="webhook", text=f"nudge {n}")
            await wf.execute_update(UPDATE_POST, other, id=f"nudge-{n}", result_type=PostResult)

        await continued(wf, run, nudge)
        again = await wf.execute_update(
            UPDATE_SCHEDULE, hourly, id="schedule-1", result_type=HandleView
        )
        assert again.next_tick_ms == first.next_tick_ms  # not restarted from now
        await wf.execute_update(
            UPDATE_PAUSE, PauseRequest(), id="pause-1", result_type=HandleStatus
        )
        assert not (await rt.inspect(h)).paused  # the later unpause stands
        await rt.close(h)
