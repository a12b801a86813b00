"""The LLM client (CONTRACT §4): both wire styles, streaming, retries through Temporal's
retry policy with Retry-After, keys read at call time and kept out of history, and an
interrupt that cancels a slow streamed completion."""

from __future__ import annotations

import asyncio
import json
import time
from typing import Any

import httpx
import pytest

from tests.fixture_llm import FixtureLLM, fixture_registry, load_fixture
from tests.helpers import spawn
from toolnexus_temporal.activities import LlmConfig, Registry, define_tool
from toolnexus_temporal.client import AgentDef, Handle, RuntimeOptions
from toolnexus_temporal.client.testing import ScriptedLLM, render, style_of, text, tool_calls

KEY = "sk-test-secret-123"


def lookup(q: str) -> str:
    """Look up q."""
    return f"data({q})"


# Local on purpose: one agent ``worker`` whose ``AgentDef`` fields each test overrides (its
# LLM settings), with this file's ``lookup``; no other test file builds it.
def registry(**overrides: Any) -> Registry:
    return Registry(
        [AgentDef(name="worker", system_prompt="be brief", tools=["lookup"], **overrides)],
        tools=[define_tool(lookup)],
    )


class Recorder:
    """A transport that records raw requests and answers from a ScriptedLLM."""

    def __init__(self, llm: ScriptedLLM) -> None:
        self.llm = llm
        self.requests: list[httpx.Request] = []

    async def handle(self, request: httpx.Request) -> httpx.Response:
        self.requests.append(request)
        return await self.llm.handle(request)

    def bodies(self) -> list[dict[str, Any]]:
        return [json.loads(r.content) for r in self.requests]


@pytest.mark.parametrize("stream", [True, False])
async def test_anthropic_wire_style(make_runtime, monkeypatch, stream: bool) -> None:
    monkeypatch.setenv("ANTHROPIC_API_KEY", KEY)
    llm = ScriptedLLM(
        {
            "claude-x": [
                tool_calls(("lookup", {"q": "x"})),
                text("found it", prompt_tokens=11, completion_tokens=4),
            ]
        }
    )
    rec = Recorder(llm)
    config = LlmConfig(
        base_url="http://anthropic.mock",
        model="claude-x",
        style="anthropic",
        api_key_env="ANTHROPIC_API_KEY",
        stream=stream,
    )
    async with make_runtime(registry(), httpx.MockTransport(rec.handle), llm=config) as rt:
        h = await spawn(rt, rt.root, "worker")
        r = await rt.run_turn(h, "find x")
        assert (r.status, r.text, r.turns) == ("done", "found it", 2)
        assert r.total_tokens == 7 + 15  # input + output tokens of both calls
        first, _ = rec.requests
        assert first.url.path == "/v1/messages"
        assert first.headers["x-api-key"] == KEY
        assert first.headers["anthropic-version"] == "2023-06-01"
        assert "authorization" not in first.headers
        body1, body2 = rec.bodies()
        assert body1["system"] == "be brief"
        assert body1["max_tokens"] == 4096
        assert body1.get("stream", False) is stream
        assert body1["messages"] == [
            {"role": "user", "content": [{"type": "text", "text": "find x"}]}
        ]
        assert body1["tools"][0]["name"] == "lookup"
        assert body1["tools"][0]["input_schema"]["properties"] == {"q": {"type": "string"}}
        # the tool result is a tool_result block in one user message after the tool_use
        assert body2["messages"][1] == {
            "role": "assistant",
            "content": [{"type": "tool_use", "id": "c1", "name": "lookup", "input": {"q": "x"}}],
        }
        assert body2["messages"][2] == {
            "role": "user",
            "content": [{"type": "tool_result", "tool_use_id": "c1", "content": "data(x)"}],
        }


@pytest.mark.parametrize("stream", [True, False])
async def test_openai_wire_style_and_key_at_call_time(
    make_runtime, monkeypatch, client, stream: bool
) -> None:
    monkeypatch.delenv("OPENAI_API_KEY", raising=False)
    llm = ScriptedLLM({"gpt-x": [text("one"), text("two")]})
    rec = Recorder(llm)
    config = LlmConfig(base_url="http://openai.mock/v1", model="gpt-x", stream=stream)
    async with make_runtime(registry(), httpx.MockTransport(rec.handle), llm=config) as rt:
        h = await spawn(rt, rt.root, "worker")
        assert (await rt.run_turn(h, "a")).text == "one"
        monkeypatch.setenv("OPENAI_API_KEY", KEY)  # read at call time, not at start-up
        assert (await rt.run_turn(h, "b")).text == "two"
        assert rec.requests[0].url.path == "/v1/chat/completions"
        assert "authorization" not in rec.requests[0].headers
        assert rec.requests[1].headers["authorization"] == f"Bearer {KEY}"
        body = rec.bodies()[1]
        assert body.get("stream", False) is stream
        if stream:
            assert body["stream_options"] == {"include_usage": True}
        assert h.usage_total == 10  # usage arrives in the stream's last chunk too
        history = await client.get_workflow_handle(rt.workflow_id(h.id)).fetch_history()
        assert KEY not in history.to_json()


async def test_per_agent_style_and_model_override(make_runtime) -> None:
    llm = ScriptedLLM({"gpt-x": [text("from openai")], "claude-y": [text("from anthropic")]})
    rec = Recorder(llm)
    reg = Registry(
        [
            AgentDef(name="plain"),
            AgentDef(name="claude", model="claude-y", style="anthropic"),
        ]
    )
    config = LlmConfig(base_url="http://mixed.mock", model="gpt-x")
    async with make_runtime(reg, httpx.MockTransport(rec.handle), llm=config) as rt:
        assert (await rt.run_turn(await spawn(rt, rt.root, "plain"), "hi")).text == "from openai"
        assert (
            await rt.run_turn(await spawn(rt, rt.root, "claude"), "hi")
        ).text == "from anthropic"
        assert [style_of(r.url.path) for r in rec.requests] == ["openai", "anthropic"]


async def test_retries_follow_retry_after_then_succeed(make_runtime) -> None:
    seen: list[float] = []

    async def flaky(request: httpx.Request) -> httpx.Response:
        seen.append(time.monotonic())
        if len(seen) == 1:
            return httpx.Response(503, text="overloaded")
        if len(seen) == 2:
            return httpx.Response(429, headers={"retry-after": "1"}, text="slow down")
        return render(text("finally"), "openai", stream=True)

    options = RuntimeOptions(llm_initial_retry_ms=100, llm_max_attempts=5)
    async with make_runtime(registry(), httpx.MockTransport(flaky), options=options) as rt:
        h = await spawn(rt, rt.root, "worker")
        r = await rt.run_turn(h, "go")
        assert (r.status, r.text) == ("done", "finally")
        assert len(seen) == 3
        assert seen[2] - seen[1] >= 1.0  # Retry-After: 1 became the next retry delay


async def test_a_400_fails_the_turn_at_once_with_the_body(make_runtime) -> None:
    calls = 0

    async def reject(request: httpx.Request) -> httpx.Response:
        nonlocal calls
        calls += 1
        return httpx.Response(400, json={"error": {"message": "model not found: nope"}})

    config = LlmConfig(base_url="http://a.mock", model="m", style="anthropic")
    async with make_runtime(registry(), httpx.MockTransport(reject), llm=config) as rt:
        h = await spawn(rt, rt.root, "worker")
        r = await rt.run_turn(h, "go")
        assert r.status == "error" and calls == 1
        assert "400" in r.text and "model not found: nope" in r.text


async def test_a_broken_stream_is_a_malformed_response(make_runtime) -> None:
    async def garbage(request: httpx.Request) -> httpx.Response:
        return httpx.Response(
            200, headers={"content-type": "text/event-stream"}, content=b"data: {not json\n\n"
        )

    async with make_runtime(registry(), httpx.MockTransport(garbage)) as rt:
        h = await spawn(rt, rt.root, "worker")
        r = await rt.run_turn(h, "go")
        assert r.status == "error" and "malformed LLM response" in r.text


async def test_interrupt_cancels_a_slow_streamed_completion(make_runtime) -> None:
    long_reply = text("word " * 400)  # 250 stream events, 0.2 s apart: ~50 s in all
    llm = ScriptedLLM({"stub-model": [long_reply, text("quick")]}, chunk_delay_s=0.2)
    async with make_runtime(registry(), llm.transport()) as rt:
        h = await spawn(rt, rt.root, "worker")
        await rt.wake(h, "write a lot")
        for _ in range(100):
            if llm.requests:
                break
            await asyncio.sleep(0.05)
        await asyncio.sleep(1.0)  # well into the stream
        started = time.monotonic()
        await rt.interrupt(h)
        result = await rt.wait(h)
        assert result.status == "interrupted" and h.state == "idle"
        assert time.monotonic() - started < 20  # long before the stream would have ended
        llm.chunk_delay_s = 0
        assert (await rt.run_turn(h, "short")).text == "quick"


@pytest.mark.parametrize("style", ["openai", "anthropic"])
async def test_fanout_fixture_in_both_wire_styles(make_runtime, style: str) -> None:
    fixture = load_fixture("subagent-fanout")
    llm = FixtureLLM(fixture["mockLLM"])
    config = LlmConfig(base_url="http://fixture.mock", model="unused", style=style)
    async with make_runtime(fixture_registry(fixture), llm.transport(), llm=config) as rt:
        entry = await rt.spawn(rt.root, fixture["run"]["entry"])
        assert isinstance(entry, Handle)
        result = await rt.run_turn(entry, fixture["run"]["prompt"])
        assert result.status == "done"
        assert result.text.count("found:") == 2 and "found:data(x)" in result.text
        assert (await rt.inspect(entry)).usage_total == fixture["expect"]["parentUsageTotal"]
