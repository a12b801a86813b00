"""Contender: the floor, a minimal hand-written Temporal workflow (``bench.floor_workflows``).

Its LLM activity makes the same HTTP exchange as our runtime's ``tnx.llm_call``: the same
request body (built by ``activities.wire``, streamed), the same SSE parsing, on a shared
httpx client with the same settings; it sends only the turn's messages (it keeps no
transcript). Its tool activity runs the same ``lookup`` function. Same pydantic data
converter, default worker options, default sandbox.
"""

from __future__ import annotations

import asyncio
import contextlib
import json
import time
from collections.abc import AsyncIterator
from typing import Any, ClassVar

import httpx
from temporalio import activity
from temporalio.client import WorkflowHandle
from temporalio.worker import Worker

from bench import llm, shapes
from bench.contender import Agent, AgentKind, Contender, Context, FanoutRun, tracker_of
from bench.floor_workflows import (
    FLOOR_LLM_ACTIVITY,
    FLOOR_TOOL_ACTIVITY,
    FloorAgent,
    FloorCall,
    FloorChild,
    FloorFanout,
    FloorLead,
    FloorParent,
    FloorTicker,
    FloorToolCall,
    FloorTurn,
)
from bench.history import MultiTracker
from bench.ours import lookup
from toolnexus_temporal.activities import wire
from toolnexus_temporal.workflows.contract.models import Message, ToolCall

MODEL_OF_KIND = {"chat": llm.MODEL_CHAT, "chat1k": llm.MODEL_CHAT_1K, "tool": llm.MODEL_TOOL}
TOOL_SCHEMA = {
    "type": "function",
    "function": {
        "name": llm.TOOL_NAME,
        "description": "Look something up.",
        "parameters": {
            "type": "object",
            "properties": {"q": {"type": "string"}},
            "required": ["q"],
        },
    },
}


class FloorActivities:
    """The floor's two activities over one httpx client."""

    def __init__(self, base_url: str) -> None:
        self.base_url = base_url
        self.http = httpx.AsyncClient(
            transport=httpx.AsyncHTTPTransport(retries=0), timeout=httpx.Timeout(120)
        )

    @activity.defn(name=FLOOR_LLM_ACTIVITY)
    async def llm_call(self, call: FloorCall) -> dict[str, Any]:
        """POST the chat completion (streamed), return the assistant message."""
        messages = [_message(m) for m in call.messages]
        body = wire.request_body(
            "openai",
            model=call.model,
            messages=messages,
            tools=[TOOL_SCHEMA] if call.tools else [],
            max_tokens=None,
            stream=True,
        )
        url = wire.endpoint("openai", self.base_url)
        assembler = wire.StreamAssembler("openai")
        async with self.http.stream(
            "POST", url, json=body, headers=wire.headers("openai", None)
        ) as response:
            response.raise_for_status()
            async for line in response.aiter_lines():
                if line.startswith("data:"):
                    assembler.feed(line[5:].strip())
        message, _usage = assembler.result()
        out: dict[str, Any] = {"role": "assistant", "content": message.content}
        if message.tool_calls:
            out["tool_calls"] = [
                {"id": c.id, "name": c.name, "arguments": c.arguments} for c in message.tool_calls
            ]
        return out

    @activity.defn(name=FLOOR_TOOL_ACTIVITY)
    async def tool_call(self, call: FloorToolCall) -> str:
        """Run the tool."""
        return await lookup(**json.loads(call.arguments or "{}"))


def _message(raw: dict[str, Any]) -> Message:
    calls = raw.get("tool_calls")
    return Message(
        role=raw["role"],
        content=raw.get("content"),
        tool_call_id=raw.get("tool_call_id"),
        tool_calls=[ToolCall(**c) for c in calls] if calls else None,
    )


class FloorAgentHandle(Agent):
    def __init__(self, handle: WorkflowHandle[Any, Any], kind: AgentKind) -> None:
        self.handle = handle
        self.kind = kind

    async def turn(self, prompt: str) -> str:
        return await self.handle.execute_update(
            FloorAgent.turn,
            FloorTurn(prompt, MODEL_OF_KIND[self.kind], tools=self.kind == "tool"),
        )

    def tracker(self) -> MultiTracker:
        return tracker_of(self.handle._client, self.handle.id)


class Floor(Contender):
    name = "floor"
    label = "Temporal floor"

    def __init__(self) -> None:
        self.ctx: Context | None = None
        self.task_queue = ""
        self._count = 0

    def attach(self, ctx: Context) -> None:
        self.ctx = ctx
        self.task_queue = f"bench-floor-{ctx.run_id}"

    @contextlib.asynccontextmanager
    async def session(self, ctx: Context) -> AsyncIterator[None]:
        self.attach(ctx)
        acts = FloorActivities(ctx.base_url)
        try:
            async with Worker(
                ctx.client,
                task_queue=self.task_queue,
                workflows=[FloorAgent, FloorChild, FloorLead, FloorTicker, FloorParent],
                activities=[acts.llm_call, acts.tool_call],
            ):
                yield
        finally:
            await acts.http.aclose()

    def _id(self, what: str) -> str:
        assert self.ctx is not None
        self._count += 1
        return f"bench-{self.ctx.run_id}-floor-{what}-{self._count}"

    async def new_agent(self, kind: AgentKind, group: str) -> FloorAgentHandle:
        assert self.ctx is not None
        handle = await self.ctx.client.start_workflow(
            FloorAgent.run, id=self._id(group), task_queue=self.task_queue
        )
        return FloorAgentHandle(handle, kind)

    async def fanout(self, n: int, rep: int) -> FanoutRun:
        assert self.ctx is not None
        client = self.ctx.client
        wid = self._id("lead")
        start = time.perf_counter()
        text = await client.execute_workflow(
            FloorLead.run,
            FloorFanout("fan out", llm.lead_model(n), llm.MODEL_WORKER),
            id=wid,
            task_queue=self.task_queue,
        )
        seconds = time.perf_counter() - start
        if not text:
            raise RuntimeError("floor fan-out returned no text")
        events = bytes_ = 0
        for w in [wid, *(f"{wid}/job.{i}" for i in range(n))]:
            history = await client.get_workflow_handle(w).fetch_history()
            events += len(history.events)
            bytes_ += sum(e.ByteSize() for e in history.events)
        return FanoutRun(seconds=seconds, events=events, bytes=bytes_, llm_calls=n + 2)

    shapes_not_built: ClassVar[dict[str, str]] = {}

    async def action_shape(self, shape: str) -> dict[str, Any]:
        """A tick turn (timer + activity), a spawn (a parent's update starts a child), an
        approval round trip (a turn update waits for an ``approve`` update, then runs the
        tool) or a continue-as-new (bench.shapes)."""
        assert self.ctx is not None
        client, queue = self.ctx.client, self.task_queue
        if shape == "tick":
            ticker = await client.start_workflow(
                FloorTicker.run,
                args=[FloorTurn("tick", llm.MODEL_CHAT), shapes.TICK_EVERY_MS],
                id=self._id("ticker"),
                task_queue=queue,
            )

            async def done() -> int:
                return await ticker.query(FloorTicker.ticks)

            try:
                return {**await shapes.ticks(tracker_of(client, ticker.id), done), "how": "timer"}
            finally:
                await ticker.terminate()
        if shape == "spawn":
            parent = await client.start_workflow(
                FloorParent.run, id=self._id("parent"), task_queue=queue
            )
            kids: list[str] = []

            async def spawn() -> None:
                kids.append(await parent.execute_update(FloorParent.spawn))
                await client.get_workflow_handle(kids[0]).query("__stack_trace")

            cost = await shapes.around(tracker_of(client, parent.id), spawn)
            cost.add(await shapes.whole_history(client, kids[0]))
            return shapes.shape_result(cost, how="update spawn: start_child_workflow")
        agent = await self.new_agent("tool", f"shape-{shape}")
        if shape == "approval":

            async def round_trip() -> None:
                turn = FloorTurn("look it up", llm.MODEL_APPROVAL, tools=True, approval=True)
                running = asyncio.create_task(agent.handle.execute_update(FloorAgent.turn, turn))
                await shapes.until(bool, lambda: agent.handle.query(FloorAgent.waiting))
                await agent.handle.execute_update(FloorAgent.approve)
                await running

            cost = await shapes.around(agent.tracker(), round_trip)
            return shapes.shape_result(cost, how="update turn waits for update approve")
        tracker = agent.tracker()
        await tracker.mark()
        for i in range(4):
            turn = FloorTurn(f"turn {i}", llm.MODEL_CHAT, continue_as_new=i == 2)
            await agent.handle.execute_update(FloorAgent.turn, turn)
            await asyncio.sleep(0.3)  # the run continues as new after the update
            await tracker.mark()
        return {**shapes.continue_as_new_cost(await tracker.costs()), "how": "turn flag"}

    async def spawn_one(self, i: int) -> Any:
        assert self.ctx is not None
        return await self.ctx.client.start_workflow(
            FloorAgent.run, id=self._id("idle"), task_queue=self.task_queue
        )

    async def settle(self, spawned: list[Any]) -> None:
        for handle in spawned:
            await handle.query("__stack_trace")
