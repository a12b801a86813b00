"""Follow the calls of ONE wake at run time and count the product modules it crosses.

A contributors' check (issue 33 item 4; docs/contributing.md): a wake should cross at most
``TARGET`` modules of ``toolnexus_temporal``. It starts a Temporal dev server (the venv's
``temporal`` binary, as ``tests/conftest.py`` does), an in-process worker with a scripted LLM
(``client.testing.ScriptedLLM`` behind ``httpx.MockTransport``) and an ``AgentRuntime``;
warms up with one wake, then records, with ``sys.setprofile`` and ``threading.setprofile``
(installed before the worker starts, recording only while a flag is on), the modules of
``toolnexus_temporal`` whose Python functions run during one more wake: ``rt.run_turn``
(the ``turn`` update: wake, the turn, the LLM activity, the wait for its result).

The rule: a module counts when one of its Python functions (or a coroutine of it) runs while
recording, in any thread of this process (client, worker, workflow and activity threads).
``workflows/contract/*`` (the floor of types, names and pure rules) is listed but counted
apart: the headline count leaves it out, as the structure review did; both counts are
printed. So is the scripted LLM (``client/testing.py``, ``client/scripted_wire.py``): it
stands in for the model server, which is no product module. A module *visit* is a step, in
one thread, from a function of one product module into (or back to) a function of another.

Usage: ``python scripts/wake_walk.py`` (about 10 s; exit status 1 when over ``TARGET``).
"""

from __future__ import annotations

import asyncio
import sys
import tempfile
import threading
import uuid
from collections import Counter
from pathlib import Path
from types import FrameType
from typing import Any

ROOT = "toolnexus_temporal."
TARGET = 30
"""The most modules one wake may cross, without ``workflows/contract/`` (issue 33)."""
CONTRACT = ROOT + "workflows.contract"
STAND_IN = (ROOT + "client.testing", ROOT + "client.scripted_wire")
"""The scripted LLM (the test double that answers for the model server): listed, not counted."""


def counted(module: str) -> bool:
    """Whether ``module`` counts in the headline number (not contract/, not the stand-in)."""
    return not module.startswith(CONTRACT) and module not in STAND_IN


class Walk:
    """The profiler: the product modules whose functions run, and the visits between them,
    while :attr:`on` is set."""

    def __init__(self) -> None:
        self.on = False
        self.modules: Counter[str] = Counter()
        self.functions: Counter[str] = Counter()
        self.visits = 0
        self._last: dict[int, str] = {}
        self._lock = threading.Lock()

    def profile(self, frame: FrameType, event: str, arg: Any) -> None:
        """A ``sys.setprofile`` hook: Python calls and returns only (not C calls)."""
        if not self.on or event not in ("call", "return"):
            return
        if event == "return":
            back = frame.f_back
            if back is None:
                return
            frame = back
        name = frame.f_globals.get("__name__", "")
        if not isinstance(name, str) or not name.startswith(ROOT):
            return
        thread = threading.get_ident()
        with self._lock:
            if event == "call":
                self.modules[name] += 1
                self.functions[f"{name}.{frame.f_code.co_qualname}"] += 1
            if self._last.get(thread) != name:
                if thread in self._last:
                    self.visits += 1
                self._last[thread] = name


def side(module: str) -> str:
    """``client``, ``workflows``, ``activities`` or ``other`` (worker, observability, ...)."""
    part = module.removeprefix(ROOT).split(".")[0]
    return part if part in ("client", "workflows", "activities") else "other"


async def walk_one_wake(walk: Walk) -> None:
    """Start everything, warm up with one wake, record the next."""
    from temporalio.contrib.pydantic import pydantic_data_converter
    from temporalio.testing import WorkflowEnvironment

    from toolnexus_temporal.activities import LlmConfig, Registry, SqliteConversationStore
    from toolnexus_temporal.client import AgentDef, AgentRuntime, SpawnError
    from toolnexus_temporal.client.testing import ScriptedLLM, text
    from toolnexus_temporal.worker import create_worker
    from toolnexus_temporal.workflows.contract.names import ALL_SEARCH_ATTRIBUTES

    temporal = Path(sys.executable).parent / "temporal"
    llm = ScriptedLLM({"m": [text("hello")]}, repeat_last=True)
    registry = Registry([AgentDef(name="helper", description="says hello", model="m")])
    async with await WorkflowEnvironment.start_local(
        dev_server_existing_path=str(temporal),
        data_converter=pydantic_data_converter,
        search_attributes=ALL_SEARCH_ATTRIBUTES,
        dev_server_log_level="error",
    ) as env:
        with tempfile.TemporaryDirectory() as tmp:
            scope = f"walk-{uuid.uuid4().hex[:8]}"
            async with (
                create_worker(
                    env.client,
                    registry=registry,
                    llm=LlmConfig(base_url="http://mock.local/v1", model="m"),
                    task_queue=f"tq-{scope}",
                    store=SqliteConversationStore(Path(tmp) / "c.sqlite"),
                    transport=llm.transport(),
                ) as worker,
                worker,
            ):
                rt = await AgentRuntime(env.client, task_queue=f"tq-{scope}", scope=scope).start()
                h = await rt.spawn(rt.root, "helper")
                assert not isinstance(h, SpawnError), h
                await rt.run_turn(h, "warm up")
                walk.on = True
                result = await rt.run_turn(h, "hello?")
                walk.on = False
                assert result.status == "done", result


def report(walk: Walk) -> int:
    """Print the modules by side, the counts and the rule; the exit status."""
    modules = sorted(walk.modules)
    without = [m for m in modules if counted(m)]
    by_side: dict[str, list[str]] = {}
    for m in modules:
        by_side.setdefault(side(m), []).append(m)
    print("One wake (rt.run_turn: wake, turn, LLM activity, wait), product modules whose")
    print("Python functions ran, by side (* = workflows/contract/ or the scripted LLM that")
    print("stands in for the model server: listed, counted apart):\n")
    for name in ("client", "workflows", "activities", "other"):
        found = by_side.get(name, [])
        kept = [m for m in found if counted(m)]
        extra = len(found) - len(kept)
        print(f"{name}: {len(kept)}" + (f" (+{extra} *)" if extra else ""))
        for m in found:
            mark = " " if counted(m) else "*"
            print(f"  {mark} {m.removeprefix(ROOT)}  ({walk.modules[m]} calls)")
    print()
    print(f"modules, all:              {len(modules)}")
    print(f"modules, counted:          {len(without)}  (target: at most {TARGET})")
    print(f"module visits:             {walk.visits}")
    print(
        "rule: a module counts when one of its Python functions runs during the wake, in any "
        "thread; workflows/contract/* (types, names, pure rules) and the scripted LLM "
        "(client/testing, client/scripted_wire) are left out of the counted number."
    )
    return 0 if len(without) <= TARGET else 1


def main() -> int:
    walk = Walk()
    # Before the worker starts: its threads (workflow activations, sync activities) are
    # created later and pick the hook up from threading.setprofile.
    sys.setprofile(walk.profile)
    threading.setprofile(walk.profile)
    try:
        asyncio.run(walk_one_wake(walk))
    finally:
        sys.setprofile(None)
        threading.setprofile(None)  # type: ignore[arg-type]
    return report(walk)


if __name__ == "__main__":
    raise SystemExit(main())
