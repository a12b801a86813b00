"""The scripted LLM every contender talks to: an OpenAI-compatible HTTP server on loopback
with zero think time, run in its own process so it never shares a GIL with a contender.

It is :class:`client.testing.ScriptedLLMServer` with one stateless script that routes on the
request's model name, so every contender gets the same answers however it counts turns:

===================  =============================================================
model                reply
===================  =============================================================
``bench-chat``       text ``ok``
``bench-chat-1k``    a ~1 KB text (the history-growth conversation)
``bench-tool``       a ``lookup`` tool call; once the request ends with a tool
                     result: text ``done`` (one tool turn = 2 LLM calls + 1 tool)
``bench-lead-N``     N ``task`` calls (``{"agent": "worker", "prompt": "job i"}``);
                     after the tool results: text ``all done``
``bench-oalead-N``   the same fan-out for the openai-agents peer, whose sub-agent tool
                     is ``worker`` with ``{"input": "job i"}``
``bench-worker``     text ``job done``
===================  =============================================================

Each tool call gets an id of its own (``c1_`` plus 8 hex digits), as a provider's are:
actant keys a thread's tool calls by id across its turns, so the same ``c1`` every turn
made its second tool turn reuse the first one's call.

JSON or SSE, whichever the request asks for (``"stream": true``). ``POST /bench/stats``
returns the number of answered requests per model (a sanity check on every contender).

Run as ``python -m bench.llm``: prints ``READY <base_url>`` and serves until stdin closes.
"""

from __future__ import annotations

import subprocess
import sys
import threading
import uuid
from collections import Counter
from pathlib import Path
from typing import Any

import httpx

from toolnexus_temporal.client.testing import (
    ScriptedLLM,
    ScriptedLLMServer,
    openai_view,
    render,
    style_of,
    text,
    tool_calls,
)

MODEL_CHAT = "bench-chat"
MODEL_CHAT_1K = "bench-chat-1k"
MODEL_TOOL = "bench-tool"
MODEL_WORKER = "bench-worker"
MODEL_APPROVAL = "bench-approval"
"""Calls ``APPROVAL_TOOL`` once, then answers ``done`` (the approval round trip)."""
TOOL_NAME = "lookup"
APPROVAL_TOOL = "guarded_lookup"
TOOL_ARGS = {"q": "benchmark"}
REPLY_1K = "r" * 1000


def lead_model(fanout: int) -> str:
    """The model name of a lead that delegates ``fanout`` jobs through ``task``."""
    return f"bench-lead-{fanout}"


def oa_lead_model(fanout: int) -> str:
    """The same lead for the openai-agents peer (its sub-agent tool is ``worker``)."""
    return f"bench-oalead-{fanout}"


def route(model: str, request: dict[str, Any]) -> dict[str, Any]:
    """The scripted reply for one request (OpenAI shape)."""
    messages = request.get("messages") or []
    after_tool = bool(messages) and messages[-1].get("role") == "tool"
    if model == MODEL_CHAT:
        reply = text("ok")
    elif model == MODEL_CHAT_1K:
        reply = text(REPLY_1K)
    elif model == MODEL_TOOL:
        reply = text("done") if after_tool else tool_calls((TOOL_NAME, TOOL_ARGS))
    elif model == MODEL_APPROVAL:
        reply = text("done") if after_tool else tool_calls((APPROVAL_TOOL, TOOL_ARGS))
    elif model == MODEL_WORKER:
        reply = text("job done")
    elif model.startswith("bench-lead-"):
        n = int(model.rsplit("-", 1)[1])
        jobs = [("task", {"agent": "worker", "prompt": f"job {i}"}) for i in range(n)]
        reply = text("all done") if after_tool else tool_calls(*jobs)
    elif model.startswith("bench-oalead-"):
        n = int(model.rsplit("-", 1)[1])
        jobs = [("worker", {"input": f"job {i}"}) for i in range(n)]
        reply = text("all done") if after_tool else tool_calls(*jobs)
    else:
        raise KeyError(model)
    for choice in reply.get("choices", []):
        for call in choice["message"].get("tool_calls") or []:
            call["id"] = f"{call['id']}_{uuid.uuid4().hex[:8]}"
    # Fields some clients (the openai SDK) expect on a chat completion.
    return {**reply, "created": 0, "model": model}


class BenchLLM(ScriptedLLM):
    """A :class:`ScriptedLLM` that routes on the model name and keeps no request log (a
    500-turn conversation would otherwise keep every transcript in memory)."""

    def __init__(self) -> None:
        super().__init__(scripts={})
        self.counts: Counter[str] = Counter()
        self._count_lock = threading.Lock()

    def respond(self, path: str, body: dict[str, Any]) -> httpx.Response:
        if path.rstrip("/").endswith("/bench/stats"):
            with self._count_lock:
                return httpx.Response(200, json=dict(self.counts))
        style = style_of(path)
        if not style:
            return httpx.Response(404, json={"error": f"no route {path}"})
        model = str(body.get("model"))
        try:
            reply = route(model, openai_view(style, body))
        except KeyError:
            return httpx.Response(404, json={"error": f"no script for model {model!r}"})
        with self._count_lock:
            self.counts[model] += 1
        return render(reply, style, stream=bool(body.get("stream")))


class LlmProcess:
    """The scripted server in a child process (``python -m bench.llm``); a context manager.

    Attributes:
        base_url: ``http://127.0.0.1:{port}/v1`` once started.
    """

    def __init__(self) -> None:
        self.base_url = ""
        self._proc: subprocess.Popen[str] | None = None

    def __enter__(self) -> LlmProcess:
        root = Path(__file__).resolve().parent.parent
        self._proc = subprocess.Popen(
            [sys.executable, "-m", "bench.llm"],
            cwd=root,
            stdin=subprocess.PIPE,
            stdout=subprocess.PIPE,
            text=True,
        )
        assert self._proc.stdout is not None
        line = self._proc.stdout.readline().strip()
        if not line.startswith("READY "):
            self._proc.kill()
            raise RuntimeError(f"scripted LLM server did not start: {line!r}")
        self.base_url = line.split(" ", 1)[1]
        return self

    @classmethod
    def attached(cls, base_url: str) -> LlmProcess:
        """A handle on a server another process started (``bench.isolated``): ``stats`` only."""
        llm = cls()
        llm.base_url = base_url
        return llm

    def stats(self) -> dict[str, int]:
        """Requests answered so far, per model."""
        response = httpx.post(f"{self.base_url}/bench/stats", json={}, timeout=10)
        response.raise_for_status()
        return dict(response.json())

    def __exit__(self, *exc: object) -> None:
        proc = self._proc
        if proc is None:
            return
        assert proc.stdin is not None
        proc.stdin.close()
        try:
            proc.wait(timeout=10)
        except subprocess.TimeoutExpired:
            proc.kill()
            proc.wait(timeout=10)


def main() -> None:
    """Serve until stdin closes."""
    with ScriptedLLMServer(BenchLLM()) as server:
        print(f"READY {server.base_url}", flush=True)
        sys.stdin.read()


if __name__ == "__main__":
    main()
