"""Visibility records durable states, not transient ones (issue 35 item 2): a turn that starts
idle and ends idle writes no ``UpsertWorkflowSearchAttributes`` (each one a billable action on
Temporal Cloud), so a plain turn writes at most the Temporal floor's 11 history events; a turn
that parks, resumes, fails or closes still writes what operators filter on."""

from __future__ import annotations

import itertools
from collections import Counter

from temporalio.api.enums.v1 import EventType
from temporalio.api.history.v1 import HistoryEvent
from temporalio.client import Client

from tests.helpers import eventually
from tests.parking import REGISTRY, next_result, park, script
from toolnexus_temporal.activities import Registry, define_tool
from toolnexus_temporal.client import AgentDef, Answer, Handle
from toolnexus_temporal.client.testing import ScriptedLLM, text, tool_calls
from toolnexus_temporal.workflows.contract.names import (
    AGENT_REQUEST_ID,
    AGENT_STATE,
    AGENT_WAITING_SINCE,
    APPROVAL_QUEUE,
)

UPSERT = EventType.EVENT_TYPE_UPSERT_WORKFLOW_SEARCH_ATTRIBUTES
FLOOR_EVENTS_PER_PLAIN_TURN = 11
"""The Temporal floor's plain turn (bench/floor_workflows.py): an update's workflow task, its
acceptance, one activity, the task that completes the update, and the completion."""


def lookup(q: str) -> str:
    """Look ``q`` up."""
    return f"found {q}"


async def events_of(client: Client, workflow_id: str) -> list[HistoryEvent]:
    return list((await client.get_workflow_handle(workflow_id).fetch_history()).events)


def counted(events: list[HistoryEvent]) -> Counter[str]:
    return Counter(EventType.Name(e.event_type).removeprefix("EVENT_TYPE_") for e in events)


async def test_plain_and_tool_turns_write_no_search_attribute(make_runtime, client) -> None:
    llm = ScriptedLLM(
        {"stub-model": [text("one"), text("two"), tool_calls(("lookup", {"q": "x"})), text("3")]}
    )
    registry = Registry([AgentDef(name="chat", tools=["lookup"])], tools=[define_tool(lookup)])
    async with make_runtime(registry, llm.transport()) as rt:
        h = await rt.spawn(rt.root, "chat")
        assert isinstance(h, Handle)
        wid = rt.workflow_id(h.id)
        marks = [len(await events_of(client, wid))]
        for prompt in ("first", "second", "tool"):
            r = await rt.run_turn(h, prompt)
            assert r.status == "done", r
            marks.append(len(await events_of(client, wid)))
        events = await events_of(client, wid)
        desc = await client.get_workflow_handle(wid).describe()
    turns = [counted(events[a:b]) for a, b in itertools.pairwise(marks)]
    for turn in turns:  # a turn: from the update accepted to the update completed
        assert turn["WORKFLOW_EXECUTION_UPDATE_ACCEPTED"] == 1, turn
        assert turn["WORKFLOW_EXECUTION_UPDATE_COMPLETED"] == 1, turn
        assert turn["UPSERT_WORKFLOW_SEARCH_ATTRIBUTES"] == 0, turn
    second_plain = turns[1]  # the first turn also starts the report timer (live_usage_ms)
    assert sum(second_plain.values()) <= FLOOR_EVENTS_PER_PLAIN_TURN, second_plain
    assert turns[2]["ACTIVITY_TASK_SCHEDULED"] == 3, turns[2]  # LLM, tool, LLM
    assert desc.typed_search_attributes.get(AGENT_STATE) == "idle"


async def test_a_turn_that_fails_writes_no_search_attribute(make_runtime, client) -> None:
    """A turn that ends in error ends idle: its error is the handle's ``last_error`` (the
    view, ``tnx inspect``, the current details), not a search attribute."""
    llm = ScriptedLLM({"another-model": [text("never")]})  # stub-model: a 404
    async with make_runtime({"chat": AgentDef(name="chat")}, llm.transport()) as rt:
        h = await rt.spawn(rt.root, "chat")
        assert isinstance(h, Handle)
        wid = rt.workflow_id(h.id)
        before = len(await events_of(client, wid))
        r = await rt.run_turn(h, "go")
        assert r.is_error, r
        turn = counted((await events_of(client, wid))[before:])
        view = await rt.inspect(h)
    assert turn["UPSERT_WORKFLOW_SEARCH_ATTRIBUTES"] == 0, turn
    assert view.state == "idle"


async def test_a_parked_turn_writes_the_queue_and_its_answer_clears_it(
    make_runtime, client
) -> None:
    """running→suspended upserts once (``suspended`` and the Request); the Answer's resume
    upserts once (``idle``, the Request cleared; never ``running``); the turn then ends idle
    with no upsert, or parks again on the next Request with one."""
    async with make_runtime(REGISTRY, script().transport()) as rt:
        h = await park(rt)
        wid = rt.workflow_id(h.id)
        wf = client.get_workflow_handle(wid)
        attrs = (await wf.describe()).typed_search_attributes
        assert attrs.get(AGENT_STATE) == "suspended"
        assert attrs.get(AGENT_REQUEST_ID) is not None
        assert attrs.get(AGENT_WAITING_SINCE) is not None
        await eventually(
            lambda: _ids(client, f"{APPROVAL_QUEUE} AND WorkflowId = '{wid}'"),
            lambda ids: ids == [wid],
        )
        parked_at = len(await events_of(client, wid))
        first = (await rt.inspect(h)).pending_req
        assert first is not None
        await rt.answer(h, Answer(id=first.id, ok=True))
        r = await next_result(rt, h, lambda r: r.pending is None or r.pending.id != first.id)
        assert r.status == "pending", r  # the second guarded call parks again
        assert r.pending is not None
        await rt.answer(h, Answer(id=r.pending.id, ok=True))
        done = await next_result(rt, h, lambda r: r.status == "done")
        assert done.text == "all done"
        events = await events_of(client, wid)
        attrs = (await wf.describe()).typed_search_attributes
    upserts = [e for e in events[parked_at:] if e.event_type == UPSERT]
    states = [_state(e) for e in upserts]
    # resume (idle, Request cleared), park again (suspended, new Request), resume (idle)
    assert states == ["idle", "suspended", "idle"], states
    assert "running" not in states
    assert attrs.get(AGENT_STATE) == "idle"
    assert attrs.get(AGENT_REQUEST_ID) is None


def _state(event: HistoryEvent) -> str | None:
    fields = event.upsert_workflow_search_attributes_event_attributes.search_attributes
    payload = fields.indexed_fields.get(AGENT_STATE.name)
    return payload.data.decode().strip('"') if payload is not None else None


async def _ids(client: Client, query: str) -> list[str]:
    return [wf.id async for wf in client.list_workflows(query)]
