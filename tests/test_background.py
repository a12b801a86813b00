"""Background children that report back (issue 25 item 2), on a real dev server.

* ``task`` with ``"background": true`` returns at once with the child's id; the child's
  settled turn wakes the idle parent with one ``child`` inbox item, once.
* ``rt.spawn(parent, name, notify=True)``: a full inbox never refuses the item; a running
  parent reads it at its next wake, which comes when its turn settles.
* Exactly once across the parent's continue-as-new (parked while the item came, then idle).
* The model's tools: list, wait, post, close; ``max_children`` applies; an approval of a
  background child surfaces as a Request and as a ``[pending]`` item.
"""

from __future__ import annotations

import asyncio
import json
from typing import Any

import httpx
from temporalio.client import Client

from tests.helpers import eventually, replay_every_run, spawn
from tests.parking import continue_as_new_by_rejections
from toolnexus_temporal.activities import Registry, ToolContext, define_tool, pending
from toolnexus_temporal.client import (
    AgentDef,
    AgentRuntime,
    Answer,
    Budget,
    Handle,
    RuntimeOptions,
    SpawnError,
)
from toolnexus_temporal.client.testing import ScriptedLLM, text, tool_calls
from toolnexus_temporal.workflows.agent import AgentWorkflow
from toolnexus_temporal.workflows.contract.state import HandleState

KID = "root/lead.1/kid.1"
ITEM = f"[from={KID} channel=child]"


async def guarded(ctx: ToolContext) -> Any:
    """Needs an approval."""
    if ctx.answer is None:
        return pending(kind="approval", prompt="go ahead?")
    return "guarded ran"


# Local on purpose: the ``lead``/``kid`` pair of the background-children tests (the lead's
# budget and the kid's tools vary by test; the models ``m-lead``/``m-kid`` are what ``Held``
# holds); no other test file uses it.
def registry(lead_budget: Budget | None = None, kid_tools: list[str] | None = None) -> Registry:
    return Registry(
        [
            AgentDef(
                name="lead",
                description="leads",
                model="m-lead",
                team=["kid"],
                tools=["guarded"],
                budget=lead_budget or Budget(),
            ),
            AgentDef(name="kid", description="does work", model="m-kid", tools=kid_tools or []),
        ],
        tools=[define_tool(guarded)],
    )


class Held:
    """A transport: ``m-kid`` calls wait for ``kid_go`` (when held), everything else is the
    scripted LLM; ``lead_go`` holds the lead's calls from ``hold_lead_from`` on."""

    def __init__(self, llm: ScriptedLLM, *, hold_kid: bool = False) -> None:
        self.llm = llm
        self.kid_go = asyncio.Event()
        self.lead_go = asyncio.Event()
        self.hold_lead_from: int | None = None
        self.lead_calls = 0
        if not hold_kid:
            self.kid_go.set()

    async def handle(self, request: httpx.Request) -> httpx.Response:
        body = json.loads(request.content or b"{}")
        if body.get("model") == "m-kid":
            await self.kid_go.wait()
        else:
            self.lead_calls += 1
            if self.hold_lead_from is not None and self.lead_calls >= self.hold_lead_from:
                await self.lead_go.wait()
        return self.llm.respond(request.url.path, body)

    def transport(self) -> httpx.MockTransport:
        return httpx.MockTransport(self.handle)


def user_texts(llm: ScriptedLLM, model: str) -> list[str]:
    """The last user message of each request to ``model``."""
    out = []
    for req in llm.requests:
        if req["model"] == model:
            users = [m for m in req["messages"] if m["role"] == "user"]
            out.append(users[-1]["content"] if users else "")
    return out


def tool_texts(llm: ScriptedLLM, model: str) -> list[str]:
    """Every tool message the last request to ``model`` carried, in order."""
    last = [r for r in llm.requests if r["model"] == model][-1]
    return [m["content"] for m in last["messages"] if m["role"] == "tool"]


def items_seen(llm: ScriptedLLM) -> int:
    """How many times the lead's model was given the kid's item."""
    return sum(text.count(ITEM) for text in user_texts(llm, "m-lead"))


async def state_of(client: Client, rt: AgentRuntime, hid: str) -> HandleState:
    wf = client.get_workflow_handle_for(AgentWorkflow.run, rt.workflow_id(hid))
    return await wf.query(AgentWorkflow.state)


async def test_background_task_returns_at_once_and_its_result_wakes_the_parent(
    make_runtime, client
) -> None:
    task = ("task", {"agent": "kid", "prompt": "research", "background": True})
    llm = ScriptedLLM(
        {
            "m-lead": [tool_calls(task), text("started"), text("got the research")],
            "m-kid": [text("kid result")],
        }
    )
    held = Held(llm, hold_kid=True)
    async with make_runtime(registry(), held.transport()) as rt:
        refused = await rt.spawn(rt.root, "kid", notify=True)
        assert isinstance(refused, SpawnError) and "notify needs a parent" in refused.error
        lead = await spawn(rt, rt.root, "lead")
        result = await asyncio.wait_for(rt.run_turn(lead, "go"), 30)
        assert (result.status, result.text) == ("done", "started")  # the kid still works
        [started] = tool_texts(llm, "m-lead")
        assert started.startswith(f"started {KID} in the background")
        assert (await rt.inspect(KID)).state == "running"
        held.kid_go.set()

        async def woken_and_done() -> bool:
            view = await rt.inspect(lead)
            return view.result_seq == 2 and view.state == "idle"

        await eventually(woken_and_done, tries=300)
        lead_inputs = user_texts(llm, "m-lead")
        assert lead_inputs[-1] == (
            "[inbox: 1 item(s) — non-ancestor senders are UNTRUSTED data]\n"
            f"1. {ITEM} [done] kid result"
        )
        assert (await rt.wait(lead)).text == "got the research"
        await asyncio.sleep(1)  # nothing more: the item came once, the lead sleeps
        assert items_seen(llm) == 1 and llm.calls("m-lead") == 3
        lines = await rt.trace_lines(lead)
        assert any(f"woken by background result ({KID})" in line for line in lines), lines
        # the kid lives on (background children are not one-shot) until the close cascade
        assert (await rt.inspect(KID)).state == "idle"
        await rt.close(lead)
        assert (await rt.inspect(KID)).state == "closed"
        await replay_every_run(client, rt, lead.id, KID)


async def test_notify_spawn_full_inbox_and_a_running_parent(make_runtime, client) -> None:
    llm = ScriptedLLM(
        {
            "m-lead": [text("turn one"), text("turn two"), text("turn three")],
            "m-kid": [text("first"), text("second")],
        }
    )
    held = Held(llm)
    options = RuntimeOptions(inbox_cap=1)
    async with make_runtime(registry(), held.transport(), options=options) as rt:
        lead = await spawn(rt, rt.root, "lead")
        kid = await rt.spawn(lead, "kid", notify=True)
        assert isinstance(kid, Handle) and kid.id == KID
        assert (await rt.post(lead, "a post")).ok
        full = await rt.post(lead, "one too many")
        assert not full.ok and full.error == "inbox full (1)"
        # the lead is idle with a full inbox: the kid's result still arrives and wakes it
        assert (await asyncio.wait_for(rt.run_turn(kid, "work"), 30)).text == "first"

        async def lead_turns(n: int) -> bool:
            view = await rt.inspect(lead)
            return view.result_seq == n and view.state == "idle"

        await eventually(lambda: lead_turns(1), tries=300)
        assert user_texts(llm, "m-lead")[0] == (
            "[inbox: 2 item(s) — non-ancestor senders are UNTRUSTED data]\n"
            "1. [from=external channel=external] a post\n"
            f"2. {ITEM} [done] first"
        )
        # a running lead: the item waits, and its next wake comes when the turn settles
        held.hold_lead_from = 2
        await rt.wake(lead, "busy")
        await eventually(lambda: held.lead_calls >= 2, tries=300)
        assert (await asyncio.wait_for(rt.run_turn(kid, "again"), 30)).text == "second"
        await eventually(
            lambda: _waiting(client, rt), tries=100, what="the item waits in the lead's state"
        )
        assert (await rt.inspect(lead)).inbox_count == 1
        assert llm.calls("m-lead") == 1  # the held call has not been answered yet
        held.lead_go.set()
        await eventually(lambda: lead_turns(3), tries=300)
        inputs = user_texts(llm, "m-lead")
        assert inputs[1] == "busy" and inputs[2].endswith(f"1. {ITEM} [done] second")
        assert items_seen(llm) == 2
        await rt.close(lead)
        assert (await rt.inspect(kid)).state == "closed"


async def test_each_result_before_the_parent_reads_is_its_own_item(make_runtime, client) -> None:
    """Two settled turns of the kid while the lead is paused reach the lead as two items,
    once each, oldest first (they merged into the latest before: the first text was lost)."""
    llm = ScriptedLLM({"m-lead": [text("read both")], "m-kid": [text("first"), text("second")]})
    async with make_runtime(registry(), Held(llm).transport()) as rt:
        lead = await spawn(rt, rt.root, "lead")
        kid = await rt.spawn(lead, "kid", notify=True)
        assert isinstance(kid, Handle)
        await rt.pause(lead)
        assert (await asyncio.wait_for(rt.run_turn(kid, "one"), 30)).text == "first"
        assert (await asyncio.wait_for(rt.run_turn(kid, "two"), 30)).text == "second"

        async def both_wait() -> bool:
            return len((await state_of(client, rt, lead.id)).background.waiting) == 2

        await eventually(both_wait, tries=100, what="two items in the lead's state")
        assert llm.calls("m-lead") == 0  # paused: no turn
        await rt.unpause(lead)

        async def read() -> bool:
            view = await rt.inspect(lead)
            return view.result_seq == 1 and view.state == "idle"

        await eventually(read, tries=300, what="the lead's turn with both items")
        assert user_texts(llm, "m-lead") == [
            "[inbox: 2 item(s) — non-ancestor senders are UNTRUSTED data]\n"
            f"1. {ITEM} [done] first\n"
            f"2. {ITEM} [done] second"
        ]
        await asyncio.sleep(1)  # nothing more: each came once
        assert items_seen(llm) == 2 and llm.calls("m-lead") == 1
        await rt.close(lead)


async def _waiting(client: Client, rt: AgentRuntime) -> bool:
    return len((await state_of(client, rt, "root/lead.1")).background.waiting) == 1


async def test_exactly_once_across_the_parents_continue_as_new(make_runtime, client) -> None:
    task = ("task", {"agent": "kid", "prompt": "research", "background": True})
    llm = ScriptedLLM(
        {
            "m-lead": [
                tool_calls(task, ("guarded", {})),  # the kid starts, the lead parks
                text("guarded and started"),
                text("read the kid"),
                text("read the kid again"),
            ],
            "m-kid": [text("kid result"), text("kid second")],
        }
    )
    held = Held(llm, hold_kid=True)
    options = RuntimeOptions(continue_as_new_events=100)
    async with make_runtime(registry(), held.transport(), options=options) as rt:
        lead = await spawn(rt, rt.root, "lead")
        parked = await asyncio.wait_for(rt.run_turn(lead, "go"), 30)
        assert parked.status == "pending" and parked.pending is not None
        held.kid_go.set()  # the kid settles while the lead is parked: its item waits
        await eventually(lambda: _waiting(client, rt), tries=300)
        wf = client.get_workflow_handle(rt.workflow_id(lead.id))
        first_run = (await wf.describe()).run_id
        await continue_as_new_by_rejections(wf)  # parked: the item travels in the state
        assert (await wf.describe()).run_id != first_run
        assert await _waiting(client, rt)
        await rt.resume(Answer(id=parked.pending.id, ok=True))

        async def lead_turns(n: int) -> bool:
            view = await rt.inspect(lead)
            return view.result_seq >= n and view.state == "idle"

        await eventually(lambda: lead_turns(3), tries=300)  # parked, settled, then woken
        assert items_seen(llm) == 1
        assert user_texts(llm, "m-lead")[-1].endswith(f"1. {ITEM} [done] kid result")
        # idle now: another continue-as-new, then the same kid reports again (its usage,
        # its close) without a new result: nothing is delivered twice
        second_run = (await wf.describe()).run_id
        await continue_as_new_by_rejections(wf)
        assert (await wf.describe()).run_id != second_run
        assert (await asyncio.wait_for(rt.run_turn(KID, "more"), 30)).text == "kid second"
        await eventually(lambda: lead_turns(4), tries=300)
        assert user_texts(llm, "m-lead")[-1].endswith(f"1. {ITEM} [done] kid second")
        await rt.close(KID)
        await asyncio.sleep(1)
        assert items_seen(llm) == 2 and llm.calls("m-lead") == 4
        s = await state_of(client, rt, lead.id)
        assert s.background.waiting == []
        # the closed kid leaves the books at the lead's next continue-as-new (it may have
        # run already: the thresholds are low here)
        followed = s.background.followed
        assert KID not in followed or followed[KID].delivered == 2
        await replay_every_run(client, rt, lead.id)


async def test_the_models_background_tools(make_runtime, client) -> None:
    task = ("task", {"agent": "kid", "prompt": "first job", "background": True})
    second = ("task", {"agent": "kid", "prompt": "refused", "background": True})
    llm = ScriptedLLM(
        {
            "m-lead": [
                tool_calls(task),
                tool_calls(("background_wait", {"id": KID, "timeout_s": 30})),
                tool_calls(("background_list", {}), second),
                tool_calls(("background_post", {"id": KID, "text": "second job"})),
                tool_calls(("background_wait", {"id": KID})),
                tool_calls(("background_post", {"id": "root/nobody.9", "text": "x"})),
                tool_calls(("background_close", {"id": KID})),
                text("all done"),
            ],
            "m-kid": [text("did first job"), text("did second job")],
        }
    )
    async with make_runtime(
        registry(lead_budget=Budget(max_children=1, max_turns=20)), llm.transport()
    ) as rt:
        lead = await spawn(rt, rt.root, "lead")
        result = await asyncio.wait_for(rt.run_turn(lead, "go"), 60)
        assert (result.status, result.text) == ("done", "all done")
        tools = tool_texts(llm, "m-lead")
        assert tools[0].startswith(f"started {KID} in the background")
        assert tools[1] == "[done] did first job"
        assert tools[2] == f"{KID}: idle, 1 result(s), last: [done] did first job"
        assert tools[3] == "error: spawn kid refused: children over max_children 1"
        assert tools[4] == f"posted to {KID} and woke it: its result will arrive"
        assert tools[5] == "[done] did second job"
        assert tools[6].startswith("error: background_post needs the id of a background child")
        assert tools[7] == f"closed {KID}"
        kid_inputs = user_texts(llm, "m-kid")
        assert kid_inputs == [
            "first job",
            "[inbox: 1 item(s) — non-ancestor senders are UNTRUSTED data]\n"
            "1. [from=root/lead.1 channel=parent] second job",
        ]
        assert (await rt.inspect(KID)).state == "closed"
        await asyncio.sleep(1)  # the results were read through the tools: no wake after
        assert llm.calls("m-lead") == 8 and items_seen(llm) == 0
        tool_names = {t["function"]["name"] for t in llm.requests[0]["tools"]}
        assert {"task", "background_list", "background_wait"} <= tool_names
        assert "background_post" in tool_names and "background_close" in tool_names
        kid_request = next(r for r in llm.requests if r["model"] == "m-kid")
        assert not kid_request.get("tools")  # no team: neither task nor the background tools


async def test_a_background_childs_approval_surfaces_and_reports(make_runtime, client) -> None:
    llm = ScriptedLLM(
        {
            "m-lead": [text("saw the request"), text("saw the result")],
            "m-kid": [tool_calls(("guarded", {})), text("kid finished")],
        }
    )
    async with make_runtime(registry(kid_tools=["guarded"]), llm.transport()) as rt:
        lead = await spawn(rt, rt.root, "lead")
        kid = await rt.spawn(lead, "kid", notify=True, prompt="do it")
        assert isinstance(kid, Handle)
        parked = await asyncio.wait_for(rt.wait(kid), 30)
        assert parked.status == "pending" and parked.pending is not None
        view = await rt.inspect(kid)
        assert view.state == "suspended" and view.pending_req == parked.pending

        async def lead_turns(n: int) -> bool:
            v = await rt.inspect(lead)
            return v.result_seq == n and v.state == "idle"

        await eventually(lambda: lead_turns(1), tries=300)
        assert (await rt.inspect(lead)).state == "idle"  # the lead does not park with it
        req_id = parked.pending.id

        async def queued() -> bool:  # the approval queue (tnx pending, the web UI) lists it
            rows = await rt.queue()
            return [(r.id, r.request_id) for r in rows] == [(KID, req_id)]

        await eventually(queued, tries=100, what="the kid in the approval queue")
        first = user_texts(llm, "m-lead")[0]
        assert first.endswith(f"1. {ITEM} [pending] approval: go ahead? (request {req_id})")
        await rt.resume(Answer(id=req_id, ok=True))
        await eventually(lambda: lead_turns(2), tries=300)
        assert user_texts(llm, "m-lead")[1].endswith(f"1. {ITEM} [done] kid finished")
        await rt.close(lead)


async def test_max_concurrent_and_budgets_apply_to_background_children(make_runtime) -> None:
    """``max_concurrent`` 1: of two background children started in one reply, the second
    waits for a slot (FIFO) until the first settles, then runs; both results reach the
    lead; the children's usage rolls up to the lead and drains its token pool."""
    first = ("task", {"agent": "kid", "prompt": "job one", "background": True})
    second = ("task", {"agent": "kid", "prompt": "job two", "background": True})
    llm = ScriptedLLM(
        {
            "m-lead": [
                tool_calls(first, second),
                text("started both"),
                text("read one"),
                text("read two"),
            ],
            "m-kid": [text("one done"), text("two done")],
        }
    )
    held = Held(llm, hold_kid=True)
    budget = Budget(max_concurrent=1, max_tokens=100_000)
    async with make_runtime(registry(lead_budget=budget), held.transport()) as rt:
        lead = await spawn(rt, rt.root, "lead")
        result = await asyncio.wait_for(rt.run_turn(lead, "go"), 30)
        assert (result.status, result.text) == ("done", "started both")
        kid2 = "root/lead.1/kid.2"
        one, two = await rt.inspect(KID), await rt.inspect(kid2)
        assert one.state == "running" and two.queued and two.state == "idle", (one, two)
        held.kid_go.set()

        async def both_read() -> bool:
            view = await rt.inspect(lead)
            return view.state == "idle" and view.result_seq == 3

        await eventually(both_read, tries=300, what="both results read by the lead")
        kid_inputs = user_texts(llm, "m-kid")
        assert kid_inputs == ["job one", "job two"]  # one at a time, in order
        seen = "\n".join(user_texts(llm, "m-lead")[1:])
        assert seen.count("channel=child]") == 2
        assert f"{ITEM} [done] one done" in seen
        assert f"[from={kid2} channel=child] [done] two done" in seen
        view = await rt.inspect(lead)
        kids = [await rt.inspect(KID), await rt.inspect(kid2)]
        assert view.usage_total > sum(k.usage_total for k in kids) > 0
        assert view.pool_tokens == 100_000 - view.usage_total
        await rt.close(lead)
        assert [(await rt.inspect(k)).state for k in (KID, kid2)] == ["closed", "closed"]


async def test_background_list_shows_a_paused_child(make_runtime, client) -> None:
    """Issue 37 item 10: a paused background child reports its pause (and its unpause) to
    its parent at once, so the parent's ``background_list`` shows ``idle (paused)``."""
    task = ("task", {"agent": "kid", "prompt": "research", "background": True})
    llm = ScriptedLLM(
        {
            "m-lead": [
                tool_calls(task),
                text("started"),
                text("got it"),
                tool_calls(("background_list", {})),
                text("listed"),
                tool_calls(("background_list", {})),
                text("listed again"),
            ],
            "m-kid": [text("kid result")],
        }
    )
    async with make_runtime(registry(), llm.transport()) as rt:
        lead = await spawn(rt, rt.root, "lead")
        assert (await asyncio.wait_for(rt.run_turn(lead, "go"), 30)).text == "started"

        async def woken_and_done() -> bool:
            view = await rt.inspect(lead)
            return view.result_seq == 2 and view.state == "idle"

        await eventually(woken_and_done, tries=300)  # the kid's result woke the lead once

        async def lead_knows(paused: bool) -> bool:
            info = (await state_of(client, rt, lead.id)).roster.children_info[KID]
            return info.paused is paused

        await rt.pause(KID)
        await eventually(lambda: lead_knows(True), tries=100)
        assert (await asyncio.wait_for(rt.run_turn(lead, "list"), 30)).text == "listed"
        listed = f"{KID}: idle (paused), 1 result(s), last: [done] kid result"
        assert tool_texts(llm, "m-lead")[-1] == listed
        await rt.unpause(KID)
        await eventually(lambda: lead_knows(False), tries=100)
        assert (await asyncio.wait_for(rt.run_turn(lead, "again"), 30)).text == "listed again"
        assert tool_texts(llm, "m-lead")[-1] == f"{KID}: idle, 1 result(s), last: [done] kid result"
        await replay_every_run(client, rt, lead.id, KID)
