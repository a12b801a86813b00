"""Issue 12, "Approvals and waits": races between parked children, Answers, waits and
close, each looped so a lost race shows (dev server, scripted LLM)."""

from __future__ import annotations

import asyncio
import json
from collections.abc import Awaitable, Callable
from typing import Any

import pytest

from tests.conftest import temporal_binary
from tests.helpers import eventually, spawn, split_loop
from toolnexus_temporal.activities import Registry, ToolContext, define_tool, pending
from toolnexus_temporal.client import (
    AgentDef,
    Answer,
    AnswerRejectedError,
    HandleNotFoundError,
    VerbRejectedError,
)
from toolnexus_temporal.client.testing import ScriptedLLM, text, tool_calls
from toolnexus_temporal.workflows.agent import AgentWorkflow
from toolnexus_temporal.workflows.contract.state import HandleState

WAIT_BOUND_MS = 60_000
"""How long a ``wait`` may take before the test calls it stuck: an upper bound, not a timing
assertion (a loop takes about 1.5 s alone; CI run C once saw 15 s pass on a loaded run)."""


# ---------------------------------------------------------------- item 4: wake after close


@split_loop("iterations", 2, 12)
async def test_wake_of_a_just_closed_handle_raises_every_time(
    make_runtime, iterations: range
) -> None:
    reg = Registry([AgentDef(name="worker")])
    llm = ScriptedLLM({"stub-model": [text("hi")]}, repeat_last=True)
    async with make_runtime(reg, llm.transport()) as rt:
        for i in iterations:
            h = await spawn(rt, rt.root, "worker")
            if i % 2:
                assert (await rt.run_turn(h, "go")).status == "done"
            await rt.close(h)
            with pytest.raises(VerbRejectedError, match="closed"):
                await rt.wake(h, "again")
            r = await rt.wait(h)  # never raises
            assert r.status in ("closed", "done"), r
            with pytest.raises(VerbRejectedError, match="closed"):
                await rt.run_turn(h.id, "again")


# ---------------------------------------------------------------- scripted behaviour

GATES: dict[str, asyncio.Event] = {}
"""Per test run: ``ask(name)`` parks only once the test sets ``GATES[name]``."""


async def ask(ctx: ToolContext, name: str) -> Any:
    """Needs an approval named ``name``, asked once the test opens its gate."""
    if ctx.answer is not None:
        return f"{name} approved"
    gate = GATES.get(name)
    if gate is not None:
        await asyncio.wait_for(gate.wait(), 60)
    return pending(kind="approval", prompt=f"approve {name}")


def last_role(view: dict[str, Any]) -> str:
    return str(view["messages"][-1]["role"])


def asker_reply(view: dict[str, Any]) -> dict[str, Any]:
    """An asker: calls ``ask`` with its prompt, then says it is done."""
    prompt = str(view["messages"][0]["content"])
    if last_role(view) == "tool":
        return text(f"{prompt} done")
    return tool_calls(("ask", {"name": prompt}))


def mid_reply(view: dict[str, Any]) -> dict[str, Any]:
    """A lead that delegates ``a`` and ``b`` to two askers in one reply."""
    if last_role(view) == "tool":
        return text("mid done")
    return tool_calls(
        ("task", {"agent": "asker", "prompt": "a"}), ("task", {"agent": "asker", "prompt": "b"})
    )


def top_reply(view: dict[str, Any]) -> dict[str, Any]:
    """The top agent: one task for the lead."""
    if last_role(view) == "tool":
        return text("top done")
    return tool_calls(("task", {"agent": "mid", "prompt": "lead"}))


def worker_reply(view: dict[str, Any]) -> dict[str, Any]:
    """A worker that asks for one approval (named by its prompt) per turn."""
    if last_role(view) == "tool":
        return text("worker done")
    return tool_calls(("ask", {"name": str(view["messages"][-1]["content"]).split("\n")[0]}))


def tree_registry() -> Registry:
    return Registry(
        [
            AgentDef(name="top", team=["mid"], model="m-top"),
            AgentDef(name="mid", description="leads", team=["asker"], model="m-mid"),
            AgentDef(name="asker", description="asks", tools=["ask"], model="m-asker"),
            AgentDef(name="worker", tools=["ask"], model="m-worker"),
        ],
        tools=[define_tool(ask)],
    )


def tree_llm() -> ScriptedLLM:
    return ScriptedLLM(
        {
            "m-top": [top_reply],
            "m-mid": [mid_reply],
            "m-asker": [asker_reply],
            "m-worker": [worker_reply],
        },
        repeat_last=True,
    )


async def state_of(rt: Any, hid: str) -> HandleState:
    return await rt._rpc.query(hid, AgentWorkflow.state)


Check = Callable[[], Awaitable[bool]]


async def until(check: Check, what: str) -> None:
    """``eventually`` every 0.05 s, 300 tries; a handle not spawned yet counts as not yet."""
    await eventually(check, 300, every=0.05, what=what, ignoring=(HandleNotFoundError,))


def parked(rt: Any, parent_id: str, name: str) -> Check:
    """The parent knows its child asking ``name`` is parked."""

    async def check() -> bool:
        st = await state_of(rt, parent_id)
        return any(
            info.parked and prompt_of(info.pending_req) == f"approve {name}"
            for info in st.roster.children_info.values()
            if info.pending_req is not None
        )

    return check


def surfaced(rt: Any, hid: str, name: str) -> Check:
    """The handle is suspended on ``approve {name}``."""

    async def check() -> bool:
        st = await state_of(rt, hid)
        return (
            st.state == "suspended"
            and st.approval.pending_req is not None
            and prompt_of(st.approval.pending_req) == f"approve {name}"
        )

    return check


def child_shows(rt: Any, parent_id: str, child_id: str, name: str) -> Check:
    """The parent's latest report of the child names ``approve {name}``."""

    async def check() -> bool:
        info = (await state_of(rt, parent_id)).roster.children_info.get(child_id)
        return (
            info is not None
            and info.pending_req is not None
            and (prompt_of(info.pending_req) == f"approve {name}")
        )

    return check


def left_suspended(rt: Any, hid: str) -> Check:
    """The handle is no longer suspended."""

    async def check() -> bool:
        return bool((await state_of(rt, hid)).state != "suspended")

    return check


def prompt_of(req: Any) -> str:
    assert req is not None
    return str(req.prompt)


# ---------------------------------------------------------------- item 1: parallel parked children


@split_loop("iterations", 3, 12)
async def test_parallel_parked_children_surface_in_call_order_at_every_level(
    make_runtime, iterations: range
) -> None:
    """top --task--> mid --task×2--> askers a, b, parking in varying order. Whatever the
    order: run_turn returns `a`'s Request (first in call order: when b parks first, no level
    surfaces it while a still runs), equal to the handle's pending_req in the same response
    and to inspect(top).pending_req once both parked; every level is suspended on `a`; after
    `a`'s Answer, wait(top) returns `b` at once; after `b`'s, the turn completes."""
    orders = ["together", "a-first", "b-first"]
    async with make_runtime(tree_registry(), tree_llm().transport()) as rt:
        for i in iterations:
            order = orders[i % 3]
            GATES.clear()
            GATES.update(a=asyncio.Event(), b=asyncio.Event())
            top = await spawn(rt, rt.root, "top")
            run = asyncio.ensure_future(rt.run_turn(top, "go"))
            mid_id = f"{top.id}/mid.1"

            if order == "together":
                GATES["a"].set()
                GATES["b"].set()
            elif order == "a-first":
                GATES["a"].set()
                r = await asyncio.wait_for(run, 60)
                assert r.status == "pending", (order, r)
                assert top.pending_req == r.pending, order  # the same response's status
                await until(surfaced(rt, top.id, "a"), "top surfaces a")
                GATES["b"].set()
            else:  # b parks first: no level surfaces it while `a` may still park
                GATES["b"].set()
                await until(parked(rt, mid_id, "b"), "b parked")
                st = await state_of(rt, mid_id)  # mid handled b's report already
                assert st.state == "running" and st.approval.pending_req is None, (order, st.state)
                assert not run.done(), (order, run.result())
                GATES["a"].set()
            await until(parked(rt, mid_id, "a"), "a parked")
            await until(parked(rt, mid_id, "b"), "b parked")
            if order != "a-first":
                r = await asyncio.wait_for(run, 60)
                assert r.status == "pending" and top.pending_req == r.pending, order
            # run_turn's Request is the one every level keeps once all children parked:
            # the first call's (issue 12 item 1)
            assert prompt_of(r.pending) == "approve a", (order, r)
            await until(surfaced(rt, mid_id, "a"), "mid surfaces a")
            await until(child_shows(rt, top.id, mid_id, "a"), "top has mid's report")
            assert (await state_of(rt, top.id)).approval.pending_req == r.pending, order

            # both parked below: mid surfaces `a` and every level above is suspended on it
            await until(surfaced(rt, mid_id, "a"), "mid surfaces a")
            await until(child_shows(rt, top.id, mid_id, "a"), "top has mid's report")
            for hid in (mid_id, top.id):
                r = await rt.wait(hid, timeout_ms=WAIT_BOUND_MS)
                assert r.status == "pending", (order, hid, r)
                assert prompt_of(r.pending) == "approve a", (order, hid)
                st = await state_of(rt, hid)
                assert st.state == "suspended" and st.approval.pending_req == r.pending, (
                    order,
                    hid,
                )

            # answer `a` through top: the next wait returns `b` at once
            assert r.pending is not None
            await rt.answer(top, Answer(id=r.pending.id, ok=True))
            r = await rt.wait(top, timeout_ms=WAIT_BOUND_MS)
            assert r.status == "pending", (order, r)
            assert prompt_of(r.pending) == "approve b", (order, r)
            assert top.pending_req == r.pending
            await rt.answer(top, Answer(id=r.pending.id, ok=True))
            r = await rt.wait(top, timeout_ms=WAIT_BOUND_MS)
            assert (r.status, r.text) == ("done", "top done"), (order, r)
            await rt.close(top)


# ------------------------------------------------------------ item 2: wait right after an Answer


async def signal_answer(rt: Any, env: Any, hid: str, answer: Answer, *, cli: bool) -> None:
    """Send the ``answer`` signal as an operator would: the Temporal CLI, or a raw client."""
    payload = answer.model_dump(mode="json", exclude_none=True)
    if not cli:
        await env.client.get_workflow_handle(rt.workflow_id(hid)).signal("answer", payload)
        return
    proc = await asyncio.create_subprocess_exec(
        temporal_binary(),
        "workflow",
        "signal",
        "--workflow-id",
        rt.workflow_id(hid),
        "--name",
        "answer",
        "--input",
        json.dumps(payload),
        "--address",
        env.client.service_client.config.target_host,
        stderr=asyncio.subprocess.PIPE,
    )
    _, err = await asyncio.wait_for(proc.communicate(), 30)
    assert proc.returncode == 0, err


@split_loop("iterations", 2, 16)
async def test_wait_right_after_an_answer_signal_returns_the_continued_turn(
    make_runtime, env, iterations: range
) -> None:
    GATES.clear()
    async with make_runtime(tree_registry(), tree_llm().transport()) as rt:
        w = await spawn(rt, rt.root, "worker")
        for i in iterations:
            r = await rt.run_turn(w, f"x{i}")
            assert r.status == "pending" and r.pending is not None
            await signal_answer(rt, env, w.id, Answer(id=r.pending.id, ok=True), cli=i % 4 == 0)
            r = await rt.wait(w, timeout_ms=WAIT_BOUND_MS)
            assert (r.status, r.text) == ("done", "worker done"), (i, r)


@split_loop("iterations", 1, 6)
async def test_wait_right_after_an_answer_to_a_delegating_parent(
    make_runtime, env, iterations: range
) -> None:
    GATES.clear()
    async with make_runtime(tree_registry(), tree_llm().transport()) as rt:
        for i in iterations:
            top = await spawn(rt, rt.root, "top")
            r = await rt.run_turn(top, "go")
            assert r.status == "pending" and r.pending is not None
            seen = r.pending
            await signal_answer(rt, env, top.id, Answer(id=seen.id, ok=True), cli=False)
            r = await rt.wait(top, timeout_ms=WAIT_BOUND_MS)
            assert r.status == "pending" and r.pending is not None, (i, r)
            assert r.pending.id != seen.id, (i, "the answered Request came back")
            await signal_answer(rt, env, top.id, Answer(id=r.pending.id, ok=True), cli=False)
            r = await rt.wait(top, timeout_ms=WAIT_BOUND_MS)
            assert (r.status, r.text) == ("done", "top done"), (i, r)
            await rt.close(top)


@split_loop("iterations", 1, 6)
async def test_wait_on_an_ancestor_right_after_an_answer_signal_to_the_owner(
    make_runtime, env, iterations: range
) -> None:
    """The Answer signalled to the Request's owner (as the web UI's approval queue lists it),
    then at once ``wait`` on the top handle: never the answered Request (the client checks a
    descendant's Request against its owner and waits for the next result). (A signal to an
    ancestor travels one hop per signal: README Known limits.)"""
    target = "owner"
    GATES.clear()
    async with make_runtime(tree_registry(), tree_llm().transport()) as rt:
        for i in iterations:
            top = await spawn(rt, rt.root, "top")
            r = await rt.run_turn(top, "go")
            assert r.status == "pending" and r.pending is not None
            seen = r.pending
            to = seen.id.split("#")[0] if target == "owner" else rt.root.id
            await signal_answer(rt, env, to, Answer(id=seen.id, ok=True), cli=False)
            r = await rt.wait(top, timeout_ms=WAIT_BOUND_MS)
            assert r.status == "pending" and r.pending is not None, (i, r)
            assert r.pending.id != seen.id, (i, "the answered Request came back")
            to = r.pending.id.split("#")[0] if target == "owner" else rt.root.id
            await signal_answer(rt, env, to, Answer(id=r.pending.id, ok=True), cli=False)
            r = await rt.wait(top, timeout_ms=WAIT_BOUND_MS)
            assert (r.status, r.text) == ("done", "top done"), (i, r)
            await rt.close(top)


# ------------------------------------------------------------ item 3: Answer sent to an ancestor


@split_loop("iterations", 1, 3)
async def test_a_wrong_number_sent_through_ancestors_is_rejected_by_the_answer(
    make_runtime, env, iterations: range
) -> None:
    """An Answer id with a wrong number under a live, parked owner, sent to the root two
    levels up: ``answer`` raises the owner's rejection (not ``ok``), and nothing changes."""
    GATES.clear()
    async with make_runtime(tree_registry(), tree_llm().transport()) as rt:
        for i in iterations:
            top = await spawn(rt, rt.root, "top")
            r = await rt.run_turn(top, "go")
            assert r.status == "pending" and r.pending is not None
            owner = r.pending.id.rsplit("#", 1)[0]
            wrong = Answer(id=f"{owner}#7", ok=True)
            with pytest.raises(AnswerRejectedError):
                await rt.answer(rt.root, wrong)
            view = await rt.inspect(owner)
            assert view.state == "suspended" and view.pending_req is not None
            assert view.pending_req.id == r.pending.id, (i, view)
            await rt.close(top, force=True)


@split_loop("iterations", 2, 4)
async def test_an_answer_sent_to_an_ancestor_reaches_the_owner(
    make_runtime, env, iterations: range
) -> None:
    GATES.clear()
    async with make_runtime(tree_registry(), tree_llm().transport()) as rt:
        for i in iterations:
            # a top-level worker, answered through the (idle) root: signal, then update
            w = await spawn(rt, rt.root, "worker")
            r = await rt.run_turn(w, "one")
            assert r.pending is not None
            if i % 2:
                await signal_answer(
                    rt, env, rt.root.id, Answer(id=r.pending.id, ok=True), cli=False
                )
                # a signal has no reply: it reaches the owner one hop later (README Known limits)
                await until(left_suspended(rt, w.id), "the worker took the Answer")
            else:
                result = await rt.answer(rt.root, Answer(id=r.pending.id, ok=True))
                assert result.ok and result.answered == w.id, result
            r = await rt.wait(w, timeout_ms=WAIT_BOUND_MS)
            assert (r.status, r.text) == ("done", "worker done"), (i, r)

            # three levels: `b` (not surfaced: `a` is) answered at the root, `a` at the root too
            top = await spawn(rt, rt.root, "top")
            r = await rt.run_turn(top, "go")
            mid_id = f"{top.id}/mid.1"

            await until(parked(rt, mid_id, "a"), "a parked")
            await until(parked(rt, mid_id, "b"), "b parked")
            mid = await state_of(rt, mid_id)
            reqs = {
                prompt_of(info.pending_req): info.pending_req
                for info in mid.roster.children_info.values()
                if info.pending_req is not None
            }
            b = reqs["approve b"]
            if i % 2:
                await signal_answer(rt, env, rt.root.id, Answer(id=b.id, ok=True), cli=False)
            else:
                result = await rt.answer(rt.root, Answer(id=b.id, ok=True))
                assert result.ok and result.answered == top.id, result

            await until(left_suspended(rt, b.id.rpartition("#")[0]), "b resumed")
            r = await rt.wait(top, timeout_ms=WAIT_BOUND_MS)
            assert r.status == "pending" and prompt_of(r.pending) == "approve a", (i, r)
            assert r.pending is not None
            await rt.answer(rt.root, Answer(id=r.pending.id, ok=True))
            r = await rt.wait(top, timeout_ms=WAIT_BOUND_MS)
            assert (r.status, r.text) == ("done", "top done"), (i, r)

        # unknown ids stay rejected, loudly: at the root when no live handle on its path
        # matches, else at the owner, which checks the number against its pending Request
        # (the update waits for the next handle's report: its rejection comes back)
        await rt.close(top)
        for bad in ("root/ghost.9#1", "bogus#1", f"{top.id}/mid.1#1", "elsewhere/x.1#1"):
            with pytest.raises(AnswerRejectedError):
                await rt.answer(rt.root, Answer(id=bad, ok=True))
        root = await state_of(rt, rt.root.id)
        rejected = [line.line for line in root.trace if "answer REJECTED" in line.line]
        assert len(rejected) == 4 and "ghost" in rejected[0], rejected
        assert root.last_error is not None and "elsewhere" in root.last_error
        with pytest.raises(AnswerRejectedError, match="no pending request"):
            await rt.answer(rt.root, Answer(id=f"{w.id}#99", ok=True))
        owner = await state_of(rt, w.id)  # rejected loudly by the owner, nothing changed
        assert owner.last_error is not None and f"{w.id}#99" in owner.last_error
        assert owner.state == "idle" and owner.approval.pending_req is None
