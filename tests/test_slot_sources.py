"""``max_concurrent`` under wakes from three sources at once: a second ``AgentRuntime``, the
``tnx`` CLI and ``temporal workflow signal``.

Three scenarios, each run once per module (a module-scoped fixture) and then checked by the
tests below (``fifty`` and ``rounds`` are ``stress``; the inner loop runs ``small``, ``rounds``
with 6 children and 2 rounds):

* ``fifty``: a spawned parent with ``max_concurrent`` 3 and 50 children, each woken once, all
  50 wakes fired together (17/17/16 over the three sources; the CLI and temporal processes
  start concurrently);
* ``rounds``: the root with ``max_concurrent`` 2 and 12 children, woken 5 times over, 12
  concurrent wakes per round (4 runtime, 6 temporal, 2 tnx), each child's source rotating; no
  pause between rounds, so each round races the previous round's settle reports to the
  parent.

Each LLM reply is slow (and the first ones of a round wait until the wakes that must contend
were sent: a ``tnx`` process takes seconds to start), so turns overlap and wakes from every
source really queue. Everything asserted is measured; the peak concurrency twice,
independently:

* from the children's trace lines (``idle→running`` … ``running→idle`` intervals in workflow
  time), and from the LLM requests in flight inside the mock transport: never above the
  limit, and reaching it (so the check can fail);
* every wake produced exactly one turn (one ``idle→running`` line, ``result_seq`` one more,
  its own prompt sent to the LLM once): no wake lost, none run twice;
* FIFO: the parent's ``DEQUEUED wake`` lines hand slots over in the order of its
  ``wake QUEUED`` lines and no queued child starts before its slot was handed over. (FIFO is
  the order slots are handed over: two children handed a slot in the same parent workflow task
  run at the same time, and which of them starts its workflow task first is up to the worker;
  a grant is a durable signal, so neither can lose its turn.)

Only the substrings ``wake QUEUED``, ``DEQUEUED wake``, ``idle→running`` and ``running→idle``
of the trace wording are relied on; the child a line is about is the child id named nearest
to that substring.
"""

from __future__ import annotations

import asyncio
import json
import os
import re
import sys
import uuid
from collections.abc import AsyncIterator, Awaitable, Callable, Sequence
from dataclasses import dataclass, field
from pathlib import Path
from typing import Any

import httpx
import pytest
from temporalio.testing import WorkflowEnvironment

from tests.conftest import MODEL, temporal_binary
from tests.helpers import eventually
from toolnexus_temporal.activities import LlmConfig, SqliteConversationStore
from toolnexus_temporal.client import AgentDef, AgentRuntime, Budget, Handle, TaskResult
from toolnexus_temporal.client.testing import text
from toolnexus_temporal.worker import create_worker
from toolnexus_temporal.workflows.agent import AgentWorkflow
from toolnexus_temporal.workflows.contract.messages import WaitRequest, WaitResponse
from toolnexus_temporal.workflows.contract.models import TraceLine

TNX = Path(sys.executable).parent / "tnx"
REG = {"boss": AgentDef(name="boss"), "w": AgentDef(name="w")}

QUEUED = "wake QUEUED"
DEQUEUED = "DEQUEUED wake"
STARTED = "idle→running"
SETTLED = "running→idle"


# ---------------------------------------------------------------- the slow, counting LLM


@dataclass
class SlowLLM:
    """An LLM transport whose replies wait for ``gate`` and then take ``delay`` s more; it
    counts the requests in flight (``peak``: the most at once since :meth:`reset`) and records
    each request's prompt (the last user message). The reply echoes the prompt.

    The gate holds the first turns of a round until the wakes that must contend have been
    sent, so they really find every slot taken (a ``tnx`` process takes seconds to start)."""

    delay: float
    gate: asyncio.Event = field(default_factory=asyncio.Event)
    in_flight: int = 0
    peak: int = 0
    prompts: list[str] = field(default_factory=list)

    def reset(self) -> None:
        self.gate.clear()
        self.peak = self.in_flight
        self.prompts = []

    async def handle(self, request: httpx.Request) -> httpx.Response:
        body = json.loads(request.content)
        users = [m for m in body["messages"] if m["role"] == "user"]
        prompt = users[-1]["content"] if users else ""
        if isinstance(prompt, list):
            prompt = " ".join(part.get("text", "") for part in prompt)
        self.prompts.append(prompt)
        self.in_flight += 1
        self.peak = max(self.peak, self.in_flight)
        try:
            await self.gate.wait()
            await asyncio.sleep(self.delay)
        finally:
            self.in_flight -= 1
        return httpx.Response(200, json=text(f"echo {prompt}"))

    def transport(self) -> httpx.MockTransport:
        return httpx.MockTransport(self.handle)


# ---------------------------------------------------------------- the three wake sources


SOURCES = ("runtime", "tnx", "temporal")


class Sources:
    """Wakes a handle from one of three sources, none sharing state with the runtime that
    spawned it: a second ``AgentRuntime`` (built fresh, given handle ids only), ``tnx wake``
    and ``temporal workflow signal ... --name wake``, both as subprocesses with explicit
    address, namespace, task queue and scope flags (and no TEMPORAL_/TNX_ environment)."""

    def __init__(self, env: WorkflowEnvironment, rt2: AgentRuntime) -> None:
        self.rt2 = rt2
        self.address = env.client.service_client.config.target_host
        self.namespace = env.client.namespace
        base = {k: v for k, v in os.environ.items() if not k.startswith(("TEMPORAL_", "TNX_"))}
        self.environ = {**base, "COLUMNS": "200"}

    async def wake(self, source: str, hid: str, prompt: str) -> None:
        if source == "runtime":
            await self.rt2.wake(hid, prompt)
        elif source == "tnx":
            await self._run(
                str(TNX),
                "wake",
                hid,
                prompt,
                "--address",
                self.address,
                "--namespace",
                self.namespace,
                "--task-queue",
                self.rt2.task_queue,
                "--scope",
                self.rt2.scope or "",
            )
        elif source == "temporal":
            await self._run(
                temporal_binary(),
                "workflow",
                "signal",
                "--address",
                self.address,
                "--namespace",
                self.namespace,
                "--workflow-id",
                self.rt2.workflow_id(hid),
                "--name",
                "wake",
                "--input",
                json.dumps(prompt),
            )
        else:
            raise ValueError(source)

    async def _run(self, *argv: str) -> None:
        proc = await asyncio.create_subprocess_exec(
            *argv,
            env=self.environ,
            stdout=asyncio.subprocess.PIPE,
            stderr=asyncio.subprocess.PIPE,
        )
        out, err = await asyncio.wait_for(proc.communicate(), 120)
        detail = f"{' '.join(argv)} -> {proc.returncode}\n{out.decode()}\n{err.decode()}"
        assert proc.returncode == 0, detail
        assert "Traceback" not in err.decode(), detail


# ---------------------------------------------------------------- reading traces


async def own_trace(rt: AgentRuntime, hid: str) -> list[TraceLine]:
    """One handle's own trace lines (the ``trace`` query on its workflow), in seq order."""
    wf = rt.client.get_workflow_handle_for(AgentWorkflow.run, rt.workflow_id(hid))
    lines = await wf.query(AgentWorkflow.trace)
    return sorted(lines, key=lambda line: line.seq)


def named_child(line: str, marker: str, children: Sequence[str]) -> str:
    """The child id named nearest to ``marker`` in ``line`` (ids match whole tokens only, so
    ``w.1`` never matches inside ``w.12``)."""
    at = line.index(marker)
    best: tuple[int, str] | None = None
    for token in re.finditer(r"[^\s:(),]+", line):
        if token.group() not in children:
            continue
        if token.end() <= at:
            distance = at - token.end()
        else:
            distance = token.start() - (at + len(marker))
        if best is None or distance < best[0]:
            best = (distance, token.group())
    assert best is not None, f"no child named in {line!r}"
    return best[1]


@dataclass
class Turn:
    """One turn of a child, from its trace: ``idle→running`` to ``running→idle``."""

    child: str
    start: int
    end: int


def turns_of(child: str, lines: list[TraceLine]) -> list[Turn]:
    """A child's turns in order; every ``idle→running`` must be followed by its
    ``running→idle`` before the next one starts."""
    turns: list[Turn] = []
    start: int | None = None
    for line in lines:
        if STARTED in line.line:
            assert start is None, f"{child}: started twice without settling: {lines}"
            start = line.at_ms
        elif SETTLED in line.line:
            assert start is not None, f"{child}: settled without starting: {lines}"
            turns.append(Turn(child, start, line.at_ms))
            start = None
    assert start is None, f"{child}: still running: {lines}"
    return turns


def peak_overlap(turns: Sequence[Turn]) -> int:
    """The most turns running at once. Intervals are half-open: a turn that settles in the
    same ms another starts does not overlap it (a slot handed over is causally later: the
    settle, the parent's hand-over and the next start are three workflow tasks)."""
    events = sorted([(t.start, 1) for t in turns] + [(t.end, -1) for t in turns])
    running = peak = 0
    for _at, delta in events:
        running += delta
        peak = max(peak, running)
    return peak


@dataclass
class SlotLog:
    """The parent's slot lines of one round: children in the order their wakes were queued
    and in the order their slots were handed over, with the workflow time of each line."""

    queued: list[str] = field(default_factory=list)
    dequeued: list[str] = field(default_factory=list)
    queued_at: dict[str, int] = field(default_factory=dict)
    dequeued_at: dict[str, int] = field(default_factory=dict)


def slot_log(lines: list[TraceLine], children: Sequence[str]) -> SlotLog:
    log = SlotLog()
    for line in lines:
        if DEQUEUED in line.line:
            child = named_child(line.line, DEQUEUED, children)
            log.dequeued.append(child)
            log.dequeued_at[child] = line.at_ms
        elif QUEUED in line.line:
            child = named_child(line.line, QUEUED, children)
            log.queued.append(child)
            log.queued_at[child] = line.at_ms
    return log


# ---------------------------------------------------------------- running a scenario


@dataclass
class Round:
    """What one round of wakes (every child woken once) left behind."""

    number: int
    limit: int
    release: str
    children: list[str]
    sources: dict[str, str]
    prompts: dict[str, str]
    results: dict[str, TaskResult]
    result_seqs: dict[str, int]
    turns: dict[str, list[Turn]]
    """Every turn of each child so far (the last one is this round's)."""
    log: SlotLog
    llm_peak: int
    llm_prompts: list[str]

    def this_round(self) -> dict[str, Turn]:
        return {child: turns[-1] for child, turns in self.turns.items()}


@dataclass
class Scenario:
    rt: AgentRuntime
    parent: str
    rounds: list[Round]


async def wait_beyond(rt: AgentRuntime, hid: str, seq: int) -> tuple[TaskResult, int]:
    """The handle's first result beyond ``seq`` (the ``wait`` update with ``after_seq``) and
    its ``result_seq``: a wake sent by another process may not have reached the handle yet,
    so a plain ``rt.wait`` could return the previous result of a settled handle."""
    wf = rt.client.get_workflow_handle_for(AgentWorkflow.run, rt.workflow_id(hid))
    wait: Any = AgentWorkflow.wait  # temporalio's overloads mistype this async handler
    resp: WaitResponse = await wf.execute_update(wait, WaitRequest(after_seq=seq))
    return resp.result, resp.status.result_seq


async def first_result(rt: AgentRuntime, hid: str) -> tuple[TaskResult, int]:
    """``rt.wait`` of a handle that has no result yet: its first one (this runtime never
    woke it, so this is the ``wait`` update for the next result)."""
    result = await rt.wait(hid)
    return result, (await rt.inspect(hid)).result_seq


async def wake_round(
    rt: AgentRuntime,
    sources: Sources,
    llm: SlowLLM,
    parent: str,
    children: list[str],
    number: int,
    limit: int,
    release: str,
    mix: Sequence[str],
) -> Round:
    """Wake every child once, all at once, each from its source for this round; wait for
    every child's next result; read the traces. The LLM's gate opens when every wake was sent
    (``release`` ``all``) or when the first ``tnx`` wake returned (``first_tnx``: the other
    ``tnx`` wakes then land while slots are being handed over). Child ``i`` is woken from
    ``mix[(i + number) % len(mix)]``, so sources rotate between rounds."""
    plan = {hid: mix[(i + number) % len(mix)] for i, hid in enumerate(children)}
    prompts = {hid: f"round {number} {hid} via {plan[hid]}" for hid in children}
    parent_seq = max((line.seq for line in await own_trace(rt, parent)), default=0)
    llm.reset()

    async def wake(hid: str) -> None:
        await sources.wake(plan[hid], hid, prompts[hid])
        if release == "first_tnx" and plan[hid] == "tnx":
            llm.gate.set()

    try:
        await asyncio.wait_for(asyncio.gather(*(wake(h) for h in children)), 150)
    finally:
        llm.gate.set()
    if number == 1:
        outs = await asyncio.wait_for(asyncio.gather(*(first_result(rt, h) for h in children)), 90)
    else:
        outs = await asyncio.wait_for(
            asyncio.gather(*(wait_beyond(rt, h, number - 1) for h in children)), 90
        )
    traces = await asyncio.gather(*(own_trace(rt, h) for h in children))
    parent_lines = [line for line in await own_trace(rt, parent) if line.seq > parent_seq]
    return Round(
        number=number,
        limit=limit,
        release=release,
        children=children,
        sources=plan,
        prompts=prompts,
        results={h: out[0] for h, out in zip(children, outs, strict=True)},
        result_seqs={h: out[1] for h, out in zip(children, outs, strict=True)},
        turns={h: turns_of(h, lines) for h, lines in zip(children, traces, strict=True)},
        log=slot_log(parent_lines, children),
        llm_peak=llm.peak,
        llm_prompts=list(llm.prompts),
    )


@dataclass(frozen=True)
class Plan:
    where: str
    """``root``: the root is the parent; ``spawned``: a handle spawned under the root."""
    limit: int
    children: int
    rounds: int
    llm_delay: float
    release: str
    """When the LLM's gate opens in a round (see :func:`wake_round`)."""
    mix: tuple[str, ...]
    """The sources, cycled over the children."""


PLANS = {
    # 50 wakes: 17 tnx, 17 temporal, 16 runtime
    "fifty": Plan(
        where="spawned",
        limit=3,
        children=50,
        rounds=1,
        llm_delay=0.3,
        release="all",
        mix=SOURCES,
    ),
    # 12 wakes a round: 4 runtime, 6 temporal, 2 tnx (a tnx process costs ~1 s of CPU to
    # start; it wakes through the same client code as the second runtime)
    "rounds": Plan(
        where="root",
        limit=2,
        children=12,
        rounds=5,
        llm_delay=0.25,
        release="first_tnx",
        mix=("runtime", "temporal", "runtime", "temporal", "tnx", "temporal"),
    ),
    # the inner loop's: ``rounds`` at half the children and two rounds (one tnx and three
    # temporal processes a round)
    "small": Plan(
        where="root",
        limit=2,
        children=6,
        rounds=2,
        llm_delay=0.25,
        release="first_tnx",
        mix=("runtime", "temporal", "runtime", "temporal", "tnx", "temporal"),
    ),
}
STRESS_PLANS = {"fifty", "rounds"}


@pytest.fixture(
    scope="module",
    params=[
        pytest.param(name, marks=[pytest.mark.stress] if name in STRESS_PLANS else [])
        for name in PLANS
    ],
)
async def scenario(
    request: pytest.FixtureRequest,
    env: WorkflowEnvironment,
    tmp_path_factory: pytest.TempPathFactory,
) -> AsyncIterator[Scenario]:
    """Runs one plan once on its own worker, task queue and scope (as ``make_runtime`` does)
    and yields what it left behind, with the runtime still up."""
    plan = PLANS[request.param]
    llm = SlowLLM(delay=plan.llm_delay)
    client = env.client
    scope = f"t-{uuid.uuid4().hex[:10]}"
    task_queue = f"tq-{scope}"
    store = SqliteConversationStore(tmp_path_factory.mktemp(scope) / "conversations.sqlite")
    root_budget = Budget(max_concurrent=plan.limit) if plan.where == "root" else Budget()
    async with (
        create_worker(
            client,
            registry=REG,
            llm=LlmConfig(base_url="http://mock.local/v1", model=MODEL),
            task_queue=task_queue,
            store=store,
            transport=llm.transport(),
        ) as worker,
        worker,
    ):
        rt = await AgentRuntime(
            client, task_queue=task_queue, scope=scope, budget=root_budget
        ).start()
        if plan.where == "root":
            parent = rt.root.id
        else:
            boss = await rt.spawn(rt.root, "boss", Budget(max_concurrent=plan.limit))
            assert isinstance(boss, Handle), boss
            parent = boss.id
        spawned = await asyncio.wait_for(
            asyncio.gather(*(rt.spawn(parent, "w") for _ in range(plan.children))), 90
        )
        children = [h.id for h in spawned if isinstance(h, Handle)]
        assert len(set(children)) == plan.children, spawned
        # A second runtime: a new object over the same client, task queue and scope, given
        # nothing of the first but handle ids.
        rt2 = await AgentRuntime(client, task_queue=task_queue, scope=scope).start()
        sources = Sources(env, rt2)
        rounds = [
            await wake_round(
                rt, sources, llm, parent, children, number, plan.limit, plan.release, plan.mix
            )
            for number in range(1, plan.rounds + 1)
        ]
        yield Scenario(rt=rt, parent=parent, rounds=rounds)


def slots_drained(rt: AgentRuntime, parent: str) -> Callable[[], Awaitable[bool]]:
    async def check() -> bool:
        wf = rt.client.get_workflow_handle_for(AgentWorkflow.run, rt.workflow_id(parent))
        st = await wf.query(AgentWorkflow.state)
        limit = st.budget.max_concurrent or 0
        # Nothing waits, and the leases left (kept by the last holders until a sibling needs
        # them) are within the limit.
        return not st.leases.wake_queue and len(st.leases.held) <= limit

    return check


# ---------------------------------------------------------------- the tests


async def test_never_more_than_max_concurrent_and_the_limit_is_reached(
    scenario: Scenario,
) -> None:
    """Peak children running at once, from the trace intervals and, independently, from the
    LLM requests in flight: exactly the limit in every round (never above; reaching it shows
    the measurement can see a breach)."""
    measured = [
        (r.number, peak_overlap(list(r.this_round().values())), r.llm_peak) for r in scenario.rounds
    ]
    limit = scenario.rounds[0].limit
    assert measured == [(r.number, limit, limit) for r in scenario.rounds], measured


async def test_every_wake_runs_exactly_one_turn(scenario: Scenario) -> None:
    """No wake lost, none run twice, from any source: each child has one more result and one
    more ``idle→running`` per round, its result echoes that round's prompt, and the LLM saw
    every round's prompt exactly once."""
    for r in scenario.rounds:
        assert set(r.sources.values()) == set(SOURCES), r.sources  # every source is used
        for hid in r.children:
            result = r.results[hid]
            assert (result.status, result.text) == ("done", f"echo {r.prompts[hid]}"), (
                r.number,
                hid,
                r.sources[hid],
                result,
            )
            assert r.result_seqs[hid] == r.number, (r.number, hid, r.sources[hid])
            assert len(r.turns[hid]) == r.number, (r.number, hid, r.sources[hid], r.turns[hid])
        assert sorted(r.llm_prompts) == sorted(r.prompts.values()), (r.number, r.llm_prompts)
    views = await asyncio.gather(*(scenario.rt.inspect(h) for h in scenario.rounds[0].children))
    n = len(scenario.rounds)
    assert [(v.state, v.result_seq) for v in views] == [("idle", n)] * len(views)


async def test_the_parent_hands_slots_over_in_fifo_order(scenario: Scenario) -> None:
    """Wakes over the limit queue (``wake QUEUED``), each at most once per round, and every
    queued wake gets a slot (``DEQUEUED wake``) in queue order; a queued child starts only
    after its slot was handed over. The queue drains at the end."""
    for r in scenario.rounds:
        log, here = r.log, r.this_round()
        assert log.queued, f"round {r.number}: no wake queued, the queue was not exercised"
        assert len(set(log.queued)) == len(log.queued), (r.number, log.queued)
        if r.release == "all":  # no slot frees before every wake was sent: all but `limit`
            # wait, at least. (More may: a wake that finds every slot leased to idle siblings
            # waits in the queue too, for the leases the parent then recalls.)
            assert len(log.queued) >= len(r.children) - r.limit, (r.number, log.queued)
        queued_from = {r.sources[child] for child in log.queued}
        assert queued_from == set(SOURCES), (r.number, queued_from)  # every source contends
        assert log.dequeued == log.queued, (r.number, log)
        for child in log.queued:
            assert here[child].start >= log.dequeued_at[child] >= log.queued_at[child], (
                r.number,
                child,
                here[child],
                log,
            )
    await eventually(slots_drained(scenario.rt, scenario.parent))
