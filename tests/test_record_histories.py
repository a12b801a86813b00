"""The recorders of the committed histories (``tests/histories/``), replayed in CI by
``tests/test_replay.py``. Opt-in: ``TNX_RECORD_HISTORIES=1 .venv/bin/python -m pytest
tests/test_record_histories.py`` runs every scenario on the session's dev server and writes
its histories (one JSON file per workflow, and per run where a handle continues as new).

Until 1.0 a behaviour change that alters workflow commands re-records the histories it changes
(``workflows/contract/versions.py``): run the recorders, commit the files, and the replay tests
then guard the new behaviour. Each file is named ``{scenario}_{handle}.json``; every scenario
listed in ``SCENARIOS`` must have written at least one file (``test_replay.py`` checks).
"""

from __future__ import annotations

import asyncio
import json
import os
from typing import Any

import httpx
import pytest
from temporalio.client import Client, WorkflowHistory

from tests.recorded import HISTORIES
from toolnexus_temporal.activities.tools import ToolContext, define_tool
from toolnexus_temporal.client import AgentDef, AgentRuntime, Handle, InboxItem
from toolnexus_temporal.client.testing import ScriptedLLM, text, tool_calls

RECORDING = pytest.mark.skipif(
    not os.environ.get("TNX_RECORD_HISTORIES"), reason="recording is opt-in"
)


@RECORDING
async def test_record_histories(make_runtime, client) -> None:
    llm = ScriptedLLM(
        {"stub-model": [text("one"), tool_calls(("lookup", {"q": "x"})), text("two")]}
    )
    registry = {"worker": AgentDef(name="worker", system_prompt="be brief")}
    async with make_runtime(registry, llm.transport()) as rt:
        h = await rt.spawn(rt.root, "worker")
        assert isinstance(h, Handle)
        assert (await rt.spawn(rt.root, "nope")) is not None
        await rt.post(h, InboxItem(from_="external", channel="webhook", text="hello"))
        assert (await rt.run_turn(h, "first")).text == "one"
        await rt.wake(h, "second")
        assert (await rt.wait(h)).text == "two"
        await client.get_workflow_handle(rt.workflow_id(h.id)).signal("wake", {"bad": 1})
        spawned = await asyncio.gather(*(rt.spawn(rt.root, "worker") for _ in range(12)))
        assert all(isinstance(s, Handle) for s in spawned)
        await rt.inspect(h)
        HISTORIES.mkdir(exist_ok=True)
        for name, handle_id in (("basic_root.json", "root"), ("basic_agent.json", h.id)):
            history = await client.get_workflow_handle(rt.workflow_id(handle_id)).fetch_history()
            (HISTORIES / name).write_text(history.to_json())


@RECORDING
async def test_record_delegation_histories(make_runtime, client) -> None:
    """A parent delegating through `task` to a child that parks on an approval, answered."""
    from tests.registries import APPROVALS
    from toolnexus_temporal.client import Answer

    llm = ScriptedLLM(
        {
            "m-parent": [
                tool_calls(("task", {"agent": "asker", "prompt": "get it"})),
                text("parent done"),
            ],
            "stub-model": [tool_calls(("check_secret", {})), text("asker done")],
        }
    )
    async with make_runtime(APPROVALS, llm.transport()) as rt:
        parent = await rt.spawn(rt.root, "parent")
        assert isinstance(parent, Handle)
        result = await rt.run_turn(parent, "go")
        assert result.status == "pending" and result.pending is not None
        await rt.resume(Answer(id=result.pending.id, ok=True))
        assert (await rt.wait(parent)).text == "parent done"
        await rt.close(parent)
        for name, handle_id in (
            ("delegation_parent.json", parent.id),
            ("delegation_child.json", f"{parent.id}/asker.1"),
        ):
            history = await client.get_workflow_handle(rt.workflow_id(handle_id)).fetch_history()
            (HISTORIES / name).write_text(history.to_json())


@RECORDING
async def test_record_protocol_histories(make_runtime, client) -> None:
    """Finite pools (budget_ask, pool_floor), root slots queued and handed over, a wake
    signal asking for a slot, an interrupt, post and answer as signals, a spawn with its first
    wake, and a close cascade. Writes ``protocol_*.json``."""
    from tests.registries import check_secret_tool, lookup_tool
    from toolnexus_temporal.activities import Registry
    from toolnexus_temporal.client import Answer, Budget

    reg = Registry(
        [
            AgentDef(
                name="lead",
                team=["helper"],
                model="m-lead",
                budget=Budget(max_tokens=10_000, max_concurrent=1),
            ),
            AgentDef(name="helper", tools=["lookup"], model="m-helper"),
            AgentDef(name="slow", model="m-slow"),
            AgentDef(name="asker", tools=["check_secret"], model="m-asker"),
        ],
        tools=[lookup_tool(), check_secret_tool()],
    )
    llm = ScriptedLLM(
        {
            "m-lead": [
                tool_calls(
                    ("task", {"agent": "helper", "prompt": "one"}),
                    ("task", {"agent": "helper", "prompt": "two"}),
                ),
                text("lead done"),
            ],
            "m-helper": [tool_calls(("lookup", {"q": "x"})), text("helped")],
            "m-slow": [text("s" * 400)],
            "m-asker": [tool_calls(("check_secret", {})), text("asked")],
        },
        repeat_last=True,
        chunk_delay_s=0.02,
    )
    async with make_runtime(reg, llm.transport(), budget=Budget(max_concurrent=1)) as rt:
        lead = await rt.spawn(rt.root, "lead")
        slow = await rt.spawn(rt.root, "slow")
        asker = await rt.spawn(rt.root, "asker")
        assert isinstance(lead, Handle) and isinstance(slow, Handle)
        assert isinstance(asker, Handle)
        assert (await rt.run_turn(lead, "fan out")).text == "lead done"
        await rt.wake(slow, "first")
        await rt.wake(asker, "queued behind slow")
        assert (await rt.wait(slow)).status == "done"
        parked = await rt.wait(asker)
        assert parked.status == "pending" and parked.pending is not None
        asker_wf = client.get_workflow_handle(rt.workflow_id(asker.id))
        await asker_wf.signal("answer", Answer(id=parked.pending.id, ok=True))
        for _ in range(100):  # a wait right after the signal may still see the Request
            if (await rt.wait(asker)).text == "asked":
                break
            await asyncio.sleep(0.1)
        slow_wf = client.get_workflow_handle(rt.workflow_id(slow.id))
        await slow_wf.signal("post", "from a shell")
        await slow_wf.signal("wake", "by signal")
        await asyncio.sleep(0.3)
        await rt.interrupt(slow)
        assert (await rt.run_turn(slow, "again")).status == "done"
        eager = await rt.spawn(rt.root, "slow", prompt="with the spawn")
        assert isinstance(eager, Handle)
        assert (await rt.wait(eager)).status == "done"
        await client.get_workflow_handle(rt.workflow_id(lead.id)).signal("close", None)
        await rt.close(rt.root)
        names = {
            "root": "root",
            "lead": lead.id,
            "lead_child": f"{lead.id}/helper.1",
            "slow": slow.id,
            "asker": asker.id,
            "eager": eager.id,
        }
        for name, handle_id in names.items():
            history = await client.get_workflow_handle(rt.workflow_id(handle_id)).fetch_history()
            (HISTORIES / f"protocol_{name}.json").write_text(history.to_json())


@RECORDING
async def test_record_operator_histories(make_runtime, client) -> None:
    """The approval queue: a ``task`` child parks (both it and its parent upsert
    the Request's search attributes), a wrong answer is rejected, the Answer sent to the
    parent is routed down, both unset the attributes. Writes ``operator_*.json``."""
    from tests.approving import WORKER, approvals_registry

    boss = AgentDef(name="boss", description="delegates", team=["worker"])
    llm = ScriptedLLM(
        {
            "stub-model": [
                tool_calls(("task", {"agent": "worker", "prompt": "deploy"})),
                tool_calls(("ask_approval", {})),
                text("deployed"),
                text("boss done"),
            ]
        }
    )
    async with make_runtime(approvals_registry(boss, WORKER), llm.transport()) as rt:
        b = await rt.spawn(rt.root, "boss")
        assert isinstance(b, Handle)
        r = await rt.run_turn(b, "go")
        assert r.status == "pending" and r.pending is not None
        parent_wf = client.get_workflow_handle(rt.workflow_id(b.id))
        await parent_wf.signal("answer", {"id": f"{b.id}/worker.1#9", "ok": True})
        await parent_wf.signal("answer", {"id": r.pending.id, "ok": True})
        assert (await rt.wait(b)).text == "boss done"
        await rt.close(b)
        for name, handle_id in (("parent", b.id), ("child", f"{b.id}/worker.1")):
            history = await client.get_workflow_handle(rt.workflow_id(handle_id)).fetch_history()
            (HISTORIES / f"operator_{name}.json").write_text(history.to_json())


async def _record_every_run(client: Client, workflow_id: str, name: str) -> None:
    """Write each run of one workflow, newest last: ``{name}_run{i}.json``."""
    runs: list[WorkflowHistory] = []
    run: str | None = None
    while True:
        history = await client.get_workflow_handle(workflow_id, run_id=run).fetch_history()
        runs.append(history)
        started = history.events[0].workflow_execution_started_event_attributes
        run = started.continued_execution_run_id or None
        if run is None:
            break
    for i, history in enumerate(reversed(runs), start=1):
        (HISTORIES / f"{name}_run{i}.json").write_text(history.to_json())


@RECORDING
async def test_record_hardened_histories(make_runtime, client) -> None:
    """Paths the protocol scenario misses: a parked handle that continues as new
    (carrying its parked turn) and is answered in the new run; a cancellation request on the
    root of a parked tree (a graceful close); a child terminated and reflected in its parent.
    Writes ``parked_run*.json`` and ``cancel_*_run*.json`` (every run of each workflow)."""
    from tests.helpers import eventually
    from tests.parking import REGISTRY as PARKED_REGISTRY
    from tests.parking import continue_as_new_by_rejections, park
    from tests.parking import script as parked_script
    from tests.registries import cancelling
    from toolnexus_temporal.client import Answer, RuntimeOptions

    HISTORIES.mkdir(exist_ok=True)
    options = RuntimeOptions(continue_as_new_events=100)
    async with make_runtime(PARKED_REGISTRY, parked_script().transport(), options=options) as rt:
        h = await park(rt)
        wf = client.get_workflow_handle(rt.workflow_id(h.id))
        await continue_as_new_by_rejections(wf)
        assert h.pending_req is not None
        first = h.pending_req.id  # (the Handle object is refreshed by every verb)
        await rt.resume(Answer(id=first, ok=True, data={"n": 1}))
        r = await rt.wait(h)
        while r.status == "pending" and r.pending is not None and r.pending.id == first:
            r = await rt.wait(h, timeout_ms=1000)
        assert r.status == "pending" and r.pending is not None
        await rt.resume(Answer(id=r.pending.id, ok=True))
        r = await rt.wait(h)
        while r.status != "done":
            r = await rt.wait(h, timeout_ms=1000)
        await _record_every_run(client, rt.workflow_id(h.id), "parked")

    closed: list[str] = []
    llm = ScriptedLLM(
        {
            "m-parent": [tool_calls(("task", {"agent": "asker", "prompt": "x"}))],
            "stub-model": [tool_calls(("check_secret", {})), text("idle one")],
        }
    )
    async with make_runtime(cancelling(closed), llm.transport()) as rt:
        parent = await rt.spawn(rt.root, "parent")
        chat = await rt.spawn(rt.root, "chat")
        assert isinstance(parent, Handle) and isinstance(chat, Handle)
        assert (await rt.run_turn(parent, "go")).status == "pending"
        await client.get_workflow_handle(rt.workflow_id(chat.id)).terminate("recorded")

        async def reflected() -> bool:
            return any("ended abnormally" in line for line in await rt.trace_lines(rt.root))

        await eventually(reflected, tries=300)
        await client.get_workflow_handle(rt.workflow_id("root")).cancel()
        ids = {"root": "root", "parent": parent.id, "asker": f"{parent.id}/asker.1"}
        for hid in ids.values():
            wf = client.get_workflow_handle(rt.workflow_id(hid))
            await wf.result()
        for name, hid in ids.items():
            await _record_every_run(client, rt.workflow_id(hid), f"cancel_{name}")


# ---------------------------------------------------------------- the paths the others miss


async def _record_each(
    client: Client, rt: AgentRuntime, scenario: str, ids: dict[str, str]
) -> None:
    """Write the (current run's) history of each handle: ``{scenario}_{name}.json``."""
    HISTORIES.mkdir(exist_ok=True)
    for name, handle_id in ids.items():
        history = await client.get_workflow_handle(rt.workflow_id(handle_id)).fetch_history()
        (HISTORIES / f"{scenario}_{name}.json").write_text(history.to_json())


class _Gated:
    """A scripted LLM whose requests for some keys (a model name, or a first prompt) wait
    until released; ``entered[key]`` is set when such a request arrives."""

    def __init__(self, llm: ScriptedLLM, *keys: str) -> None:
        self.llm = llm
        self.entered = {k: asyncio.Event() for k in keys}
        self.release = {k: asyncio.Event() for k in keys}

    def _key(self, body: dict[str, Any]) -> str | None:
        messages = body.get("messages") or [{}]
        first = messages[0].get("content")
        for key in self.entered:
            if body.get("model") == key or first == key:
                return key
        return None

    async def handle(self, request: httpx.Request) -> httpx.Response:
        body = json.loads(request.content)
        key = self._key(body)
        if key is not None:
            self.entered[key].set()
            await self.release[key].wait()
        return self.llm.respond(request.url.path, body)

    def transport(self) -> httpx.MockTransport:
        return httpx.MockTransport(self.handle)

    def release_all(self) -> None:
        for event in self.release.values():
            event.set()


def _arrows(lines: list[str], handle_id: str) -> list[str]:
    """A handle's trace lines without its id prefix."""
    prefix = f"{handle_id}: "
    return [line.removeprefix(prefix) for line in lines if line.startswith(prefix)]


@RECORDING
async def test_record_interp_histories(make_runtime, client) -> None:
    """Inline interpreters (``wait_for``): one approves (the tool runs again with the
    Answer), one declines (the model sees the refusal). Writes ``interp_*.json``."""
    from tests.approving import approvals_registry

    reg = approvals_registry(
        AgentDef(name="inl", tools=["ask_approval"], wait_for="approve", model="m-inl"),
        AgentDef(name="dec", tools=["ask_approval"], wait_for="decline", model="m-dec"),
    )
    llm = ScriptedLLM(
        {
            "m-inl": [tool_calls(("ask_approval", {})), text("approved inline")],
            "m-dec": [tool_calls(("ask_approval", {})), text("not doing it")],
        }
    )
    async with make_runtime(reg, llm.transport()) as rt:
        inl = await rt.spawn(rt.root, "inl")
        dec = await rt.spawn(rt.root, "dec")
        assert isinstance(inl, Handle) and isinstance(dec, Handle)
        r = await rt.run_turn(inl, "do the risky thing")
        assert (r.status, r.text) == ("done", "approved inline")
        r = await rt.run_turn(dec, "do the risky thing")
        assert (r.status, r.text) == ("done", "not doing it")
        second = {q["model"]: q for q in llm.requests}  # each model's last (second) request
        assert second["m-inl"]["messages"][-1]["content"] == 'approved: {"by": "interpreter"}'
        assert second["m-dec"]["messages"][-1]["content"] == "declined: need approval to proceed"
        lines = await rt.trace_lines(inl)
        assert f"{inl.id}: escalate → {inl.id} answers (approve)" in lines
        assert _arrows(lines, inl.id)[0].startswith("idle→running")
        assert f"{dec.id}: escalate → {dec.id} answers (decline)" in await rt.trace_lines(dec)
        await _record_each(client, rt, "interp", {"root": "root", "inl": inl.id, "dec": dec.id})


@RECORDING
async def test_record_hooks_histories(make_runtime, client) -> None:
    """Registered on_spawn / on_close hooks: on a spawned handle closed by the host, and on
    a ``task`` child that closes itself after its one turn. Writes ``hooks_*.json``."""
    from tests.helpers import eventually
    from toolnexus_temporal.activities import Registry
    from toolnexus_temporal.workflows.contract.messages import HookInput

    events: list[tuple[str, str, str | None]] = []

    async def record(event: HookInput) -> None:
        events.append((event.event, event.handle_id, event.reason))

    reg = Registry(
        [
            AgentDef(name="watched", on_spawn="record", on_close="record"),
            AgentDef(name="lead", team=["helper"], model="m-lead"),
            AgentDef(name="helper", on_spawn="record", on_close="record", model="m-helper"),
        ],
        hooks={"record": record},
    )
    llm = ScriptedLLM(
        {
            "stub-model": [text("watched ok")],
            "m-lead": [tool_calls(("task", {"agent": "helper", "prompt": "x"})), text("lead done")],
            "m-helper": [text("helper done")],
        }
    )
    async with make_runtime(reg, llm.transport()) as rt:
        watched = await rt.spawn(rt.root, "watched")
        lead = await rt.spawn(rt.root, "lead")
        assert isinstance(watched, Handle) and isinstance(lead, Handle)

        async def spawned() -> bool:
            return ("spawn", watched.id, None) in events

        await eventually(spawned)
        assert (await rt.run_turn(watched, "hi")).text == "watched ok"
        assert (await rt.run_turn(lead, "delegate")).text == "lead done"
        helper_id = f"{lead.id}/helper.1"

        async def helper_closed() -> bool:
            return any(e[:2] == ("close", helper_id) for e in events)

        await eventually(helper_closed, tries=300)
        assert ("spawn", helper_id, None) in events
        closed = await rt.close(watched, reason="done")
        assert closed.state == "closed"
        assert events.count(("close", watched.id, "done")) == 1
        assert events.index(("spawn", watched.id, None)) < events.index(
            ("close", watched.id, "done")
        )
        assert f"{watched.id}: on_spawn record ran" in await rt.trace_lines(watched)
        assert (await rt.inspect(helper_id)).state == "closed"
        ids = {"root": "root", "watched": watched.id, "lead": lead.id, "helper": helper_id}
        await _record_each(client, rt, "hooks", ids)


@RECORDING
async def test_record_timeouts_histories(make_runtime, client) -> None:
    """A ``wait`` update whose timeout expires while the turn still runs (then the turn's
    result), and the wall-clock watchdog (``max_wall_ms``) stopping a hanging turn, then
    refusing the next one. Writes ``timeouts_*.json``."""
    from toolnexus_temporal.client import Budget

    reg = {
        "slow": AgentDef(name="slow", model="m-slow"),
        "walled": AgentDef(name="walled", model="m-walled", budget=Budget(max_wall_ms=1_500)),
    }
    llm = ScriptedLLM({"m-slow": [text("slow done")], "m-walled": [text("never seen")]})
    gated = _Gated(llm, "m-slow", "m-walled")
    async with make_runtime(reg, gated.transport()) as rt:
        slow = await rt.spawn(rt.root, "slow")
        assert isinstance(slow, Handle)
        # woken by a signal: this runtime holds no turn update, so wait is the `wait` update
        await client.get_workflow_handle(rt.workflow_id(slow.id)).signal("wake", "work")
        await asyncio.wait_for(gated.entered["m-slow"].wait(), 30)
        r = await rt.wait(slow, timeout_ms=500)
        assert r.status == "timeout" and r.is_error, r
        assert (await rt.inspect(slow)).state == "running"  # the turn keeps running
        gated.release["m-slow"].set()
        r = await rt.wait(slow)
        while r.status == "timeout":
            r = await rt.wait(slow, timeout_ms=1000)
        assert (r.status, r.text) == ("done", "slow done")

        walled = await rt.spawn(rt.root, "walled")  # its deadline counts from the spawn
        assert isinstance(walled, Handle)
        r = await rt.run_turn(walled, "hang")  # the durable timer stops the hanging call
        assert gated.entered["m-walled"].is_set()
        assert (r.status, r.limit) == ("incomplete", "wallMs"), r
        r = await rt.run_turn(walled, "again")  # past the deadline: no LLM call at all
        assert (r.status, r.limit, r.turns) == ("incomplete", "wallMs", 0), r
        gated.release_all()
        ids = {"root": "root", "slow": slow.id, "walled": walled.id}
        await _record_each(client, rt, "timeouts", ids)


@RECORDING
async def test_record_grace_histories(make_runtime, client) -> None:
    """The close grace timer (``shutdown_ms``): a close while a turn runs that the grace
    outlasts (the turn is interrupted), one whose turn finishes within it, and an idle
    handle that continues as new (``continue_as_new_updates``). Writes ``grace_*_run*.json``
    (every run of each workflow)."""
    from tests.helpers import eventually
    from toolnexus_temporal.client import RuntimeOptions

    reg = {
        "chat": AgentDef(name="chat"),
        "busy": AgentDef(name="busy", model="m-busy"),
        "fin": AgentDef(name="fin", model="m-fin"),
    }
    llm = ScriptedLLM(
        {
            "stub-model": [text(f"answer {i}") for i in range(4)],
            "m-busy": [text("too late")],
            "m-fin": [text("finished in grace")],
        }
    )
    gated = _Gated(llm, "m-busy", "m-fin")
    options = RuntimeOptions(shutdown_ms=1_500, continue_as_new_updates=3)
    async with make_runtime(reg, gated.transport(), options=options) as rt:
        chat = await rt.spawn(rt.root, "chat")
        busy = await rt.spawn(rt.root, "busy")
        fin = await rt.spawn(rt.root, "fin")
        assert isinstance(chat, Handle) and isinstance(busy, Handle) and isinstance(fin, Handle)
        chat_wf = client.get_workflow_handle(rt.workflow_id(chat.id))
        first_run = (await chat_wf.describe()).run_id
        for i in range(4):
            r = await rt.run_turn(chat, f"question {i}")
            assert (r.status, r.text) == ("done", f"answer {i}")

        async def continued() -> bool:
            return (await chat_wf.describe()).run_id != first_run

        await eventually(continued, tries=300)
        assert any(line.endswith(": continue-as-new") for line in await rt.trace_lines(chat))
        assert (await rt.inspect(chat)).turns_total == 4

        await rt.wake(busy, "work")
        await asyncio.wait_for(gated.entered["m-busy"].wait(), 30)
        closed = await rt.close(busy)  # the LLM call outlasts the grace: interrupted
        assert closed.state == "closed"
        assert closed.last_result is not None and closed.last_result.status == "interrupted"
        assert _arrows(await rt.trace_lines(busy), busy.id)[-2:] == [
            "running→idle (interrupted)",
            "idle→closed (close)",
        ]

        await rt.wake(fin, "work")
        await asyncio.wait_for(gated.entered["m-fin"].wait(), 30)
        closing = asyncio.create_task(rt.close(fin))
        await asyncio.sleep(0.4)
        gated.release["m-fin"].set()  # within the grace: the turn finishes, then the close
        closed = await asyncio.wait_for(closing, 30)
        assert closed.state == "closed"
        assert closed.last_result is not None
        assert (closed.last_result.status, closed.last_result.text) == (
            "done",
            "finished in grace",
        )
        gated.release_all()
        HISTORIES.mkdir(exist_ok=True)
        for name, hid in (("root", "root"), ("chat", chat.id), ("busy", busy.id), ("fin", fin.id)):
            await _record_every_run(client, rt.workflow_id(hid), f"grace_{name}")


@RECORDING
async def test_record_task_histories(make_runtime, client) -> None:
    """Shared ``task`` calls (two identical calls in one reply run one child), then a task
    call interrupted while its child runs. Writes ``task_*.json``."""
    from toolnexus_temporal.activities import Registry

    reg = Registry(
        [
            AgentDef(name="boss", team=["kid"], model="m-boss"),
            AgentDef(name="kid", description="finds things", model="m-kid"),
        ]
    )
    llm = ScriptedLLM(
        {
            "m-boss": [
                tool_calls(
                    ("task", {"agent": "kid", "prompt": "find A"}),
                    ("task", {"agent": "kid", "prompt": "find A"}),
                ),
                text("synthesis"),
                tool_calls(("task", {"agent": "kid", "prompt": "slow job"})),
                text("never seen"),
            ],
            "m-kid": [text("found A"), text("slow found")],
        }
    )
    gated = _Gated(llm, "slow job")
    async with make_runtime(reg, gated.transport()) as rt:
        boss = await rt.spawn(rt.root, "boss")
        assert isinstance(boss, Handle)
        r = await rt.run_turn(boss, "go")
        assert (r.status, r.text) == ("done", "synthesis")
        last = [q for q in llm.requests if q["model"] == "m-boss"][-1]
        tool_msgs = [m["content"] for m in last["messages"] if m["role"] == "tool"]
        assert tool_msgs == ["found A", "found A"]
        assert (await rt.inspect(boss)).children == [f"{boss.id}/kid.1"]  # one, shared
        assert llm.calls("m-kid") == 1

        await rt.wake(boss, "again")
        await asyncio.wait_for(gated.entered["slow job"].wait(), 30)
        kid2 = f"{boss.id}/kid.2"
        await rt.interrupt(boss)
        r = await rt.wait(boss)
        assert r.status == "interrupted", r
        boss_view = await rt.inspect(boss)
        assert boss_view.state == "idle" and boss_view.children == [f"{boss.id}/kid.1", kid2]
        assert llm.calls("m-boss") == 3
        gated.release_all()
        ids = {"root": "root", "boss": boss.id, "kid1": f"{boss.id}/kid.1", "kid2": kid2}
        await _record_each(client, rt, "task", ids)


@RECORDING
async def test_record_background_histories(make_runtime, client) -> None:
    """A background child (``task`` with ``"background": true``) whose result wakes its
    parent; the woken turn posts to it, waits for it and closes it (issue 25 item 2).
    Writes ``background_*.json``."""
    from toolnexus_temporal.activities import Registry

    reg = Registry(
        [
            AgentDef(name="lead", team=["kid"], model="m-lead"),
            AgentDef(name="kid", description="does work", model="m-kid"),
        ]
    )
    kid = "root/lead.1/kid.1"
    llm = ScriptedLLM(
        {
            "m-lead": [
                tool_calls(("task", {"agent": "kid", "prompt": "job", "background": True})),
                text("started"),
                tool_calls(("background_post", {"id": kid, "text": "more"})),
                tool_calls(("background_wait", {"id": kid}), ("background_list", {})),
                tool_calls(("background_close", {"id": kid})),
                text("all read"),
            ],
            "m-kid": [text("did the job"), text("did more")],
        }
    )
    gated = _Gated(llm, "m-kid")
    async with make_runtime(reg, gated.transport()) as rt:
        lead = await rt.spawn(rt.root, "lead")
        assert isinstance(lead, Handle)
        assert (await rt.run_turn(lead, "go")).text == "started"
        gated.release_all()  # the kid settles while the lead is idle: it wakes the lead
        for _ in range(300):
            view = await rt.inspect(lead)
            if view.result_seq == 2 and view.state == "idle":
                break
            await asyncio.sleep(0.1)
        assert (await rt.wait(lead)).text == "all read"
        assert (await rt.inspect(kid)).state == "closed"
        await rt.close(lead)
        await _record_each(client, rt, "background", {"lead": lead.id, "kid": kid})


@RECORDING
async def test_record_budget_histories(make_runtime, client) -> None:
    """Nested pools (a lead with ``max_tokens`` whose ``task`` child carves its own pool
    under it), and budget stops: ``max_tokens`` and ``max_tool_calls`` end a turn as
    ``incomplete``. Writes ``budget_*.json``."""
    from tests.helpers import eventually
    from tests.registries import lookup_tool
    from toolnexus_temporal.activities import Registry
    from toolnexus_temporal.client import Budget

    reg = Registry(
        [
            AgentDef(name="lead", team=["helper"], model="m-lead", budget=Budget(max_tokens=1_000)),
            AgentDef(
                name="helper", tools=["lookup"], model="m-helper", budget=Budget(max_tokens=300)
            ),
            AgentDef(
                name="spender", tools=["lookup"], model="m-spender", budget=Budget(max_tokens=10)
            ),
            AgentDef(
                name="caller", tools=["lookup"], model="m-caller", budget=Budget(max_tool_calls=2)
            ),
        ],
        tools=[lookup_tool()],
    )
    two_calls = tool_calls(("lookup", {"q": "a"}), ("lookup", {"q": "b"}))
    one_call = tool_calls(("lookup", {"q": "c"}))
    llm = ScriptedLLM(
        {
            "m-lead": [tool_calls(("task", {"agent": "helper", "prompt": "dig"})), text("led")],
            "m-helper": [tool_calls(("lookup", {"q": "x"})), text("dug")],
            "m-spender": [two_calls, one_call, text("never seen")],
            "m-caller": [two_calls, one_call, text("never seen")],
        }
    )
    async with make_runtime(reg, llm.transport()) as rt:
        lead = await rt.spawn(rt.root, "lead")
        assert isinstance(lead, Handle) and lead.pool_tokens == 1_000
        r = await rt.run_turn(lead, "delegate")
        assert (r.status, r.text) == ("done", "led")
        helper = await rt.inspect(f"{lead.id}/helper.1")
        assert helper.state == "closed" and helper.usage_total == 7 + 5
        assert helper.pool_tokens == 300 - 12

        async def drained() -> bool:
            view = await rt.inspect(lead)
            return (view.usage_total, view.pool_tokens) == (24, 1_000 - 24)

        await eventually(drained, tries=300)

        spender = await rt.spawn(rt.root, "spender")
        assert isinstance(spender, Handle)
        r = await rt.run_turn(spender, "spend")  # 7 tokens, then 7 more: over 10
        assert (r.status, r.limit, r.turns) == ("incomplete", "tokens", 2), r
        caller = await rt.spawn(rt.root, "caller")
        assert isinstance(caller, Handle)
        r = await rt.run_turn(caller, "call")  # 2 tool calls allowed, the next batch is not
        assert (r.status, r.limit, r.turns) == ("incomplete", "toolCalls", 2), r
        assert caller.tool_calls_total == 2
        ids = {
            "root": "root",
            "lead": lead.id,
            "helper": helper.id,
            "spender": spender.id,
            "caller": caller.id,
        }
        await _record_each(client, rt, "budget", ids)


@RECORDING
async def test_record_terminated_histories(make_runtime, client) -> None:
    """A child terminated from outside frees its slot under ``max_concurrent=1``: the
    sibling whose wake was queued behind it then runs. Writes ``terminated_*.json``."""
    from tests.helpers import eventually
    from toolnexus_temporal.client import Budget

    reg = {"a": AgentDef(name="a", model="m-a"), "b": AgentDef(name="b", model="m-b")}
    llm = ScriptedLLM({"m-a": [text("never seen")], "m-b": [text("b ran")]})
    gated = _Gated(llm, "m-a")
    async with make_runtime(reg, gated.transport(), budget=Budget(max_concurrent=1)) as rt:
        a = await rt.spawn(rt.root, "a")
        b = await rt.spawn(rt.root, "b")
        assert isinstance(a, Handle) and isinstance(b, Handle)
        await rt.wake(a, "hold the slot")
        await asyncio.wait_for(gated.entered["m-a"].wait(), 30)
        await rt.wake(b, "queued")
        assert b.queued and b.state == "idle"
        await client.get_workflow_handle(rt.workflow_id(a.id)).terminate("recorded")
        r = await rt.wait(b)
        assert (r.status, r.text) == ("done", "b ran")

        async def reflected() -> bool:
            return any("ended abnormally" in line for line in await rt.trace_lines(rt.root))

        await eventually(reflected, tries=300)
        lines = await rt.trace_lines(rt.root)
        assert any(f"{b.id} wake QUEUED" in line for line in lines)
        assert any(f"DEQUEUED wake {b.id}" in line for line in lines)
        gated.release_all()
        await _record_each(client, rt, "terminated", {"root": "root", "a": a.id, "b": b.id})


@RECORDING
async def test_record_race_histories(make_runtime, client) -> None:
    """A close racing an interpreter: sent while the interpreter activity answers the
    handle's Request. The first close lands well before the Answer (the parked turn is
    interrupted, the late Answer dropped); the second is signalled as the interpreter
    returns (whichever lands first decides). Writes ``race_*.json``."""
    from tests.approving import TOOLS
    from toolnexus_temporal.activities import Registry
    from toolnexus_temporal.client import Answer, Request

    gates: dict[str, tuple[asyncio.Event, asyncio.Event]] = {}

    async def slow_approve(req: Request) -> Answer:
        entered, release = gates[req.id.rsplit("#", 1)[0]]
        entered.set()
        await release.wait()
        return Answer(id=req.id, ok=True, data={"by": "slow"})

    reg = Registry(
        [
            AgentDef(name=name, tools=["ask_approval"], wait_for="slow_approve", model=f"m-{name}")
            for name in ("racer", "late")
        ],
        tools=TOOLS,
        interpreters={"slow_approve": slow_approve},
    )
    script = [tool_calls(("ask_approval", {})), text("raced")]
    llm = ScriptedLLM({"m-racer": list(script), "m-late": list(script)})
    async with make_runtime(reg, llm.transport()) as rt:
        first = await rt.spawn(rt.root, "racer")
        second = await rt.spawn(rt.root, "late")
        assert isinstance(first, Handle) and isinstance(second, Handle)
        for h in (first, second):
            gates[h.id] = (asyncio.Event(), asyncio.Event())

        await rt.wake(first, "risky")
        await asyncio.wait_for(gates[first.id][0].wait(), 30)
        closing = asyncio.create_task(rt.close(first, reason="race"))
        await asyncio.sleep(0.3)  # the close lands while the interpreter still answers
        gates[first.id][1].set()
        closed = await asyncio.wait_for(closing, 60)
        assert closed.state == "closed"
        assert closed.last_result is not None and closed.last_result.status == "interrupted"
        assert _arrows(await rt.trace_lines(first), first.id) == [
            "idle→running (wake)",
            "running→suspended (ask_approval needs approval)",
            "escalate → root/racer.1 answers (slow_approve)",
            "close requested (race)",
            "suspended→idle (interrupted)",
            "idle→closed (race)",
        ]

        await rt.wake(second, "risky")
        await asyncio.wait_for(gates[second.id][0].wait(), 30)
        wf = client.get_workflow_handle(rt.workflow_id(second.id))
        gates[second.id][1].set()
        await wf.signal("close", {"reason": "race"})
        await wf.result()
        view = await rt.inspect(second)
        assert view.state == "closed" and view.last_result is not None
        outcome = (view.last_result.status, view.last_result.text)
        assert outcome[0] == "interrupted" or outcome == ("done", "raced"), outcome
        assert _arrows(await rt.trace_lines(second), second.id)[-1] == "idle→closed (race)"
        ids = {"root": "root", "racer": first.id, "late": second.id}
        await _record_each(client, rt, "race", ids)


@RECORDING
async def test_record_recovered_histories(make_runtime, client) -> None:
    """A parked handle terminated from outside and started again by ``recover`` (issue 23
    item 6): the recovered run starts parked on the same Request, traces ``recovered``,
    reports to the root, and is answered. Writes ``recovered_*.json`` (the recovered run of
    the handle, and the root that took its reports)."""
    from toolnexus_temporal.client import Answer

    async def guarded(ctx: Any) -> Any:
        """Needs an approval."""
        from toolnexus_temporal.activities import pending

        return pending(kind="approval", prompt="ok?") if ctx.answer is None else "done it"

    from toolnexus_temporal.activities import Registry, define_tool

    registry = Registry(
        [AgentDef(name="guard", tools=["guarded"])],
        tools=[define_tool(guarded, input_schema={"type": "object", "properties": {}})],
    )
    llm = ScriptedLLM({"stub-model": [tool_calls(("guarded", {})), text("recovered done")]})
    async with make_runtime(registry, llm.transport()) as rt:
        h = await rt.spawn(rt.root, "guard")
        assert isinstance(h, Handle)
        r = await rt.run_turn(h, "go")
        assert r.pending is not None
        await client.get_workflow_handle(rt.workflow_id(h.id)).terminate("recorded")
        back = await rt.recover(h.id)
        assert back.state == "suspended" and back.pending_req == r.pending
        await rt.resume(Answer(id=r.pending.id, ok=True))
        done = await rt.wait(back)
        assert (done.status, done.text) == ("done", "recovered done")
        await _record_each(client, rt, "recovered", {"root": "root", "guard": h.id})


@RECORDING
async def test_record_ticks_histories(make_runtime, client) -> None:
    """Ticks and pause (issue 25): a definition's 1 s tick that wakes the handle, a pause
    during which ticks coalesce and a wake is held, the pause and unpause signals (one with
    bad input), unpause running the held wake, a schedule update to inbox-only ticks, an
    unschedule, and a continue-as-new carrying the schedule."""
    from toolnexus_temporal.client import RuntimeOptions, TickSpec

    llm = ScriptedLLM({"stub-model": [text("ticked")]}, repeat_last=True)
    registry = {
        "ticker": AgentDef(name="ticker", tick=TickSpec(every_ms=1_000, prompt="look")),
    }
    options = RuntimeOptions(continue_as_new_events=150)
    async with make_runtime(registry, llm.transport(), options=options) as rt:
        h = await rt.spawn(rt.root, "ticker")
        assert isinstance(h, Handle)
        wf = client.get_workflow_handle(rt.workflow_id(h.id))

        async def turns_at_least(n: int) -> None:
            for _ in range(200):
                if (await rt.inspect(h)).turns_total >= n:
                    return
                await asyncio.sleep(0.1)
            raise AssertionError(f"fewer than {n} turns")

        await turns_at_least(2)
        await rt.pause(h)
        await wf.signal("pause", {"now": "yes"})  # rejected: bad input
        await rt.wake(h, "held")
        await asyncio.sleep(2.5)  # ticks coalesce while paused
        await wf.signal("unpause", None)
        await turns_at_least(3)
        await rt.schedule(h, every=1, wake=False)
        await asyncio.sleep(2.2)
        await rt.post(h, InboxItem(from_="ops", channel="chat", text="note"))
        await rt.unschedule(h)
        await rt.run_turn(h, "drain")
        await rt.schedule(h, every=1, prompt="again")
        for _ in range(300):  # until the run continued as new at least once
            started = (await wf.fetch_history()).events[0]
            if started.workflow_execution_started_event_attributes.continued_execution_run_id:
                break
            await asyncio.sleep(0.1)
        else:
            raise AssertionError("never continued as new")
        await asyncio.sleep(1.5)
        await rt.close(h)
        await _record_every_run(client, wf.id, "ticks_ticker")


@RECORDING
async def test_record_context_histories(make_runtime, client) -> None:
    """A bounded context (issue 26 item 1): an agent under a ``summarize`` policy whose views
    leave turns out, so the summarizer activity runs (its tokens counted), and a
    continue-as-new that carries the summary; a second agent under ``drop``."""
    from toolnexus_temporal.client import ContextPolicy, RuntimeOptions
    from toolnexus_temporal.workflows.contract.context import SUMMARIZER_INSTRUCTIONS

    def answer(request: dict[str, Any]) -> dict[str, Any]:
        if request["messages"][0].get("content") == SUMMARIZER_INSTRUCTIONS:
            return text("summary: they talked", prompt_tokens=300, completion_tokens=10)
        return text("noted " + "r" * 300, prompt_tokens=250, completion_tokens=80)

    llm = ScriptedLLM({"stub-model": [answer]}, repeat_last=True)
    summarize = ContextPolicy(
        max_tokens=400, keep_turns=1, older="summarize", summary_max_tokens=64
    )
    registry = {
        "keeper": AgentDef(name="keeper", system_prompt="be brief", context=summarize),
        "dropper": AgentDef(name="dropper", context=ContextPolicy(max_tokens=300, keep_turns=1)),
    }
    options = RuntimeOptions(continue_as_new_events=150)
    async with make_runtime(registry, llm.transport(), options=options) as rt:
        keeper = await rt.spawn(rt.root, "keeper")
        dropper = await rt.spawn(rt.root, "dropper")
        assert isinstance(keeper, Handle) and isinstance(dropper, Handle)
        for i in range(8):
            await rt.run_turn(keeper, f"turn {i} " + "p" * 300)
            await rt.run_turn(dropper, f"turn {i} " + "p" * 300)
        await asyncio.sleep(1.3)  # past continue_as_new_min_run_ms
        wf = client.get_workflow_handle(rt.workflow_id(keeper.id))
        for i in range(8, 30):  # until the run continued as new, carrying the summary
            await rt.run_turn(keeper, f"turn {i} " + "p" * 300)
            started = (await wf.fetch_history()).events[0]
            if started.workflow_execution_started_event_attributes.continued_execution_run_id:
                break
        else:
            raise AssertionError("never continued as new")
        await rt.run_turn(keeper, "after")
        await rt.close(keeper)
        await rt.close(dropper)
        await _record_every_run(client, rt.workflow_id(keeper.id), "context_keeper")
        await _record_each(client, rt, "context", {"dropper": dropper.id})


@RECORDING
async def test_record_expiry_histories(make_runtime, client) -> None:
    """Expiry, escalation, approvers and the audit (issue 26): a tool's 1.5 s timeout that
    expires and a late Answer rejected; an agent escalating to a named queue after 300 ms, an
    approver refused and one accepted; an agent escalating to an interpreter for its parent;
    an agent timeout carried across a continue-as-new while parked."""
    from tests.expiring import expiry_registry, finished
    from toolnexus_temporal.client import Answer, AnswerRejectedError, RuntimeOptions
    from toolnexus_temporal.workflows.contract.models import ApprovalPolicy, Escalation

    llm = ScriptedLLM(
        {
            "stub-model": [tool_calls(("quick", {})), text("done")],
            "m-queue": [tool_calls(("slow", {})), text("done")],
            "m-interp": [tool_calls(("slow", {})), text("done")],
            "m-carry": [tool_calls(("slow", {})), text("done")],
        }
    )
    agents = expiry_registry(
        AgentDef(name="dead", tools=["quick"]),
        AgentDef(
            name="queue",
            model="m-queue",
            tools=["slow"],
            approval=ApprovalPolicy(
                escalate=Escalation(after_ms=300, queue="ops"),
                approvers={"approval": ["alice"]},
            ),
        ),
        AgentDef(
            name="interp",
            model="m-interp",
            tools=["slow"],
            approval=ApprovalPolicy(escalate=Escalation(after_ms=300, interpreter="approve")),
        ),
        AgentDef(
            name="carry", model="m-carry", tools=["slow"], approval=ApprovalPolicy(timeout_ms=4_000)
        ),
    )
    options = RuntimeOptions(continue_as_new_events=100)
    async with make_runtime(agents, llm.transport(), options=options) as rt:
        handles = {}
        for name in ("dead", "queue", "interp", "carry"):
            h = await rt.spawn(rt.root, name)
            assert isinstance(h, Handle)
            handles[name] = h
            assert (await rt.run_turn(h, "go")).status == "pending"
        carry = client.get_workflow_handle(rt.workflow_id(handles["carry"].id))
        first_run = (await carry.describe()).run_id
        for batch in range(100):
            for i in range(50):
                await carry.signal("answer", {"id": f"nope#{batch}.{i}", "ok": True})
            if (await carry.describe()).run_id != first_run:
                break
        queue = handles["queue"]
        await asyncio.sleep(0.8)  # escalated to the queue by now
        req = f"{queue.id}#1"
        with pytest.raises(AnswerRejectedError):
            await rt.answer(queue, Answer(id=req, ok=True, by="bob"))
        await rt.answer(queue, Answer(id=req, ok=True, by="alice"))
        for h in handles.values():
            assert (await finished(rt, h)).status == "done"
        with pytest.raises(AnswerRejectedError, match="expired"):
            await rt.answer(handles["dead"], Answer(id=f"{handles['dead'].id}#1", ok=True))
        for name, h in handles.items():
            await rt.close(h)
            await _record_every_run(client, rt.workflow_id(h.id), f"expiry_{name}")


def _jot(note: str, ctx: ToolContext) -> str:
    """Append a note to a file in the workspace and return the file."""
    assert ctx.workspace is not None
    with (ctx.workspace / "notes.txt").open("a") as notes:
        notes.write(note + "\n")
    return (ctx.workspace / "notes.txt").read_text()


@RECORDING
async def test_record_workspace_histories(make_runtime, client) -> None:
    """A workspace tool (issue 27, item 5): the claim on the shared queue, then calls on the
    worker's own queue with a schedule-to-start timeout, across a continue-as-new."""
    from toolnexus_temporal.activities import Registry
    from toolnexus_temporal.client import RuntimeOptions

    llm = ScriptedLLM(
        {
            "stub-model": [
                tool_calls(("jot", {"note": "a"})),
                text("one"),
                tool_calls(("jot", {"note": "b"}), ("jot", {"note": "c"})),
                text("two"),
                tool_calls(("jot", {"note": "d"})),
                text("three"),
            ]
        }
    )
    registry = Registry(
        [AgentDef(name="dev", tools=["jot"])], tools=[define_tool(_jot, name="jot", workspace=True)]
    )
    options = RuntimeOptions(continue_as_new_updates=2)
    async with make_runtime(registry, llm.transport(), options=options) as rt:
        h = await rt.spawn(rt.root, "dev")
        assert isinstance(h, Handle)
        wf = client.get_workflow_handle(rt.workflow_id(h.id))
        first_run = (await wf.describe()).run_id
        assert (await rt.run_turn(h, "first")).text == "one"
        assert (await rt.run_turn(h, "second")).text == "two"
        for _ in range(300):  # it continues as new once idle: wait for it
            if (await wf.describe()).run_id != first_run:
                break
            await asyncio.sleep(0.1)
        assert (await rt.run_turn(h, "third")).text == "three"
        await rt.close(h)
        await _record_every_run(client, rt.workflow_id(h.id), "workspace_dev")
