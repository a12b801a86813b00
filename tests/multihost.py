"""The harness of the many-hosts test (``tests/test_multihost.py``): ``tnx-worker``
processes, each in its own folder, and a scripted model over loopback HTTP that knows which
worker asked and counts requests per (conversation, call).

* :class:`WorkerProcess`: one ``tnx-worker`` (the venv's console script) with its own working
  directory, log file and environment (nothing inherited that names a store, a model or a
  server: everything comes by flag); ``start``, ``kill`` (SIGKILL), ``stop`` (SIGTERM, waits
  for a clean exit).
* :class:`CountingLLM`: a :class:`ScriptedLLM` whose replies are a pure function of the
  request (:func:`reply_for`), so a repeated request gets the same reply. Each worker
  process calls it under its own URL prefix (``/{label}/v1``), so every request is known by
  the worker incarnation that sent it. Requests of a worker can be *held* (the HTTP call
  blocks) and later served or aborted: that is how the test knows a worker is mid-turn.
"""

from __future__ import annotations

import asyncio
import os
import re
import signal
import sys
import threading
from collections import Counter
from collections.abc import Awaitable, Callable
from dataclasses import dataclass, field
from pathlib import Path
from typing import Any

import httpx

from tests.helpers import eventually
from toolnexus_temporal.client.testing import ScriptedLLM, openai_view, style_of, text, tool_calls

ROOT = Path(__file__).resolve().parent.parent
MODEL = "multihost-model"
PROMPT = re.compile(r"agent (\d+) turn (\d+)")

Key = tuple[int, int]
"""(agent number, LLM call number within its conversation, from 0)."""


def prompt(agent: int, turn: int) -> str:
    """The user message of turn ``turn`` of agent ``agent``."""
    return f"agent {agent} turn {turn}"


def final_text(agent: int, turn: int) -> str:
    """The model's last reply in a turn."""
    return f"agent {agent} turn {turn} done"


def key_of(view: dict[str, Any]) -> tuple[Key, int, int]:
    """(key, turn, step within the turn) of a request in the OpenAI shape."""
    msgs = view["messages"]
    last_user = max(i for i, m in enumerate(msgs) if m["role"] == "user")
    match = PROMPT.fullmatch(str(msgs[last_user]["content"]))
    assert match, msgs[last_user]
    agent, turn = int(match[1]), int(match[2])
    calls = sum(1 for m in msgs if m["role"] == "assistant")
    step = sum(1 for m in msgs[last_user:] if m["role"] == "assistant")
    return (agent, calls), turn, step


def usage_of(key: Key, n_messages: int) -> tuple[int, int]:
    """(prompt, completion) tokens of the reply to a request: distinct per call."""
    agent, call = key
    return n_messages, 1 + agent % 5 + call


def reply_for(view: dict[str, Any]) -> dict[str, Any]:
    """Turn 1: fetch, then check_secret (parks for an approval), then a final text; later
    turns: fetch, then a final text."""
    key, turn, step = key_of(view)
    agent = key[0]
    p, c = usage_of(key, len(view["messages"]))
    if step == 0:
        return tool_calls(("fetch", {"q": f"{agent}-{turn}"}), prompt_tokens=p, completion_tokens=c)
    if step == 1 and turn == 1:
        return tool_calls(("check_secret", {}), prompt_tokens=p, completion_tokens=c)
    return text(final_text(agent, turn), prompt_tokens=p, completion_tokens=c)


def expected_transcript(agent: int, turns: int) -> list[tuple[Any, ...]]:
    """The transcript of an agent after ``turns`` turns, as (role, content, tool names,
    tool_call_id) tuples."""
    out: list[tuple[Any, ...]] = []
    for turn in range(1, turns + 1):
        out += [
            ("user", prompt(agent, turn), None, None),
            ("assistant", None, ["fetch"], None),
            ("tool", f"record {agent}-{turn}", None, "c1"),
        ]
        if turn == 1:
            out += [
                ("assistant", None, ["check_secret"], None),
                ("tool", "secret-token", None, "c1"),
            ]
        out.append(("assistant", final_text(agent, turn), None, None))
    return out


@dataclass
class Served:
    """One request the scripted model received."""

    worker: str
    key: Key
    n_messages: int
    state: str = "received"  # received | held | served | aborted
    tokens: int = 0


@dataclass
class CountingLLM(ScriptedLLM):
    """The scripted model of the test (module docstring). Thread-safe: the HTTP server
    answers each request on its own thread."""

    log: list[Served] = field(default_factory=list)
    _holding: set[str] = field(default_factory=set)
    _cond: threading.Condition = field(default_factory=threading.Condition)

    def respond(self, path: str, body: dict[str, Any]) -> httpx.Response:
        """Record the request under its worker label; block while that worker is held."""
        worker = path.strip("/").split("/")[0]
        style = style_of(path)
        if not style:
            return super().respond(path, body)
        view = openai_view(style, body)
        key, _, _ = key_of(view)
        rec = Served(worker, key, len(view["messages"]))
        with self._cond:
            self.log.append(rec)
            if worker in self._holding:
                rec.state = "held"
                self._cond.notify_all()
                self._cond.wait_for(lambda: rec.state != "held")
            if rec.state == "aborted":
                return httpx.Response(503, json={"error": "aborted: the worker was killed"})
        response = super().respond(path, body)
        p, c = usage_of(key, rec.n_messages)
        with self._cond:
            rec.state, rec.tokens = "served", p + c
            self._cond.notify_all()
        return response

    def hold(self, worker: str) -> None:
        """From now on, requests of ``worker`` block until :meth:`release`."""
        with self._cond:
            self._holding.add(worker)

    def release(self, worker: str, *, abort: bool) -> int:
        """Stop holding ``worker``; its held requests are served, or answered 503 and marked
        ``aborted`` (their worker is dead: nobody reads the answer). Returns how many."""
        with self._cond:
            self._holding.discard(worker)
            held = [r for r in self.log if r.worker == worker and r.state == "held"]
            for rec in held:
                rec.state = "aborted" if abort else "served_later"
            self._cond.notify_all()
        return len(held)

    def records(self, worker: str | None = None, state: str | None = None) -> list[Served]:
        """A snapshot of the log, filtered."""
        with self._cond:
            return [
                r
                for r in self.log
                if (worker is None or r.worker == worker) and (state is None or r.state == state)
            ]

    def repeated(self) -> dict[Key, int]:
        """Keys asked more than once, aborted requests (never answered) left out:
        key -> extra requests."""
        counts = Counter(r.key for r in self.records() if r.state != "aborted")
        return {k: n - 1 for k, n in counts.items() if n > 1}

    def tokens_per_agent(self) -> Counter[int]:
        """Tokens of the served replies, each key counted once."""
        seen: dict[Key, int] = {}
        for r in self.records(state="served"):
            seen[r.key] = r.tokens
        out: Counter[int] = Counter()
        for (agent, _), tokens in seen.items():
            out[agent] += tokens
        return out


def worker_env() -> dict[str, str]:
    """The environment of a worker process: ours minus every setting a worker reads (so
    only flags configure it), plus ``PYTHONPATH`` for the test registry."""
    prefixes = ("TNX_", "OPENAI_", "TEMPORAL_", "ANTHROPIC_")
    env = {k: v for k, v in os.environ.items() if not k.startswith(prefixes)}
    env["PYTHONPATH"] = str(ROOT)
    return env


async def until(check: Callable[[], Awaitable[bool] | bool], what: str, timeout_s: float) -> None:
    """``eventually`` every 50 ms for ``timeout_s`` seconds, failing with ``what``."""
    await eventually(check, every=0.05, within_s=timeout_s, what=what)


@dataclass
class WorkerProcess:
    """One ``tnx-worker`` process in its own folder ``home`` (module docstring).

    ``label`` names the current incarnation (the scripted model's URL prefix); a restart
    gets a new label (``w2`` → ``w2.r1``).
    """

    name: str
    home: Path
    args: list[str]
    llm_root: str
    label: str = ""
    restarts: int = 0
    proc: asyncio.subprocess.Process | None = None

    @property
    def log(self) -> Path:
        """This incarnation's log file (stdout and stderr)."""
        return self.home / f"{self.label}.log"

    def log_text(self) -> str:
        """The log so far."""
        return self.log.read_text(errors="replace") if self.log.exists() else ""

    async def start(self) -> None:
        """Start an incarnation and wait until it says it runs."""
        self.home.mkdir(parents=True, exist_ok=True)
        self.label = self.name if not self.restarts else f"{self.name}.r{self.restarts}"
        exe = Path(sys.executable).parent / "tnx-worker"
        with self.log.open("wb") as out:
            self.proc = await asyncio.create_subprocess_exec(
                str(exe),
                *self.args,
                "--llm-base-url",
                f"{self.llm_root}/{self.label}/v1",
                cwd=self.home,
                env=worker_env(),
                stdout=out,
                stderr=asyncio.subprocess.STDOUT,
                start_new_session=True,
            )
        proc = self.proc
        await until(
            lambda: "worker on" in self.log_text() or proc.returncode is not None,
            f"{self.label} to start",
            90,
        )
        assert proc.returncode is None, f"{self.label} exited:\n{self.log_text()}"

    async def kill(self) -> None:
        """SIGKILL: the process dies at once, mid-whatever."""
        assert self.proc is not None
        self.proc.send_signal(signal.SIGKILL)
        await asyncio.wait_for(self.proc.wait(), 30)

    def terminate(self) -> None:
        """SIGTERM (a graceful stop); :meth:`wait_stopped` waits for it."""
        assert self.proc is not None
        self.proc.send_signal(signal.SIGTERM)

    async def wait_stopped(self) -> None:
        """Wait for a clean exit (status 0) after :meth:`terminate`."""
        assert self.proc is not None
        rc = await asyncio.wait_for(self.proc.wait(), 60)
        assert rc == 0, f"{self.label} exited with {rc}:\n{self.log_text()[-3000:]}"

    async def restart(self) -> None:
        """Start a new incarnation in the same folder."""
        self.restarts += 1
        await self.start()

    async def close(self) -> None:
        """Kill whatever still runs (end of test)."""
        if self.proc is not None and self.proc.returncode is None:
            self.proc.kill()
            await self.proc.wait()
