"""Contender: the in-process reference, the ``toolnexus`` package from PyPI.

Its own ``AgentRuntime`` (``toolnexus.agents``) with its own HTTP transport (stdlib urllib
in a worker thread, non-streaming JSON) pointed at the same scripted server: what durability
costs over no durability. A turn is ``wake`` then ``wait``, like ours. Top-level agents hang
under one ``group`` handle whose ``max_concurrent`` is 1000 (the root's is 8 and has no
option), so 100 agents can run at once, as in ours.
"""

from __future__ import annotations

import contextlib
import importlib.util
import time
from collections.abc import AsyncIterator
from typing import Any

from bench import llm
from bench.contender import Agent, AgentKind, Contender, Context, FanoutRun

AGENT_OF_KIND = {"chat": "chat", "chat1k": "chat1k", "tool": "tooler"}


class ToolnexusAgent(Agent):
    def __init__(self, rt: Any, handle: Any) -> None:
        self.rt = rt
        self.handle = handle

    async def turn(self, prompt: str) -> str:
        posted = self.rt.wake(self.handle, prompt)
        if not posted.ok:
            raise RuntimeError(f"wake rejected: {posted.error}")
        result = await self.rt.wait(self.handle)
        if result.status != "done":
            raise RuntimeError(f"{self.handle.id}: turn ended {result.status}: {result.text}")
        return str(result.text)


class Toolnexus(Contender):
    name = "toolnexus"
    label = "toolnexus (in-process)"
    durable = False

    def __init__(self) -> None:
        self.ctx: Context | None = None
        self.rt: Any = None
        self._groups: dict[str, Any] = {}

    def skip_reason(self) -> str | None:
        if importlib.util.find_spec("toolnexus") is None:
            return "the `toolnexus` package is not installed (pip install toolnexus)"
        try:
            import toolnexus.agents  # noqa: F401
        except Exception as err:
            return f"`toolnexus.agents` does not import: {type(err).__name__}: {err}"
        return None

    def _registry(self, fanout: int) -> dict[str, Any]:
        from toolnexus.agents import AgentDef, Budget
        from toolnexus.types import Tool, ToolResult

        from bench.ours import lookup

        async def execute(args: dict[str, Any] | None = None, ctx: Any = None) -> ToolResult:
            return ToolResult(output=await lookup(**(args or {})), is_error=False)

        tool = Tool(
            name=llm.TOOL_NAME,
            description="Look something up.",
            input_schema={
                "type": "object",
                "properties": {"q": {"type": "string"}},
                "required": ["q"],
            },
            source="native",
            execute=execute,
        )

        def agent(name: str, model: str, **kw: Any) -> Any:
            return AgentDef(name=name, description=name, system_prompt="", model=model, **kw)

        return {
            "group": agent("group", "none", budget=Budget(max_concurrent=1000)),
            "chat": agent("chat", llm.MODEL_CHAT),
            "chat1k": agent("chat1k", llm.MODEL_CHAT_1K),
            "tooler": agent("tooler", llm.MODEL_TOOL, tools=[tool]),
            "lead": agent(
                "lead",
                llm.lead_model(fanout),
                task_targets=["worker"],
                budget=Budget(max_concurrent=fanout),
            ),
            "worker": agent("worker", llm.MODEL_WORKER),
        }

    @contextlib.asynccontextmanager
    async def session(self, ctx: Context) -> AsyncIterator[None]:
        from toolnexus.agents import AgentRuntime

        self.ctx = ctx
        self.rt = AgentRuntime(
            registry=self._registry(ctx.size.fanout),
            llm={"base_url": ctx.base_url, "model": llm.MODEL_CHAT, "style": "openai"},
            max_concurrent_turns=1000,
        )
        yield

    def _group(self, group: str) -> Any:
        from toolnexus.agents import SpawnError

        handle = self._groups.get(group)
        if handle is None:
            handle = self.rt.spawn(self.rt.root, "group")
            if isinstance(handle, SpawnError):
                raise RuntimeError(handle.error)
            self._groups[group] = handle
        return handle

    def _spawn(self, parent: Any, name: str) -> Any:
        from toolnexus.agents import SpawnError

        handle = self.rt.spawn(parent, name)
        if isinstance(handle, SpawnError):
            raise RuntimeError(handle.error)
        return handle

    async def new_agent(self, kind: AgentKind, group: str) -> ToolnexusAgent:
        return ToolnexusAgent(self.rt, self._spawn(self._group(group), AGENT_OF_KIND[kind]))

    async def fanout(self, n: int, rep: int) -> FanoutRun:
        lead = self._spawn(self._group(f"fanout{rep}"), "lead")
        agent = ToolnexusAgent(self.rt, lead)
        start = time.perf_counter()
        await agent.turn("fan out")
        return FanoutRun(seconds=time.perf_counter() - start, llm_calls=n + 2)

    async def spawn_one(self, i: int) -> Any:
        return self._spawn(self._group("idle"), "chat")

    async def settle(self, spawned: list[Any]) -> None:
        return None
