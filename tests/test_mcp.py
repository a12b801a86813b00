"""MCP servers' tools (issue 27 item 3; docs/guide/mcp.md) against real servers nobody here
wrote: the reference servers on PyPI (``mcp-server-time``, ``mcp-server-git``) over stdio, and
one over streamable HTTP on loopback (``tests/mcp_http_server.py``, the SDK's FastMCP: neither
reference server speaks HTTP), each driven by an agent with a scripted LLM on a real dev
server."""

from __future__ import annotations

import asyncio
import dataclasses
import json
import os
import subprocess
import sys
from collections.abc import AsyncIterator
from pathlib import Path
from typing import Any

import pytest
from temporalio.api.enums.v1 import EventType
from temporalio.client import Client

from tests.conftest import MODEL, RuntimeFactory
from tests.helpers import eventually, spawn
from tests.mcp_serving import mcp_http_server
from tests.parking import cli_answer
from tests.workers import free_port
from toolnexus_temporal.activities import Registry, RegistryError, define_tool
from toolnexus_temporal.activities.mcp import FAILED_LISTING_HOLD_S, McpPool, offered_name
from toolnexus_temporal.client import AgentDef, Answer, McpServer
from toolnexus_temporal.client.testing import ScriptedLLM, text, tool_calls
from toolnexus_temporal.workflows.contract.messages import ToolCallInput
from toolnexus_temporal.workflows.contract.models import ToolOptions

pytestmark = pytest.mark.mcp


def time_server() -> McpServer:
    return McpServer(
        name="time",
        command=sys.executable,
        args=["-m", "mcp_server_time", "--local-timezone", "UTC"],
    )


def git_server(repo: Path, approval: list[str] | None = None) -> McpServer:
    return McpServer(
        name="git",
        command=sys.executable,
        args=["-m", "mcp_server_git", "--repository", str(repo)],
        approval=approval or [],
        options=ToolOptions(timeout_ms=30_000),
    )


def git(repo: Path, *args: str) -> str:
    env = {
        **os.environ,
        "GIT_AUTHOR_NAME": "t",
        "GIT_AUTHOR_EMAIL": "t@example.com",
        "GIT_COMMITTER_NAME": "t",
        "GIT_COMMITTER_EMAIL": "t@example.com",
    }
    done = subprocess.run(
        ["git", "-C", str(repo), *args], env=env, check=True, capture_output=True, text=True
    )
    return done.stdout


@pytest.fixture
def repo(tmp_path: Path) -> Path:
    """A git repository with one commit ("first commit") and an untracked file."""
    path = tmp_path / "repo"
    path.mkdir()
    git(path, "init", "-q", "-b", "main")
    git(path, "config", "user.name", "t")
    git(path, "config", "user.email", "t@example.com")
    (path / "README.md").write_text("hello\n")
    git(path, "add", "README.md")
    git(path, "commit", "-q", "-m", "first commit")
    (path / "notes.txt").write_text("untracked\n")
    return path


@pytest.fixture
async def http_url() -> AsyncIterator[str]:
    """The streamable-HTTP server of tests/mcp_http_server.py, on a free loopback port."""
    async with mcp_http_server() as url:
        yield url


def tool_messages(request: dict[str, Any]) -> dict[str, str]:
    """The tool messages of an LLM request, by tool call id."""
    return {m["tool_call_id"]: m["content"] for m in request["messages"] if m.get("role") == "tool"}


def offered(request: dict[str, Any]) -> set[str]:
    return {t["function"]["name"] for t in request.get("tools", [])}


async def test_stdio_reference_servers_time_and_git(
    make_runtime: RuntimeFactory, client: Client, repo: Path
) -> None:
    registry = Registry(
        [AgentDef(name="ops", mcp=[time_server(), git_server(repo)])],
    )
    llm = ScriptedLLM(
        {
            MODEL: [
                tool_calls(
                    ("time__get_current_time", {"timezone": "UTC"}),
                    ("git__git_status", {"repo_path": str(repo)}),
                    ("git__git_log", {"repo_path": str(repo), "max_count": 5}),
                    ("git__no_such_tool", {}),
                ),
                text("all read"),
            ]
        }
    )
    async with make_runtime(registry, llm.transport()) as rt:
        h = await spawn(rt, rt.root, "ops")
        result = await rt.run_turn(h, "what time is it, and what is in the repo?")
        assert result.status == "done" and result.text == "all read", result
        await rt.close(h)
        history = await client.get_workflow_handle(rt.workflow_id(h.id)).fetch_history()

    first, second = llm.requests
    names = offered(first)
    assert {"time__get_current_time", "time__convert_time"} <= names
    assert {"git__git_status", "git__git_log", "git__git_commit"} <= names
    assert all(len(n) <= 64 for n in names)
    results = tool_messages(second)
    now = json.loads(results["c1"])  # the time server's own JSON answer
    assert now["timezone"] == "UTC" and now["datetime"].startswith("20")
    assert "notes.txt" in results["c2"] and "main" in results["c2"]  # git status
    assert "first commit" in results["c3"]  # git log
    assert results["c4"].startswith("error:") and "no_such_tool" in results["c4"]

    # Each call is one tnx.tool_call activity; the listing never enters history.
    scheduled = [
        e.activity_task_scheduled_event_attributes.activity_type.name
        for e in history.events
        if e.event_type == EventType.EVENT_TYPE_ACTIVITY_TASK_SCHEDULED
    ]
    assert scheduled == ["tnx.llm_call", *["tnx.tool_call"] * 4, "tnx.llm_call"], scheduled
    listed = first["tools"]
    assert len(json.dumps(listed)) > 5_000  # the schemas the model got: 14 tools
    staged = next(t for t in listed if t["function"]["name"] == "git__git_diff_staged")
    assert staged["function"]["description"] not in history.to_json()  # never in history


async def test_streamable_http_on_loopback(
    make_runtime: RuntimeFactory, http_url: str, monkeypatch: pytest.MonkeyPatch
) -> None:
    monkeypatch.setenv("TNX_TEST_TEAM", "blue")
    server = McpServer(name="loop", url=http_url, header_env={"x-tnx-team": "TNX_TEST_TEAM"})
    registry = Registry([AgentDef(name="reader", mcp=[server])])
    llm = ScriptedLLM(
        {
            MODEL: [
                tool_calls(("loop__word_count", {"text": "one two three"}), ("loop__whoami", {})),
                text("counted"),
            ]
        }
    )
    async with make_runtime(registry, llm.transport()) as rt:
        h = await spawn(rt, rt.root, "reader")
        result = await rt.run_turn(h, "count the words")
        assert result.status == "done" and result.text == "counted", result
        await rt.close(h)
    assert {"loop__word_count", "loop__whoami", "loop__add_tool"} <= offered(llm.requests[0])
    results = tool_messages(llm.requests[1])
    assert results == {"c1": "3 words", "c2": "team=blue"}


async def test_an_approval_gated_mcp_tool_suspends_until_a_signal_answers(
    make_runtime: RuntimeFactory, client: Client, repo: Path
) -> None:
    git(repo, "add", "notes.txt")
    registry = Registry([AgentDef(name="ops", mcp=[git_server(repo, approval=["git_commit"])])])
    commit = ("git__git_commit", {"repo_path": str(repo), "message": "approved change"})
    llm = ScriptedLLM({MODEL: [tool_calls(commit), text("committed")]})
    async with make_runtime(registry, llm.transport()) as rt:
        h = await spawn(rt, rt.root, "ops")
        parked = await rt.run_turn(h, "commit the notes")
        assert parked.status == "pending" and parked.pending is not None, parked
        request = parked.pending
        assert request.kind == "approval"
        assert "git/git_commit" in request.prompt and "approved change" in request.prompt
        assert request.data is not None and request.data["tool"] == "git_commit"
        view = await rt.inspect(h)
        assert view.state == "suspended" and view.pending_req == request
        assert "approved change" not in git(repo, "log", "--format=%s")  # nothing ran yet
        assert len(llm.requests) == 1

        # as an operator would: temporal workflow signal --name answer
        await cli_answer(client, rt.workflow_id(h.id), {"id": request.id, "ok": True})
        done = await rt.wait(h, timeout_ms=60_000)
        assert done.status == "done" and done.text == "committed", done
        assert git(repo, "log", "--format=%s").splitlines()[0] == "approved change"
        result = tool_messages(llm.requests[1])["c1"]
        assert "approved change" in result or "Changes committed" in result, result
        await rt.close(h)


async def test_a_declined_mcp_call_never_runs(make_runtime: RuntimeFactory, repo: Path) -> None:
    git(repo, "add", "notes.txt")
    registry = Registry([AgentDef(name="ops", mcp=[git_server(repo, approval=["*"])])])
    commit = ("git__git_commit", {"repo_path": str(repo), "message": "declined change"})
    llm = ScriptedLLM({MODEL: [tool_calls(commit), text("left it")]})
    async with make_runtime(registry, llm.transport()) as rt:
        h = await spawn(rt, rt.root, "ops")
        parked = await rt.run_turn(h, "commit the notes")
        assert parked.status == "pending" and parked.pending is not None, parked
        await rt.resume(Answer(id=parked.pending.id, ok=False, reason="declined"))
        done = await rt.wait(h, timeout_ms=60_000)
        assert done.status == "done" and done.text == "left it", done
        await rt.close(h)
    assert tool_messages(llm.requests[1])["c1"].startswith("declined: call MCP tool git/")
    assert git(repo, "log", "--format=%s").splitlines() == ["first commit"]


async def test_an_mcp_call_has_its_timeout_and_an_interrupt_stops_it(
    make_runtime: RuntimeFactory, client: Client, http_url: str
) -> None:
    """The server's ``options.timeout_ms`` bounds a call (an error result, the turn goes on),
    and an interrupt reaches a call in flight (the activity heartbeats)."""
    server = McpServer(name="loop", url=http_url, options=ToolOptions(timeout_ms=1_000))
    registry = Registry([AgentDef(name="napper", mcp=[server])])
    llm = ScriptedLLM(
        {
            MODEL: [
                tool_calls(("loop__nap", {"seconds": 20})),
                text("gave up"),
                tool_calls(("loop__nap", {"seconds": 0.05})),
                text("rested"),
            ]
        }
    )
    async with make_runtime(registry, llm.transport()) as rt:
        h = await spawn(rt, rt.root, "napper")
        started = asyncio.get_running_loop().time()
        result = await rt.run_turn(h, "nap long")
        assert asyncio.get_running_loop().time() - started < 15
        assert result.status == "done" and result.text == "gave up", result
        assert tool_messages(llm.requests[1])["c1"].startswith("error:")
        # the session was dropped with the timed-out call; the next call starts a new one
        result = await rt.run_turn(h, "nap short")
        assert result.status == "done" and result.text == "rested", result
        assert tool_messages(llm.requests[3])["c1"] == "slept 0.05 s"
        await rt.close(h)

    slow = McpServer(name="loop", url=http_url, options=ToolOptions(timeout_ms=60_000))
    registry = Registry([AgentDef(name="napper", mcp=[slow])])
    llm = ScriptedLLM({MODEL: [tool_calls(("loop__nap", {"seconds": 30}))]})
    async with make_runtime(registry, llm.transport()) as rt:
        h = await spawn(rt, rt.root, "napper")
        await rt.wake(h, "nap")

        async def napping() -> bool:
            wf = client.get_workflow_handle(rt.workflow_id(h.id))
            pending = (await wf.describe()).raw_description.pending_activities
            return any(
                a.activity_type.name == "tnx.tool_call" and a.attempt >= 1 and a.state == 2
                for a in pending
            )  # state 2: PENDING_ACTIVITY_STATE_STARTED

        await eventually(napping, within_s=30, what="the nap call")
        started = asyncio.get_running_loop().time()
        await rt.interrupt(h)
        stopped = await rt.wait(h, timeout_ms=20_000)
        assert stopped.status == "interrupted", stopped
        assert asyncio.get_running_loop().time() - started < 15
        await rt.close(h)


async def test_listing_is_cached_and_refreshed_on_list_changed(http_url: str) -> None:
    """The refresh rule, at the pool: within the TTL a listing is reused; the server's
    ``notifications/tools/list_changed`` drops it, and the next listing shows the new tool."""
    pool = McpPool({"loop": McpServer(name="loop", url=http_url)})
    try:
        first = await pool.listing("loop")
        assert await pool.listing("loop") is first  # cached (default TTL 5 minutes)
        assert "loop__greet" not in first.tools
        added = await pool.call(
            ToolCallInput(
                tool="loop__add_tool", arguments='{"name": "greet"}', handle_id="h", call_id="c"
            )
        )
        assert added.output == "added greet" and not added.is_error

        async def relisted() -> bool:
            return "loop__greet" in (await pool.listing("loop")).tools

        await eventually(relisted, within_s=10, what="the list_changed refresh")
    finally:
        await pool.aclose()


async def test_the_pool_shares_one_session_and_ends_its_process() -> None:
    """Concurrent first calls start one stdio server process; closing the pool (the worker's
    shutdown) ends it."""
    marker = "America/Argentina/Ushuaia"  # names this test's process on the command line
    spec = McpServer(
        name="time",
        command=sys.executable,
        args=["-m", "mcp_server_time", "--local-timezone", marker],
    )
    pool = McpPool({"time": spec})

    def processes() -> list[str]:
        found = subprocess.run(["pgrep", "-f", marker], capture_output=True, text=True)
        return found.stdout.split()

    try:
        calls = [
            ToolCallInput(
                tool="time__get_current_time",
                arguments=json.dumps({"timezone": "UTC"}),
                handle_id="h",
                call_id=f"c{i}",
            )
            for i in range(6)
        ]
        results = await asyncio.gather(*(pool.call(c) for c in calls))
        assert all(json.loads(r.output)["timezone"] == "UTC" for r in results)
        assert len(processes()) == 1
    finally:
        await pool.aclose()
    await eventually(lambda: not processes(), within_s=10, what="the server's exit")


async def test_a_hanging_server_is_left_out_of_llm_calls_for_a_while() -> None:
    """A server that never answers ``initialize`` costs one LLM call its
    ``connect_timeout_ms``; the calls of the next ``FAILED_LISTING_HOLD_S`` leave it out at
    once, and its process is ended."""
    marker = "tnx-mcp-hang-test"
    spec = McpServer(
        name="hang",
        command=sys.executable,
        args=["-c", "import sys, time; time.sleep(120)", marker],
        connect_timeout_ms=500,
    )
    now = [1_000.0]
    pool = McpPool({"hang": spec}, clock=lambda: now[0])
    loop = asyncio.get_running_loop()
    try:
        started = loop.time()
        assert await pool.schemas(["hang"]) == []
        assert loop.time() - started >= 0.5
        started = loop.time()
        assert await pool.schemas(["hang"]) == []
        assert loop.time() - started < 0.2  # not tried again
        now[0] += FAILED_LISTING_HOLD_S
        started = loop.time()
        assert await pool.schemas(["hang"]) == []
        assert loop.time() - started >= 0.5  # tried again after the hold
    finally:
        await pool.aclose()

    def processes() -> list[str]:
        found = subprocess.run(["pgrep", "-f", marker], capture_output=True, text=True)
        return found.stdout.split()

    await eventually(lambda: not processes(), within_s=10, what="the hung server's end")


async def test_an_approval_naming_a_tool_the_server_lacks_offers_none_of_its_tools() -> None:
    """A typo in ``approval`` (``get_curent_time``) would let the tool it meant run with no
    approval: the server's tools are not offered (fail closed) and a call of one is a
    non-retryable ``McpConfigError`` naming the stray entry, not a call that runs."""
    from temporalio.exceptions import ApplicationError

    spec = time_server().model_copy(update={"approval": ["get_curent_time"]})
    pool = McpPool({"time": spec})
    try:
        assert await pool.schemas(["time"]) == []
        with pytest.raises(ApplicationError, match="get_curent_time") as raised:
            await pool.call(
                ToolCallInput(
                    tool="time__get_current_time",
                    arguments=json.dumps({"timezone": "UTC"}),
                    handle_id="h",
                    call_id="c",
                )
            )
        assert raised.value.type == "McpConfigError" and raised.value.non_retryable
    finally:
        await pool.aclose()
    with pytest.raises(ValueError, match="approval names tools not in its tools: 'git_comit'"):
        McpServer(name="git", command="x", tools=["git_commit"], approval=["git_comit"])
    McpServer(name="git", command="x", tools=["git_commit"], approval=["git_commit", "*"])


ORPHAN_WORKER = """
import asyncio, sys
from toolnexus_temporal.activities.mcp import McpPool
from toolnexus_temporal.client import McpServer

async def main():
    wrapper = (
        "import subprocess, sys, time\\n"
        "subprocess.run([sys.executable, '-m', 'mcp_server_time', '--local-timezone', 'UTC'])\\n"
        "time.sleep(600)\\n"  # the end of stdin ends the server, never this wrapper
    )
    spec = McpServer(name="time", command=sys.executable, args=["-c", wrapper, sys.argv[1]])
    pool = McpPool({"time": spec})
    await pool.listing("time")
    print("LISTED", flush=True)
    await asyncio.sleep(600)

asyncio.run(main())
"""


@pytest.mark.skipif(not sys.platform.startswith("linux"), reason="PR_SET_PDEATHSIG is Linux's")
async def test_a_sigkilled_worker_leaves_no_stdio_server_behind() -> None:
    """A worker SIGKILLed while a stdio server runs: the server ends too, even one that
    ignores the end of its stdin (a wrapper that outlives the real server). It lived on as an
    orphan before: the SDK ends a server only at a clean close."""
    marker = "tnx-mcp-orphan-test"

    def processes() -> list[str]:
        found = subprocess.run(["pgrep", "-f", marker], capture_output=True, text=True)
        return found.stdout.split()

    worker = await asyncio.create_subprocess_exec(
        sys.executable, "-c", ORPHAN_WORKER, marker, stdout=asyncio.subprocess.PIPE
    )
    try:
        assert worker.stdout is not None
        line = await asyncio.wait_for(worker.stdout.readline(), 60)
        assert line.strip() == b"LISTED", line
        server_pids = [p for p in processes() if int(p) != worker.pid]
        assert server_pids, "the wrapper is running"
    finally:
        worker.kill()
        await worker.wait()
    await eventually(lambda: not processes(), within_s=10, what="the orphaned server's end")


async def test_a_stdio_command_the_worker_lacks_is_named_in_the_error() -> None:
    from temporalio.exceptions import ApplicationError

    pool = McpPool({"gone": McpServer(name="gone", command="tnx-no-such-mcp-server")})
    try:
        with pytest.raises(ApplicationError, match="'tnx-no-such-mcp-server' is not found"):
            await pool.listing("gone")
    finally:
        await pool.aclose()


def test_offered_names_are_valid_stable_and_distinct() -> None:
    assert offered_name("git", "git_status") == "git__git_status"
    dotted = offered_name("fs", "read.file")
    assert dotted.startswith("fs__read_file_") and dotted == offered_name("fs", "read.file")
    assert dotted != offered_name("fs", "read_file")
    long = offered_name("srv", "x" * 100)
    assert len(long) == 64 and long != offered_name("srv", "x" * 99)
    with pytest.raises(ValueError):
        McpServer(name="a__b", command="x")
    with pytest.raises(ValueError):
        McpServer(name="both", command="x", url="http://127.0.0.1/mcp")


def test_the_registry_checks_its_mcp_servers() -> None:
    one = McpServer(name="time", command="python3")
    other = McpServer(name="time", command="python3", args=["-m", "mcp_server_time"])
    reg = Registry([AgentDef(name="a", mcp=[one]), AgentDef(name="b", mcp=[one])])
    assert reg.mcp_servers == {"time": one}
    with pytest.raises(RegistryError, match="defined differently"):
        Registry([AgentDef(name="a", mcp=[one]), AgentDef(name="b", mcp=[other])])
    with pytest.raises(RegistryError, match="named like a tool of MCP server 'time'"):
        Registry(
            [AgentDef(name="a", mcp=[one])],
            tools=[define_tool(lambda: "x", name="time__now", input_schema={"type": "object"})],
        )
    with pytest.raises(ValueError, match="twice"):
        AgentDef(name="a", mcp=[one, other])
    with pytest.raises(ValueError, match="headers need a url"):
        McpServer(name="x", command="y", headers={"a": "b"})


async def test_a_tool_name_the_server_lacks_is_not_a_metric_label() -> None:
    """A model that invents MCP tool names (``time__zzz1``, ``time__zzz2``, ...) must not make
    a ``tnx_tool_calls_total`` series per invention (docs/guide/metrics.md: labels are
    registry names and closed vocabularies): an unknown MCP tool is counted as
    ``time__(unknown)``; a real one keeps its name. Read back from a real Prometheus endpoint
    of the SDK runtime. The ``execute_tool`` span names follow the same rule (OpenTelemetry
    span names are low-cardinality): ``execute_tool time__(unknown)``; its
    ``gen_ai.tool.name`` keeps the name called."""
    import httpx
    from opentelemetry.sdk.trace import TracerProvider
    from opentelemetry.sdk.trace.export import SimpleSpanProcessor
    from opentelemetry.sdk.trace.export.in_memory_span_exporter import InMemorySpanExporter
    from temporalio.testing import ActivityEnvironment

    from toolnexus_temporal.activities.tools import ToolActivities
    from toolnexus_temporal.observability import spans as telemetry
    from toolnexus_temporal.observability.activity import ActivityObserver
    from toolnexus_temporal.observability.prometheus import metrics_runtime
    from toolnexus_temporal.workflows.contract.names import TOOL_CALL_ACTIVITY

    exporter = InMemorySpanExporter()
    provider = TracerProvider()
    provider.add_span_processor(SimpleSpanProcessor(exporter))
    token = telemetry.ACTIVE_TRACER.set(provider.get_tracer("test"))

    port = free_port()
    runtime = metrics_runtime("127.0.0.1", port)
    env = ActivityEnvironment()
    env.metric_meter = runtime.metric_meter
    env.info = dataclasses.replace(env.info, activity_type=TOOL_CALL_ACTIVITY)
    pool = McpPool({"time": time_server()})
    tools = ToolActivities({}, {}, mcp=pool)
    observer = ActivityObserver(tool_known=tools.knows)  # as create_worker installs it
    try:
        for name in ("time__zzz1", "time__zzz2", "time__get_current_time"):
            call = ToolCallInput(
                tool=name, arguments='{"timezone": "UTC"}', handle_id="h", call_id="c"
            )
            try:
                await env.run(observer.run, tools.tool_call, call)
            except Exception as err:
                assert "UnknownTool" in repr(err) or "offers no tool" in str(err), err
    finally:
        telemetry.ACTIVE_TRACER.reset(token)
        await pool.aclose()
    spans = exporter.get_finished_spans()
    assert [span.name for span in spans] == [
        "execute_tool time__(unknown)",
        "execute_tool time__(unknown)",
        "execute_tool time__get_current_time",
    ]
    assert [dict(span.attributes or {})["gen_ai.tool.name"] for span in spans][:2] == [
        "time__zzz1",
        "time__zzz2",
    ]
    async with httpx.AsyncClient() as http:
        body = (await http.get(f"http://127.0.0.1:{port}/metrics")).text
    series = [line for line in body.splitlines() if line.startswith("tnx_tool_calls_total{")]
    assert not [line for line in series if "zzz" in line], series
    assert any('tool="time__(unknown)"' in line and line.endswith(" 2") for line in series)
    assert any('tool="time__get_current_time"' in line for line in series), series
