"""The audit names whoever delivered the Answer that was taken (issue 36 item 1), on a real dev
server: a Request only alice may answer; a client whose Temporal identity is ``mallory`` sends
an approving Answer first (refused), then a client whose identity is ``alice`` (taken). Before
the fix ``rt.audit`` matched the earliest event with the Request's id: mallory's. By update,
by signal, both in one workflow task, and across continue-as-new."""

from __future__ import annotations

from typing import Any

from temporalio.api.enums.v1 import EventType
from temporalio.client import Client, WorkflowHandle

from tests.expiring import expiry_registry, finished
from tests.helpers import spawn
from tests.parking import continue_as_new_by_rejections
from toolnexus_temporal.client import AgentDef, Answer, Handle, Request, RuntimeOptions
from toolnexus_temporal.client.testing import ScriptedLLM, text, tool_calls
from toolnexus_temporal.workflows.contract.messages import AnswerResult
from toolnexus_temporal.workflows.contract.models import ApprovalPolicy
from toolnexus_temporal.workflows.contract.names import SIGNAL_ANSWER, UPDATE_ANSWER

GATED = expiry_registry(
    AgentDef(name="w", tools=["slow"], approval=ApprovalPolicy(approvers={"approval": ["alice"]}))
)
"""One agent whose Request only alice may answer (the dev server stamps no principal: the
approvers are checked against the stated ``by``)."""


def script(turns: int = 1) -> ScriptedLLM:
    """The model, per turn: call ``slow`` (it parks), then answer ``done``."""
    return ScriptedLLM({"stub-model": [tool_calls(("slow", {})), text("done")] * turns})


async def as_identity(client: Client, identity: str) -> Client:
    """A client of the same server with another caller identity (what Temporal records)."""
    return await Client.connect(
        client.service_client.config.target_host,
        namespace=client.namespace,
        identity=identity,
        data_converter=client.data_converter,
    )


async def parked(rt: Any, client: Client) -> tuple[Handle, Request, str]:
    h = await spawn(rt, rt.root, "w")
    r = await rt.run_turn(h, "go")
    assert r.pending is not None
    return h, r.pending, rt.workflow_id(h.id)


async def wf(client: Client, identity: str, workflow_id: str) -> WorkflowHandle[Any, Any]:
    return (await as_identity(client, identity)).get_workflow_handle(workflow_id)


async def update(client: Client, identity: str, workflow_id: str, answer: Answer) -> AnswerResult:
    return await (await wf(client, identity, workflow_id)).execute_update(
        UPDATE_ANSWER, answer, result_type=AnswerResult
    )


async def taken_by_alice(rt: Any, h: Handle, run_id: str | None = None) -> None:
    """The turn finished on alice's Answer, and the audit names her event."""
    r = await finished(rt, h, within_s=30)
    assert (r.status, r.text) == ("done", "done")
    (entry,) = await rt.audit(h)
    assert (entry.by, entry.ok, entry.identity) == ("alice", True, "alice"), entry
    if run_id is not None:
        assert entry.run_id == run_id, entry


async def test_refused_then_taken_by_update(make_runtime, client: Client) -> None:
    async with make_runtime(GATED, script().transport()) as rt:
        h, req, wid = await parked(rt, client)
        refused = await update(client, "mallory", wid, Answer(id=req.id, ok=True, by="mallory"))
        assert not refused.ok and "may not answer" in (refused.error or ""), refused
        taken = await update(client, "alice", wid, Answer(id=req.id, ok=True, by="alice"))
        assert taken.ok, taken
        await taken_by_alice(rt, h)
        # the record names the update event itself
        (entry,) = await rt.audit(h)
        assert entry.path == "update"


async def test_refused_then_taken_by_signal(make_runtime, client: Client) -> None:
    async with make_runtime(GATED, script().transport()) as rt:
        h, req, wid = await parked(rt, client)
        await (await wf(client, "mallory", wid)).signal(
            SIGNAL_ANSWER, Answer(id=req.id, ok=True, by="mallory")
        )
        await (await wf(client, "alice", wid)).signal(
            SIGNAL_ANSWER, Answer(id=req.id, ok=True, by="alice")
        )
        await taken_by_alice(rt, h)


async def one_task(client: Client, workflow_id: str) -> bool:
    """Whether the run's two ``answer`` signals came in one workflow task (no task started
    between them)."""
    between: list[int] | None = None
    async for event in client.get_workflow_handle(workflow_id).fetch_history_events():
        if event.event_type == EventType.EVENT_TYPE_WORKFLOW_EXECUTION_SIGNALED:
            if between is not None:
                return not between
            between = []
        elif between is not None and (
            event.event_type == EventType.EVENT_TYPE_WORKFLOW_TASK_STARTED
        ):
            between.append(event.event_id)
    raise AssertionError("fewer than two signals")


async def test_refused_and_taken_signals_in_one_workflow_task(make_runtime, client: Client) -> None:
    """mallory's and alice's signals back to back, until both land in one workflow task (a
    race: the test loops, asserting the audit every time)."""
    rounds = 8
    async with make_runtime(GATED, script(rounds).transport()) as rt:
        together = 0
        for _ in range(rounds):
            h, req, wid = await parked(rt, client)
            mallory, alice = await wf(client, "mallory", wid), await wf(client, "alice", wid)
            await mallory.signal(SIGNAL_ANSWER, Answer(id=req.id, ok=True, by="mallory"))
            await alice.signal(SIGNAL_ANSWER, Answer(id=req.id, ok=True, by="alice"))
            await taken_by_alice(rt, h)
            together += await one_task(client, wid)
            if together:
                break
        assert together, f"the two signals never came in one workflow task in {rounds} rounds"


async def test_refused_in_one_run_taken_in_the_next(make_runtime, client: Client) -> None:
    """mallory's update is refused in the first run; the run continues as new (rejected
    signals); alice's signal is taken in the second: the audit names alice and that run."""
    options = RuntimeOptions(continue_as_new_events=100)
    async with make_runtime(GATED, script().transport(), options=options) as rt:
        h, req, wid = await parked(rt, client)
        refused = await update(client, "mallory", wid, Answer(id=req.id, ok=True, by="mallory"))
        assert not refused.ok
        handle = client.get_workflow_handle(wid)
        first = (await handle.describe()).run_id
        await continue_as_new_by_rejections(handle)
        second = (await handle.describe()).run_id
        assert second != first
        await (await wf(client, "alice", wid)).signal(
            SIGNAL_ANSWER, Answer(id=req.id, ok=True, by="alice")
        )
        await taken_by_alice(rt, h, run_id=second)


async def test_the_audit_reads_the_run_an_entry_names_not_every_run(
    make_runtime, client: Client, monkeypatch
) -> None:
    """Issue 38: what ``rt.audit`` reads does not grow with the agent's age. alice's Answer
    is taken in the first run; three more runs follow (rejected signals); the audit reads
    that one run's history (named by the entry), none of the later ones, and still names
    alice's event."""
    from toolnexus_temporal.client import audit

    options = RuntimeOptions(continue_as_new_events=100)
    async with make_runtime(GATED, script().transport(), options=options) as rt:
        h, req, wid = await parked(rt, client)
        first = (await client.get_workflow_handle(wid).describe()).run_id
        await update(client, "alice", wid, Answer(id=req.id, ok=True, by="alice"))
        await taken_by_alice(rt, h, run_id=first)
        for _ in range(3):
            await continue_as_new_by_rejections(client.get_workflow_handle(wid))
        runs = [run.run_id async for run in client.list_workflows(f'WorkflowId = "{wid}"')]
        assert len(runs) >= 4, runs
        read: list[tuple[str, str]] = []
        real, real_named = audit.read_run, audit.read_named

        async def counted(client: Client, wid: str, run_id: str, *rest: Any) -> None:
            read.append((wid, run_id))
            await real(client, wid, run_id, *rest)

        async def counted_named(client: Client, wid: str, run_id: str, *rest: Any) -> bool:
            read.append((wid, run_id))
            return await real_named(client, wid, run_id, *rest)

        monkeypatch.setattr(audit, "read_run", counted)
        monkeypatch.setattr(audit, "read_named", counted_named)
        (entry,) = await rt.audit(h)
        assert (entry.identity, entry.run_id, entry.path) == ("alice", first, "update"), entry
        assert read == [(wid, first)], read


def asking() -> ScriptedLLM:
    """A model that calls ``slow`` (it parks) when the turn's input says ``[ask]``, and
    answers ``done`` otherwise (and after the tool)."""

    def reply(request: dict[str, Any]) -> dict[str, Any]:
        last = request["messages"][-1]
        if last["role"] != "tool" and "[ask]" in str(last.get("content")):
            return tool_calls(("slow", {}))
        return text("done")

    return ScriptedLLM({"stub-model": [reply]}, repeat_last=True)


async def test_the_audit_reads_a_named_run_only_up_to_its_event(
    make_runtime, client: Client, monkeypatch
) -> None:
    """Issue 38: an old agent's kept entries name many runs, each long; the audit reads of
    each only the part that holds the event its entries name, from the end nearer to it.
    alice's Answer (an update) is taken at the start of a run of 60 more turns, bob's at
    the end of the next run, after 60 turns: the audit still names both, and reads well
    under half of the two runs' events (before: both whole; a page holds ~200 events)."""
    turns = 60
    # one batch of rejected signals: one new run (continued as soon as it is long)
    options = RuntimeOptions(continue_as_new_signals=40, continue_as_new_min_run_ms=0)
    agent = expiry_registry(AgentDef(name="w", tools=["slow"]))
    async with make_runtime(agent, asking().transport(), options=options) as rt:
        h = await spawn(rt, rt.root, "w")
        wid = rt.workflow_id(h.id)

        async def answered_by(who: str) -> None:
            r = await rt.run_turn(h, "[ask]")
            assert r.pending is not None, r
            taken = await update(client, who, wid, Answer(id=r.pending.id, ok=True, by=who))
            assert taken.ok, taken
            assert (await finished(rt, h, within_s=30)).text == "done"

        first = (await client.get_workflow_handle(wid).describe()).run_id
        await answered_by("alice")
        for i in range(turns):
            assert (await rt.run_turn(h, f"turn {i}")).text == "done"
        await continue_as_new_by_rejections(client.get_workflow_handle(wid))
        # a turn first: the last batch's rejections may spill into the new run and continue
        # it as new once more (a loaded machine); a turn is taken after every signal sent
        assert (await rt.run_turn(h, "settle")).text == "done"
        second = (await client.get_workflow_handle(wid).describe()).run_id
        for i in range(turns):
            assert (await rt.run_turn(h, f"turn {i}")).text == "done"
        await answered_by("bob")
        assert (await client.get_workflow_handle(wid).describe()).run_id == second

        lengths = {}
        for run in (first, second):
            desc = await client.get_workflow_handle(wid, run_id=run).describe()
            lengths[run] = desc.raw_description.workflow_execution_info.history_length
        events = 0
        service = client.workflow_service
        for name in ("get_workflow_execution_history", "get_workflow_execution_history_reverse"):
            call = getattr(service, name)

            async def counted(req: Any, *args: Any, call: Any = call, **kw: Any) -> Any:
                nonlocal events
                page = await call(req, *args, **kw)
                events += len(page.history.events)
                return page

            monkeypatch.setattr(service, name, counted)
        records = await rt.audit(h)
        monkeypatch.undo()
        assert [(r.by, r.identity, r.path, r.run_id) for r in records] == [
            ("alice", "alice", "update", first),
            ("bob", "bob", "update", second),
        ], records
        assert 0 < events < sum(lengths.values()) / 2, (events, lengths)
