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
The fan-out: the lead's tool ``worker`` (the same scripted lead as the openai-agents
peer's, ``bench-oalead-N``) starts a sub-thread of the agent ``worker`` with the job as its
first message (``AgentRuntime.spawn``, ``parent_thread_id`` the lead's) and returns its
reply once its run is done: N durable sub-threads, run at once (actant executes a turn's
allowed tools concurrently), waited for inside the lead's one turn. Actant's own ``task``
tool does not fit the scripted lead: in the background it returns the sub-thread's id at
once (each finished sub-thread later messages its parent, a new run of the lead each), and
with an invoker it runs in the tool's process with no durable child. Activity slots: 2N
(each waiting tool holds one, each sub-thread's model turn one) plus room, set on
``TemporalRuntimeConfig.max_concurrent_activities``.

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
import time
import uuid
from collections.abc import AsyncIterator
from typing import Any, ClassVar

from bench import llm
from bench.contender import Agent, AgentKind, Contender, Context, FanoutRun
from bench.history import HistoryTracker, MultiTracker

AGENT_OF_KIND = {"chat": "chat", "chat1k": "chat1k", "tool": "tooler"}
MODEL_OF_AGENT = {
    "chat": llm.MODEL_CHAT,
    "chat1k": llm.MODEL_CHAT_1K,
    "tooler": llm.MODEL_TOOL,
    "worker": llm.MODEL_WORKER,
}

NOT_MEASURED = {
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
    shapes_not_built: ClassVar[dict[str, str]] = {
        "tick": "no timer of its own: a thread's workflow runs only while its inbox has messages",
        "spawn": NOT_MEASURED["idle"].split(":")[0] + " (a spawn starts nothing)",
        "approval": "not built for actant in this bench",
        "continue_as_new": "never: each turn is a run of its own (its start, one action, is "
        "in every turn's count)",
    }

    def __init__(self) -> None:
        self.ctx: Context | None = None
        self.runtime: Any = None
        self._jobs: dict[str, list[str]] = {}
        """Lead thread id -> the workflow ids of the sub-threads its tool started."""

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

        from actant.tools.base import CallContext

        async def run_job(input: str, context: Any) -> str:
            """Run one job as a sub-thread of the agent ``worker`` and return its reply."""
            rt = self.runtime
            thread_id = uuid.uuid4().hex
            await rt.spawn("worker", thread_id, input, parent_thread_id=context.thread_id)
            wid = rt._workflow_id("worker", thread_id)
            self._jobs.setdefault(context.thread_id, []).append(wid)
            await rt.client.get_workflow_handle(wid).result()
            messages = await rt.stores.messages.list_for_thread("worker", thread_id)
            return str(messages[-1].content)

        # actant injects the parameter annotated CallContext (resolved with get_type_hints,
        # which cannot see this function's local import: the annotations are given here)
        run_job.__annotations__ = {"input": str, "context": CallContext, "return": str}
        worker = tool(name="worker", description="does one job")(run_job)

        self.ctx = ctx
        openai_client = AsyncOpenAI(base_url=ctx.base_url, api_key="bench", max_retries=0)
        models = {**MODEL_OF_AGENT, "lead": llm.oa_lead_model(ctx.size.fanout)}
        tools = {"tooler": [lookup], "lead": [worker]}
        agents = {
            name: AgentDefinition(
                id=name,
                name=name,
                persona="You are a benchmark agent.",
                llm=QwenProvider(model, client=openai_client),
                tools=ToolRegistry(tools.get(name, [])),
            )
            for name, model in models.items()
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
                max_concurrent_activities=2 * ctx.size.fanout + 100,
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

    async def fanout(self, n: int, rep: int) -> FanoutRun:
        """One turn of the lead (``bench-oalead-N``): N ``worker`` calls at once, each a
        durable sub-thread; history summed over the lead's run and every sub-thread's."""
        rt = self.runtime
        thread_id = uuid.uuid4().hex
        start = time.perf_counter()
        wid = await rt.send_message("lead", thread_id, "fan out")
        await rt.client.get_workflow_handle(wid).result()
        seconds = time.perf_counter() - start
        messages = await rt.stores.messages.list_for_thread("lead", thread_id)
        if not messages or messages[-1].role != "assistant" or not messages[-1].content:
            raise RuntimeError(f"actant fan-out ended without a reply: {messages[-1:]!r}")
        jobs = self._jobs.pop(thread_id, [])
        if len(jobs) != n:
            raise RuntimeError(f"actant fan-out ran {len(jobs)} jobs, not {n}")
        events = bytes_ = 0
        for w in [wid, *jobs]:
            history = await rt.client.get_workflow_handle(w).fetch_history()
            events += len(history.events)
            bytes_ += sum(e.ByteSize() for e in history.events)
        return FanoutRun(seconds=seconds, events=events, bytes=bytes_, llm_calls=n + 2)
