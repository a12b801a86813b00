"""Registries importable by a separate worker process (``tnx-worker --registry
tests.registries:APPROVALS``) in tests that stop and restart workers."""

from __future__ import annotations

from typing import Any

from toolnexus_temporal.activities import Registry, ToolContext, define_tool, pending
from toolnexus_temporal.client import AgentDef


async def check_secret(ctx: ToolContext) -> Any:
    """Needs an approval, then returns the secret token."""
    if ctx.answer is None:
        return pending(kind="approval", prompt="approve secret access?")
    return "secret-token"


APPROVALS = Registry(
    [
        AgentDef(name="parent", description="delegates", team=["asker"], model="m-parent"),
        AgentDef(name="asker", description="needs approvals", tools=["check_secret"]),
    ],
    tools=[define_tool(check_secret, input_schema={"type": "object", "properties": {}})],
)
"""A parent that delegates to an asker whose tool needs an approval (no interpreter)."""


async def lookup(q: str) -> str:
    """Looks something up."""
    return f"found {q}"


def lookup_tool() -> Any:
    """A fresh ``lookup`` tool (returns ``found <q>``)."""
    return define_tool(lookup)


def check_secret_tool() -> Any:
    """A fresh ``check_secret`` tool (needs an approval)."""
    return define_tool(check_secret, input_schema={"type": "object", "properties": {}})
