"""The floor's workflows: the least any Temporal design must do for the same turn.

One long-lived workflow per agent, one update per turn; the update runs the turn's
activities (the same HTTP call to the same scripted LLM, the same tool) and returns the
text. Nothing else: no state machine, no search attributes, no parent, no store. Imported in
Temporal's workflow sandbox: deterministic code only.
"""

from __future__ import annotations

import asyncio
from collections.abc import Awaitable, Callable
from dataclasses import dataclass, field
from datetime import timedelta
from typing import Any

from temporalio import workflow

FLOOR_LLM_ACTIVITY = "bench.floor_llm"
FLOOR_TOOL_ACTIVITY = "bench.floor_tool"
TIMEOUT = timedelta(seconds=120)


@dataclass
class FloorTurn:
    """One turn: the prompt, the model, and whether the model gets the tool's schema."""

    prompt: str
    model: str
    tools: bool = False
    approval: bool = False
    """Wait for an ``approve`` update before running the tools (the approval round trip)."""
    continue_as_new: bool = False
    """Continue as new once this turn is done (the continue-as-new shape)."""


@dataclass
class FloorCall:
    """One LLM call: the messages (OpenAI shape) and the model."""

    model: str
    messages: list[dict[str, Any]] = field(default_factory=list)
    tools: bool = False


@dataclass
class FloorToolCall:
    """One tool call."""

    name: str
    arguments: str


async def run_turn(
    turn: FloorTurn, before_tools: Callable[[], Awaitable[None]] | None = None
) -> str:
    """LLM; while it calls tools: every tool (one activity each, after ``before_tools``),
    then LLM again."""
    messages: list[dict[str, Any]] = [{"role": "user", "content": turn.prompt}]
    while True:
        reply: dict[str, Any] = await workflow.execute_activity(
            FLOOR_LLM_ACTIVITY,
            FloorCall(turn.model, messages, turn.tools),
            result_type=dict,
            start_to_close_timeout=TIMEOUT,
        )
        calls = reply.get("tool_calls") or []
        if not calls:
            return str(reply.get("content") or "")
        messages = [*messages, reply]
        if before_tools is not None:
            await before_tools()
        outputs = await asyncio.gather(
            *(
                workflow.execute_activity(
                    FLOOR_TOOL_ACTIVITY,
                    FloorToolCall(call["name"], call["arguments"]),
                    result_type=str,
                    start_to_close_timeout=TIMEOUT,
                )
                for call in calls
            )
        )
        messages += [
            {"role": "tool", "tool_call_id": call["id"], "content": output}
            for call, output in zip(calls, outputs, strict=True)
        ]


@workflow.defn(name="BenchFloorAgent")
class FloorAgent:
    """An agent: serves one ``turn`` update at a time until ``stop``; a turn may wait for an
    ``approve`` update before its tools, and may ask the run to continue as new after it."""

    def __init__(self) -> None:
        self._stop = False
        self._continue = False
        self._approved = False
        self._waiting = False

    @workflow.run
    async def run(self) -> None:
        await workflow.wait_condition(
            lambda: (self._stop or self._continue) and workflow.all_handlers_finished()
        )
        if self._continue and not self._stop:
            workflow.continue_as_new()

    @workflow.update
    async def turn(self, turn: FloorTurn) -> str:
        text = await run_turn(turn, self._wait_approval if turn.approval else None)
        self._continue = turn.continue_as_new
        return text

    async def _wait_approval(self) -> None:
        self._waiting = True
        await workflow.wait_condition(lambda: self._approved)
        self._waiting = self._approved = False

    @workflow.update
    def approve(self) -> None:
        self._approved = True

    @workflow.query
    def waiting(self) -> bool:
        return self._waiting

    @workflow.signal
    def stop(self) -> None:
        self._stop = True


@workflow.defn(name="BenchFloorTicker")
class FloorTicker:
    """An agent that acts on its own: a timer, then the plain turn's activity, forever."""

    def __init__(self) -> None:
        self._ticks = 0

    @workflow.run
    async def run(self, turn: FloorTurn, every_ms: int) -> None:
        while True:
            await workflow.sleep(timedelta(milliseconds=every_ms))
            await run_turn(turn)
            self._ticks += 1

    @workflow.query
    def ticks(self) -> int:
        return self._ticks


@workflow.defn(name="BenchFloorParent")
class FloorParent:
    """A parent whose ``spawn`` update starts one child agent and returns its workflow id."""

    def __init__(self) -> None:
        self._n = 0

    @workflow.run
    async def run(self) -> None:
        await workflow.wait_condition(lambda: False)

    @workflow.update
    async def spawn(self) -> str:
        self._n += 1
        wid = f"{workflow.info().workflow_id}/kid.{self._n}"
        await workflow.start_child_workflow(
            FloorAgent.run, id=wid, parent_close_policy=workflow.ParentClosePolicy.ABANDON
        )
        return wid


@workflow.defn(name="BenchFloorChild")
class FloorChild:
    """A delegated job: one turn, then done (a child workflow)."""

    @workflow.run
    async def run(self, turn: FloorTurn) -> str:
        return await run_turn(turn)


@dataclass
class FloorFanout:
    """The lead's turn: its model answers with N ``task`` calls."""

    prompt: str
    model: str
    worker_model: str


@workflow.defn(name="BenchFloorLead")
class FloorLead:
    """A lead: LLM → one child workflow per ``task`` call, all at once → LLM."""

    @workflow.run
    async def run(self, turn: FloorFanout) -> str:
        import json

        messages: list[dict[str, Any]] = [{"role": "user", "content": turn.prompt}]
        reply: dict[str, Any] = await workflow.execute_activity(
            FLOOR_LLM_ACTIVITY,
            FloorCall(turn.model, messages),
            result_type=dict,
            start_to_close_timeout=TIMEOUT,
        )
        calls = reply.get("tool_calls") or []
        info = workflow.info()
        outputs = await asyncio.gather(
            *(
                workflow.execute_child_workflow(
                    FloorChild.run,
                    FloorTurn(json.loads(call["arguments"])["prompt"], turn.worker_model),
                    id=f"{info.workflow_id}/job.{i}",
                )
                for i, call in enumerate(calls)
            )
        )
        messages += [
            reply,
            *(
                {"role": "tool", "tool_call_id": call["id"], "content": output}
                for call, output in zip(calls, outputs, strict=True)
            ),
        ]
        final: dict[str, Any] = await workflow.execute_activity(
            FLOOR_LLM_ACTIVITY,
            FloorCall(turn.model, messages),
            result_type=dict,
            start_to_close_timeout=TIMEOUT,
        )
        return str(final.get("content") or "")
