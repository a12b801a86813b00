"""Contender: a second Temporal peer, ``actant`` from PyPI ("Temporal-native runtime for
persistent agents with durable inboxes"), set up as its README shows: an
``actant.runtime.AgentRuntime`` over the suite's client with ``InMemoryRuntimeStores`` and a
``resolve_agent`` for the bench's agents, its worker in this process (``run_worker()``: its
own ``AgentThreadWorkflow``, activities and sandboxed runner), a turn sent with
``send_message`` and waited for as its quickstart does (the thread workflow's result), the
reply read from its message store.

The model: actant's own ``QwenProvider`` (chat completions, streamed, on an ``AsyncOpenAI``
client) pointed at the suite's scripted server (``base_url``, a dummy key, the SDK's retries
off: actant and Temporal retry), so actant gets the same scripted replies over the same
HTTP as every contender, routed on the model name (``bench-chat``, ``bench-tool``, ...).
Its ``OpenAIProvider`` speaks only OpenAI's Responses API, which the scripted server does
not; ``QwenProvider`` is its chat-completions adapter (its ``enable_thinking`` body field
is ignored by the server). The tool is an ``@tool`` function returning at once.

How actant differs, and what it means for the measures: a thread's workflow closes when its
inbox is empty, and the next message starts a new execution with the same workflow id, so
each turn is a workflow of its own (the tracker counts the new execution's events as that
turn's), and no workflow exists between turns. Measures it cannot do: ``NOT_MEASURED``.
"""

from __future__ import annotations

import asyncio
import contextlib
import importlib.util
import uuid
from collections.abc import AsyncIterator
from typing import Any, ClassVar

from bench import llm
from bench.contender import Agent, AgentKind, Contender, Context
from bench.history import HistoryTracker, MultiTracker

AGENT_OF_KIND = {"chat": "chat", "chat1k": "chat1k", "tool": "tooler"}
MODEL_OF_AGENT = {"chat": llm.MODEL_CHAT, "chat1k": llm.MODEL_CHAT_1K, "tooler": llm.MODEL_TOOL}

NOT_MEASURED = {
    "fanout": "actant's subagents (its `task` tool) either run in the tool's own process "
    "(an invoker: no durable child) or in the background (the tool returns the sub-thread's "
    "id at once; each finished sub-thread later messages its parent, starting another run "
    "of the lead): neither is one turn that waits for 50 delegated jobs, as the scripted "
    "lead's two replies need",
    "idle": "an actant thread has no workflow while idle (its execution closes when its "
    "inbox is empty; the next message starts a new one): nothing to spawn before a first "
    "turn (spawn rate) and nothing held in the worker between turns (idle RSS)",
}
"""Measures actant cannot do here, and why (the report lists them)."""


class ActantTracker(HistoryTracker):
    """A :class:`HistoryTracker` that also follows a thread's next execution: each turn of
    an actant thread is a new run of the same workflow id, started by the turn's message
    after the previous run closed (not a continue-as-new), so a turn's cost is the new
    run's events. The next run is the next distinct run id among the marks."""

    async def mark(self) -> None:
        """As :meth:`HistoryTracker.mark`; before a thread's first message there is no
        workflow yet: an empty mark (no run, no events)."""
        from temporalio.service import RPCError, RPCStatusCode

        try:
            await super().mark()
        except RPCError as err:
            if err.status != RPCStatusCode.NOT_FOUND:
                raise
            self.marks.append(("", 0))
            self.sizes.append(0)

    async def _events(self, run_id: str) -> list[Any]:
        return [] if not run_id else await super()._events(run_id)

    async def _next_run(self, run_id: str) -> str | None:
        nxt = await super()._next_run(run_id)
        if nxt is not None:
            return nxt
        runs = list(dict.fromkeys(run for run, _ in self.marks))
        at = runs.index(run_id) if run_id in runs else -1
        return runs[at + 1] if 0 <= at < len(runs) - 1 else None


class ActantAgent(Agent):
    def __init__(self, owner: Actant, agent_id: str) -> None:
        self.owner = owner
        self.agent_id = agent_id
        self.thread_id = uuid.uuid4().hex

    async def turn(self, prompt: str) -> str:
        rt = self.owner.runtime
        wid = await rt.send_message(self.agent_id, self.thread_id, prompt)
        await rt.client.get_workflow_handle(wid).result()
        messages = await rt.stores.messages.list_for_thread(self.agent_id, self.thread_id)
        last = messages[-1] if messages else None
        if last is None or last.role != "assistant" or not last.content:
            raise RuntimeError(f"{wid}: the run ended without a reply (last: {last!r})")
        return str(last.content)

    def tracker(self) -> MultiTracker:
        rt = self.owner.runtime
        wid = rt._workflow_id(self.agent_id, self.thread_id)
        return MultiTracker([ActantTracker(rt.client, wid)])


class Actant(Contender):
    name = "actant"
    label = "actant on Temporal"
    not_measured: ClassVar[dict[str, str]] = NOT_MEASURED

    def __init__(self) -> None:
        self.ctx: Context | None = None
        self.runtime: Any = None

    def skip_reason(self) -> str | None:
        for module, package in (("actant", "actant"), ("openai", "openai")):
            try:
                found = importlib.util.find_spec(module)
            except (ImportError, ValueError):
                found = None
            if found is None:
                return f"the `{package}` package is not installed (pip install {package})"
        return None

    @contextlib.asynccontextmanager
    async def session(self, ctx: Context) -> AsyncIterator[None]:
        from actant import AgentDefinition, tool
        from actant.llm.providers.qwen import QwenProvider
        from actant.runtime import AgentRuntime
        from actant.runtime.stores import InMemoryRuntimeStores
        from actant.runtime.temporal.types import TemporalRuntimeConfig
        from actant.tools import ToolRegistry
        from openai import AsyncOpenAI

        @tool(name=llm.TOOL_NAME)
        async def lookup(q: str) -> str:
            """Look something up (the benchmark's tool: returns at once)."""
            return f"result for {q}"

        self.ctx = ctx
        openai_client = AsyncOpenAI(base_url=ctx.base_url, api_key="bench", max_retries=0)
        agents = {
            name: AgentDefinition(
                id=name,
                name=name,
                persona="You are a benchmark agent.",
                llm=QwenProvider(model, client=openai_client),
                tools=ToolRegistry([lookup] if name == "tooler" else []),
            )
            for name, model in MODEL_OF_AGENT.items()
        }

        async def resolve_agent(agent_id: str, thread_id: str) -> Any:
            return agents[agent_id]

        self.runtime = AgentRuntime(
            client=ctx.client,
            stores=InMemoryRuntimeStores(),
            resolve_agent=resolve_agent,
            config=TemporalRuntimeConfig(
                task_queue=f"bench-actant-{ctx.run_id}",
                workflow_id_prefix=f"bench-{ctx.run_id}-actant",
            ),
        )
        polling = asyncio.create_task(self.runtime.run_worker())
        try:
            yield
        finally:
            await self.runtime.shutdown()
            with contextlib.suppress(asyncio.CancelledError):
                await polling
            await openai_client.close()

    async def new_agent(self, kind: AgentKind, group: str) -> ActantAgent:
        """A new thread id: nothing is started before its first message (its first turn
        starts its workflow)."""
        return ActantAgent(self, AGENT_OF_KIND[kind])
