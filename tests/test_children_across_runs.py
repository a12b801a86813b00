"""Children across continue-as-new (issue 12 items 8 and 13, and "terminate of any handle is
reflected in its parent" of item 16).

* A child started by an earlier run of its parent and then terminated frees its
  ``max_concurrent`` slot: a sibling's queued wake runs.
* A parent that spawned, ran and closed many children carries none of them into its next run
  (protocol 3), and ``ls`` / ``inspect`` still list every child in spawn order, closed, with
  the usage rolled up and ids that keep counting.
"""

from __future__ import annotations

import asyncio
from typing import Any

from temporalio.client import Client

from tests.helpers import eventually, replay_every_run, spawn
from toolnexus_temporal.client import AgentDef, AgentRuntime, Budget, Handle, RuntimeOptions
from toolnexus_temporal.client.testing import ScriptedLLM, text
from toolnexus_temporal.workflows.agent import AgentWorkflow
from toolnexus_temporal.workflows.contract.messages import WatchChildrenInput
from toolnexus_temporal.workflows.contract.names import WATCH_CHILDREN_ACTIVITY
from toolnexus_temporal.workflows.contract.state import HandleState


async def root_state(client: Client, rt: AgentRuntime) -> HandleState:
    wf = client.get_workflow_handle_for(AgentWorkflow.run, rt.workflow_id("root"))
    return await wf.query(AgentWorkflow.state)


async def usage_is(client: Client, rt: AgentRuntime, tokens: int) -> bool:
    return (await root_state(client, rt)).usage.usage_total == tokens


async def run_id(client: Client, rt: AgentRuntime, hid: str) -> str:
    return (await client.get_workflow_handle(rt.workflow_id(hid)).describe()).run_id or ""


async def test_a_child_of_an_earlier_run_terminated_frees_its_slot(make_runtime, client) -> None:
    llm = ScriptedLLM({"stub-model": [text("b ran")]})
    async with make_runtime(
        {"w": AgentDef(name="w")},
        llm.transport(),
        options=RuntimeOptions(continue_as_new_updates=2),
        budget=Budget(max_concurrent=1),
    ) as rt:
        first_run = await run_id(client, rt, "root")
        a = await spawn(rt, rt.root, "w")  # holds the root's only slot (granted ahead)
        b = await spawn(rt, rt.root, "w")  # the second update: the root continues as new

        async def continued() -> bool:
            return await run_id(client, rt, "root") != first_run

        await eventually(continued, tries=300)
        await client.get_workflow_handle(rt.workflow_id(a.id)).terminate(reason="operator")
        # b's wake asks the root for the slot a held; only noticing a's end frees it
        result = await asyncio.wait_for(rt.run_turn(b, "go"), 60)
        assert (result.status, result.text) == ("done", "b ran")
        lines = await rt.trace_lines(rt.root)
        assert any(f"child {a.id} ended abnormally" in line for line in lines), lines
        assert (await root_state(client, rt)).roster.children_info[a.id].state == "closed"
        await replay_every_run(client, rt, "root", b.id)


async def test_a_terminated_child_is_reflected_in_its_parent(make_runtime, client) -> None:
    llm = ScriptedLLM({"stub-model": [text("a ran"), text("b ran")]})
    async with make_runtime(
        {"w": AgentDef(name="w")}, llm.transport(), budget=Budget(max_concurrent=1)
    ) as rt:
        a = await spawn(rt, rt.root, "w")
        b = await spawn(rt, rt.root, "w")
        assert (await rt.run_turn(a, "go")).text == "a ran"
        await rt.wake(b, "queued behind a's lease")
        await client.get_workflow_handle(rt.workflow_id(a.id)).terminate(reason="operator")
        assert (await asyncio.wait_for(rt.wait(b), 60)).text == "b ran"

        async def a_closed_and_freed() -> bool:
            # Under load the root may recall idle a's slot for b before the terminate lands,
            # so b can finish first: a's end is reflected by a signal, soon after.
            root = await root_state(client, rt)
            return root.roster.children_info[a.id].state == "closed" and (
                a.id not in root.leases.held
            )

        await eventually(a_closed_and_freed, within_s=30, what="a closed, its lease freed")
        await eventually(lambda: usage_is(client, rt, 10))  # a's unreported usage too
        lines = await rt.trace_lines(rt.root)
        assert any(f"child {a.id} ended abnormally" in line for line in lines), lines
        await rt.close(rt.root)  # the close cascade skips the dead child
        assert (await rt.inspect(b)).state == "closed"


async def test_closed_children_are_not_carried_and_ls_stays_correct(make_runtime, client) -> None:
    n = 50
    llm = ScriptedLLM({"stub-model": [text(f"child {i}") for i in range(n + 1)]})
    async with make_runtime(
        {"w": AgentDef(name="w")},
        llm.transport(),
        options=RuntimeOptions(continue_as_new_updates=15),
    ) as rt:
        first_run = await run_id(client, rt, "root")
        ids: list[str] = []
        for i in range(n):  # spawned with a first wake, run, closed
            h = await rt.spawn(rt.root, "w", prompt=f"go {i}")
            assert isinstance(h, Handle)
            assert (await rt.wait(h)).status == "done"
            await rt.close(h)
            ids.append(h.id)

        # force a continue-as-new now that every child is closed (refused spawns are
        # updates too), then wait for the run whose state carries no closed child
        for _ in range(15):
            assert not isinstance(await rt.spawn(rt.root, "missing"), Handle)

        async def compacted() -> bool:
            s = await root_state(client, rt)
            return s.roster.children_info == {} and s.usage.usage_total == 5 * n

        await eventually(compacted, tries=300)
        assert await run_id(client, rt, "root") != first_run
        s = await root_state(client, rt)
        assert s.roster.children == [] and s.roster.spawn_count == n
        assert len(s.model_dump_json()) < 20_000
        root = await rt.inspect(rt.root)
        assert root.children == ids == [f"root/w.{i}" for i in range(1, n + 1)]
        assert root.usage_total == 5 * n
        tree = await rt.list()
        assert [h.id for h in tree] == ["root", *ids]
        assert all(h.state == "closed" for h in tree[1:])
        # ids keep counting; a new child is live in the books and runs
        h = await spawn(rt, rt.root, "w")
        assert h.id == f"root/w.{n + 1}"
        assert (await rt.run_turn(h, "again")).text == f"child {n}"
        assert (await rt.inspect(rt.root)).children == [*ids, h.id]
        await replay_every_run(client, rt, "root", h.id)


async def test_the_children_of_a_terminated_handle_are_closed(make_runtime, client) -> None:
    """A terminated handle's children can report to no one and no cascade reaches them: the
    dead handle's parent closes them (and they their subtrees)."""
    llm = ScriptedLLM({"stub-model": [text("c ran")]})
    async with make_runtime({"w": AgentDef(name="w")}, llm.transport()) as rt:
        lead = await spawn(rt, rt.root, "w")
        c = await spawn(rt, lead, "w")
        done = await spawn(rt, lead, "w")
        await rt.close(done)
        grandchild = await spawn(rt, c, "w")
        assert (await rt.run_turn(c, "go")).text == "c ran"
        await client.get_workflow_handle(rt.workflow_id(lead.id)).terminate(reason="operator")

        async def closed(h: Handle) -> bool:
            return (await rt.inspect(h)).state == "closed"

        await eventually(lambda: closed(c), tries=300)
        await eventually(lambda: closed(grandchild), tries=300)
        lines = await rt.trace_lines(rt.root)
        assert any(f"child {lead.id} ended abnormally" in line for line in lines), lines
        assert any(f"closes {c.id} (its parent {lead.id} ended)" in line for line in lines)
        assert not any(f"closes {done.id}" in line for line in lines)  # closed already
        assert (await rt.inspect(rt.root)).state == "idle"
        await replay_every_run(client, rt, "root", lead.id, c.id, grandchild.id)


async def test_the_trace_of_an_old_parent_queries_only_its_newest_closed_children(
    make_runtime, client, monkeypatch
) -> None:
    """Issue 38: a query of a closed handle makes the worker replay its whole history, and an
    agent closes children all its life. ``trace_read(closed=2)`` queries the open handles and
    the two newest closed children only, whether the parent still carries the others (closed
    in this run) or dropped them at continue-as-new: its state says which are closed, none of
    the others is queried, and ``omitted`` names them (a closed child's subtree with it). The
    trace with no ``closed`` reads every handle, as before."""
    n = 6
    llm = ScriptedLLM({"stub-model": [text("job done")]}, repeat_last=True)
    async with make_runtime(
        {"w": AgentDef(name="w")},
        llm.transport(),
        options=RuntimeOptions(continue_as_new_updates=3, continue_as_new_min_run_ms=0),
    ) as rt:
        lead = await spawn(rt, rt.root, "w")
        first_run = await run_id(client, rt, lead.id)
        live = await spawn(rt, lead, "w")  # open all along (the first child: see below)
        assert (await rt.run_turn(live, "still open")).text == "job done"
        kids: list[str] = []
        for i in range(n):  # each spawn is an update of lead's: lead continues as new
            kid = await spawn(rt, lead, "w")
            if i == 0:  # a closed child with a child of its own: left out with it
                grandchild = await spawn(rt, kid, "w")
            assert (await rt.run_turn(kid, f"job {i}")).text == "job done"
            await rt.close(kid)
            kids.append(kid.id)
        assert await run_id(client, rt, lead.id) != first_run
        lead_wf = client.get_workflow_handle_for(AgentWorkflow.run, rt.workflow_id(lead.id))

        async def last_closed_in_books() -> bool:
            # the close returns once the kid closed; its closed report reaches lead by a
            # signal, soon after (a kid spawned in a run's first task was once taken for
            # ended at once, "workflow not found": that hid this wait)
            info = (await lead_wf.query(AgentWorkflow.state)).roster.children_info
            return kids[-1] not in info or info[kids[-1]].state == "closed"

        await eventually(last_closed_in_books, within_s=30, what="the last kid closed in lead")
        state = await lead_wf.query(AgentWorkflow.state)
        assert kids[0] not in state.roster.children_info  # dropped at a continue-as-new
        assert state.roster.children_info[live.id].state == "idle"

        queried: list[str] = []
        real = rt._rpc.query

        async def counted(hid: str, query: Any) -> Any:
            queried.append(hid)
            return await real(hid, query)

        monkeypatch.setattr(rt._rpc, "query", counted)
        read = await rt.trace_read(lead, closed=2)
        assert sorted(set(queried)) == sorted({lead.id, live.id, *kids[-2:]}), queried
        assert len(queried) == 2 * 4, queried  # two queries a handle read, none of the others
        assert read.omitted == kids[:-2], read.omitted
        lines = [line.line for line in read.lines]
        for hid in (lead.id, live.id, *kids[-2:]):
            assert any(line.startswith(f"{hid}: ") for line in lines), (hid, lines)
        assert not any(line.startswith(f"{hid}: ") for hid in kids[:-2] for line in lines)

        queried.clear()
        every = await rt.trace_lines(lead)
        assert set(queried) == {lead.id, live.id, grandchild.id, *kids}, queried
        assert all(any(line.startswith(f"{hid}: ") for line in every) for hid in kids), every
        assert [line.line for line in await rt.trace(lead, closed=n)] == every


async def test_a_child_spawned_in_a_runs_first_task_is_not_taken_for_ended(
    make_runtime, client
) -> None:
    """A spawn that reaches a parent in the first workflow task of a run (the run after a
    continue-as-new) starts its child in that task, where the run also starts the watch of
    the live children of its earlier runs (activity ``tnx.watch_children``). The new child is
    not one of those: its start is in flight, and the activity would find no workflow for it
    yet and report it ended ("workflow not found"), closing a running child in its parent's
    books. Each spawn here continues the root as new (``continue_as_new_updates=1``); the
    next spawn comes while the server holds the next run's first task back
    (``continue_as_new_min_run_ms=0``: the run was shorter than a second), and so arrives in
    it. Every child must stay live in the root's books, and none be traced as ended."""
    n = 12
    llm = ScriptedLLM({"stub-model": [text("ran")]}, repeat_last=True)
    async with make_runtime(
        {"w": AgentDef(name="w")},
        llm.transport(),
        options=RuntimeOptions(continue_as_new_updates=1, continue_as_new_min_run_ms=0),
    ) as rt:
        first_run = await run_id(client, rt, "root")
        ids = [(await spawn(rt, rt.root, "w")).id for _ in range(n)]
        assert await run_id(client, rt, "root") != first_run
        # a turn of the newest child: the watch of the root's last run has had its time
        assert (await rt.run_turn(ids[-1], "go")).text == "ran"
        infos = (await root_state(client, rt)).roster.children_info
        lines = await rt.trace_lines(rt.root)
        # closed ones are dropped from the books at the next continue-as-new
        closed = [c for c in ids if c not in infos or infos[c].state == "closed"]
        assert closed == [], [line for line in lines if "ended abnormally" in line]
        assert not any("ended abnormally" in line for line in lines), lines
        assert [(await rt.inspect(c)).state for c in ids] == ["idle"] * n
        # the watch was never asked about a child whose start was in flight (the activity
        # also looks again for a while before it reports one not found)
        assert await watched_while_starting(client, rt, "root") == []
        await replay_every_run(client, rt, "root")


async def watched_while_starting(client: Client, rt: AgentRuntime, hid: str) -> list[str]:
    """The children that a run of ``hid`` handed to its watch of earlier children
    (``tnx.watch_children``) though that same run started them (each run's history read)."""
    found: list[str] = []
    run: str | None = None
    while True:
        history = await client.get_workflow_handle(rt.workflow_id(hid), run_id=run).fetch_history()
        started = {
            e.start_child_workflow_execution_initiated_event_attributes.workflow_id
            for e in history.events
            if e.HasField("start_child_workflow_execution_initiated_event_attributes")
        }
        for e in history.events:
            if not e.HasField("activity_task_scheduled_event_attributes"):
                continue
            scheduled = e.activity_task_scheduled_event_attributes
            if scheduled.activity_type.name != WATCH_CHILDREN_ACTIVITY:
                continue
            [watched] = await client.data_converter.decode(
                scheduled.input.payloads, [WatchChildrenInput]
            )
            found += [c for c in watched.handle_ids if rt.workflow_id(c) in started]
        begun = history.events[0].workflow_execution_started_event_attributes
        run = begun.continued_execution_run_id or None
        if run is None:
            return found
