"""The tour of ``tnx demo`` (:mod:`~toolnexus_temporal.cli.demo`): its agents, its one tool,
and its steps, each printed small and followed by one line saying what it showed.

1. delegation: the coordinator calls ``task`` twice in one reply (the researcher, the deployer);
2. the tree: the coordinator and its children, with their states;
3. the approval: the deployer's ``deploy`` tool parks on a Request; the exact ``tnx pending``,
   ``tnx answer`` (``--approve``, ``--edit``) and ``temporal workflow signal`` lines; the demo
   answers it itself with an edit (:data:`EDIT_ENVIRONMENT`: the deploy goes to staging), and
   the tool runs with the edited arguments;
4. the trace of the coordinator's subtree, and the audit of its answers, the edit with them
   (:func:`_show_answer_record`);
5. usage, budgets and cost per agent;
6. a ticking monitor (``AgentDef.tick``), unscheduled once it has ticked twice;
7. a background child (``rt.spawn(..., notify=True)``) whose report wakes the coordinator;
8. the web UI links: each agent's page and the approval queue;

then it closes every agent it started (:func:`close_tour`).

Every wait is bounded (:data:`TURN_WAIT_MS`, :data:`POLL_WAIT_S`): a real model that does not
follow the script makes a step say what happened instead, and the tour goes on.
"""

from __future__ import annotations

import asyncio
import json
import time
from collections.abc import Awaitable, Callable
from dataclasses import dataclass, field
from typing import Final

from rich.console import Console
from rich.markup import escape

from toolnexus_temporal.activities.tools import ToolContext, define_tool, pending
from toolnexus_temporal.cli.demo_setup import (
    COORDINATOR_ROLE,
    DEPLOYER_ROLE,
    MONITOR_ROLE,
    REPORTER_ROLE,
    RESEARCHER_ROLE,
    TOUR_SERVICE,
    DemoError,
)
from toolnexus_temporal.cli.render import clock, scoped_ids
from toolnexus_temporal.client.errors import SpawnError
from toolnexus_temporal.client.handle import Handle
from toolnexus_temporal.client.runtime import AgentRuntime
from toolnexus_temporal.workflows.contract.models import (
    AgentDef,
    Answer,
    Budget,
    Request,
    TaskResult,
    TickSpec,
    ToolResult,
)
from toolnexus_temporal.workflows.visibility.operator import answer_json, shell_quote

COORDINATOR: Final = "coordinator"
"""The tour's top agent: it delegates to the researcher and the deployer."""

MONITOR: Final = "monitor"
"""The tour's ticking agent."""

REPORTER: Final = "reporter"
"""The tour's background child of the coordinator."""

TICK_EVERY_MS: Final = 1_000
"""The monitor's tick interval."""

TURN_WAIT_MS: Final = 120_000
"""The longest the tour waits for one turn (a real model may be slow); then it says so."""

POLL_WAIT_S: Final = 30.0
"""The longest the tour waits for ticks, or for a background report to be read."""

BRIEF_CHARS: Final = 200
"""The most of a model's text one line of the tour shows."""

EDIT_ENVIRONMENT: Final = "staging"
"""Where the tour's reviewer sends the deploy instead of production: the demo approves the
deploy with edited arguments (``Answer.edited_args``), the service as asked, this
``environment`` added."""


def _brief(text: str | None) -> str:
    """A model's text on one line, cut to :data:`BRIEF_CHARS` (a real model may ramble)."""
    flat = " ".join((text or "(empty)").split())
    return flat if len(flat) <= BRIEF_CHARS else flat[: BRIEF_CHARS - 1] + "…"


def deploy(service: str, ctx: ToolContext, environment: str = "production") -> ToolResult | str:
    """Deploy a service to an environment, production unless told (needs an approval)."""
    if ctx.answer is None:
        return pending(
            kind="approval",
            prompt=f"deploy {service} to {environment}?",
            data={"service": service, "environment": environment},
        )
    if not ctx.answer.ok:
        return f"deploy of {service} declined"
    return f"deployed {service} to {environment}"


TOUR_TOOLS: Final = [define_tool(deploy)]
"""The tour's tools: ``deploy``."""

TOUR_AGENTS: Final = [
    AgentDef(
        name=COORDINATOR,
        description="Coordinates a release: delegates research and the deploy.",
        system_prompt=(
            f"{COORDINATOR_ROLE} For each request, call the task tool twice in one reply: "
            "agent researcher to find what changed, agent deployer to deploy. Then sum up "
            "their results in one sentence."
        ),
        team=["researcher", "deployer", REPORTER],
        budget=Budget(max_turns=8, max_tokens=40_000, max_tool_calls=8, max_children=6),
    ),
    AgentDef(
        name="researcher",
        description="Finds what changed in a service's latest release.",
        system_prompt=f"{RESEARCHER_ROLE} Answer in one sentence.",
        budget=Budget(max_turns=2, max_tokens=8_000),
    ),
    AgentDef(
        name="deployer",
        description="Deploys a service with the deploy tool (it needs an approval).",
        system_prompt=(
            f"{DEPLOYER_ROLE} Call the deploy tool with the service to deploy, then report "
            "its result in one sentence."
        ),
        tools=["deploy"],
        budget=Budget(max_turns=3, max_tokens=8_000, max_tool_calls=2),
    ),
    AgentDef(
        name=MONITOR,
        description="Looks at the deploy queue on every tick.",
        system_prompt=f"{MONITOR_ROLE} Say in a few words what the deploy queue holds.",
        tick=TickSpec(every_ms=TICK_EVERY_MS, prompt="look at the deploy queue"),
        budget=Budget(max_turns=20, max_tokens=20_000),
    ),
    AgentDef(
        name=REPORTER,
        description="Writes a one-line release note.",
        system_prompt=f"{REPORTER_ROLE} Write a one-line release note.",
        budget=Budget(max_turns=2, max_tokens=4_000),
    ),
]
"""The tour's agents."""


@dataclass
class Tour:
    """What the tour's steps share; :attr:`ids` collects every handle it started.

    Args:
        rt: the demo's runtime.
        console: where to print.
        flag: the ``--address`` flag the printed commands need ("" for the default).
        workflow_url: a workflow id's web UI link.
        queue_url: the web UI link of the demo's approval queue.
    """

    rt: AgentRuntime
    console: Console
    flag: str
    workflow_url: Callable[[str], str]
    queue_url: str
    ids: list[str] = field(default_factory=list)
    step: int = 0

    def head(self, title: str) -> None:
        """Print a step's heading."""
        self.step += 1
        self.console.print(f"\n[bold cyan]{self.step}. {escape(title)}[/bold cyan]")

    def line(self, text: str) -> None:
        """Print one line of a step, escaped."""
        self.console.print(f"  {escape(text)}")

    def showed(self, text: str) -> None:
        """Print what a step showed."""
        self.console.print(f"  [green]→ {escape(text)}[/green]")

    def wid(self, handle_id: str) -> str:
        """The workflow id of a handle id."""
        return self.rt.workflow_id(handle_id)


async def run_tour(tour: Tour, prompt: str) -> tuple[TaskResult, str]:
    """Run every step; returns the coordinator's last result and its workflow id.

    Raises:
        DemoError: the coordinator could not be spawned.
    """
    coord, result = await _delegate(tour, prompt)
    await _show_tree(tour, coord)
    if result.status == "pending" and result.pending is not None:
        result = await _approve(tour, coord, result.pending)
    else:
        tour.head("the approval")
        tour.showed(
            f"nothing to answer: the coordinator's turn ended {result.status} without parking "
            "on a Request (a real model need not follow the script)"
        )
    await _show_trace(tour, coord)
    await _show_usage(tour, coord)
    await _tick(tour)
    result = await _background(tour, coord, result)
    await _show_links(tour)
    await close_tour(tour)
    return result, tour.wid(coord.id)


async def close_tour(tour: Tour) -> None:
    """Close every agent the tour started (:attr:`Tour.ids`, their subtrees with them): an
    example closes what it starts (the demo left three agents running per run). Closed, each
    stays readable: its web UI page, ``temporal workflow describe``, ``tnx inspect`` with a
    worker. The runtime's root stays: the next run attaches to it (its pools, its spawn
    counters)."""
    for hid in tour.ids:
        await tour.rt.close(hid, reason="the demo's tour is done")
    tour.console.print(
        "\n[bold]closed[/bold] what the tour started: "
        + ", ".join(escape(tour.wid(hid)) for hid in tour.ids)
        + " (and their children); closed agents stay readable at their links "
        f"({escape(tour.rt.workflow_id('root'))}, the runtime's root, stays for the next run)"
    )


async def _delegate(tour: Tour, prompt: str) -> tuple[Handle, TaskResult]:
    rt = tour.rt
    tour.head("delegation: the coordinator hands work to two workers through `task`")
    spawned = await rt.spawn(rt.root, COORDINATOR)
    if isinstance(spawned, SpawnError):
        raise DemoError(str(spawned))
    coord = spawned
    tour.ids.append(coord.id)
    tour.console.print(f"  [bold]spawned[/bold] {escape(tour.wid(coord.id))} (state {coord.state})")
    await rt.wake(coord, prompt)
    tour.line(f"wake {prompt!r} → state {coord.state}; waiting for its turn ...")
    result = await rt.wait(coord, timeout_ms=TURN_WAIT_MS)
    tour.line(f"wait → status {result.status}: {_brief(result.text)}")
    await rt.inspect(coord)
    tasks = len(coord.children)
    tour.showed(
        f"one model reply started {tasks} child agent(s), each a workflow of its own; "
        + (
            "the coordinator waits on them, parked with the child that needs an approval"
            if result.status == "pending"
            else f"the turn ended {result.status}"
        )
    )
    return coord, result


async def _show_tree(tour: Tour, coord: Handle) -> None:
    tour.head("the tree")
    tree = await tour.rt.list(coord)
    for h in tree:
        indent = "  " * (h.depth - coord.depth)
        tour.line(f"{indent}{tour.wid(h.id)}  {h.state}")
    parked = [tour.wid(h.id) for h in tree if h.state == "suspended"]
    if len(tree) == 1:
        tour.showed("the model started no child (a real model need not follow the script)")
        return
    tour.showed(
        "a child whose task is done is closed (it reported its result); "
        + (
            f"{' and '.join(parked)} wait on the same Request, each suspended"
            if parked
            else "nothing is suspended"
        )
    )


def _edit(req: Request) -> dict[str, object]:
    """The reviewer's edit of the deploy call: the service it asked for (its Request's data),
    deployed to :data:`EDIT_ENVIRONMENT`; it replaces the call's arguments whole."""
    asked = (req.data or {}).get("service")
    service = asked if isinstance(asked, str) and asked else TOUR_SERVICE
    return {"service": service, "environment": EDIT_ENVIRONMENT}


def _answer_lines(tour: Tour, coord: Handle, req: Request, edit: dict[str, object]) -> list[str]:
    """The commands a user would type to see ``req`` and answer it (at the topmost handle):
    approved as asked, or approved with ``edit`` (the tnx line and the signal line)."""
    wid = tour.wid(coord.id)
    scope = f" --scope {tour.rt.scope}" if tour.rt.scope else ""  # pending has no id to name it
    edited = answer_json(req, edited_args=edit, scope=tour.rt.scope)
    return [
        f"tnx pending{scope}{tour.flag}",
        f"tnx answer {wid} --approve{tour.flag}",
        f"tnx answer {wid} --edit {shell_quote(json.dumps(edit))}{tour.flag}",
        f"temporal workflow signal --workflow-id {shell_quote(wid)} --name answer "
        f"--input {shell_quote(edited)}{tour.flag}",
    ]


async def _approve(tour: Tour, coord: Handle, req: Request) -> TaskResult:
    rt = tour.rt
    tour.head("the approval: a tool asked for one, its agent parked")
    tour.line(f"Request {scoped_ids(req.id, tour.wid)}  kind {req.kind}: {_brief(req.prompt)}")
    for h in (coord.id, req.id.rpartition("#")[0]):
        row = await rt.queue_row(h)
        if row is not None:
            tour.line(
                f"approval queue row (search attributes): {tour.wid(row.id)}  AgentRequestId "
                f"{tour.wid(row.request_id or '?')}  AgentRequestKind {row.kind}"
            )
    edit = _edit(req)
    tour.line(
        "a user would list it, then approve it as asked, or approve it with edited arguments "
        "(the last two lines, the same edit):"
    )
    for command in _answer_lines(tour, coord, req, edit):
        tour.line(f"  {command}")
    origin = await rt.resume(Answer(id=req.id, ok=True, edited_args=edit))
    tour.line(
        f"the demo answers it itself with the edit (rt.resume, Answer(ok=True, edited_args="
        f"{json.dumps(edit)})): {tour.wid(origin.id)} → {origin.state}"
    )
    result = await rt.wait(coord, timeout_ms=TURN_WAIT_MS)
    await rt.inspect(origin)
    ran = origin.last_result
    tour.line(
        f"deployer → status {ran.status if ran else '?'}: {_brief(ran.text if ran else None)}"
    )
    tour.line(f"coordinator → status {result.status}: {_brief(result.text)}")
    tour.showed(
        "the edit was checked against deploy's schema, then the parked turn went on where it "
        "stopped (no LLM call repeated): deploy ran once with the edited arguments, the "
        "model read a note naming the edit, and the coordinator got both task results"
    )
    return result


async def _show_trace(tour: Tour, coord: Handle) -> None:
    tour.head("the trace of the coordinator's subtree (and the answer's record)")
    lines = await tour.rt.trace(coord)
    moves = [line for line in lines if "→" in line.line]  # state transitions, answer routes
    tour.line(
        f"{len(lines)} lines; the {len(moves)} transitions and hand-offs among them "
        f"(`tnx trace {tour.wid(coord.id)}` shows all):"
    )
    for line in moves:
        tour.line(f"  {clock(line.at_ms)}  {scoped_ids(line.line, tour.wid)}")
    await _show_answer_record(tour, coord)
    tour.showed("each agent's workflow keeps its own trace; the runtime merges them in order")


async def _show_answer_record(tour: Tour, h: Handle) -> None:
    """The audit step: every answered Request of ``h``'s subtree (``rt.audit(h,
    subtree=True)``, what ``tnx audit ID --subtree`` prints): who answered (the stated ``by``
    and the identity Temporal recorded on the event), when, through which path, the
    decision."""
    records = await tour.rt.audit(h, subtree=True)
    tour.line(f"the audit (tnx audit {tour.rt.workflow_id(h.id)} --subtree):")
    for rec in records:
        verdict = "approved" if rec.ok else f"declined ({rec.reason})"
        if rec.edited_args is not None:
            verdict += " with an edit"
        tour.line(
            f"  {scoped_ids(rec.request_id, tour.wid)}: {verdict} by {rec.by or '?'} via "
            f"{rec.path} at "
            f"{rec.answered_at or '?'} (Temporal identity: {rec.identity or '-'}; "
            f"{'verified' if rec.verified else 'unverified'})"
        )
        if rec.edited_args is not None:
            tour.line(
                f"    the model called {rec.tool or 'the tool'} with {rec.arguments or '?'}; "
                f"it ran with {json.dumps(rec.edited_args)}"
            )
    if not records:
        tour.line("  (no answered Request in this subtree)")


async def _show_usage(tour: Tour, coord: Handle) -> None:
    tour.head("usage, budgets and cost per agent")
    for h in await tour.rt.list(coord):
        budget = h.defn.budget if h.defn is not None else Budget()
        pool = "unlimited" if h.pool_tokens is None else f"{h.pool_tokens} left"
        cap = "" if budget.max_tokens is None else f" of {budget.max_tokens}"
        tour.line(
            f"{tour.wid(h.id)}: {h.usage_total} tokens (its subtree) · {h.turns_total} turn(s) · "
            f"{h.tool_calls_total} tool call(s) · token pool {pool}{cap} · max_turns "
            f"{budget.max_turns} · {h.cost.text()}"
        )
    tour.showed(
        "children's usage rolls up to the coordinator live; each child's pool was carved "
        "from its parent's remainder at spawn"
    )


async def _until(check: Callable[[], Awaitable[bool]], within_s: float) -> bool:
    """Poll ``check`` every 0.3 s until it is true (True) or ``within_s`` passed (False)."""
    deadline = time.monotonic() + within_s
    while True:
        if await check():
            return True
        if time.monotonic() >= deadline:
            return False
        await asyncio.sleep(0.3)


async def _tick(tour: Tour) -> None:
    rt = tour.rt
    tour.head(f"a ticking monitor (AgentDef.tick every {TICK_EVERY_MS // 1000} s)")
    spawned = await rt.spawn(rt.root, MONITOR)
    if isinstance(spawned, SpawnError):
        tour.showed(f"the monitor was not spawned: {spawned.error}")
        return
    monitor = spawned
    tour.ids.append(monitor.id)
    tour.line(f"spawned {tour.wid(monitor.id)}: nobody wakes it, its ticks do")

    async def ticked_twice() -> bool:
        await rt.inspect(monitor)
        return monitor.turns_total >= 2 and monitor.state == "idle"

    ticked = await _until(ticked_twice, POLL_WAIT_S)
    await rt.unschedule(monitor)
    for line in await rt.trace_lines(monitor):
        if "tick" in line:
            tour.line(scoped_ids(line, tour.wid))
    last = monitor.last_result.text if monitor.last_result else "(none)"
    tour.line(f"last result: {_brief(last)}")
    tour.showed(
        (
            f"{monitor.turns_total} turn(s) started by a durable timer in its own workflow"
            if ticked
            else f"only {monitor.turns_total} turn(s) within {POLL_WAIT_S:g} s"
        )
        + "; the demo then unscheduled it (rt.unschedule), so no timer is left due"
    )


async def _background(tour: Tour, coord: Handle, result: TaskResult) -> TaskResult:
    rt = tour.rt
    tour.head("a background child that reports back (rt.spawn(..., notify=True))")
    await rt.inspect(coord)
    before = coord.result_seq
    spawned = await rt.spawn(coord, REPORTER, prompt="write the release note", notify=True)
    if isinstance(spawned, SpawnError):
        tour.showed(f"the reporter was not spawned: {spawned.error}")
        return result
    child = spawned
    tour.line(f"spawned {tour.wid(child.id)} under the coordinator, running on its own")
    report = await rt.wait(child, timeout_ms=TURN_WAIT_MS)
    tour.line(f"reporter → status {report.status}: {_brief(report.text)}")

    async def coordinator_read_it() -> bool:
        await rt.inspect(coord)
        return coord.result_seq > before and coord.state == "idle"

    if await _until(coordinator_read_it, POLL_WAIT_S) and coord.last_result is not None:
        result = coord.last_result
        tour.line(f"coordinator, woken by the report → {result.status}: {_brief(result.text)}")
        tour.showed(
            "the child's result reached the coordinator once, as an inbox item on channel "
            "`child`, and woke it: no one waited on the child"
        )
    else:
        tour.showed(f"the coordinator did not settle a turn within {POLL_WAIT_S:g} s")
    return result


async def _show_links(tour: Tour) -> None:
    tour.head("the web UI")
    for hid in tour.ids:
        for h in await tour.rt.list(hid):
            tour.line(f"{tour.wid(h.id)}: {tour.workflow_url(tour.wid(h.id))}")
    tour.line(f"approval queue (tnx pending --ui): {tour.queue_url}")
    tour.line(
        "  (empty now: the demo answered its one Request above; every Request that waits for "
        "an answer is listed there, with its prompt and since when, until it is answered; to "
        "see one there, leave a Request unanswered: the operator's guide, 'From \"something "
        'waits" to "answered"\': with a worker running, the first three lines of '
        "docs/examples/shell_approval.sh park one, and `tnx pending --ui` prints the link to "
        "its queue: this link lists the demo's scope only)"
    )
    tour.showed(
        "each agent is a workflow with its own page; the approval queue is a search over "
        "the agents' search attributes"
    )
