"""Contender: a Temporal peer, ``temporalio.contrib.openai_agents`` with the ``openai-agents``
package, set up as its documentation shows: ``OpenAIAgentsPlugin`` on the client (and so the
worker), ``ModelActivityParameters`` for the model activity, a chat-completions model (not the
Responses API) on an ``AsyncOpenAI`` client whose ``base_url`` is the scripted server (dummy
key, no SDK retries: Temporal retries). Tracing export is off (no network here; it would go
to OpenAI's servers).
"""

from __future__ import annotations

import contextlib
import importlib.util
import os
import time
from collections.abc import AsyncIterator
from datetime import timedelta
from typing import Any, ClassVar

from bench import llm
from bench.contender import Agent, AgentKind, Contender, Context, FanoutRun, tracker_of
from bench.history import MultiTracker

MODEL_OF_KIND = {"chat": llm.MODEL_CHAT, "chat1k": llm.MODEL_CHAT_1K, "tool": llm.MODEL_TOOL}


class PeerAgentHandle(Agent):
    def __init__(self, handle: Any, kind: AgentKind) -> None:
        self.handle = handle
        self.kind = kind

    async def turn(self, prompt: str) -> str:
        from bench.peer_workflows import PeerAgent, PeerTurn

        return str(
            await self.handle.execute_update(
                PeerAgent.turn,
                PeerTurn(prompt, MODEL_OF_KIND[self.kind], tools=self.kind == "tool"),
            )
        )

    def tracker(self) -> MultiTracker:
        return tracker_of(self.handle._client, self.handle.id)


class Peer(Contender):
    name = "openai_agents"
    label = "openai-agents on Temporal"
    shapes_not_built: ClassVar[dict[str, str]] = {
        "tick": "no timer of its own: the plugin runs Runner.run in a workflow the user "
        "writes (a Temporal Schedule would start a new workflow, not reach this one)",
        "spawn": "no durable child agent: handoffs and agents-as-tools run inside the lead's "
        "workflow (see fan-out)",
        "approval": "no approval step in the plugin: a human-in-the-loop wait is the user's "
        "own workflow code",
        "continue_as_new": "its workflow carries the whole conversation and never continues "
        "as new (see growth: it runs into the history limit instead)",
    }

    def __init__(self) -> None:
        self.ctx: Context | None = None
        self.client: Any = None
        self.task_queue = ""
        self._count = 0

    def skip_reason(self) -> str | None:
        for module, package in (
            ("agents", "openai-agents"),
            ("openai", "openai"),
            ("temporalio.contrib.openai_agents", "temporalio-openai-agents"),
        ):
            try:
                found = importlib.util.find_spec(module)
            except (ImportError, ValueError):
                found = None
            if found is None:
                return f"the `{package}` package is not installed (pip install {package})"
        try:
            from temporalio.contrib.openai_agents import OpenAIAgentsPlugin  # noqa: F401
        except Exception as err:
            return f"temporalio.contrib.openai_agents does not import: {err}"
        return None

    @contextlib.asynccontextmanager
    async def session(self, ctx: Context) -> AsyncIterator[None]:
        os.environ.setdefault("OPENAI_AGENTS_DISABLE_TRACING", "1")
        from agents import OpenAIProvider, set_trace_processors, set_tracing_disabled
        from openai import AsyncOpenAI
        from temporalio.client import Client
        from temporalio.contrib.openai_agents import ModelActivityParameters, OpenAIAgentsPlugin
        from temporalio.worker import Worker

        from bench.peer_workflows import PeerAgent, PeerLead, lookup

        set_tracing_disabled(True)
        set_trace_processors([])
        self.ctx = ctx
        self.task_queue = f"bench-peer-{ctx.run_id}"
        openai_client = AsyncOpenAI(base_url=ctx.base_url, api_key="bench", max_retries=0)
        plugin = OpenAIAgentsPlugin(
            model_params=ModelActivityParameters(start_to_close_timeout=timedelta(seconds=120)),
            model_provider=OpenAIProvider(openai_client=openai_client, use_responses=False),
        )
        self.client = await Client.connect(ctx.address, plugins=[plugin])
        try:
            async with Worker(
                self.client,
                task_queue=self.task_queue,
                workflows=[PeerAgent, PeerLead],
                activities=[lookup],
            ):
                yield
        finally:
            await openai_client.close()

    def _id(self, what: str) -> str:
        assert self.ctx is not None
        self._count += 1
        return f"bench-{self.ctx.run_id}-peer-{what}-{self._count}"

    async def new_agent(self, kind: AgentKind, group: str) -> PeerAgentHandle:
        from bench.peer_workflows import PeerAgent

        handle = await self.client.start_workflow(
            PeerAgent.run, id=self._id(group), task_queue=self.task_queue
        )
        return PeerAgentHandle(handle, kind)

    async def fanout(self, n: int, rep: int) -> FanoutRun:
        from bench.peer_workflows import PeerFanout, PeerLead

        wid = self._id("lead")
        start = time.perf_counter()
        text = await self.client.execute_workflow(
            PeerLead.run,
            PeerFanout("fan out", llm.oa_lead_model(n), llm.MODEL_WORKER),
            id=wid,
            task_queue=self.task_queue,
        )
        seconds = time.perf_counter() - start
        if not text:
            raise RuntimeError("peer fan-out returned no text")
        history = await self.client.get_workflow_handle(wid).fetch_history()
        return FanoutRun(
            seconds=seconds,
            events=len(history.events),
            bytes=sum(e.ByteSize() for e in history.events),
            llm_calls=n + 2,
        )

    async def spawn_one(self, i: int) -> Any:
        from bench.peer_workflows import PeerAgent

        return await self.client.start_workflow(
            PeerAgent.run, id=self._id("idle"), task_queue=self.task_queue
        )

    async def settle(self, spawned: list[Any]) -> None:
        for handle in spawned:
            await handle.query("__stack_trace")
