"""``tnx-worker --processes 2``: two worker processes on one task queue under one supervisor
(cli/supervisor.py). Turns land on both (two worker identities in the agents' histories), a
SIGTERM drains both and exits 0, and a child killed from outside is restarted while the other
keeps running, every turn finishing."""

from __future__ import annotations

import asyncio
import os
import re
import signal
import sys
import time
import uuid
from pathlib import Path
from typing import Any

import pytest
from temporalio.api.enums.v1 import EventType

from tests.helpers import spawn
from tests.workers import start_tnx_worker
from toolnexus_temporal.client import AgentRuntime, Handle, RuntimeOptions
from toolnexus_temporal.client.testing import ScriptedLLM, ScriptedLLMServer, text

ROOT = Path(__file__).resolve().parent.parent
START_LINE = re.compile(rb"^process (\d)/2 pid=(\d+): worker on ")


class Supervisor:
    """``tnx-worker --processes 2`` as a child of the test, its output read line by line."""

    def __init__(self, proc: asyncio.subprocess.Process) -> None:
        self.proc = proc
        self.lines: list[bytes] = []
        self.child_pids: dict[int, int] = {}

    async def read_until(self, pattern: bytes, timeout_s: float = 60) -> bytes:
        """Read lines until one contains ``pattern``; fail after ``timeout_s``."""
        assert self.proc.stdout is not None
        deadline = time.monotonic() + timeout_s
        while True:
            left = deadline - time.monotonic()
            assert left > 0, f"no line with {pattern!r} in {self.lines!r}"
            line = await asyncio.wait_for(self.proc.stdout.readline(), left)
            assert line, f"output ended without {pattern!r}: {self.lines!r}"
            self.lines.append(line)
            found = START_LINE.match(line)
            if found:
                self.child_pids[int(found.group(1))] = int(found.group(2))
            if pattern in line:
                return line

    async def started(self) -> None:
        while len(self.child_pids) < 2:
            await self.read_until(b"worker on ")

    async def exit_code(self, timeout_s: float = 60) -> int:
        assert self.proc.stdout is not None
        rest = await asyncio.wait_for(self.proc.stdout.read(), timeout_s)
        self.lines.extend(rest.splitlines(keepends=True))
        return await asyncio.wait_for(self.proc.wait(), timeout_s)


async def start_supervisor(address: str, task_queue: str, base_url: str, store: Path) -> Supervisor:
    proc = await start_tnx_worker(
        address,
        task_queue,
        base_url,
        store,
        args=("--processes", "2", "--graceful-shutdown-s", "10"),
        ready=None,  # the Supervisor reads the start lines of both processes
    )
    sup = Supervisor(proc)
    await sup.started()
    return sup


def alive(pid: int) -> bool:
    try:
        os.kill(pid, 0)
    except ProcessLookupError:
        return False
    # a zombie is gone for our purpose: its parent (the supervisor) has not reaped it yet
    try:
        state = Path(f"/proc/{pid}/stat").read_text().split(")")[-1].split()[0]
    except OSError:
        return False
    return state != "Z"


async def worker_identities(rt: AgentRuntime, handles: list[Handle]) -> set[str]:
    """The identities of the workers that started the agents' workflow tasks (each
    ``user@host (tnx) pid N``: ``worker.worker_identity``)."""
    out: set[str] = set()
    for h in handles:
        history = await rt.client.get_workflow_handle(rt.workflow_id(h.id)).fetch_history()
        for event in history.events:
            if event.event_type == EventType.EVENT_TYPE_WORKFLOW_TASK_STARTED:
                out.add(event.workflow_task_started_event_attributes.identity)
    return out


async def test_two_processes_share_the_turns_and_drain_on_sigterm(client, env, tmp_path) -> None:
    llm = ScriptedLLM({"m-parent": [text("ok")]}, repeat_last=True)
    address = env.client.service_client.config.target_host
    scope = f"t-{uuid.uuid4().hex[:10]}"
    task_queue = f"tq-{scope}"
    with ScriptedLLMServer(llm) as server:
        sup = await start_supervisor(address, task_queue, server.base_url, tmp_path / "s.sqlite")
        try:
            assert b"supervisor: 2 worker processes" in b"".join(sup.lines)
            rt = await AgentRuntime(client, task_queue=task_queue, scope=scope).start()
            handles: list[Handle] = []
            identities: set[str] = set()
            deadline = time.monotonic() + 90
            # Temporal gives each new agent's first workflow task to whichever poller asks
            # first: more agents until both processes have run turns (or the deadline).
            while (
                len(
                    {i.rsplit(" pid ", 1)[-1] for i in identities}
                    & set(map(str, sup.child_pids.values()))
                )
                < 2
            ):
                assert time.monotonic() < deadline, f"one worker ran every turn: {identities}"
                batch = [await rt.spawn(rt.root, "parent") for _ in range(4)]
                assert all(isinstance(h, Handle) for h in batch)
                results = await asyncio.gather(*(rt.run_turn(h, "hi") for h in batch))  # type: ignore[arg-type]
                assert [(r.status, r.text) for r in results] == [("done", "ok")] * len(batch)
                handles += batch  # type: ignore[arg-type]
                identities = await worker_identities(rt, handles)
        except BaseException:
            sup.proc.kill()
            raise
        sup.proc.send_signal(signal.SIGTERM)
        code = await sup.exit_code()
        output = b"".join(sup.lines).decode(errors="replace")
        assert code == 0, output
        assert "supervisor: SIGTERM: 2 worker processes draining" in output
        assert output.count("shutting down: activities in flight") == 2, output
        assert not any(alive(pid) for pid in sup.child_pids.values())


def slow_reply(request: dict[str, Any]) -> Any:
    """The model answers ``ok`` after 1.5 s (turns stay in flight long enough to kill a
    process under them); runs in the scripted server's request thread."""
    time.sleep(1.5)
    return text("ok")


@pytest.mark.stress  # kills a worker process
async def test_a_killed_process_is_restarted_and_every_turn_finishes(client, env, tmp_path) -> None:
    """Issue 36 item 7: SIGKILL of process 1 of 2 while turns are in flight: the supervisor
    starts it again (a new pid, the same 1/2), the other keeps running, every turn started
    before and after the kill finishes, and a SIGTERM afterwards still drains both, exit 0.
    Before the fix the supervisor drained the survivor and exited 1."""
    llm = ScriptedLLM({"m-parent": [slow_reply]}, repeat_last=True)
    address = env.client.service_client.config.target_host
    scope = f"t-{uuid.uuid4().hex[:10]}"
    task_queue = f"tq-{scope}"
    with ScriptedLLMServer(llm) as server:
        sup = await start_supervisor(address, task_queue, server.base_url, tmp_path / "s.sqlite")
        try:
            options = RuntimeOptions(llm_heartbeat_ms=2_000)
            rt = await AgentRuntime(
                client, task_queue=task_queue, scope=scope, options=options
            ).start()
            before = [await spawn(rt, rt.root, "parent") for _ in range(6)]
            turns = [asyncio.create_task(rt.run_turn(h, "hi")) for h in before]
            deadline = time.monotonic() + 60
            while llm.calls() < 4:  # turns in flight: their LLM calls started
                assert time.monotonic() < deadline, "no LLM calls in flight"
                await asyncio.sleep(0.05)
            victim, survivor = sup.child_pids[1], sup.child_pids[2]
            os.kill(victim, signal.SIGKILL)
            line = await sup.read_until(b"killed by SIGKILL")
            assert f"worker process 1/2 (pid {victim})".encode() in line
            assert b"restarting it in 0.5 s" in line
            line = await sup.read_until(b"worker process 1/2 restarted: pid ")
            restarted = int(line.rsplit(b"pid ", 1)[1])
            await sup.read_until(f"process 1/2 pid={restarted}: worker on ".encode())
            assert restarted != victim and sup.child_pids[1] == restarted
            assert alive(survivor) and not alive(victim)
            after = [await spawn(rt, rt.root, "parent") for _ in range(4)]
            turns += [asyncio.create_task(rt.run_turn(h, "hi")) for h in after]
            results = await asyncio.wait_for(asyncio.gather(*turns), 120)
            assert [(r.status, r.text) for r in results] == [("done", "ok")] * 10
        except BaseException:
            sup.proc.kill()
            raise
        sup.proc.send_signal(signal.SIGTERM)
        code = await sup.exit_code()
        output = b"".join(sup.lines).decode(errors="replace")
        assert code == 0, output
        assert output.count("shutting down: activities in flight") == 2, output
        assert not any(alive(pid) for pid in (survivor, restarted))


async def test_a_child_process_names_itself_in_its_fatal_error(tmp_path) -> None:
    """The supervisor's output merges its children's: a child's fatal error says which
    process it is (``process 1/2 pid=N:``), as its start line does (it said only
    ``tnx-worker: cannot connect ...``)."""
    proc = await asyncio.create_subprocess_exec(
        str(Path(sys.executable).parent / "tnx-worker"),
        *("--processes", "2", "--registry", "tests.registries:APPROVALS"),
        *("--address", "127.0.0.1:1", "--llm-base-url", "http://127.0.0.1:9/v1"),
        *("--model", "m", "--store", str(tmp_path / "s.sqlite")),
        cwd=ROOT,
        stdout=asyncio.subprocess.PIPE,
        stderr=asyncio.subprocess.STDOUT,
    )
    out, _ = await asyncio.wait_for(proc.communicate(), 120)
    assert proc.returncode == 1, out
    named = re.compile(rb"^tnx-worker: process [12]/2 pid=\d+: cannot connect to Temporal", re.M)
    assert named.search(out), out
    assert not re.search(rb"^tnx-worker: cannot connect", out, re.M), out
