"""tests/fixtures/toolnexus/subagent-lifecycle.json as a data-driven test (CONTRACT §10).

Scenarios coalescedDrain, inboxGate, interrupt and closeCascade run here. concurrencyGate and
turnGate need the ``task`` tool and the concurrency gates; they run with those capabilities.
"""

from __future__ import annotations

import asyncio
from typing import Any

import pytest

from tests.fixture_llm import FixtureLLM, load_fixture
from toolnexus_temporal.activities import Registry
from toolnexus_temporal.client import AgentDef, AgentRuntime, Handle, InboxItem, RuntimeOptions
from toolnexus_temporal.workflows.contract.messages import HookInput

FIXTURE = load_fixture("subagent-lifecycle")


def build_registry(closed: list[str]) -> Registry:
    async def record(event: HookInput) -> None:
        closed.append(event.handle_id)

    agents = [
        AgentDef(
            name=name,
            description=spec["does"],
            model=spec["model"],
            # Tools and teams arrive with the tools issue; these scenarios do not call them.
            on_close="record",
        )
        for name, spec in FIXTURE["registry"].items()
    ]
    return Registry(agents, hooks={"record": record})


def runtime_options(scenario: dict[str, Any]) -> RuntimeOptions | None:
    runtime = scenario.get("runtime", {})
    return RuntimeOptions(inbox_cap=runtime["inboxCap"]) if "inboxCap" in runtime else None


async def resolve(rt: AgentRuntime, handles: dict[str, Handle], path: str) -> Handle:
    """A fixture handle path (``peer``, ``coordinator/peer``) → a Handle spawned on demand."""
    if path in handles:
        return handles[path]
    parent_path, _, name = path.rpartition("/")
    parent = await resolve(rt, handles, parent_path) if parent_path else rt.root
    h = await rt.spawn(parent, name)
    assert isinstance(h, Handle), h
    handles[path] = h
    return h


@pytest.mark.parametrize(
    "scenario_name", ["coalescedDrain", "inboxGate", "interrupt", "closeCascade"]
)
async def test_lifecycle_fixture(make_runtime, scenario_name: str) -> None:
    scenario = FIXTURE["scenarios"][scenario_name]
    llm = FixtureLLM(FIXTURE["mockLLM"])
    closed: list[str] = []
    async with make_runtime(
        build_registry(closed), llm.transport(), options=runtime_options(scenario)
    ) as rt:
        handles: dict[str, Handle] = {}
        for path in scenario.get("tree", []):
            await resolve(rt, handles, path)
        waiter: asyncio.Task[Any] | None = None
        last_result = None
        for step in scenario["steps"]:
            (verb, args), *_ = ((k, v) for k, v in step.items() if k != "expect")
            expect = step.get("expect", {})
            if verb == "post":
                h = await resolve(rt, handles, args["handle"])
                item = InboxItem(
                    from_=args.get("from", "external"),
                    channel=args.get("channel", "external"),
                    text=args["text"],
                )
                result = await rt.post(h, item)
                if expect.get("rejected"):
                    assert not result.ok and expect["errorContains"] in (result.error or "")
                else:
                    assert result.ok, result
            elif verb == "wakeWait":
                h = await resolve(rt, handles, args["handle"])
                last_result = await rt.run_turn(h, args.get("prompt"))
            elif verb == "wake":
                h = await resolve(rt, handles, args["handle"])
                await rt.wake(h, args.get("prompt"))
                waiter = asyncio.create_task(rt.wait(h))
            elif verb == "awaitState":
                h = await resolve(rt, handles, args["handle"])
                await asyncio.wait_for(llm.entered.wait(), 10)
                assert (await rt.inspect(h)).state == args["state"]
            elif verb == "interrupt":
                await rt.interrupt(await resolve(rt, handles, args["handle"]))
            elif verb == "closeRoot":
                await rt.close(rt.root)
            else:
                raise AssertionError(f"unknown step {verb}")

        expect = scenario.get("expect", {})
        if "turns" in expect:
            assert last_result is not None
            assert last_result.turns == expect["turns"]
            assert last_result.text == expect["text"]
            assert last_result.status == "done"
        if "waiterStatus" in expect:
            assert waiter is not None
            assert (await waiter).status == expect["waiterStatus"]
            h = await rt.inspect(handles["slow"])
            assert h.state == expect["finalState"]
            assert h.inbox_count == expect["inboxLen"]
            assert llm.calls("m-slow") == 1
        if "onCloseOrder" in expect:  # "grandchild, child, parent (leaf-first)"
            tree = [handles[p].id for p in scenario["tree"]]
            assert closed == list(reversed(tree))
        if expect.get("allStates") == "closed":
            assert {h.state for h in await rt.list()} == {"closed"}
