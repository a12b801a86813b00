"""The openai-agents peer's workflows, written as that integration's users write them:
``Runner.run(agent, input)`` inside a workflow, the model call made by the plugin's activity,
the tool an ``activity_as_tool``. Multi-turn: each turn passes the previous turn's
``to_input_list()`` plus the new message. Imported in Temporal's workflow sandbox.
"""

from __future__ import annotations

from dataclasses import dataclass
from datetime import timedelta
from typing import Any

from temporalio import activity, workflow

with workflow.unsafe.imports_passed_through():
    from agents import Agent, Runner
    from temporalio.contrib.openai_agents import workflow as oa_workflow

TIMEOUT = timedelta(seconds=120)


@activity.defn(name="lookup")
async def lookup(q: str) -> str:
    """Look something up (the benchmark's tool: returns at once)."""
    return f"result for {q}"


@dataclass
class PeerTurn:
    prompt: str
    model: str
    tools: bool = False


@workflow.defn(name="BenchPeerAgent")
class PeerAgent:
    """One conversation: a ``turn`` update runs the agent over the conversation so far."""

    def __init__(self) -> None:
        self.items: list[Any] = []
        self._stop = False

    @workflow.run
    async def run(self) -> None:
        await workflow.wait_condition(lambda: self._stop and workflow.all_handlers_finished())

    @workflow.update
    async def turn(self, turn: PeerTurn) -> str:
        tools = (
            [oa_workflow.activity_as_tool(lookup, start_to_close_timeout=TIMEOUT)]
            if turn.tools
            else []
        )
        agent: Agent[Any] = Agent(name="assistant", model=turn.model, tools=tools)
        result = await Runner.run(agent, [*self.items, {"role": "user", "content": turn.prompt}])
        self.items = result.to_input_list()
        return str(result.final_output)

    @workflow.signal
    def stop(self) -> None:
        self._stop = True


@dataclass
class PeerFanout:
    prompt: str
    model: str
    worker_model: str


@workflow.defn(name="BenchPeerLead")
class PeerLead:
    """A lead whose tool is a sub-agent (``Agent.as_tool``): the model's N calls run at once,
    each a sub-agent run whose model call is an activity."""

    @workflow.run
    async def run(self, turn: PeerFanout) -> str:
        worker: Agent[Any] = Agent(name="worker", model=turn.worker_model)
        lead: Agent[Any] = Agent(
            name="lead",
            model=turn.model,
            tools=[worker.as_tool(tool_name="worker", tool_description="does one job")],
        )
        result = await Runner.run(lead, turn.prompt)
        return str(result.final_output)
