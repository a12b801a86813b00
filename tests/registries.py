"""Registries shared by the tests: the constants are importable by a separate worker process
(``tnx-worker --registry tests.registries:APPROVALS``) in tests that stop and restart
workers; ``recording_closes`` and ``cancelling`` build registries whose close hook records
the closed handles. Topic registries live beside their helpers (``tests/approving.py``,
``tests/expiring.py``, ``tests/parking.py``, ``tests/ticking.py``, ``tests/fixture_llm.py``)."""

from __future__ import annotations

import asyncio
from collections.abc import Sequence
from typing import Any

from toolnexus_temporal.activities import Registry, Tool, ToolContext, define_tool, pending
from toolnexus_temporal.client import AgentDef
from toolnexus_temporal.workflows.contract.messages import HookInput
from toolnexus_temporal.workflows.contract.models import ApprovalPolicy


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

EXPIRING = Registry(
    [
        AgentDef(name="parent", description="delegates", team=["asker"], model="m-parent"),
        AgentDef(
            name="asker",
            description="needs approvals that expire",
            tools=["check_secret"],
            approval=ApprovalPolicy(timeout_ms=4_000),
        ),
    ],
    tools=[define_tool(check_secret, input_schema={"type": "object", "properties": {}})],
)
""":data:`APPROVALS` with the asker's Requests expiring 4 s after they are raised."""


async def lookup(q: str) -> str:
    """Looks something up."""
    return f"found {q}"


def lookup_tool() -> Any:
    """A fresh ``lookup`` tool (returns ``found <q>``)."""
    return define_tool(lookup)


def check_secret_tool() -> Any:
    """A fresh ``check_secret`` tool (needs an approval)."""
    return define_tool(check_secret, input_schema={"type": "object", "properties": {}})


async def fetch(q: str) -> str:
    """Fetches a record (idempotent: safe to run again)."""
    await asyncio.sleep(0.05)
    return f"record {q}"


MULTIHOST = Registry(
    [
        AgentDef(
            name="clerk",
            description="fetches records; a secret needs an approval",
            tools=["fetch", "check_secret"],
        )
    ],
    tools=[
        # Idempotent tools with a short attempt timeout: a call that was running on a
        # killed worker runs again elsewhere after ``timeout_ms`` (tests/test_multihost.py).
        define_tool(fetch, timeout_ms=5_000, max_attempts=3, initial_retry_ms=200),
        define_tool(
            check_secret,
            input_schema={"type": "object", "properties": {}},
            timeout_ms=5_000,
            max_attempts=3,
            initial_retry_ms=200,
        ),
    ],
)
"""One agent with an idempotent tool and a tool that needs an approval, for the many-hosts
test (three ``tnx-worker`` processes)."""

METRICS = Registry(
    [
        AgentDef(name="chatter", description="answers in plain text", model="m-plain"),
        AgentDef(name="looker", description="looks things up", tools=["lookup"], model="m-tool"),
        AgentDef(
            name="asker", description="needs approvals", tools=["check_secret"], model="m-ask"
        ),
        AgentDef(name="spender", description="runs out of tokens", tools=["lookup"], model="m-cap"),
    ],
    tools=[lookup_tool(), check_secret_tool()],
)
"""One agent per scripted turn of the Prometheus test (``tests/test_metrics_prometheus.py``):
a plain turn, a tool turn, an approval that waits, a budget stop."""


def recording_closes(
    agents: Sequence[AgentDef], closed: list[str] | None = None, tools: Sequence[Tool] = ()
) -> Registry:
    """``agents`` and ``tools`` with one hook under each ``on_close`` name the agents use: it
    appends the closed handle's id to ``closed`` (when given)."""

    async def record_close(event: HookInput) -> None:
        if closed is not None:
            closed.append(event.handle_id)

    hooks = {agent.on_close: record_close for agent in agents if agent.on_close}
    return Registry(agents, tools=tools, hooks=hooks)


def cancelling(closed: list[str]) -> Registry:
    """A parent that delegates to an asker whose tool needs an approval, and a plain ``chat``;
    each records its close in ``closed`` (``tests/test_cancellation.py`` and the ``cancel``
    recorder of the committed histories)."""
    return recording_closes(
        [
            AgentDef(name="parent", team=["asker"], model="m-parent", on_close="record"),
            AgentDef(name="asker", tools=["check_secret"], on_close="record"),
            AgentDef(name="chat", on_close="record"),
        ],
        closed,
        tools=[check_secret_tool()],
    )
