"""Approvals that edit and explain (issue 34 item 3) on a real dev server with the scripted
LLM: an Answer approves with ``edited_args`` (checked against the tool's schema first; a bad
edit is refused and the Request stays pending), the tool runs once with them and the model
reads a note naming the edit; an Answer rejects with a ``message`` the model reads as the
tool's result; an approval covers one call. By update, by signal (``temporal workflow
signal``), from Python and from ``tnx answer``, on a ``define_tool`` tool and on an MCP tool of
a real MCP server (``mcp-server-time``)."""

from __future__ import annotations

import json
import sys
from typing import Any

import pytest
from temporalio.client import Client

from tests.cli_support import Cli
from tests.conftest import MODEL, RuntimeFactory
from tests.helpers import settle, spawn
from tests.parking import cli_answer
from toolnexus_temporal.activities import Registry, ToolContext, define_tool, pending
from toolnexus_temporal.client import AgentDef, Answer, AnswerRejectedError, McpServer
from toolnexus_temporal.client.testing import ScriptedLLM, text, tool_calls

NOTE = "[the reviewer changed this call's arguments; it ran with "

RAN: list[tuple[str, int]] = []
"""What ``transfer`` did, in order (one worker process: the tests share it, each clears it)."""


async def transfer(to: str, amount: int, ctx: ToolContext) -> Any:
    """Send ``amount`` to ``to``, once approved."""
    if ctx.answer is None:
        return pending(kind="approval", prompt=f"send {amount} to {to}?")
    RAN.append((to, amount))
    return f"sent {amount} to {to}"


REGISTRY = Registry([AgentDef(name="payer", tools=["transfer"])], tools=[define_tool(transfer)])
BOB_100 = {"to": "bob", "amount": 100}


async def after_signal(rt: Any, h: Any, request_id: str) -> Any:
    """The result of the turn a signalled Answer to ``request_id`` resumed: a signal returns
    before the workflow took it (its edit is checked by an activity first), so wait until
    the handle is no longer parked on it, then for the turn."""
    await settle(
        lambda: rt.inspect(h),
        lambda v: v.pending_req is None or v.pending_req.id != request_id,
    )
    return await rt.wait(h, timeout_ms=60_000)


def last_tool_result(request: dict[str, Any]) -> str:
    """The content of the last tool message of an LLM request (the scripted LLM numbers the
    calls of each reply from ``c1``)."""
    return [m["content"] for m in request["messages"] if m.get("role") == "tool"][-1]


async def test_an_edit_by_update_runs_once_and_the_approval_covers_one_call(
    make_runtime: RuntimeFactory,
) -> None:
    RAN.clear()
    llm = ScriptedLLM(
        {
            MODEL: [
                tool_calls(("transfer", BOB_100)),
                tool_calls(("transfer", BOB_100)),  # the original arguments again
                text("done"),
            ]
        }
    )
    async with make_runtime(REGISTRY, llm.transport()) as rt:
        h = await spawn(rt, rt.root, "payer")
        parked = await rt.run_turn(h, "pay bob")
        assert parked.status == "pending" and parked.pending is not None, parked
        first = parked.pending

        # Bad edits are refused loudly and change nothing.
        for bad, why in (
            ({"to": "bob", "amount": "lots"}, "amount"),
            ({"to": "bob"}, "amount"),
            ({"to": "bob", "amount": 5, "memo": "x"}, "memo"),
        ):
            with pytest.raises(AnswerRejectedError, match=why) as caught:
                await rt.answer(h, Answer(id=first.id, ok=True, edited_args=bad))
            assert "does not fit its schema" in str(caught.value)
            view = await rt.inspect(h)
            assert view.state == "suspended" and view.pending_req == first, view
        assert RAN == [] and len(llm.requests) == 1

        await rt.answer(h, Answer(id=first.id, ok=True, edited_args={"to": "bob", "amount": 10}))
        again = await rt.wait(h, timeout_ms=60_000)
        # The model called the original arguments again: that is a new call, parked again.
        assert again.status == "pending" and again.pending is not None, again
        assert again.pending.id != first.id and again.pending.prompt == "send 100 to bob?"
        assert RAN == [("bob", 10)]
        result = last_tool_result(llm.requests[1])
        assert result == NOTE + '{"to":"bob","amount":10}]\nsent 10 to bob', result

        # Reject with a message: the model reads the reviewer's words, the turn goes on.
        words = "not today: bob's account is frozen, ask finance"
        await rt.answer(h, Answer(id=again.pending.id, ok=False, message=words))
        done = await rt.wait(h, timeout_ms=60_000)
        assert done.status == "done" and done.text == "done", done
        assert last_tool_result(llm.requests[2]) == f"declined by the reviewer: {words}"
        assert RAN == [("bob", 10)]

        audit = await rt.audit(h)
        assert [(r.ok, r.path) for r in audit] == [(True, "update"), (False, "update")]
        assert json.loads(audit[0].arguments or "") == BOB_100
        assert audit[0].edited_args == {"to": "bob", "amount": 10}
        assert audit[1].edited_args is None and audit[1].message == words
        assert json.loads(audit[1].arguments or "") == BOB_100
        await rt.close(h)


async def test_an_edit_by_signal_and_a_bad_one(
    make_runtime: RuntimeFactory, client: Client
) -> None:
    RAN.clear()
    llm = ScriptedLLM({MODEL: [tool_calls(("transfer", BOB_100)), text("paid")]})
    async with make_runtime(REGISTRY, llm.transport()) as rt:
        h = await spawn(rt, rt.root, "payer")
        parked = await rt.run_turn(h, "pay bob")
        assert parked.pending is not None, parked
        req = parked.pending
        wf_id = rt.workflow_id(h.id)

        # As an operator pastes it into `temporal workflow signal` (or the UI's dialog).
        await cli_answer(client, wf_id, {"id": req.id, "ok": True, "edited_args": {"to": 3}})
        view = await settle(
            lambda: rt.inspect(h), lambda v: "does not fit its schema" in (v.last_error or "")
        )
        assert view.state == "suspended" and view.pending_req == req, view
        assert any(
            "answer REJECTED" in line and "amount" in line for line in await rt.trace_lines(h)
        )
        # An edit that declines is malformed: refused before it is routed.
        await cli_answer(client, wf_id, {"id": req.id, "ok": False, "edited_args": BOB_100})
        view = await settle(
            lambda: rt.inspect(h), lambda v: "only with ok=true" in (v.last_error or "")
        )
        assert view.state == "suspended" and RAN == []

        edit = {"to": "carol", "amount": 7}
        await cli_answer(
            client,
            wf_id,
            {"id": req.id, "ok": True, "edited_args": edit, "message": "carol, not bob"},
        )
        done = await after_signal(rt, h, req.id)
        assert done.status == "done" and done.text == "paid", done
        assert RAN == [("carol", 7)]
        result = last_tool_result(llm.requests[1])
        assert result == (
            NOTE
            + '{"to":"carol","amount":7}]\n[the reviewer says: carol, not bob]\nsent 7 to carol'
        )
        (entry,) = await rt.audit(h)
        assert entry.path == "signal" and entry.edited_args == edit
        assert entry.message == "carol, not bob"
        await rt.close(h)


async def test_tnx_answer_edit_and_reject_with_a_message(make_runtime: RuntimeFactory, env) -> None:
    RAN.clear()
    llm = ScriptedLLM(
        {
            MODEL: [
                tool_calls(("transfer", BOB_100)),
                tool_calls(("transfer", {"to": "dave", "amount": 1})),
                text("over"),
            ]
        }
    )
    async with make_runtime(REGISTRY, llm.transport()) as rt:
        tnx = Cli(env, rt)
        h = await spawn(rt, rt.root, "payer")
        parked = await rt.run_turn(h, "pay bob")
        assert parked.pending is not None, parked

        for bad in (
            ("--edit", "{not json"),
            ("--edit", "[1]"),
            ("--edit", '{"to": "bob"}', "--decline"),
            ("--reject", "--message", ""),
        ):
            run = await tnx("answer", h.id, *bad)
            assert run.code != 0 and len(run.err.strip().splitlines()) == 1, run
        run = await tnx("answer", h.id, "--edit", '{"to": "bob", "amount": "x"}')
        assert run.code != 0 and "does not fit its schema" in run.err, run
        assert len(run.err.strip().splitlines()) == 1, run
        view = await rt.inspect(h)
        assert view.state == "suspended" and view.pending_req == parked.pending

        await tnx.ok("answer", h.id, "--edit", '{"to": "bob", "amount": 25}')
        second = await rt.wait(h, timeout_ms=60_000)
        assert second.status == "pending" and second.pending is not None, second
        assert RAN == [("bob", 25)]
        assert last_tool_result(llm.requests[1]).startswith(NOTE + '{"to":"bob","amount":25}]')

        await tnx.ok("answer", h.id, "--reject", "--message", "dave is not a payee")
        done = await rt.wait(h, timeout_ms=60_000)
        assert done.status == "done" and done.text == "over", done
        assert last_tool_result(llm.requests[2]) == "declined by the reviewer: dave is not a payee"
        audit = (await tnx.ok("audit", h.id)).out
        assert 'edited {"amount": 25, "to": "bob"}' in audit and "dave is not a payee" in audit
        await rt.close(h)


def time_server() -> McpServer:
    return McpServer(
        name="time",
        command=sys.executable,
        args=["-m", "mcp_server_time", "--local-timezone", "UTC"],
        approval=["get_current_time"],
    )


@pytest.mark.mcp
async def test_an_mcp_tool_edited_by_update_signal_and_cli(
    make_runtime: RuntimeFactory, client: Client, env
) -> None:
    registry = Registry([AgentDef(name="clock", mcp=[time_server()])])
    now_utc = ("time__get_current_time", {"timezone": "UTC"})
    llm = ScriptedLLM(
        {MODEL: [tool_calls(now_utc), tool_calls(now_utc), tool_calls(now_utc), text("ticked")]}
    )
    async with make_runtime(registry, llm.transport()) as rt:
        tnx = Cli(env, rt)
        h = await spawn(rt, rt.root, "clock")
        wf_id = rt.workflow_id(h.id)
        parked = await rt.run_turn(h, "what time is it?")
        assert parked.pending is not None and "time/get_current_time" in parked.pending.prompt

        # A bad edit, against the server's inputSchema: refused, still pending.
        with pytest.raises(AnswerRejectedError, match="timezone"):
            await rt.answer(h, Answer(id=parked.pending.id, ok=True, edited_args={"zone": "UTC"}))
        assert (await rt.inspect(h)).pending_req == parked.pending

        zones = ["Europe/Paris", "Asia/Tokyo", "America/New_York"]
        await rt.answer(
            h, Answer(id=parked.pending.id, ok=True, edited_args={"timezone": zones[0]})
        )
        second = await rt.wait(h, timeout_ms=60_000)
        assert second.pending is not None, second  # the original arguments park again
        await cli_answer(
            client,
            wf_id,
            {"id": second.pending.id, "ok": True, "edited_args": {"timezone": zones[1]}},
        )
        third = await after_signal(rt, h, second.pending.id)
        assert third.pending is not None, third
        await tnx.ok("answer", h.id, "--edit", json.dumps({"timezone": zones[2]}))
        done = await rt.wait(h, timeout_ms=60_000)
        assert done.status == "done" and done.text == "ticked", done

        for i, zone in enumerate(zones):
            result = last_tool_result(llm.requests[i + 1])
            note, _, body = result.partition("\n")
            assert note == NOTE + json.dumps({"timezone": zone}, separators=(",", ":")) + "]"
            assert json.loads(body)["timezone"] == zone, result
        audit = await rt.audit(h)
        assert [r.path for r in audit] == ["update", "signal", "update"]
        assert [r.edited_args for r in audit] == [{"timezone": z} for z in zones]
        assert all(json.loads(r.arguments or "") == {"timezone": "UTC"} for r in audit)
        await rt.close(h)


async def test_an_edit_sent_to_the_parent_is_checked_by_the_child_that_asked(
    make_runtime: RuntimeFactory,
) -> None:
    RAN.clear()
    registry = Registry(
        [
            AgentDef(name="lead", description="delegates", team=["payer"], model="m-lead"),
            AgentDef(name="payer", description="pays", tools=["transfer"]),
        ],
        tools=[define_tool(transfer)],
    )
    llm = ScriptedLLM(
        {
            "m-lead": [
                tool_calls(("task", {"agent": "payer", "prompt": "pay"})),
                text("lead done"),
            ],
            MODEL: [tool_calls(("transfer", BOB_100)), text("payer done")],
        }
    )
    async with make_runtime(registry, llm.transport()) as rt:
        lead = await spawn(rt, rt.root, "lead")
        parked = await rt.run_turn(lead, "go")
        assert parked.status == "pending" and parked.pending is not None, parked
        req = parked.pending
        with pytest.raises(AnswerRejectedError, match="does not fit its schema"):
            await rt.answer(lead, Answer(id=req.id, ok=True, edited_args={"to": "bob"}))
        child = (await rt.inspect(f"{lead.id}/payer.1")).pending_req
        assert child is not None and child.id == req.id  # still parked on it
        await rt.answer(lead, Answer(id=req.id, ok=True, edited_args={"to": "eve", "amount": 2}))
        done = await rt.wait(lead, timeout_ms=60_000)
        assert (done.status, done.text) == ("done", "lead done"), done
        assert RAN == [("eve", 2)]
        await rt.close(lead)
