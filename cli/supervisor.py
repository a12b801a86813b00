"""``tnx-worker --processes N``: N worker processes on one task queue, under one supervisor.

One worker process runs all its workflow tasks on one Python thread (the GIL), so on a host
with several cores one process uses about one of them. ``--processes N`` (``auto``: one per
core this process may run on, ``os.sched_getaffinity``) makes ``tnx-worker`` a supervisor of
N child processes, each today's worker: the same command line plus ``--processes 1``, run as
``python -m toolnexus_temporal.worker`` with the same environment (and
``TNX_WORKER_PROCESS=i/N``). Every child polls the same task queue; Temporal hands each
workflow task and activity task to whichever poller asks first, and each child has its own
worker identity (the client's with ``pid N``: :func:`~toolnexus_temporal.worker.worker_identity`),
which the histories' task events and the server's poller list record.

What the supervisor does (and the exit codes, :func:`supervise`):

* **SIGINT/SIGTERM**: forwarded once to every child, which drains as a single worker does
  (stops polling, lets its activities in flight finish for up to ``--graceful-shutdown-s``);
  the supervisor waits for all of them. Each child runs in its own process group, so a
  terminal's Ctrl-C reaches the supervisor only and each child gets the signal once. A second
  signal is forwarded too (each child then stops at once, as a single worker does on its
  second signal) and the supervisor then dies of that signal's default action.
* **A child that ends on its own** (a crash, SIGKILL from outside, an out-of-memory kill):
  the supervisor says which and how and starts it again in its place (same ``i/N``, a new
  pid) after a backoff (:class:`RestartPolicy`: 0.5 s, doubling to at most 10 s); the others
  keep running. A worker that died mid-task costs what any worker crash costs (its activities
  retry on the live workers or the restarted one after their heartbeat timeout, its workflows
  replay elsewhere after the sticky queue's timeout). **The crash-loop limit**: a process
  slot that ends on its own a 6th time within 60 s (5 restarts within 60 s already: an
  unreachable server, codec keys gone stale, a bad flag that passed the checks) is not
  restarted again: the supervisor drains the others as for SIGTERM and exits 1, so a process
  manager (systemd, Kubernetes) that restarts the whole unit sees the failure.
* **The supervisor killed outright** (SIGKILL): each child gets SIGTERM from the kernel
  (Linux ``PR_SET_PDEATHSIG``) and drains.

Exit code: 0 when every child exited 0 after a signal (or died of that very signal while still
starting, before its handler existed: it held no task), restarted ones included; 1 when the
crash-loop limit was reached or a child ended after the signal with another code. Flags are
checked once, before any child starts (a bad one: exit 2).

The LLM-call cap (``--max-concurrent-turns``) stays per process: N processes make up to
N × cap HTTP calls at once (docs/guide/scale.md).
"""

from __future__ import annotations

import asyncio
import contextlib
import ctypes
import os
import signal
import sys
import time
from collections.abc import Awaitable, Callable, Sequence
from dataclasses import dataclass
from typing import Final

PROCESSES_ENV: Final = "TNX_PROCESSES"
"""The environment variable of ``--processes``."""

CHILD_ENV: Final = "TNX_WORKER_PROCESS"
"""Set in each child's environment to ``i/N`` (1-based): which process of the supervisor's
it is (its start line says so)."""

AUTO: Final = "auto"

MAX_PER_CORE: Final = 4
"""The most worker processes per usable core ``--processes`` takes (a typo such as 500
would start 500 Python workers)."""

_PR_SET_PDEATHSIG: Final = 1
"""``prctl`` option: the signal a process gets when its parent dies (``<linux/prctl.h>``)."""


@dataclass(frozen=True)
class RestartPolicy:
    """When the supervisor starts again a child that ended on its own (issue 36 item 7).

    Attributes:
        limit: the most restarts of one process slot within ``window_s``; the next death in
            that window gives up (drain the others, exit 1).
        window_s: the window, seconds.
        first_s: the backoff before the first restart in the window, seconds; it doubles
            with each further death in the window, up to ``max_s``.
        max_s: the longest backoff, seconds.
    """

    limit: int = 5
    window_s: float = 60.0
    first_s: float = 0.5
    max_s: float = 10.0

    def delay(self, deaths: Sequence[float], now: float) -> float | None:
        """The backoff before restarting a slot whose process just ended, in seconds, or
        None to give up (the crash-loop limit).

        Args:
            deaths: the monotonic times (seconds) the slot's processes ended on their own,
                this death included.
            now: the monotonic time now, seconds.
        """
        recent = sum(1 for at in deaths if now - at < self.window_s)
        if recent > self.limit:
            return None
        return min(self.max_s, self.first_s * 2.0 ** max(0, recent - 1))


def process_label() -> str:
    """``"process 2/4 pid=1234: "`` in a supervisor's child (:data:`CHILD_ENV` set), else
    ``""``: the prefix of a child's start line and of its fatal error, so a reader of the
    supervisor's merged output knows which process said it."""
    which = os.environ.get(CHILD_ENV)
    return f"process {which} pid={os.getpid()}: " if which else ""


class ProcessesError(ValueError):
    """``--processes`` is neither ``auto`` nor a whole number of at least 1."""


def usable_cores() -> int:
    """The cores this process may run on (its CPU affinity; ``os.cpu_count()`` where the
    platform has no affinity), at least 1."""
    try:
        return max(1, len(os.sched_getaffinity(0)))
    except AttributeError:  # not Linux
        return max(1, os.cpu_count() or 1)


def parse_processes(value: str | int) -> int:
    """``--processes`` as a count: ``auto`` is :func:`usable_cores`.

    Raises:
        ProcessesError: not ``auto``, not an integer of at least 1, or more than
            :data:`MAX_PER_CORE` per core.
    """
    text = str(value).strip().lower()
    if text == AUTO:
        return usable_cores()
    try:
        count = int(text)
    except ValueError:
        raise ProcessesError(
            f"--processes must be a whole number of at least 1 or {AUTO!r}, got {value!r}"
        ) from None
    if count < 1:
        raise ProcessesError(f"--processes must be at least 1, got {count}")
    most = MAX_PER_CORE * usable_cores()
    if count > most:
        raise ProcessesError(
            f"--processes {count} is more than {MAX_PER_CORE} per core ({most} on this host): "
            "each process is a whole Python worker; more than the cores only adds memory"
        )
    return count


def child_command(argv: Sequence[str]) -> list[str]:
    """The command of one child: today's worker with the supervisor's arguments, and
    ``--processes 1`` last (the last occurrence of an option wins, over the flag and over
    ``TNX_PROCESSES``)."""
    return [sys.executable, "-m", "toolnexus_temporal.worker", *argv, "--processes", "1"]


def _die_with_parent() -> None:  # pragma: no cover - runs in the child before exec
    """In the child, before exec: ask Linux for SIGTERM when the supervisor dies."""
    with contextlib.suppress(Exception):
        ctypes.CDLL(None, use_errno=True).prctl(_PR_SET_PDEATHSIG, int(signal.SIGTERM))


def describe_exit(code: int) -> str:
    """A child's return code in words: ``exited 1`` or ``killed by SIGKILL``."""
    if code < 0:
        try:
            return f"killed by {signal.Signals(-code).name}"
        except ValueError:
            return f"killed by signal {-code}"
    return f"exited {code}"


async def supervise(
    argv: Sequence[str],
    processes: int,
    *,
    echo: Callable[[str], None] = print,
    command: Callable[[Sequence[str]], list[str]] = child_command,
    policy: RestartPolicy | None = None,
) -> int:
    """Run ``processes`` children (``command(argv)``) until they have all ended; forward
    SIGINT/SIGTERM to them, restart one that ends on its own (see the module docstring).

    Args:
        argv: the supervisor's own arguments (``sys.argv[1:]``).
        processes: how many children, at least 1.
        echo: where the supervisor's lines go (stderr in ``tnx-worker``).
        command: the child command for ``argv`` (tests: a stand-in child).
        policy: the restart backoff and crash-loop limit (default :class:`RestartPolicy`).

    Returns:
        The exit code: 0 when every child exited 0 after a signal, else 1. After a second
        signal it does not return: the process dies of that signal.
    """
    loop = asyncio.get_running_loop()
    children: list[asyncio.subprocess.Process] = []
    state: dict[str, signal.Signals | None] = {"signal": None, "again": None}
    stopping = asyncio.Event()

    def forward(sig: signal.Signals) -> None:
        stopping.set()
        for child in children:
            if child.returncode is None:
                with contextlib.suppress(ProcessLookupError):
                    child.send_signal(sig)

    def on_signal(sig: signal.Signals) -> None:
        if state["signal"] is None:
            state["signal"] = sig
            alive = sum(1 for c in children if c.returncode is None)
            echo(
                f"supervisor: {sig.name}: {alive} worker processes draining "
                "(signal again to stop them now)"
            )
        else:
            state["again"] = sig
            for s in (signal.SIGINT, signal.SIGTERM):
                loop.remove_signal_handler(s)
        forward(sig)

    async def start(i: int) -> asyncio.subprocess.Process:
        child = await asyncio.create_subprocess_exec(
            *command(argv),
            env={**os.environ, CHILD_ENV: f"{i + 1}/{processes}"},
            process_group=0,  # a terminal's Ctrl-C reaches the supervisor only
            preexec_fn=_die_with_parent if sys.platform == "linux" else None,
        )
        if state["signal"] is not None:  # a signal came while starting: this one too
            with contextlib.suppress(ProcessLookupError):
                child.send_signal(state["signal"])
        return child

    for sig in (signal.SIGINT, signal.SIGTERM):
        loop.add_signal_handler(sig, on_signal, sig)
    try:
        for i in range(processes):
            children.append(await start(i))
        echo(
            f"supervisor: {processes} worker processes on one task queue: pids "
            + ", ".join(str(c.pid) for c in children)
        )
        restarts = _Restarts(policy or RestartPolicy(), start, stopping)
        failed = await _wait_children(children, state, forward, echo, restarts)
    finally:
        forward(signal.SIGTERM)  # cancelled or failed to start them all: leave none behind
        for sig in (signal.SIGINT, signal.SIGTERM):
            loop.remove_signal_handler(sig)
    again = state["again"]
    if again is not None:
        signal.signal(again, signal.SIG_DFL)
        signal.raise_signal(again)
    return 1 if failed else 0


@dataclass
class _Restarts:
    """What :func:`_wait_children` needs to restart a child: the rule, how to start process
    slot ``i`` (0-based), and the event set once everything drains (a backoff ends early)."""

    policy: RestartPolicy
    start: Callable[[int], Awaitable[asyncio.subprocess.Process]]
    stopping: asyncio.Event
    clock: Callable[[], float] = time.monotonic

    async def backoff(self, delay: float) -> None:
        """Sleep ``delay`` seconds, or less once the supervisor drains."""
        with contextlib.suppress(TimeoutError):
            await asyncio.wait_for(self.stopping.wait(), delay)


async def _wait_children(
    children: list[asyncio.subprocess.Process],
    state: dict[str, signal.Signals | None],
    forward: Callable[[signal.Signals], None],
    echo: Callable[[str], None],
    restarts: _Restarts,
) -> bool:
    """Wait until every child has ended (:func:`supervise`'s loop). A child that ends before
    any signal (``state["signal"]``) is started again in its slot after the policy's backoff,
    unless its slot reached the crash-loop limit: then the others drain (SIGTERM forwarded)
    and that is a failure; one that ends after a signal with a code other than 0 or that
    signal's is a failure.

    Returns:
        Whether a child failed (the supervisor then exits 1).
    """
    processes = len(children)
    failed = False
    deaths: list[list[float]] = [[] for _ in children]
    tasks: dict[asyncio.Task[object], tuple[str, int]] = {
        asyncio.create_task(c.wait()): ("exit", i) for i, c in enumerate(children)
    }
    while tasks:
        done, _ = await asyncio.wait(tasks, return_when=asyncio.FIRST_COMPLETED)
        for task in done:
            kind, i = tasks.pop(task)
            child = children[i]
            name = f"worker process {i + 1}/{processes}"
            if kind == "restart":
                if state["signal"] is None:  # (a signal during the backoff: it stays down)
                    children[i] = child = await restarts.start(i)
                    echo(f"supervisor: {name} restarted: pid {child.pid}")
                    tasks[asyncio.create_task(child.wait())] = ("exit", i)
                continue
            code = task.result()
            assert isinstance(code, int)
            if state["signal"] is None:
                now = restarts.clock()
                deaths[i] = [*deaths[i], now]
                delay = restarts.policy.delay(deaths[i], now)
                said = f"supervisor: {name} (pid {child.pid}) {describe_exit(code)} on its own"
                if delay is not None:
                    echo(f"{said}; restarting it in {delay:g} s")
                    tasks[asyncio.create_task(restarts.backoff(delay))] = ("restart", i)
                    continue
                failed = True
                policy = restarts.policy
                echo(
                    f"{said}; not restarted: more than {policy.limit} restarts within "
                    f"{policy.window_s:g} s (a crash loop): draining the others, exit 1"
                )
                state["signal"] = signal.SIGTERM
                forward(signal.SIGTERM)
            elif code not in (0, -int(state["signal"] or 0)):
                # (killed by the very signal forwarded: it was still starting, before its
                # handler existed, so it held no task: a clean stop)
                failed = True
                echo(f"supervisor: {name} (pid {child.pid}) {describe_exit(code)}")
    return failed


def run_supervisor(argv: Sequence[str], processes: int) -> int:
    """:func:`supervise` on a fresh event loop, its lines on stderr."""
    return asyncio.run(
        supervise(argv, processes, echo=lambda line: print(line, file=sys.stderr, flush=True))
    )
