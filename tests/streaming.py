"""Live output in the dev-server tests (issue 14): the streamed replies (``REPLY``,
``LONG_REPLY``), the LLM config that streams from a ``ScriptedLLMServer``
(``stream_config``), a script entry held until an event is set (``held``) and a handle's
live-output position now (``cursor_now``). Shared by ``test_stream`` and
``test_stream_resume``."""

from __future__ import annotations

import threading
from collections.abc import Callable
from typing import Any

from tests.conftest import MODEL
from toolnexus_temporal.activities import LlmConfig
from toolnexus_temporal.client import AgentRuntime, Handle
from toolnexus_temporal.client.stream import TurnEnd
from toolnexus_temporal.client.testing import ScriptedLLMServer

REPLY = "".join(f"piece{i:02d} " for i in range(10))  # 10 stream pieces of 8 characters


def stream_config(server: ScriptedLLMServer, *, stream: bool = True) -> LlmConfig:
    """The LLM config of ``server`` for ``MODEL``, streaming unless ``stream`` is false."""
    return LlmConfig(base_url=server.base_url, model=MODEL, stream=stream)


LONG_REPLY = "".join(f"piece{i:02d} " for i in range(40))  # 40 pieces, ~4 s at 0.1 s a piece


def held(reply: dict[str, Any], release: threading.Event) -> Callable[[Any], dict[str, Any]]:
    """A script entry answering ``reply`` once ``release`` is set (it blocks the server's
    thread for that request only): the turn runs, and its reply has not begun."""

    def entry(view: Any) -> dict[str, Any]:
        release.wait(120)
        return reply

    return entry


async def cursor_now(rt: AgentRuntime, h: Handle) -> str:
    """The live-output position of ``h`` now (a stream's ``seq`` that ends at once)."""
    [end] = [ev async for ev in rt.stream(h, timeout_ms=0)]
    assert isinstance(end, TurnEnd) and end.seq, end
    return end.seq
