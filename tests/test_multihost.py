"""Many hosts, proven (issue 13, item 2): three ``tnx-worker`` processes, each in its own
folder (no shared file), on one task queue and one PostgreSQL conversation store; 50 agents
run turns with tools and a parked approval while one worker is killed (SIGKILL) in the
middle of an LLM call and another is stopped gracefully (SIGTERM) with an LLM call in
flight, then started again.

Checked: every turn completes; every transcript, read back from the store, is complete and
in order; each handle's usage equals what the scripted model served, each call counted once;
no LLM call is asked again for a step that was answered (only the calls the killed worker
never got an answer for are asked again). The harness is ``tests/multihost.py``.
"""

from __future__ import annotations

import asyncio
import time
import uuid
from pathlib import Path
from typing import Any

import pytest
from temporalio.client import Client

from tests.helpers import replay_every_run, spawn
from tests.multihost import (
    MODEL,
    CountingLLM,
    WorkerProcess,
    expected_transcript,
    final_text,
    prompt,
    reply_for,
    until,
)
from toolnexus_temporal.activities.pgstore import PostgresConversationStore
from toolnexus_temporal.client import AgentRuntime, Answer, Handle, RuntimeOptions
from toolnexus_temporal.client.testing import ScriptedLLMServer
from toolnexus_temporal.workflows.contract.models import HandleView
from toolnexus_temporal.workflows.contract.names import QUERY_VIEW

pytestmark = [pytest.mark.stress, pytest.mark.multihost, pytest.mark.postgres]

AGENTS = 50
TURNS = 2
WORKERS = ("w1", "w2", "w3")


async def drive(
    rt: AgentRuntime, agent: int, handles: dict[int, Handle], stage: dict[int, str]
) -> int:
    """Spawn agent ``agent`` and run its turns (answering its approval); returns the turns
    that completed with the expected text. ``stage`` says where each driver is."""
    stage[agent] = "spawn"
    h = await spawn(rt, rt.root, "clerk")
    handles[agent] = h
    done = 0
    for turn in range(1, TURNS + 1):
        stage[agent] = f"run_turn {turn}"
        result = await rt.run_turn(h, prompt(agent, turn))
        if turn == 1:
            assert result.status == "pending" and result.pending is not None, result
            stage[agent] = "resume"
            await rt.resume(Answer(id=result.pending.id, ok=True))
            stage[agent] = "wait after resume"
            result = await rt.wait(h)
        assert (result.status, result.text) == ("done", final_text(agent, turn)), result
        done += 1
    stage[agent] = "done"
    return done


async def stuck_report(
    client: Client, rt: AgentRuntime, handles: dict[int, Handle], stage: dict[int, str], dump: Path
) -> str:
    """Where each unfinished driver is, its handle's state and last trace lines; each stuck
    workflow's history is saved in ``dump`` (JSON, for ``Replayer``)."""
    out = []
    for agent, where in sorted(stage.items()):
        if where == "done":
            continue
        out.append(f"agent {agent}: driver at {where!r}")
        if agent not in handles:
            continue
        wf = client.get_workflow_handle(rt.workflow_id(handles[agent].id))
        history = await wf.fetch_history()
        path = dump / f"agent{agent}.json"
        path.write_text(history.to_json())
        out.append(f"  history: {path}")
        try:
            view = await rt.inspect(handles[agent])
            out.append(f"  {view.id} state={view.state} turns={view.turns_total}")
            out += [f"  | {line}" for line in (await rt.trace_lines(handles[agent]))[-12:]]
        except Exception as err:
            out.append(f"  not readable: {err}")
    return "\n".join(out)


def shape(messages: list[Any]) -> list[tuple[Any, ...]]:
    """Transcript messages as (role, content, tool names, tool_call_id)."""
    return [
        (
            m.role,
            m.content,
            [c.name for c in m.tool_calls] if m.tool_calls else None,
            m.tool_call_id,
        )
        for m in messages
    ]


async def test_fifty_agents_on_three_worker_processes_survive_a_kill_and_a_restart(
    env: Any, tmp_path: Path, postgres_db: str
) -> None:
    client = env.client
    address = client.service_client.config.target_host
    scope = f"mh-{uuid.uuid4().hex[:8]}"
    queue = f"tq-{scope}"
    store = PostgresConversationStore(postgres_db)
    await store.open()
    llm = CountingLLM({MODEL: [reply_for]}, repeat_last=True)
    with ScriptedLLMServer(llm) as server:
        llm_root = server.base_url.removesuffix("/v1")
        args = [
            "--registry",
            "tests.registries:MULTIHOST",
            "--address",
            address,
            "--task-queue",
            queue,
            "--model",
            MODEL,
            "--store",
            postgres_db,
        ]
        workers = {n: WorkerProcess(n, tmp_path / n, args, llm_root) for n in WORKERS}
        try:
            t0 = time.monotonic()

            def phase(what: str) -> None:
                print(f"[{time.monotonic() - t0:6.1f} s] {what}", flush=True)

            await asyncio.gather(*(w.start() for w in workers.values()))
            phase("workers started")
            options = RuntimeOptions(llm_heartbeat_ms=2_000, llm_initial_retry_ms=200)
            rt = await AgentRuntime(
                client, task_queue=queue, scope=scope, options=options, store=store
            ).start()
            handles: dict[int, Handle] = {}
            stage: dict[int, str] = {}
            drivers = [asyncio.create_task(drive(rt, k, handles, stage)) for k in range(AGENTS)]
            w1, w2 = workers["w1"], workers["w2"]

            async def replies_stored(worker: str) -> bool:
                """Every reply served to ``worker`` is in the store (so a retry of its
                activity elsewhere finds it and asks the model nothing)."""
                for rec in llm.records(worker, "served"):
                    conv = await conv_id(client, rt, handles[rec.key[0]])
                    if len(await store.read(conv)) <= rec.n_messages:
                        return False
                return True

            # SIGKILL w1 in the middle of an LLM call: its next requests are held; once one
            # is held and every earlier answer to w1 is stored, w1 dies with that call open.
            await until(lambda: len(llm.records(w1.label, "served")) >= 10, "w1 busy", 90)
            llm.hold(w1.label)
            await until(lambda: bool(llm.records(w1.label, "held")), "a call held on w1", 60)
            await until(lambda: replies_stored(w1.label), "w1's answers stored", 30)
            await w1.kill()
            phase("w1 killed")
            aborted = llm.release(w1.label, abort=True)

            # SIGTERM w2 with an LLM call in flight, answer it while w2 shuts down, start
            # w2 again in the same folder.
            seen = len(llm.records(w2.label, "served"))
            await until(lambda: len(llm.records(w2.label, "served")) >= seen + 5, "w2 busy", 60)
            llm.hold(w2.label)
            await until(lambda: bool(llm.records(w2.label, "held")), "a call held on w2", 60)
            w2.terminate()
            phase("w2 stopping")
            await until(lambda: "shutting down" in w2.log_text(), "w2 to shut down", 30)
            in_flight = llm.release(w2.label, abort=False)
            await w2.wait_stopped()
            await w2.restart()
            phase("w2 restarted")

            finished, _ = await asyncio.wait(drivers, timeout=180)
            if len(finished) < AGENTS:
                report = await stuck_report(client, rt, handles, stage, tmp_path)
                raise AssertionError(f"turns never completed:\n{report}")
            completed = sum(await asyncio.gather(*drivers))
            phase("turns over")
            repeated = llm.repeated()
            print(
                f"\nmultihost: turns completed={completed} lost={AGENTS * TURNS - completed} "
                f"repeated LLM calls={sum(repeated.values())} "
                f"(calls open on the killed worker={aborted}, answered during the graceful "
                f"stop={in_flight}, requests={len(llm.records())})"
            )
            assert completed == AGENTS * TURNS
            assert repeated == {}, "LLM calls asked again after an answer: " + str(
                [(r.key, r.worker, r.state) for r in llm.records() if r.key in repeated]
            )
            served = llm.tokens_per_agent()
            for agent, h in sorted(handles.items()):
                view = await rt.inspect(h)
                assert view.state == "idle", view
                assert view.usage_total == served[agent], (agent, view.usage_total)
                transcript = await rt.transcript(h)
                assert shape(transcript) == expected_transcript(agent, TURNS), agent
            # Every agent's history replays on fresh code (no worker took a different path).
            await replay_every_run(client, rt, *(h.id for h in handles.values()))
            root = rt.root
            total = sum(served.values())

            async def root_counted() -> bool:
                return (await rt.inspect(root)).usage_total == total

            try:
                await until(root_counted, "root usage", 30)
            except AssertionError:
                view = await rt.inspect(root)
                raise AssertionError(f"root usage {view.usage_total} != served {total}") from None
        finally:
            for w in workers.values():
                await w.close()
            await store.aclose()


async def conv_id(client: Client, rt: AgentRuntime, h: Handle) -> str:
    """The store key of a handle's transcript (from its ``view``)."""
    view: HandleView = await client.get_workflow_handle(rt.workflow_id(h.id)).query(
        QUERY_VIEW, result_type=HandleView
    )
    assert view.store_key is not None
    return view.store_key
