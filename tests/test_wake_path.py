"""The wake path under stress (written by an adversarial review of the `turn` update, relay
grants and slot leases): quick and repeated wakes, stale handles and grants, two hosts,
parked handles and slots, close races, concurrent spawns with replay, live usage reports."""

from __future__ import annotations

import asyncio
import json
from typing import Any

import httpx
import pytest
from temporalio.contrib.pydantic import pydantic_data_converter
from temporalio.worker import Replayer

from tests.helpers import eventually, spawn
from tests.registries import APPROVALS, check_secret  # noqa: F401
from toolnexus_temporal.activities import Registry
from toolnexus_temporal.client import AgentDef, AgentRuntime, Answer, Budget, Handle, RuntimeOptions
from toolnexus_temporal.client.errors import VerbRejectedError
from toolnexus_temporal.client.testing import text, tool_calls
from toolnexus_temporal.worker import workflow_runner
from toolnexus_temporal.workflows.agent import AgentWorkflow
from toolnexus_temporal.workflows.contract.messages import TurnRequest, WaitResponse


class Gated:
    """An LLM transport: a prompt containing BLOCK:<k> waits until release(k); the reply
    echoes the prompt. Records prompts in call order."""

    def __init__(self) -> None:
        self.events: dict[str, asyncio.Event] = {}
        self.prompts: list[str] = []
        self.started: dict[str, asyncio.Event] = {}

    def ev(self, k: str) -> asyncio.Event:
        return self.events.setdefault(k, asyncio.Event())

    def st(self, k: str) -> asyncio.Event:
        return self.started.setdefault(k, asyncio.Event())

    def release(self, k: str) -> None:
        self.ev(k).set()

    async def handle(self, request: httpx.Request) -> httpx.Response:
        body = json.loads(request.content)
        users = [m for m in body["messages"] if m["role"] == "user"]
        last = users[-1]["content"] if users else ""
        if isinstance(last, list):
            last = " ".join(p.get("text", "") for p in last)
        self.prompts.append(last)
        if "BLOCK:" in last:
            k = last.split("BLOCK:")[1].split()[0]
            self.st(k).set()
            await self.ev(k).wait()
        return httpx.Response(200, json=text(f"echo {last}"))

    def transport(self) -> httpx.MockTransport:
        return httpx.MockTransport(self.handle)


REG = {"w": AgentDef(name="w")}


async def root_slots(rt: AgentRuntime) -> tuple[dict[str, int], list[str]]:
    """The root's leases (child → lease id) and its queue of wakes waiting for a slot."""
    st = await rt._rpc.query("root", AgentWorkflow.state)
    leases = {child: lease.id for child, lease in st.leases.held.items()}
    return leases, [q.child for q in st.leases.wake_queue]


# ---------------------------------------------------------------- wake / wait basics


async def test_wake_twice_quickly(make_runtime) -> None:
    g = Gated()
    async with make_runtime(REG, g.transport(), budget=Budget(max_concurrent=1)) as rt:
        h = await spawn(rt, rt.root, "w")
        await rt.wake(h, "first BLOCK:a")
        await rt.wake(h, "second")  # kept (issue 34: nothing sent is lost), not a no-op
        g.release("a")
        # the wait of the second wake's update: the result of the turn that holds "second"
        r = await asyncio.wait_for(rt.wait(h), 20)
        assert r.text.startswith("echo second"), r
        assert len(g.prompts) == 2 and "first" in g.prompts[0] and "second" in g.prompts[1]
        other = await spawn(rt, rt.root, "w")
        r2 = await asyncio.wait_for(rt.run_turn(other, "x"), 20)
        assert r2.status == "done"
        r3 = await asyncio.wait_for(rt.run_turn(h, "third"), 20)
        assert r3.text.startswith("echo third"), r3


async def test_wake_then_interrupt_before_turn_runs(make_runtime) -> None:
    g = Gated()
    async with make_runtime(REG, g.transport(), budget=Budget(max_concurrent=1)) as rt:
        h = await spawn(rt, rt.root, "w")
        await rt.wake(h, "BLOCK:never")
        await rt.interrupt(h)
        r = await asyncio.wait_for(rt.wait(h), 20)
        assert r.status == "interrupted", r
        sib = await spawn(rt, rt.root, "w")
        r2 = await asyncio.wait_for(rt.run_turn(sib, "go"), 20)
        assert r2.status == "done", r2
        r3 = await asyncio.wait_for(rt.run_turn(h, "again"), 20)
        assert r3.status == "done", r3


async def test_wake_then_interrupt_while_running(make_runtime) -> None:
    g = Gated()
    async with make_runtime(REG, g.transport(), budget=Budget(max_concurrent=1)) as rt:
        h = await spawn(rt, rt.root, "w")
        await rt.wake(h, "BLOCK:never")
        await asyncio.wait_for(g.st("never").wait(), 20)
        await rt.interrupt(h)
        r = await asyncio.wait_for(rt.wait(h), 20)
        assert r.status == "interrupted", r
        sib = await spawn(rt, rt.root, "w")
        assert (await asyncio.wait_for(rt.run_turn(sib, "go"), 20)).status == "done"


async def test_close_with_turn_in_flight(make_runtime) -> None:
    g = Gated()
    async with make_runtime(REG, g.transport(), budget=Budget(max_concurrent=1)) as rt:
        h = await spawn(rt, rt.root, "w")
        await rt.wake(h, "BLOCK:never")
        await asyncio.wait_for(g.st("never").wait(), 20)
        waiter = asyncio.ensure_future(rt.wait(h))
        await asyncio.sleep(0.2)
        await asyncio.wait_for(rt.close(h), 20)
        r = await asyncio.wait_for(waiter, 20)
        assert r.status in ("interrupted", "closed"), r
        sib = await spawn(rt, rt.root, "w")
        assert (await asyncio.wait_for(rt.run_turn(sib, "go"), 20)).status == "done"
        with pytest.raises(VerbRejectedError):
            await rt.wake(h, "x")


async def test_wake_queued_then_close(make_runtime) -> None:
    g = Gated()
    async with make_runtime(REG, g.transport(), budget=Budget(max_concurrent=1)) as rt:
        a = await spawn(rt, rt.root, "w")
        b = await spawn(rt, rt.root, "w")
        c = await spawn(rt, rt.root, "w")
        await rt.wake(a, "BLOCK:a")
        await rt.wake(b, "b")
        assert b.queued
        await rt.close(b)
        rb = await asyncio.wait_for(rt.wait(b), 20)
        assert rb.status == "closed", rb
        g.release("a")
        assert (await asyncio.wait_for(rt.wait(a), 20)).status == "done"
        assert (await asyncio.wait_for(rt.run_turn(c, "c"), 20)).status == "done"
        _running, queue = await root_slots(rt)
        assert queue == []
        assert all("echo b" not in p for p in g.prompts)


async def test_five_siblings_max_concurrent_one(make_runtime) -> None:
    g = Gated()
    async with make_runtime(REG, g.transport(), budget=Budget(max_concurrent=1)) as rt:
        hs = [await spawn(rt, rt.root, "w") for _ in range(5)]
        results = await asyncio.wait_for(
            asyncio.gather(*(rt.run_turn(h, f"p{i}") for i, h in enumerate(hs))), 60
        )
        assert [r.status for r in results] == ["done"] * 5, results
        for i, r in enumerate(results):
            assert r.text == f"echo p{i}", (i, r)
        _running, queue = await root_slots(rt)
        assert queue == []
        # second round, with wake/wait split
        for i, h in enumerate(hs):
            await rt.wake(h, f"q{i}")
        results = await asyncio.wait_for(asyncio.gather(*(rt.wait(h) for h in hs)), 60)
        assert [r.text for r in results] == [f"echo q{i}" for i in range(5)], results


async def test_wait_timeout_then_wait_again(make_runtime) -> None:
    g = Gated()
    async with make_runtime(REG, g.transport()) as rt:
        h = await spawn(rt, rt.root, "w")
        await rt.wake(h, "BLOCK:a")
        r = await rt.wait(h, timeout_ms=300)
        assert r.status == "timeout"
        r = await rt.wait(h, timeout_ms=300)
        assert r.status == "timeout"
        g.release("a")
        r = await asyncio.wait_for(rt.wait(h), 20)
        assert r.status == "done" and r.text.startswith("echo BLOCK:a")
        r = await asyncio.wait_for(rt.wait(h), 20)
        assert r.text.startswith("echo BLOCK:a")


# ---------------------------------------------------------------- rejections, forged grants


async def test_turn_on_root_and_closed_rejected(make_runtime, client) -> None:
    g = Gated()
    async with make_runtime(REG, g.transport()) as rt:
        with pytest.raises(VerbRejectedError):
            await rt.wake(rt.root, "x")
        wf = client.get_workflow_handle(rt.workflow_id("root"))
        from temporalio.client import WorkflowUpdateFailedError

        with pytest.raises(WorkflowUpdateFailedError):
            await wf.execute_update("turn", TurnRequest(prompt="x"), result_type=WaitResponse)
        h = await spawn(rt, rt.root, "w")
        await rt.close(h)
        with pytest.raises(VerbRejectedError):
            await rt.wake(h, "x")
        with pytest.raises(VerbRejectedError):
            await rt.run_turn(h, "x")
        # raw turn on a closed handle, by id through the runtime's own path
        with pytest.raises(VerbRejectedError):
            await rt._turns.start(h.id, TurnRequest(prompt="x"))

        async def lease_freed() -> bool:  # the closed report frees the lease h held
            leases, _queue = await root_slots(rt)
            return h.id not in leases

        await eventually(lease_freed)


async def test_a_turn_with_an_unknown_field_is_rejected_and_the_handle_runs(
    make_runtime, client
) -> None:
    """A ``turn`` update that carries a field of a retired protocol (protocol 1's relay
    ``grant``) is refused loudly, and the handle's next real wakes still run with no slot
    leaked."""
    from temporalio.client import WorkflowUpdateFailedError

    g = Gated()
    async with make_runtime(REG, g.transport(), budget=Budget(max_concurrent=1)) as rt:
        a = await spawn(rt, rt.root, "w")
        b = await spawn(rt, rt.root, "w")  # no lease at spawn: a holds the only one
        wf = client.get_workflow_handle(rt.workflow_id(b.id))
        with pytest.raises(WorkflowUpdateFailedError):
            await asyncio.wait_for(wf.execute_update("turn", {"prompt": "forged", "grant": 99}), 20)
        for i in range(3):
            r = await asyncio.wait_for(rt.run_turn(b, f"legit{i}"), 20)
            assert r.text == f"echo legit{i}", r
        assert (await asyncio.wait_for(rt.run_turn(a, "two"), 20)).text == "echo two"

        async def drained() -> bool:
            leases, queue = await root_slots(rt)
            return len(leases) <= 1 and queue == []

        await eventually(drained)


# ---------------------------------------------------------------- stale handles, two hosts


async def test_wake_with_stale_handle_object_runs_a_turn(make_runtime) -> None:
    """A Handle object from before a turn settled (another host's copy) wakes the handle
    right after that turn: the wake must start a new turn, not hand back the old result."""
    g = Gated()
    async with make_runtime(REG, g.transport()) as rt:
        for i in range(5):
            h = await spawn(rt, rt.root, "w")
            stale = await rt.inspect(h.id)
            assert (await rt.run_turn(h, f"one{i}")).text == f"echo one{i}"
            await rt.wake(stale, f"two{i}")
            r = await asyncio.wait_for(rt.wait(stale), 20)
            assert r.text == f"echo two{i}", (i, r, g.prompts)


async def test_two_runtimes_wake_same_handle(make_runtime, client) -> None:
    g = Gated()
    async with make_runtime(REG, g.transport(), budget=Budget(max_concurrent=1)) as rt:
        rt2 = await AgentRuntime(client, task_queue=rt.task_queue, scope=rt.scope).start()
        h = await spawn(rt, rt.root, "w")
        h2 = await rt2.inspect(h.id)
        await asyncio.gather(rt.wake(h, "from1 BLOCK:x"), rt2.wake(h2, "from2 BLOCK:x"))
        await asyncio.sleep(0.5)
        g.release("x")
        r1, r2 = await asyncio.wait_for(asyncio.gather(rt.wait(h), rt2.wait(h2)), 20)
        # Both wakes are kept (issue 34: before, the second was dropped and both waits got
        # the first's result): two turns, one after the other, each wait its own answer.
        assert (r1.text, r2.text) == ("echo from1 BLOCK:x", "echo from2 BLOCK:x"), (r1, r2)
        assert r1.status == r2.status == "done"
        assert len(g.prompts) == 2
        sib = await spawn(rt, rt.root, "w")
        assert (await asyncio.wait_for(rt.run_turn(sib, "s"), 20)).status == "done"
        running, queue = await root_slots(rt)
        assert queue == [] and h.id not in running


async def test_wake_by_signal_then_wait(make_runtime, client) -> None:
    g = Gated()
    async with make_runtime(REG, g.transport(), budget=Budget(max_concurrent=1)) as rt:
        h = await spawn(rt, rt.root, "w")
        await client.get_workflow_handle(rt.workflow_id(h.id)).signal("wake", "by signal")
        r = await asyncio.wait_for(rt.wait(h), 20)
        assert r.text == "echo by signal", r
        sib = await spawn(rt, rt.root, "w")
        assert (await asyncio.wait_for(rt.run_turn(sib, "s"), 20)).status == "done"


async def test_wake_by_signal_via_cli_binary(make_runtime, client, env) -> None:
    from tests.conftest import temporal_binary

    g = Gated()
    async with make_runtime(REG, g.transport(), budget=Budget(max_concurrent=1)) as rt:
        h = await spawn(rt, rt.root, "w")
        target = env.client.service_client.config.target_host
        proc = await asyncio.create_subprocess_exec(
            temporal_binary(),
            "workflow",
            "signal",
            "--address",
            target,
            "--workflow-id",
            rt.workflow_id(h.id),
            "--name",
            "wake",
            "--input",
            '"cli go"',
            stdout=asyncio.subprocess.PIPE,
            stderr=asyncio.subprocess.PIPE,
        )
        _out, err = await proc.communicate()
        assert proc.returncode == 0, err
        r = await asyncio.wait_for(rt.wait(h), 20)
        assert r.text == "echo cli go", r


# ---------------------------------------------------------------- parked approvals & slots


def approval_transport(g: Gated) -> httpx.MockTransport:
    async def handler(request: httpx.Request) -> httpx.Response:
        body = json.loads(request.content)
        if body["model"] == "m-ask":
            if any(m["role"] == "tool" for m in body["messages"]):
                return httpx.Response(200, json=text("asker done"))
            return httpx.Response(200, json=tool_calls(("check_secret", {})))
        return await g.handle(request)

    return httpx.MockTransport(handler)


def approvals_registry() -> Any:
    from toolnexus_temporal.activities import define_tool

    return Registry(
        [AgentDef(name="asker", tools=["check_secret"], model="m-ask"), AgentDef(name="w")],
        tools=[define_tool(check_secret, input_schema={"type": "object", "properties": {}})],
    )


async def test_wake_of_parked_handle_does_not_take_a_slot(make_runtime) -> None:
    """A wake of a suspended handle buffers (CONTRACT §3, seed 001): it must not hold the
    parent's only slot while the handle stays parked."""
    g = Gated()
    async with make_runtime(
        approvals_registry(), approval_transport(g), budget=Budget(max_concurrent=1)
    ) as rt:
        a = await spawn(rt, rt.root, "asker")
        r = await asyncio.wait_for(rt.run_turn(a, "go"), 20)
        assert r.status == "pending"
        w = await spawn(rt, rt.root, "w")
        assert (await asyncio.wait_for(rt.run_turn(w, "w1"), 20)).status == "done"
        await rt.wake(a, "nudge")  # kept for the turn after the Answer's: a stays parked
        assert (await rt.inspect(a)).state == "suspended"
        running, queue = await root_slots(rt)
        r2 = await asyncio.wait_for(rt.run_turn(w, "w2"), 15)
        assert r2.status == "done", (r2, running, queue)


async def test_answer_parked_while_wake_queued(make_runtime) -> None:
    g = Gated()
    async with make_runtime(
        approvals_registry(), approval_transport(g), budget=Budget(max_concurrent=1)
    ) as rt:
        a = await spawn(rt, rt.root, "asker")
        r = await asyncio.wait_for(rt.run_turn(a, "go"), 20)
        assert r.status == "pending" and r.pending is not None
        b = await spawn(rt, rt.root, "w")
        c = await spawn(rt, rt.root, "w")
        await rt.wake(b, "BLOCK:b")
        await rt.wake(c, "c")
        assert c.queued
        await rt.resume(Answer(id=r.pending.id, ok=True))
        ra = await asyncio.wait_for(rt.wait(a), 20)
        assert ra.text == "asker done", ra
        g.release("b")
        assert (await asyncio.wait_for(rt.wait(b), 20)).status == "done"
        assert (await asyncio.wait_for(rt.wait(c), 20)).text == "echo c"

        async def drained() -> bool:
            leases, queue = await root_slots(rt)
            return queue == [] and len(leases) <= 1

        await eventually(drained)


# ---------------------------------------------------------------- spawn fan-out + replay


async def test_spawn_30_concurrently_then_replay_root(make_runtime, client) -> None:
    g = Gated()
    reg = {n: AgentDef(name=n) for n in ("w", "x", "y")}
    async with make_runtime(reg, g.transport()) as rt:
        names = ["w", "x", "y"] * 10
        spawned = await asyncio.wait_for(
            asyncio.gather(*(rt.spawn(rt.root, n) for n in names), rt.spawn(rt.root, "nope")), 90
        )
        hs = [s for s in spawned if isinstance(s, Handle)]
        assert len(hs) == 30 and len({h.id for h in hs}) == 30
        res = await asyncio.wait_for(
            asyncio.gather(*(rt.run_turn(h, f"t{i}") for i, h in enumerate(hs[:12]))), 90
        )
        assert all(r.status == "done" for r in res), res
        history = await client.get_workflow_handle(rt.workflow_id("root")).fetch_history()
    await Replayer(
        workflows=[AgentWorkflow],
        data_converter=pydantic_data_converter,
        workflow_runner=workflow_runner(sandboxed=True),
    ).replay_workflow(history)


async def test_live_usage_reports_are_throttled(make_runtime, client) -> None:
    """Many fast LLM calls in one turn: reports to the parent at most once per
    live_usage_ms (10 s here)."""
    from toolnexus_temporal.activities import define_tool

    def lookup(q: str = "") -> str:
        """returns data"""
        return "d"

    n = {"i": 0}

    async def handler(request: httpx.Request) -> httpx.Response:
        n["i"] += 1
        if n["i"] <= 4:
            return httpx.Response(200, json=tool_calls(("lookup", {"q": str(n["i"])})))
        return httpx.Response(200, json=text("done"))

    reg = Registry([AgentDef(name="w", tools=["lookup"])], tools=[define_tool(lookup)])
    async with make_runtime(
        reg, httpx.MockTransport(handler), options=RuntimeOptions(live_usage_ms=10_000)
    ) as rt:
        h = await spawn(rt, rt.root, "w")
        r = await asyncio.wait_for(rt.run_turn(h, "go"), 30)
        assert r.status == "done"
        hist = await client.get_workflow_handle(rt.workflow_id(h.id)).fetch_history()
        sent = [
            e
            for e in hist.events
            if e.HasField("signal_external_workflow_execution_initiated_event_attributes")
            and e.signal_external_workflow_execution_initiated_event_attributes.signal_name
            == "child_report"
        ]
        assert len(sent) <= 2, len(sent)
        child_usage = (await rt.inspect(h)).usage_total

        async def rolled_up() -> bool:
            return (await rt.inspect(rt.root)).usage_total == child_usage

        await eventually(rolled_up)


async def test_close_then_wait_returns_closed_result(make_runtime) -> None:
    g = Gated()
    async with make_runtime(REG, g.transport()) as rt:
        for _ in range(20):
            h = await spawn(rt, rt.root, "w")
            await rt.close(h)
            r = await rt.wait(h)
            assert r.status == "closed", r


async def test_parked_wake_slot_minimal(make_runtime) -> None:
    g = Gated()
    async with make_runtime(
        approvals_registry(), approval_transport(g), budget=Budget(max_concurrent=1)
    ) as rt:
        a = await spawn(rt, rt.root, "asker")
        assert (await rt.run_turn(a, "go")).status == "pending"
        await rt.wake(a, "nudge")  # kept on a suspended handle: it stays parked
        # The parked handle keeps its lease only until a sibling needs it (recalled: a
        # parked handle spends nothing), so the sibling runs.
        w = await spawn(rt, rt.root, "w")
        assert (await asyncio.wait_for(rt.run_turn(w, "w"), 20)).status == "done"
        leases, _queue = await root_slots(rt)
        assert a.id not in leases, leases


@pytest.mark.parametrize("verb", ["wait", "post"])
async def test_verbs_right_after_close_answer_from_the_final_state(make_runtime, verb) -> None:
    """15 handles closed in parallel, each followed at once by ``wait`` (the closed result) or
    ``post`` (``inbox closed``): never an error, however the close races the verb."""
    g = Gated()
    async with make_runtime(REG, g.transport(), budget=Budget(max_concurrent=None)) as rt:
        hs = [await spawn(rt, rt.root, "w") for _ in range(15)]

        async def one(h: Handle) -> Any:
            await rt.close(h)
            return await (rt.wait(h) if verb == "wait" else rt.post(h, "late"))

        out = await asyncio.gather(*(one(h) for h in hs), return_exceptions=True)
        bad = [o for o in out if isinstance(o, BaseException)]
        assert not bad, bad
        if verb == "wait":
            assert all(o.status == "closed" for o in out), out
        else:
            assert all(o.error == "inbox closed" for o in out), out


async def test_wake_handle_after_run_turn_by_id(make_runtime) -> None:
    g = Gated()
    async with make_runtime(REG, g.transport()) as rt:
        for i in range(5):
            h = await spawn(rt, rt.root, "w")  # h.result_seq == 0 from here on
            assert (await rt.run_turn(h.id, f"one{i}")).text == f"echo one{i}"
            await rt.wake(h, f"two{i}")
            r = await asyncio.wait_for(rt.wait(h), 20)
            assert r.text == f"echo two{i}", (i, r)


# ---------------------------------------------------------------- protocol 2: one message


async def _events(client: Any, wid: str) -> list[Any]:
    return list((await client.get_workflow_handle(wid).fetch_history()).events)


async def test_a_turn_of_a_lease_holder_sends_its_parent_nothing(make_runtime, client) -> None:
    """A wake is one ``turn`` update to the handle: with the lease it got at spawn, a burst
    of turns adds no event at all to the parent's history but the one coalesced usage report
    (``live_usage_ms`` 60 s here, so none within the test), and the parent's books are
    unchanged."""
    g = Gated()
    options = RuntimeOptions(live_usage_ms=60_000)
    async with make_runtime(
        REG, g.transport(), budget=Budget(max_concurrent=2), options=options
    ) as rt:
        h = await spawn(rt, rt.root, "w")
        leases_before, _ = await root_slots(rt)
        assert h.id in leases_before  # granted ahead, with the spawn
        root_wid = rt.workflow_id(rt.root.id)
        before = len(await _events(client, root_wid))
        for i in range(5):
            assert (await rt.run_turn(h, f"t{i}")).text == f"echo t{i}"
        assert len(await _events(client, root_wid)) == before
        assert (await root_slots(rt))[0] == leases_before
        # the one message of each turn: an update accepted and completed on the handle
        names = [e.event_type for e in await _events(client, rt.workflow_id(h.id))]
        from temporalio.api.enums.v1 import EventType

        signals_out = names.count(EventType.EVENT_TYPE_SIGNAL_EXTERNAL_WORKFLOW_EXECUTION_INITIATED)
        assert signals_out == 0
        assert names.count(EventType.EVENT_TYPE_WORKFLOW_EXECUTION_UPDATE_ACCEPTED) == 5


async def test_spawn_with_a_prompt_starts_the_first_turn(make_runtime) -> None:
    """``spawn(..., prompt=...)``: the first wake travels with the spawn; ``wait`` gives that
    turn's result, and the handle is ``running`` (or done) when spawn returns."""
    g = Gated()
    async with make_runtime(REG, g.transport(), budget=Budget(max_concurrent=1)) as rt:
        h = await rt.spawn(rt.root, "w", prompt="first")
        assert isinstance(h, Handle) and h.state == "running" and not h.queued
        assert (await asyncio.wait_for(rt.wait(h), 20)).text == "echo first"
        # over the cap: the second spawn's wake queues for the slot, then runs
        h2 = await rt.spawn(rt.root, "w", prompt="second BLOCK:x")
        assert isinstance(h2, Handle) and h2.queued
        g.release("x")
        assert (await asyncio.wait_for(rt.wait(h2), 20)).text.startswith("echo second")
