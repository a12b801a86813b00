"""Fork from any turn (issue 34 item 5) on a real dev server with a scripted LLM:
``rt.fork(h, at_turn=N)`` and ``tnx fork ID --turn N`` make a new agent under the same parent
whose conversation is the original's first N turns; the original is untouched and keeps
working; a closed original forks too; bad turns are refused with one typed error and nothing
is spawned."""

from __future__ import annotations

import asyncio
import json
from typing import Any

import httpx
import pytest

from tests.cli_support import Cli
from tests.conftest import rt_transcript
from tests.helpers import spawn
from toolnexus_temporal.activities import Registry
from toolnexus_temporal.client import AgentDef, AgentRuntime, Budget, ForkRefusedError
from toolnexus_temporal.client.errors import HandleNotFoundError
from toolnexus_temporal.client.testing import text
from toolnexus_temporal.workflows.contract.models import Message

SYSTEM = "You are a talker."


class Echo:
    """The model: answers ``re: <last user message>``; records each request (its model and
    messages); a message containing ``slow`` waits for ``release``."""

    def __init__(self) -> None:
        self.requests: list[dict[str, Any]] = []
        self.release = asyncio.Event()
        self.slow_entered = asyncio.Event()

    def transport(self) -> httpx.MockTransport:
        return httpx.MockTransport(self.handle)

    async def handle(self, request: httpx.Request) -> httpx.Response:
        body = json.loads(request.content)
        self.requests.append(body)
        last = next(m for m in reversed(body["messages"]) if m["role"] == "user")
        if "slow" in last["content"]:
            self.slow_entered.set()
            await self.release.wait()
        return httpx.Response(200, json=text(f"re: {last['content']}"))

    def sent(self, i: int = -1) -> list[tuple[str, str]]:
        """Request ``i``'s messages as (role, content)."""
        return [(m["role"], m["content"]) for m in self.requests[i]["messages"]]


def registry() -> Registry:
    return Registry(
        [AgentDef(name="talker", system_prompt=SYSTEM, budget=Budget(max_tokens=50_000))]
    )


def pairs(messages: list[Message]) -> list[tuple[str, str | None]]:
    return [(m.role, m.content) for m in messages]


async def talk(rt: AgentRuntime, h: Any, *prompts: str) -> None:
    for p in prompts:
        result = await rt.run_turn(h, p)
        assert result.status == "done", result


async def children_of_root(rt: AgentRuntime) -> list[str]:
    return (await rt.inspect(rt.root)).children  # type: ignore[arg-type]


async def test_a_fork_from_turn_2_of_5_sends_turns_1_2_and_the_new_message(
    make_runtime: Any, store: Any
) -> None:
    llm = Echo()
    async with make_runtime(registry(), llm.transport()) as rt:
        h = await spawn(rt, rt.root, "talker")
        await talk(rt, h, "m1", "m2", "m3", "m4", "m5")
        before = await rt_transcript(rt, store, h)
        assert [m.content for m in before if m.role == "user"] == ["m1", "m2", "m3", "m4", "m5"]

        f = await rt.fork(h, at_turn=2)
        assert f.id == f"{rt.root.id}/talker.2"  # the parent's next child id
        assert f.parent == rt.root.id and f.state == "idle"
        assert f.transcript_len == 5  # system, then (user, assistant) x 2
        assert pairs(await rt_transcript(rt, store, f)) == pairs(before[:5])

        assert (await rt.run_turn(f, "instead")).text == "re: instead"
        assert llm.sent() == [*pairs(before[:5]), ("user", "instead")]

        # the original: untouched, and it keeps working from its own five turns
        assert pairs(await rt_transcript(rt, store, h)) == pairs(before)
        assert (await rt.run_turn(h, "m6")).text == "re: m6"
        assert llm.sent() == [*pairs(before), ("user", "m6")]
        assert "instead" not in json.dumps(llm.requests[-1])
        lines = [entry.line for entry in await rt.trace()]
        assert any("fork of" in line and f.id in line for line in lines), lines
        await rt.close(f)
        await rt.close(h)


async def test_a_closed_agent_forks_with_its_own_budget_and_model(
    make_runtime: Any, store: Any
) -> None:
    llm = Echo()
    async with make_runtime(registry(), llm.transport()) as rt:
        h = await spawn(rt, rt.root, "talker")
        await talk(rt, h, "a", "b")
        before = await rt_transcript(rt, store, h)
        await rt.close(h)

        f = await rt.fork(h, 2, budget=Budget(max_tokens=1_000), model="other-model")
        assert f.state == "idle" and f.pool_tokens == 1_000
        assert f.defn is not None and f.defn.model == "other-model"
        assert (await rt.run_turn(f, "c")).text == "re: c"
        assert llm.requests[-1]["model"] == "other-model"
        assert llm.sent() == [*pairs(before), ("user", "c")]
        assert (await rt.inspect(h)).state == "closed"

        # the default: the definition's budget and model, and the first turn alone
        g = await rt.fork(h, 1, prompt="d")
        assert (await rt.wait(g)).text == "re: d"
        assert llm.requests[-1]["model"] != "other-model"
        assert llm.sent() == [*pairs(before[:3]), ("user", "d")]
        assert (await rt.inspect(g)).pool_tokens == 50_000 - (await rt.inspect(g)).usage_total
        await rt.close(f)
        await rt.close(g)


@pytest.mark.parametrize("turn", [0, -1, 3, 99, "2", True])
async def test_bad_turns_are_refused_and_nothing_is_spawned(
    make_runtime: Any, store: Any, turn: int
) -> None:
    llm = Echo()
    async with make_runtime(registry(), llm.transport()) as rt:
        h = await spawn(rt, rt.root, "talker")
        await talk(rt, h, "a", "b")
        children = await children_of_root(rt)
        with pytest.raises(ForkRefusedError) as refused:
            await rt.fork(h, turn)
        assert refused.value.turn == turn and refused.value.handle_id == h.id
        if not isinstance(turn, int) or isinstance(turn, bool):  # a str, a bool
            expected = "a whole number"
        else:
            expected = "turns count from 1" if turn < 1 else "past the turns"
        assert expected in str(refused.value), refused.value
        assert await children_of_root(rt) == children
        # ids were not used up: the next fork is the parent's next child
        f = await rt.fork(h, 2)
        assert f.id == f"{rt.root.id}/talker.2"
        await rt.close(f)
        await rt.close(h)


async def test_the_root_an_unknown_id_and_an_agent_with_no_turn_are_refused(
    make_runtime: Any,
) -> None:
    llm = Echo()
    async with make_runtime(registry(), llm.transport()) as rt:
        with pytest.raises(ForkRefusedError, match="the root takes no turns"):
            await rt.fork(rt.root, 1)
        with pytest.raises(HandleNotFoundError):
            await rt.fork(f"{rt.root.id}/nobody.9", 1)
        h = await spawn(rt, rt.root, "talker")
        with pytest.raises(ForkRefusedError, match="no complete turn"):
            await rt.fork(h, 1)
        assert await children_of_root(rt) == [h.id]
        await rt.close(h)


async def test_a_running_agent_offers_the_turns_before_its_turn_in_flight(
    make_runtime: Any, store: Any
) -> None:
    llm = Echo()
    async with make_runtime(registry(), llm.transport()) as rt:
        h = await spawn(rt, rt.root, "talker")
        await talk(rt, h, "a")
        await rt.wake(h, "slow b")
        await llm.slow_entered.wait()
        with pytest.raises(ForkRefusedError, match="turn in flight is not offered"):
            await rt.fork(h, 2)
        f = await rt.fork(h, 1)
        assert (await rt.run_turn(f, "c")).text == "re: c"
        assert [m for m in llm.sent() if m[0] == "user"] == [("user", "a"), ("user", "c")]
        llm.release.set()
        assert (await rt.wait(h)).text == "re: slow b"
        g = await rt.fork(h, 2)  # settled now: its second turn is offered
        assert g.transcript_len == 5
        for x in (f, g, h):
            await rt.close(x)


async def test_tnx_fork(make_runtime: Any, env: Any, store: Any) -> None:
    llm = Echo()
    async with make_runtime(registry(), llm.transport()) as rt:
        h = await spawn(rt, rt.root, "talker")
        await talk(rt, h, "a", "b", "c")
        tnx = Cli(env, rt, store.path)
        run = await tnx.ok("fork", h.id, "--turn", "2")
        fid = run.out.strip()
        assert fid == rt.workflow_id(f"{rt.root.id}/talker.2")
        assert (await rt.inspect(f"{rt.root.id}/talker.2")).transcript_len == 5
        run = await tnx.ok("fork", h.id, "--turn", "1", "--budget", '{"max_tokens": 700}', "--json")
        assert run.json()["pool_tokens"] == 700
        for turn in ("0", "4"):
            bad = await tnx("fork", h.id, "--turn", turn)
            assert bad.code == 1, bad
            assert len(bad.err.strip().splitlines()) == 1, bad
            assert "fork of" in bad.err and "refused" in bad.err, bad
        assert len(await children_of_root(rt)) == 3
        for x in await children_of_root(rt):
            await rt.close(x)
