"""End to end with a real model server as a peer of our wire code: llama.cpp's
llama-server serving SmolLM2-135M-Instruct on loopback, in both wire styles, streamed and
not. Marked ``real_llm``; skipped when the server is not built (build it once with
``bash scripts/build-llama-server.sh``). A 135M model does not call tools reliably: tool flows
stay on the scripted LLM; here we assert shapes, never wording."""

from __future__ import annotations

from collections.abc import Iterator

import pytest

from toolnexus_temporal.activities import LlmConfig
from toolnexus_temporal.cli.localmodel import LocalModelServer, find_llama_server, find_model
from toolnexus_temporal.client import AgentDef, Handle
from toolnexus_temporal.client.stream import TextDelta, TurnEnd

pytestmark = pytest.mark.real_llm

BINARY = find_llama_server()
MODEL = find_model()


@pytest.fixture(scope="module")
def model_server() -> Iterator[LocalModelServer]:
    if BINARY is None or MODEL is None:
        pytest.skip("llama-server is not built: bash scripts/build-llama-server.sh")
    with LocalModelServer(binary=BINARY, model=MODEL) as server:
        yield server


@pytest.mark.parametrize(
    ("style", "stream"),
    [("openai", True), ("openai", False), ("anthropic", True), ("anthropic", False)],
)
async def test_real_model_turns(make_runtime, model_server, style: str, stream: bool) -> None:
    base = model_server.base_url if style == "openai" else model_server.root_url
    config = LlmConfig(base_url=base, model="smollm2", style=style, stream=stream, max_tokens=24)
    reg = {"chat": AgentDef(name="chat", system_prompt="Answer in one short sentence.")}
    async with make_runtime(reg, None, llm=config) as rt:
        h = await rt.spawn(rt.root, "chat")
        assert isinstance(h, Handle)
        first = await rt.run_turn(h, "Name a colour.")
        assert first.status == "done" and first.text.strip()
        assert first.turns == 1 and first.total_tokens > 0
        second = await rt.run_turn(h, "And another one?")
        assert second.status == "done" and second.text.strip()
        h = await rt.inspect(h)
        assert h.turns_total == 2 and h.transcript_len == 5  # system, 2 × (user, assistant)
        assert h.usage_total == first.total_tokens + second.total_tokens


@pytest.mark.parametrize("style", ["openai", "anthropic"])
async def test_real_model_output_streams_live(make_runtime, model_server, style: str) -> None:
    """``rt.stream`` follows a real model's streamed reply: the deltas, in order, make the
    turn's text; the stream ends with the turn."""
    base = model_server.base_url if style == "openai" else model_server.root_url
    config = LlmConfig(base_url=base, model="smollm2", style=style, stream=True, max_tokens=64)
    reg = {"chat": AgentDef(name="chat", system_prompt="Answer in a few sentences.")}
    async with make_runtime(reg, None, llm=config) as rt:
        h = await rt.spawn(rt.root, "chat")
        assert isinstance(h, Handle)
        await rt.wake(h, "Describe the sea.")
        events = [ev async for ev in rt.stream(h)]
    end = events[-1]
    assert isinstance(end, TurnEnd) and end.result is not None
    assert end.result.status == "done" and end.result.text.strip()
    deltas = [ev for ev in events if isinstance(ev, TextDelta)]
    assert deltas and "".join(d.text for d in deltas) == end.result.text
    assert all(d.skipped == 0 for d in deltas)
