"""Small helpers shared by the test modules: the one copy of ``spawn``, ``Gate`` and the
polling helpers (``eventually``, ``settle``); test modules import these rather than keep
their own."""

from __future__ import annotations

import asyncio
import inspect
import signal as signal_module
from collections.abc import Awaitable, Callable
from typing import Any, TypeVar

import httpx
import pytest
from temporalio.api.enums.v1 import EventType
from temporalio.client import Client
from temporalio.contrib.pydantic import pydantic_data_converter
from temporalio.worker import Replayer

from toolnexus_temporal.client import AgentRuntime, Budget, Handle
from toolnexus_temporal.client.testing import text
from toolnexus_temporal.worker import workflow_runner
from toolnexus_temporal.workflows.agent import AgentWorkflow

T = TypeVar("T")


async def spawn(rt: Any, parent: Any, name: str, budget: Budget | None = None) -> Handle:
    """``rt.spawn`` that must succeed."""
    h = await rt.spawn(parent, name, budget)
    assert isinstance(h, Handle), h
    return h


class Gate:
    """An LLM transport handler whose every call blocks until ``release`` is set, then
    answers ``reply``. ``entered`` is set by the first call, ``reached(n)`` once ``n`` calls
    came in; ``calls`` counts calls and ``cancelled`` the calls cancelled while blocked."""

    def __init__(self, reply: str = "finished late") -> None:
        self.reply = reply
        self.entered = asyncio.Event()
        self.release = asyncio.Event()
        self.calls = 0
        self.cancelled = 0
        self._reached: dict[int, asyncio.Event] = {}

    def reached(self, n: int) -> asyncio.Event:
        """An event set once ``n`` calls have come in."""
        event = self._reached.setdefault(n, asyncio.Event())
        if self.calls >= n:
            event.set()
        return event

    def transport(self) -> httpx.MockTransport:
        return httpx.MockTransport(self.handle)

    async def handle(self, request: httpx.Request) -> httpx.Response:
        self.calls += 1
        self.entered.set()
        for n, event in self._reached.items():
            if self.calls >= n:
                event.set()
        try:
            await self.release.wait()
        except asyncio.CancelledError:
            self.cancelled += 1
            raise
        return httpx.Response(200, json=text(self.reply))


async def accepted_updates(client: Client, workflow_id: str) -> int:
    """Updates the workflow has accepted, from its history."""
    history = await client.get_workflow_handle(workflow_id).fetch_history()
    accepted = EventType.EVENT_TYPE_WORKFLOW_EXECUTION_UPDATE_ACCEPTED
    return sum(1 for event in history.events if event.event_type == accepted)


async def eventually(
    check: Callable[[], Awaitable[bool] | bool],
    tries: int = 100,
    *,
    every: float = 0.1,
    within_s: float | None = None,
    what: str = "condition",
    ignoring: tuple[type[BaseException], ...] = (),
) -> None:
    """Poll ``check`` (sync or async) every ``every`` seconds until it holds (for state that
    settles by a signal): at most ``tries`` times, or, with ``within_s``, until that many
    seconds have passed. A check that raises one of ``ignoring`` counts as not yet."""
    loop = asyncio.get_running_loop()
    deadline = None if within_s is None else loop.time() + within_s
    attempt = 0
    while True:
        try:
            got = check()
            if inspect.isawaitable(got):
                got = await got
            if got:
                return
        except ignoring:
            pass
        attempt += 1
        if deadline is None and attempt >= tries:
            raise AssertionError(f"never held after {tries} tries: {what}")
        if deadline is not None and loop.time() > deadline:
            raise AssertionError(f"timed out after {within_s:.0f} s waiting for {what}")
        await asyncio.sleep(every)


async def settle(fetch: Callable[[], Awaitable[T]], ok: Callable[[T], bool], tries: int = 100) -> T:
    """Fetch every 0.1 s until ``ok`` holds (visibility and queries settle a moment after a
    signal) and return the value; the last value otherwise (the caller's assertion then says
    what differs)."""
    last: list[T] = []

    async def check() -> bool:
        last[:] = [await fetch()]
        return ok(last[0])

    try:
        await eventually(check, tries + 1)
    except AssertionError:
        pass
    return last[0]


async def replay_every_run(client: Client, rt: AgentRuntime, *hids: str) -> None:
    """Replay each run of each handle's workflow in the sandbox (determinism of the paths
    a test went through: nonces, the watch activity, continue-as-new with compaction)."""
    replayer = Replayer(
        workflows=[AgentWorkflow],
        data_converter=pydantic_data_converter,
        workflow_runner=workflow_runner(sandboxed=True),
    )
    for hid in hids:
        run: str | None = None
        while True:
            wf = client.get_workflow_handle(rt.workflow_id(hid), run_id=run)
            history = await wf.fetch_history()
            await replayer.replay_workflow(history)
            started = history.events[0].workflow_execution_started_event_attributes
            run = started.continued_execution_run_id or None
            if run is None:
                break


def split_loop(name: str, quick: int, full: int) -> pytest.MarkDecorator:
    """Parametrize a race test's loop ``name`` with two ranges of its iterations: the first
    ``quick`` in the inner loop, the rest (up to ``full``) marked ``stress``. Together they
    run the whole loop, each iteration as before (the same index, so the same order, offset
    or name)."""
    return pytest.mark.parametrize(
        name,
        [
            pytest.param(range(quick), id=f"first{quick}"),
            pytest.param(range(quick, full), id=f"rest{full - quick}", marks=pytest.mark.stress),
        ],
    )


async def communicate(proc: asyncio.subprocess.Process, timeout_s: float) -> tuple[bytes, bytes]:
    """``proc.communicate()`` bounded by ``timeout_s`` (a hang bound, not a speed goal). On a
    hang the process is asked where it is, then stopped: SIGINT (``asyncio.run`` prints the
    await chain it was cancelled in), then SIGABRT (with ``PYTHONFAULTHANDLER=1`` in its
    environment, every thread's stack), then SIGKILL; the test fails with all it printed.
    Reading goes on while it waits, so nothing it printed before the hang is lost."""
    assert proc.stdout is not None and proc.stderr is not None
    reads = asyncio.gather(proc.stdout.read(), proc.stderr.read(), proc.wait())
    done, _ = await asyncio.wait({reads}, timeout=timeout_s)
    if done:
        out, err, _ = reads.result()
        return out, err
    for signal, grace_s in ((signal_module.SIGINT, 10.0), (signal_module.SIGABRT, 5.0)):
        if proc.returncode is None:
            proc.send_signal(signal)
            await asyncio.wait({reads}, timeout=grace_s)
    if proc.returncode is None:
        proc.kill()
    out, err, _ = await reads
    raise AssertionError(
        f"the process did not end within {timeout_s} s\n--- stdout\n{out.decode()[-4000:]}\n"
        f"--- stderr\n{err.decode()[-8000:]}"
    )
