"""The approvals registry of the dev-server tests (CONTRACT §1, §5): the tool ``ask_approval``
that parks its turn until an Answer, the plain tool ``lookup``, the interpreters ``approve``
and ``decline``; ``approvals_registry(*agents)`` serves any agents with them. Shared by
``test_approvals``, ``test_operator_queue``, ``test_store_postgres`` and the recorders of
the committed histories."""

from __future__ import annotations

import json
from typing import Any

from pydantic import BaseModel

from toolnexus_temporal.activities import Registry, ToolContext, define_tool, pending
from toolnexus_temporal.client import AgentDef, Answer, Request


async def ask_approval(ctx: ToolContext) -> Any:
    """Request approval before doing the risky thing."""
    if ctx.answer is None:
        return pending(kind="approval", prompt="need approval to proceed")
    return "approved: " + json.dumps(ctx.answer.data or {})


class LookupArgs(BaseModel):
    q: str


def lookup(args: LookupArgs) -> str:
    """Look something up."""
    return f"data({args.q})"


async def approve(req: Request) -> Answer:
    return Answer(id=req.id, ok=True, data={"by": "interpreter"})


async def decline(req: Request) -> Answer:
    return Answer(id=req.id, ok=False, reason="declined")


TOOLS = [
    define_tool(ask_approval, input_schema={"type": "object", "properties": {}}),
    define_tool(lookup),
]


INTERPRETERS = {"approve": approve, "decline": decline}


def approvals_registry(*agents: AgentDef) -> Registry:
    """``agents`` with the approvals tools (``TOOLS``) and interpreters (``INTERPRETERS``)."""
    return Registry(agents, tools=TOOLS, interpreters=INTERPRETERS)


WORKER = AgentDef(name="worker", description="does risky work", tools=["ask_approval"])
"""An agent whose one tool, ``ask_approval``, parks it (the operator-queue tests)."""
