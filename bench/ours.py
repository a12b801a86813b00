"""Contender: toolnexus-temporal itself, as a user runs it.

An in-process worker (``worker.create_worker``) and an ``AgentRuntime``; a turn is
``rt.run_turn(h, prompt)``: the ``wake_child`` update on the parent (which owns the
``max_concurrent`` slots and signals the child), then the ``wait`` update on the agent.
Each measure gets its own runtime scope, so its root's history is its own.
"""

from __future__ import annotations

import contextlib
import time
from collections.abc import AsyncIterator
from typing import Any

from activities import LlmConfig, Registry, SqliteConversationStore, define_tool
from bench import llm
from bench.contender import Agent, AgentKind, Context, Contender, FanoutRun, tracker_of
from bench.history import MultiTracker
from client import AgentDef, AgentRuntime, Handle
from worker import create_worker
from workflows.models import Budget

AGENT_OF_KIND = {"chat": "chat", "chat1k": "chat1k", "tool": "tooler"}
ROOT_BUDGET = Budget(max_concurrent=1000)
"""The root's ``max_concurrent`` (default 8) caps the top-level agents running at once."""


async def lookup(q: str) -> str:
    """Look something up (the benchmark's tool: returns at once)."""
    return f"result for {q}"


def registry(fanout: int) -> Registry:
    """The benchmark's agents: plain chat, ~1 KB chat, a tool user, a lead and its workers."""
    return Registry(
        [
            AgentDef(name="chat", model=llm.MODEL_CHAT),
            AgentDef(name="chat1k", model=llm.MODEL_CHAT_1K),
            AgentDef(name="tooler", model=llm.MODEL_TOOL, tools=[llm.TOOL_NAME]),
            AgentDef(name="lead", model=llm.lead_model(fanout), team=["worker"]),
            AgentDef(name="worker", description="does one job", model=llm.MODEL_WORKER),
        ],
        tools=[define_tool(lookup, name=llm.TOOL_NAME)],
    )


class OursAgent(Agent):
    def __init__(self, rt: AgentRuntime, handle: Handle) -> None:
        self.rt = rt
        self.handle = handle

    async def turn(self, prompt: str) -> str:
        result = await self.rt.run_turn(self.handle, prompt)
        if result.status != "done":
            raise RuntimeError(f"{self.handle.id}: turn ended {result.status}: {result.text}")
        return result.text

    def tracker(self) -> MultiTracker:
        rt = self.rt
        return tracker_of(
            rt.client, rt.workflow_id(self.handle.id), rt.workflow_id(rt.root.id)
        )


class Ours(Contender):
    name = "ours"
    label = "toolnexus-temporal"

    def __init__(self) -> None:
        self.ctx: Context | None = None
        self.task_queue = ""
        self._runtimes: dict[str, AgentRuntime] = {}

    @contextlib.asynccontextmanager
    async def session(self, ctx: Context) -> AsyncIterator[None]:
        self.ctx = ctx
        self.task_queue = f"bench-ours-{ctx.run_id}"
        store = SqliteConversationStore(ctx.tmp / f"ours-{ctx.run_id}.sqlite")
        async with (
            create_worker(
                ctx.client,
                registry=registry(ctx.size.fanout),
                llm=LlmConfig(base_url=ctx.base_url, model=llm.MODEL_CHAT),
                task_queue=self.task_queue,
                store=store,
                max_concurrent_turns=1000,
            ) as worker,
            worker,
        ):
            yield

    async def runtime(self, group: str) -> AgentRuntime:
        """One runtime (root workflow) per measure."""
        rt = self._runtimes.get(group)
        if rt is None:
            assert self.ctx is not None
            rt = AgentRuntime(
                self.ctx.client,
                task_queue=self.task_queue,
                scope=f"bench-{self.ctx.run_id}-{group}",
                budget=ROOT_BUDGET,
            )
            await rt.start()
            self._runtimes[group] = rt
        return rt

    async def new_agent(self, kind: AgentKind, group: str) -> OursAgent:
        rt = await self.runtime(group)
        h = await rt.spawn(rt.root, AGENT_OF_KIND[kind])
        if not isinstance(h, Handle):
            raise RuntimeError(f"spawn failed: {h}")
        return OursAgent(rt, h)

    async def fanout(self, n: int, rep: int) -> FanoutRun:
        rt = await self.runtime(f"fanout{rep}")
        lead = await rt.spawn(rt.root, "lead", Budget(max_concurrent=n, max_turns=6))
        if not isinstance(lead, Handle):
            raise RuntimeError(f"spawn failed: {lead}")
        wids = [rt.workflow_id(rt.root.id), rt.workflow_id(lead.id)]
        before = tracker_of(rt.client, *wids)
        await before.mark()
        start = time.perf_counter()
        result = await rt.run_turn(lead, "fan out")
        seconds = time.perf_counter() - start
        if result.status != "done":
            raise RuntimeError(f"fan-out ended {result.status}: {result.text}")
        # Every child the lead spawned wrote its own history: count them all.
        view = await rt.inspect(lead)
        children = [rt.workflow_id(c) for c in view.children]
        await before.mark()
        events = bytes_ = 0
        for cost in await before.costs():
            events, bytes_ = cost.events, cost.bytes
        for wid in children:
            history = await rt.client.get_workflow_handle(wid).fetch_history()
            events += len(history.events)
            bytes_ += sum(e.ByteSize() for e in history.events)
        return FanoutRun(seconds=seconds, events=events, bytes=bytes_, llm_calls=n + 2)

    # ------------------------------------------------------------------ idle agents

    async def spawn_one(self, i: int) -> Any:
        rt = await self.runtime("idle")
        h = await rt.spawn(rt.root, "chat")
        if not isinstance(h, Handle):
            raise RuntimeError(f"spawn failed: {h}")
        return h

    async def settle(self, spawned: list[Any]) -> None:
        rt = await self.runtime("idle")
        for h in spawned:
            await rt.inspect(h)
