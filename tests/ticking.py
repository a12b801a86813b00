"""Ticks in the dev-server tests (issue 25): the agent ``ticker`` (``ticker_registry``), the
inbox block a tick-woken turn sees (``tick_block``), an LLM transport that records each
turn's prompt and can hold one (``Recorder``), the approval tool ``guarded`` and the
``inbox`` query (``inbox_of``). Shared by ``test_ticks``, ``test_pause``, ``test_tick_cli``
and ``test_wait_timeout_across_runs``."""

from __future__ import annotations

import asyncio
import json
from typing import Any

import httpx

from toolnexus_temporal.activities import Registry, ToolContext, pending
from toolnexus_temporal.client import AgentDef, AgentRuntime, InboxItem, TickSpec
from toolnexus_temporal.client.testing import text
from toolnexus_temporal.workflows.agent import AgentWorkflow
from toolnexus_temporal.workflows.rules.render import UNTRUSTED_HEADER

TICK_LINE = "[from=clock channel=timer] tick (x{n} coalesced)"


def tick_block(n: int, *others: str) -> str:
    """The inbox block of a turn woken by ticks (CONTRACT §4): the tick line first."""
    lines = [TICK_LINE.format(n=n), *others]
    numbered = [f"{k}. {line}" for k, line in enumerate(lines, start=1)]
    return "\n".join([UNTRUSTED_HEADER.format(n=len(lines)), *numbered])


class Recorder:
    """An LLM transport that records each call's last user message; a message containing
    ``BLOCK`` waits until :meth:`release`."""

    def __init__(self) -> None:
        self.prompts: list[str] = []
        self.gate = asyncio.Event()
        self.blocked = asyncio.Event()

    def release(self) -> None:
        self.gate.set()

    async def handle(self, request: httpx.Request) -> httpx.Response:
        body = json.loads(request.content)
        users = [m for m in body["messages"] if m["role"] == "user"]
        last = users[-1]["content"] if users else ""
        self.prompts.append(last)
        if "BLOCK" in last:
            self.blocked.set()
            await self.gate.wait()
        return httpx.Response(200, json=text("checked"))

    def transport(self) -> httpx.MockTransport:
        return httpx.MockTransport(self.handle)


async def guarded(ctx: ToolContext) -> Any:
    """Needs an approval."""
    if ctx.answer is None:
        return pending(kind="approval", prompt="go ahead?")
    return "guarded ran"


def ticker_registry(tick: TickSpec | None = None) -> Registry:
    """The one agent ``ticker`` (no tools), ticking on ``tick`` when given."""
    return Registry([AgentDef(name="ticker", description="looks at a queue", tick=tick)])


async def inbox_of(rt: AgentRuntime, h: Any) -> list[InboxItem]:
    """The handle's inbox (the ``inbox`` query)."""
    wf = rt.client.get_workflow_handle(rt.workflow_id(h.id))
    return await wf.query(AgentWorkflow.inbox)
