"""The expiring-approvals registry of the dev-server tests (issue 26): the tools ``quick``
(its Request expires 1.5 s after it is asked) and ``slow`` (the agent's policy sets any
timeout), the interpreter ``approve`` an escalation names; ``expiry_registry(*agents)`` serves
any agents with them. ``finished`` waits out a turn parked on a Request. Shared by
``test_expiry``, ``test_answers_at_once`` and the recorders of the committed histories."""

from __future__ import annotations

import asyncio
import json
from typing import Any

from toolnexus_temporal.activities import Registry, ToolContext, define_tool, pending
from toolnexus_temporal.client import AgentDef, Answer, Request


async def quick(ctx: ToolContext) -> Any:
    """Needs an approval that expires 1.5 s after it is asked."""
    if ctx.answer is None:
        return pending(kind="approval", prompt="deploy?", timeout_ms=1_500)
    return "deployed " + json.dumps(ctx.answer.data or {})


async def slow(ctx: ToolContext) -> Any:
    """Needs an approval (the agent's policy sets any timeout)."""
    if ctx.answer is None:
        return pending(kind="approval", prompt="delete?")
    return "deleted " + json.dumps(ctx.answer.data or {})


async def approve(req: Request) -> Answer:
    return Answer(id=req.id, ok=True, data={"via": "escalation"})


TOOLS = [
    define_tool(quick, input_schema={"type": "object", "properties": {}}),
    define_tool(slow, input_schema={"type": "object", "properties": {}}),
]


def expiry_registry(*agents: AgentDef) -> Registry:
    """``agents`` with the tools ``quick`` and ``slow`` and the interpreter ``approve``."""
    return Registry(agents, tools=TOOLS, interpreters={"approve": approve})


async def finished(rt: Any, h: Any, within_s: float = 15) -> Any:
    """The result of ``h``'s turn once it no longer waits on a Request (``wait`` on a
    suspended handle returns ``pending`` at once)."""
    loop = asyncio.get_running_loop()
    deadline = loop.time() + within_s
    while loop.time() < deadline:
        r = await rt.wait(h, timeout_ms=2_000)
        if r.status not in ("pending", "timeout"):
            return r
        await asyncio.sleep(0.1)
    raise AssertionError(f"{h.id} still waits: {r}")
