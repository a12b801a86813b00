"""OpenTelemetry traces (issue 27, item 1; docs/guide/tracing.md): a host's wake of a
delegating agent is one trace (the host's update span, the coordinator's turn, its LLM calls
and its ``task`` child's turn, LLM calls and tool call), with the GenAI attributes and token
counts equal to the handles' usage; a replay (the SDK ``Replayer``) and a cold worker
replaying a running handle's history add no span."""

from __future__ import annotations

import uuid
from collections.abc import AsyncIterator
from contextlib import asynccontextmanager
from typing import Any

import pytest
from opentelemetry.sdk.trace import ReadableSpan, TracerProvider
from opentelemetry.sdk.trace.export import SimpleSpanProcessor
from opentelemetry.sdk.trace.export.in_memory_span_exporter import InMemorySpanExporter
from temporalio.client import Client

from tests.helpers import eventually, spawn
from toolnexus_temporal.activities import LlmConfig, Registry, ToolContext, define_tool, pending
from toolnexus_temporal.client import AgentDef, AgentRuntime, Answer, RuntimeOptions, TickSpec
from toolnexus_temporal.client.cluster import connect
from toolnexus_temporal.client.testing import ScriptedLLM, text, tool_calls
from toolnexus_temporal.observability.otel import TnxTracingInterceptor
from toolnexus_temporal.observability.tracing import tracing_wanted
from toolnexus_temporal.worker import create_worker, replayer
from toolnexus_temporal.workflows.contract.models import HandleView
from toolnexus_temporal.workflows.contract.names import QUERY_VIEW

pytestmark = pytest.mark.otel


def lookup(q: str = "") -> str:
    """returns data(<q>)"""
    return f"data({q})"


def deploy(ctx: ToolContext) -> Any:
    """needs an approval"""
    if ctx.answer is None:
        return pending(kind="approval", prompt="deploy?")
    return "deployed"


REGISTRY = Registry(
    [
        AgentDef(name="coord", description="delegates", model="m-coord", team=["helper"]),
        AgentDef(name="helper", description="looks up", model="m-help", tools=["lookup"]),
        AgentDef(name="deployer", description="deploys", model="m-dep", tools=["deploy"]),
        AgentDef(
            name="lead", description="delegates in the background", model="m-lead", team=["helper"]
        ),
        AgentDef(
            name="ticker",
            description="ticks",
            model="m-tick",
            tick=TickSpec(every_ms=1_000, prompt="look"),
        ),
    ],
    tools=[define_tool(lookup), define_tool(deploy, input_schema={"type": "object"})],
)


class Traced:
    """An in-memory exporter behind the tracing interceptor; a traced client."""

    def __init__(self, client: Client, exporter: InMemorySpanExporter | None = None) -> None:
        self.exporter = exporter or InMemorySpanExporter()
        provider = TracerProvider()
        provider.add_span_processor(SimpleSpanProcessor(self.exporter))
        self.interceptor = TnxTracingInterceptor(provider.get_tracer("test"))
        self.client = Client(**{**client.config(), "interceptors": [self.interceptor]})

    def cold(self, client: Client) -> Traced:
        """Another process's interceptor (none of this one's open spans), same exporter."""
        return Traced(client, self.exporter)

    def spans(self) -> list[ReadableSpan]:
        return list(self.exporter.get_finished_spans())


@asynccontextmanager
async def traced_worker(
    t: Traced, llm: ScriptedLLM, store: Any, task_queue: str, sandboxed: bool = False
) -> AsyncIterator[None]:
    async with (
        create_worker(
            t.client,
            registry=REGISTRY,
            llm=LlmConfig(base_url="http://mock.local/v1", model="stub-model"),
            task_queue=task_queue,
            store=store,
            transport=llm.transport(),
            sandboxed=sandboxed,
        ) as worker,
        worker,
    ):
        yield


@asynccontextmanager
async def traced_runtime(
    t: Traced, llm: ScriptedLLM, store: Any, task_queue: str, sandboxed: bool = False
) -> AsyncIterator[AgentRuntime]:
    async with traced_worker(t, llm, store, task_queue, sandboxed):
        yield await AgentRuntime(
            t.client, task_queue=task_queue, scope=task_queue.removeprefix("tq-")
        ).start()


def _ancestors(span: ReadableSpan, by_id: dict[int, ReadableSpan]) -> list[ReadableSpan]:
    out: list[ReadableSpan] = []
    while span.parent is not None and span.parent.span_id in by_id:
        span = by_id[span.parent.span_id]
        out.append(span)
    return out


def _tokens(span: ReadableSpan) -> int:
    a = span.attributes or {}
    return int(a.get("gen_ai.usage.input_tokens", 0)) + int(  # type: ignore[arg-type]
        a.get("gen_ai.usage.output_tokens", 0)  # type: ignore[arg-type]
    )


@pytest.mark.parametrize("sandboxed", [False, True], ids=["unsandboxed", "sandboxed"])
async def test_a_delegating_wake_is_one_trace_and_a_replay_adds_no_span(
    client, store, sandboxed: bool
) -> None:
    t = Traced(client)
    llm = ScriptedLLM(
        {
            "m-coord": [
                tool_calls(("task", {"agent": "helper", "prompt": "look x"}), prompt_tokens=11),
                {**text("all done", prompt_tokens=17, completion_tokens=4), "model": "m-coord-1"},
            ],
            "m-help": [
                tool_calls(("lookup", {"q": "x"}), prompt_tokens=7, completion_tokens=3),
                {**text("found data(x)", prompt_tokens=9, completion_tokens=5), "model": "m-h-1"},
            ],
        }
    )
    task_queue = f"tq-t-{uuid.uuid4().hex[:10]}"
    async with traced_runtime(t, llm, store, task_queue, sandboxed) as rt:
        coord = await spawn(rt, rt.root, "coord")
        result = await rt.run_turn(coord, "go")
        assert result.status == "done" and result.text == "all done"
        helper_id = f"{coord.id}/helper.1"
        coord_view, helper_view = await rt.inspect(coord), await rt.inspect(helper_id)

        def turn_of(hid: str) -> ReadableSpan | None:
            return next(
                (
                    s
                    for s in t.spans()
                    if s.name.startswith("invoke_agent")
                    and (s.attributes or {}).get("tnx.handle.id") == hid
                ),
                None,
            )

        await eventually(lambda: turn_of(coord.id) is not None, what="the coordinator's turn")
        spans = t.spans()
        coord_turn, helper_turn = turn_of(coord.id), turn_of(helper_id)
        assert coord_turn is not None and helper_turn is not None
        trace_id = coord_turn.context.trace_id
        mine = [s for s in spans if s.context.trace_id == trace_id]
        by_id = {s.context.span_id: s for s in mine}

        # one trace: the host's update, the coordinator's turn, down to the child's tool call
        top = by_id[coord_turn.parent.span_id] if coord_turn.parent else None
        assert top is not None and top.name == "StartWorkflowUpdate:turn", top
        assert coord_turn in _ancestors(helper_turn, by_id)
        assert (coord_turn.attributes or {})["gen_ai.operation.name"] == "invoke_agent"
        assert (
            dict(helper_turn.attributes or {}).items()
            >= {
                "gen_ai.agent.name": "helper",
                "gen_ai.request.model": "m-help",
                "tnx.handle.id": helper_id,
                "tnx.parent.id": coord.id,
                "tnx.turn.status": "done",
            }.items()
        )
        chats = {hid: [s for s in mine if s.name.startswith("chat ") and
                       (s.attributes or {}).get("tnx.handle.id") == hid]
                 for hid in (coord.id, helper_id)}  # fmt: skip
        assert [len(chats[coord.id]), len(chats[helper_id])] == [2, 2]
        for hid, turn in ((coord.id, coord_turn), (helper_id, helper_turn)):
            for chat in chats[hid]:
                assert turn in _ancestors(chat, by_id), chat.name
                assert (chat.attributes or {})["gen_ai.operation.name"] == "chat"
        last = {k: dict(chats[k][-1].attributes or {}) for k in chats}
        assert last[helper_id]["gen_ai.request.model"] == "m-help"
        assert last[helper_id]["gen_ai.response.model"] == "m-h-1"
        assert last[helper_id]["gen_ai.response.finish_reasons"] == ("stop",)
        assert last[helper_id]["gen_ai.agent.name"] == "helper"
        first = dict(chats[coord.id][0].attributes or {})
        assert first["gen_ai.response.finish_reasons"] == ("tool_calls",)
        assert (first["gen_ai.usage.input_tokens"], first["gen_ai.usage.output_tokens"]) == (11, 2)
        tool = [s for s in mine if s.name == "execute_tool lookup"]
        assert len(tool) == 1 and helper_turn in _ancestors(tool[0], by_id)
        assert (
            dict(tool[0].attributes or {}).items()
            >= {
                "gen_ai.operation.name": "execute_tool",
                "gen_ai.tool.name": "lookup",
                "gen_ai.tool.call.id": "c1",
                "tnx.handle.id": helper_id,
            }.items()
        )
        assert "gen_ai.tool.call.arguments" not in (tool[0].attributes or {})  # not opted in

        # token counts: the spans add up to the handles' usage
        assert sum(map(_tokens, chats[helper_id])) == helper_view.usage_total == 7 + 3 + 9 + 5
        assert _tokens(helper_turn) == helper_view.usage_total
        assert (
            sum(map(_tokens, chats[coord.id] + chats[helper_id]))
            == coord_view.usage_total
            == _tokens(coord_turn) + _tokens(helper_turn)
        )

        histories = [
            await client.get_workflow_handle(rt.workflow_id(hid)).fetch_history()
            for hid in (coord.id, helper_id)
        ]
    before = len(t.spans())
    for sandboxed in (False, True):
        replay = replayer(client.data_converter, sandboxed=sandboxed, interceptors=[t.interceptor])
        for history in histories:
            await replay.replay_workflow(history)
    assert len(t.spans()) == before, [s.name for s in t.spans()[before:]]


async def test_a_cold_worker_replaying_a_running_handle_adds_no_span(client, store) -> None:
    t = Traced(client)
    llm = ScriptedLLM({"m-dep": [tool_calls(("deploy", {})), text("ok")]})
    task_queue = f"tq-t-{uuid.uuid4().hex[:10]}"
    async with traced_runtime(t, llm, store, task_queue) as rt:
        h = await spawn(rt, rt.root, "deployer")
        assert (await rt.run_turn(h, "deploy it")).status == "pending"  # the turn is parked
        workflow_id = rt.workflow_id(h.id)

    def of_handle() -> list[str]:  # its spans: the workflow's, its activities', its turn's
        return [
            s.name
            for s in t.spans()
            if workflow_id
            in (
                (s.attributes or {}).get("temporalWorkflowID"),
                (s.attributes or {}).get("tnx.handle.id"),
            )
            or (s.attributes or {}).get("tnx.handle.id") == h.id
        ]

    before = of_handle()
    assert "chat m-dep" in before and "execute_tool deploy" in before
    async with traced_worker(t.cold(client), llm, store, task_queue):
        # an untraced query: the new worker replays the whole history to answer it
        wf = client.get_workflow_handle(workflow_id)
        view = await wf.query(QUERY_VIEW, result_type=HandleView)
        assert view.state == "suspended"
        assert of_handle() == before  # (the root may go on with new work meanwhile)
        # the turn goes on here: new work is traced, but the turn's span (opened by the
        # first worker) is not made again from the replayed start
        rt = AgentRuntime(client, task_queue=task_queue, scope=task_queue.removeprefix("tq-"))
        assert view.pending_req is not None
        await rt.answer(h.id, Answer(id=view.pending_req.id, ok=True))
        assert (await rt.wait(h.id, timeout_ms=30_000)).status == "done"
        assert of_handle()[len(before) :].count("chat m-dep") == 1
        assert not [n for n in of_handle()[len(before) :] if n.startswith("invoke_agent")]


def _turns_of(t: Traced, hid: str) -> list[ReadableSpan]:
    """The handle's turn spans, oldest first."""
    turns = [
        s
        for s in t.spans()
        if s.name.startswith("invoke_agent") and (s.attributes or {}).get("tnx.handle.id") == hid
    ]
    return sorted(turns, key=lambda s: s.start_time or 0)


def _roots_linked_in_turn(turns: list[ReadableSpan], trigger: str) -> list[ReadableSpan]:
    """Check that each turn driven by ``trigger`` is the root of its own trace, linked to
    the turn before it (none before the first), in no other turn's trace; returns them."""
    own = [s for s in turns if (s.attributes or {}).get("tnx.turn.trigger") == trigger]
    for k, span in enumerate(turns):
        if span not in own:
            continue
        assert span.parent is None, (trigger, k, span.parent)
        before = [turns[k - 1].context] if k else []  # the handle's first turn: no link
        assert [link.context for link in span.links] == before, k
    assert len({s.context.trace_id for s in own}) == len(own)
    assert not {s.context.trace_id for s in own} & {
        s.context.trace_id for s in turns if s not in own
    }
    return own


async def test_each_tick_turn_is_its_own_trace_linked_to_the_turn_before(client, store) -> None:
    """Issue 36 item 2: an agent ticking over several continue-as-new runs makes one trace
    per tick turn (a root span, linked to the handle's previous turn; its LLM call in that
    trace), not one trace of them all; a host's wake between them stays in the host's trace."""
    t = Traced(client)
    llm = ScriptedLLM({"m-tick": [text("checked")]}, repeat_last=True)
    task_queue = f"tq-t-{uuid.uuid4().hex[:10]}"
    options = RuntimeOptions(continue_as_new_events=100)
    async with traced_worker(t, llm, store, task_queue):
        rt = await AgentRuntime(
            t.client, task_queue=task_queue, scope=task_queue.removeprefix("tq-"), options=options
        ).start()
        h = await spawn(rt, rt.root, "ticker")
        wf = client.get_workflow_handle(rt.workflow_id(h.id))

        async def runs() -> int:
            return len([w async for w in client.list_workflows(f'WorkflowId="{wf.id}"')])

        async def ticked(n: int) -> bool:
            ticks = [s for s in _turns_of(t, h.id)
                     if (s.attributes or {}).get("tnx.turn.trigger") == "tick"]  # fmt: skip
            return len(ticks) >= n and await runs() >= 2

        await eventually(lambda: ticked(3), within_s=40, what="three tick turns, two runs")
        assert (await rt.run_turn(h, "now")).status == "done"
        await eventually(lambda: ticked(5), within_s=40, what="two more tick turns")
        await rt.close(h)
    turns = _turns_of(t, h.id)
    ticks = _roots_linked_in_turn(turns, "tick")
    assert len(ticks) >= 5
    by_id = {s.context.span_id: s for s in t.spans()}
    [woken] = [s for s in turns if (s.attributes or {}).get("tnx.turn.trigger") == "message"]
    assert woken.parent is not None
    assert by_id[woken.parent.span_id].name == "StartWorkflowUpdate:turn"
    runs_seen = {(s.attributes or {}).get("temporalRunID") for s in t.spans()
                 if (s.attributes or {}).get("temporalWorkflowID") == wf.id}  # fmt: skip
    assert len(runs_seen - {None}) >= 2  # the ticks went on across continue-as-new
    for tick in ticks:  # each tick turn's LLM call is in its own trace
        chats = [s for s in t.spans() if s.name == "chat m-tick"
                 and s.context.trace_id == tick.context.trace_id]  # fmt: skip
        assert len(chats) == 1 and tick in _ancestors(chats[0], by_id)


async def test_a_background_report_turn_is_its_own_trace(client, store) -> None:
    """Issue 36 item 2: the turn a background child's report wakes is the root of its own
    trace, linked to the turn that started the child (the child's turn stays in that one)."""
    t = Traced(client)
    task = ("task", {"agent": "helper", "prompt": "look x", "background": True})
    llm = ScriptedLLM(
        {
            "m-lead": [tool_calls(task), text("started"), text("got it")],
            "m-help": [text("found x")],
        }
    )
    task_queue = f"tq-t-{uuid.uuid4().hex[:10]}"
    async with traced_runtime(t, llm, store, task_queue) as rt:
        lead = await spawn(rt, rt.root, "lead")
        assert (await rt.run_turn(lead, "go")).status == "done"
        await eventually(lambda: len(_turns_of(t, lead.id)) >= 2, within_s=30,
                         what="the report's turn")  # fmt: skip
        await rt.close(lead)
    first, report = _turns_of(t, lead.id)[:2]
    assert (report.attributes or {})["tnx.turn.trigger"] == "background"
    _roots_linked_in_turn([first, report], "background")
    helper = _turns_of(t, f"{lead.id}/helper.1")
    assert len(helper) == 1 and helper[0].context.trace_id == first.context.trace_id


def test_the_rule_for_turning_tracing_on() -> None:
    assert not tracing_wanted(None, {})
    assert tracing_wanted(True, {})
    assert not tracing_wanted(False, {"OTEL_TRACES_EXPORTER": "otlp"})
    assert tracing_wanted(None, {"OTEL_TRACES_EXPORTER": "console"})
    assert tracing_wanted(None, {"OTEL_EXPORTER_OTLP_ENDPOINT": "http://collector:4318"})
    assert not tracing_wanted(None, {"OTEL_TRACES_EXPORTER": "none",
                                     "OTEL_EXPORTER_OTLP_ENDPOINT": "http://c:4318"})  # fmt: skip
    assert not tracing_wanted(True, {"OTEL_SDK_DISABLED": "true"})


def test_content_is_recorded_only_when_opted_in_and_bounded(monkeypatch) -> None:
    from toolnexus_temporal.observability import spans as telemetry
    from toolnexus_temporal.workflows.contract.models import ToolResult

    exporter = InMemorySpanExporter()
    provider = TracerProvider()
    provider.add_span_processor(SimpleSpanProcessor(exporter))
    token = telemetry.ACTIVE_TRACER.set(provider.get_tracer("test"))
    try:
        for opted in ("", "true"):
            monkeypatch.setenv(telemetry.ENV_CAPTURE_CONTENT, opted)
            with telemetry.tool_span(
                tool="t", call_id="c9", handle_id="root/a.1", arguments='{"q": "secret"}'
            ) as done:
                done(ToolResult(output="x" * 20_000))
    finally:
        telemetry.ACTIVE_TRACER.reset(token)
    off, on = (dict(s.attributes or {}) for s in exporter.get_finished_spans())
    assert "gen_ai.tool.call.arguments" not in off and "gen_ai.tool.call.result" not in off
    assert on["gen_ai.tool.call.arguments"] == '{"q": "secret"}'
    result = on["gen_ai.tool.call.result"]
    assert isinstance(result, str) and len(result) == telemetry.CONTENT_MAX_CHARS + 1
    assert on["tnx.parent.id"] == "root" and on["gen_ai.agent.name"] == "a"


async def test_the_otel_environment_installs_the_interceptor_and_off_installs_none(
    client, store, monkeypatch
) -> None:
    def traced(worker: Any) -> bool:
        return any(isinstance(i, TnxTracingInterceptor) for i in worker.config()["interceptors"])

    llm = LlmConfig(base_url="http://mock.local/v1", model="stub-model")

    def queue() -> str:
        return f"tq-t-{uuid.uuid4().hex[:10]}"

    async with (
        create_worker(client, registry=REGISTRY, llm=llm, task_queue=queue(), store=store) as w,
        w,
    ):
        assert not traced(w)  # no OTEL_* variables here: off, nothing installed
    monkeypatch.setenv("OTEL_TRACES_EXPORTER", "console")
    async with (
        create_worker(client, registry=REGISTRY, llm=llm, task_queue=queue(), store=store) as w,
        w,
    ):
        assert traced(w)
    async with (
        create_worker(
            Traced(client).client, registry=REGISTRY, llm=llm, task_queue=queue(), store=store
        ) as w,
        w,
    ):
        assert not traced(w)  # the client's interceptor serves the worker: not a second one
    monkeypatch.setenv("OTEL_SDK_DISABLED", "true")
    async with (
        create_worker(
            client, registry=REGISTRY, llm=llm, task_queue=queue(), store=store, tracing=True
        ) as w,
        w,
    ):
        assert not traced(w)
    monkeypatch.delenv("OTEL_SDK_DISABLED")
    address = client.service_client.config.target_host
    for asked, expected in ((True, True), (None, True), (False, False)):  # the env says on
        host = await connect(address, client.namespace, tracing=asked)
        found = [i for i in host.config()["interceptors"] if isinstance(i, TnxTracingInterceptor)]
        assert len(found) == expected, asked
