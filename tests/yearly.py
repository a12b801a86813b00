"""Support of the year soak (issue 38, ``tests/test_year.py``): the agent's registry (served by
a ``tnx-worker`` subprocess: ``--registry tests.yearly:REGISTRY``), the scripted provider that
answers any request and counts what it saw, and the history figures of a workflow's runs.

The registry: ``year`` ticks every second, may start ``kid`` children, and has four tools:
``deploy`` (an approval the test answers), ``quick`` (an approval that expires after 1 s),
``slow`` (an approval nobody answers: the agent's policy escalates it to the interpreter
``approve`` after 3 s) and ``stamp`` (returns ``stamp <TNX_YEAR_TOOL>``: a deploy that changes
the tool sets that variable to ``v2`` in the new worker's environment). No context policy is
set: the default bound (``DEFAULT_CONTEXT``, summarize) applies.
"""

from __future__ import annotations

import json
import os
import re
import threading
from collections import Counter
from dataclasses import dataclass, field
from typing import Any

import httpx
from temporalio.api.enums.v1 import EventType
from temporalio.client import Client

from toolnexus_temporal.activities import Registry, ToolContext, define_tool, pending
from toolnexus_temporal.client import (
    AgentDef,
    Answer,
    ApprovalPolicy,
    Budget,
    Escalation,
    Request,
    TickSpec,
)
from toolnexus_temporal.client.testing import (
    ScriptedLLM,
    openai_view,
    render,
    style_of,
    text,
    tool_calls,
)
from toolnexus_temporal.workflows.contract.context import SUMMARIZER_INSTRUCTIONS

AGENT_MODEL = "m-year"
"""The model name of the ``year`` agent (its summarizer calls use it too)."""

KID_MODEL = "m-kid"
"""The model name of the background children."""

REPLY_CHARS = 1_500
"""Filler of each agent reply: about 380 estimated tokens a turn, so the default bound
(100,000 tokens) is reached after about 260 turns."""

TOKENS_PER_CALL = 5
"""The usage every scripted reply reports (3 prompt + 2 completion tokens)."""

ESCALATE_AFTER_MS = 3_000
"""The ``year`` agent's escalation delay (``slow`` waits this long, then ``approve`` answers)."""

TICK_LINE = re.compile(r"\[from=clock channel=timer\] tick \(x(\d+) coalesced\)")
POST_LINE = re.compile(r"\[from=ops channel=chat\] (post-\d+)")
WAKE_TAG = re.compile(r"\b(wake-\d+)\b")
CHILD_LINE = re.compile(r"\[from=(root/year\.1/kid\.\d+) channel=child\] \[(\w+)\] (.*)")


async def deploy(ctx: ToolContext) -> Any:
    """Needs an approval (the test answers it)."""
    if ctx.answer is None:
        return pending(kind="approval", prompt="deploy?")
    return "deployed " + json.dumps(ctx.answer.data or {})


async def quick(ctx: ToolContext) -> Any:
    """Needs an approval that expires 1 s after it is asked."""
    if ctx.answer is None:
        return pending(kind="approval", prompt="restart?", timeout_ms=1_000)
    return "restarted"


async def slow(ctx: ToolContext) -> Any:
    """Needs an approval nobody answers: the agent's policy escalates it."""
    if ctx.answer is None:
        return pending(kind="approval", prompt="delete?")
    return "deleted " + json.dumps(ctx.answer.data or {})


async def stamp(ctx: ToolContext) -> str:
    """The tool's version (``TNX_YEAR_TOOL`` of the worker, ``v1`` by default)."""
    return "stamp " + os.environ.get("TNX_YEAR_TOOL", "v1")


async def approve(req: Request) -> Answer:
    """The escalation's interpreter: approves on the parent's behalf."""
    return Answer(id=req.id, ok=True, data={"via": "escalation"})


NO_ARGS: dict[str, Any] = {"type": "object", "properties": {}}

REGISTRY = Registry(
    [
        AgentDef(
            name="year",
            description="an hourly agent, an hour a second",
            model=AGENT_MODEL,
            tools=["deploy", "quick", "slow", "stamp"],
            team=["kid"],
            budget=Budget(max_children=5_000),
            tick=TickSpec(every_ms=1_000, prompt="look at the queue"),
            approval=ApprovalPolicy(
                escalate=Escalation(after_ms=ESCALATE_AFTER_MS, interpreter="approve")
            ),
        ),
        AgentDef(name="kid", description="does one job", model=KID_MODEL),
    ],
    tools=[define_tool(f, input_schema=NO_ARGS) for f in (deploy, quick, slow, stamp)],
    interpreters={"approve": approve},
)
"""The year soak's agents, for ``tnx-worker --registry tests.yearly:REGISTRY``."""

TOOL_OF_MARK = {
    "[approve:answer]": "deploy",
    "[approve:expire]": "quick",
    "[approve:escalate]": "slow",
    "[stamp]": "stamp",
}
"""A mark in a turn's input -> the tool the scripted model calls for it."""


def is_summarizer(request: dict[str, Any]) -> bool:
    """Whether an LLM request (OpenAI shape) is the context summarizer's."""
    first = request["messages"][0]
    return bool(first["role"] == "system" and first.get("content") == SUMMARIZER_INSTRUCTIONS)


@dataclass
class Call:
    """One request the provider answered (or held).

    Attributes:
        kind: ``turn`` (an agent call whose last message is the turn's input), ``tool`` (an
            agent call after a tool result), ``summarize`` or ``kid``.
        size: the request body's bytes as JSON.
        text: the turn's input (``turn``) or the tool result (``tool``); empty otherwise.
    """

    kind: str
    size: int
    text: str = ""


@dataclass
class YearLLM(ScriptedLLM):
    """A scripted provider answering any request of the year soak, keeping only what the
    soak checks (not every request: they reach 400 KB each): the calls in order
    (:attr:`log`, of :class:`Call`), and a hold for the worker kill.

    A turn's input holding ``[hold]`` is held (the first time only) until :attr:`release` is
    set; :attr:`held` is set while it waits. A mark of :data:`TOOL_OF_MARK` makes the model
    call that tool, and the call after the tool's result replies with text.
    """

    scripts: dict[str, list[Any]] = field(default_factory=dict)
    log: list[Call] = field(default_factory=list)
    held: threading.Event = field(default_factory=threading.Event)
    release: threading.Event = field(default_factory=threading.Event)
    _held_once: bool = False

    def count(self, kind: str) -> int:
        """How many calls of ``kind`` came in."""
        return sum(1 for c in self.log if c.kind == kind)

    def turn_inputs(self) -> list[str]:
        """The input of every ``turn`` call, in order."""
        return [c.text for c in self.log if c.kind == "turn"]

    def respond(self, path: str, body: dict[str, Any]) -> httpx.Response:
        """Answer one request (the HTTP server's threads call this)."""
        style = style_of(path)
        if not style:
            return httpx.Response(404, json={"error": f"no route {path}"})
        size = len(json.dumps(body))
        view = openai_view(style, body)
        reply = self._answer(view, size)
        return render(reply, style, stream=bool(body.get("stream")))

    def _answer(self, view: dict[str, Any], size: int) -> dict[str, Any]:
        if is_summarizer(view):
            with self._lock:
                self.log.append(Call("summarize", size))
                n = len(self.log)
            return text(f"summary {n}: " + "s" * 1_000)
        if view.get("model") == KID_MODEL:
            with self._lock:
                self.log.append(Call("kid", size))
            return text("job done")
        last = view["messages"][-1]
        content = last.get("content")
        content = content if isinstance(content, str) else json.dumps(content)
        if last["role"] == "tool":
            with self._lock:
                self.log.append(Call("tool", size, content))
                n = len(self.log)
            return text(f"ack {n} after the tool " + "r" * REPLY_CHARS)
        if "[hold]" in content and not self._held_once:
            self._held_once = True
            self.held.set()
            self.release.wait(120)
        with self._lock:
            self.log.append(Call("turn", size, content))
            n = len(self.log)
        for mark, tool in TOOL_OF_MARK.items():
            if mark in content:
                return tool_calls((tool, {}), prompt_tokens=3, completion_tokens=2)
        return text(f"ack {n} " + "r" * REPLY_CHARS)


BILLABLE = frozenset(
    {
        EventType.EVENT_TYPE_WORKFLOW_EXECUTION_UPDATE_ACCEPTED,
        EventType.EVENT_TYPE_ACTIVITY_TASK_SCHEDULED,
        EventType.EVENT_TYPE_TIMER_STARTED,
        EventType.EVENT_TYPE_WORKFLOW_EXECUTION_SIGNALED,
        EventType.EVENT_TYPE_SIGNAL_EXTERNAL_WORKFLOW_EXECUTION_INITIATED,
        EventType.EVENT_TYPE_START_CHILD_WORKFLOW_EXECUTION_INITIATED,
        EventType.EVENT_TYPE_WORKFLOW_EXECUTION_CONTINUED_AS_NEW,
        EventType.EVENT_TYPE_UPSERT_WORKFLOW_SEARCH_ATTRIBUTES,
    }
)
"""The event types counted as billable actions (updates accepted, activities scheduled,
timers started, signals received and sent, children started, continue-as-new, search
attribute upserts)."""


@dataclass
class RunFigures:
    """One run's history: events, billable actions, bytes, and whether it has ended.

    Attributes:
        kinds: events by type name (``EVENT_TYPE_`` left off).
    """

    run_id: str
    events: int
    actions: int
    size: int
    closed: bool
    kinds: Counter[str]


class RunLedger:
    """The runs of one workflow, read from their histories: an ended run (continued as new)
    is read once and kept; the current run is read again at each :meth:`refresh`."""

    def __init__(self, client: Client, workflow_id: str) -> None:
        self.client = client
        self.workflow_id = workflow_id
        self.ended: list[RunFigures] = []
        self._ids: set[str] = set()

    async def refresh(self) -> list[RunFigures]:
        """Every run's figures, oldest first (the runs since the last refresh are read by
        walking back from the current one along ``continued_execution_run_id``)."""
        found: list[RunFigures] = []
        desc = await self.client.get_workflow_handle(self.workflow_id).describe()
        run_id: str | None = desc.run_id
        while run_id and run_id not in self._ids:
            figures, previous = await self._read(run_id)
            found.append(figures)
            run_id = previous or None
        found.reverse()
        current = []
        for figures in found:
            if figures.closed:
                self.ended.append(figures)
                self._ids.add(figures.run_id)
            else:
                current.append(figures)
        return self.ended + current

    async def _read(self, run_id: str) -> tuple[RunFigures, str]:
        events = actions = size = 0
        kinds: Counter[str] = Counter()
        previous = ""
        closed = False
        handle = self.client.get_workflow_handle(self.workflow_id, run_id=run_id)
        async for event in handle.fetch_history_events():
            events += 1
            size += event.ByteSize()
            kinds[EventType.Name(event.event_type).removeprefix("EVENT_TYPE_")] += 1
            if event.event_type in BILLABLE:
                actions += 1
            if event.HasField("workflow_execution_started_event_attributes"):
                started = event.workflow_execution_started_event_attributes
                previous = started.continued_execution_run_id
            if event.event_type == EventType.EVENT_TYPE_WORKFLOW_EXECUTION_CONTINUED_AS_NEW:
                closed = True
        return RunFigures(run_id, events, actions, size, closed, kinds), previous
