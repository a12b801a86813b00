"""A parked approval survives its worker process: stop the worker, start a new one, answer,
and the parked turn finishes without a duplicate child or a repeated LLM call."""

from __future__ import annotations

import uuid

from tests.workers import start_tnx_worker, stop_worker
from toolnexus_temporal.client import AgentRuntime, Answer, Handle
from toolnexus_temporal.client.testing import ScriptedLLM, ScriptedLLMServer, text, tool_calls


async def test_approval_answered_after_a_worker_restart(client, env, tmp_path) -> None:
    llm = ScriptedLLM(
        {
            "m-parent": [
                tool_calls(("task", {"agent": "asker", "prompt": "get the secret"})),
                text("parent done"),
            ],
            "stub-model": [tool_calls(("check_secret", {})), text("asker done: secret-token")],
        }
    )
    address = env.client.service_client.config.target_host
    scope = f"t-{uuid.uuid4().hex[:10]}"
    task_queue = f"tq-{scope}"
    store = tmp_path / "store.sqlite"
    with ScriptedLLMServer(llm) as server:
        first = await start_tnx_worker(address, task_queue, server.base_url, store)
        try:
            rt = await AgentRuntime(client, task_queue=task_queue, scope=scope).start()
            parent = await rt.spawn(rt.root, "parent")
            assert isinstance(parent, Handle)
            result = await rt.run_turn(parent, "do the secret thing")
            assert result.status == "pending" and result.pending is not None
        finally:
            await stop_worker(first)
        assert llm.calls() == 2

        second = await start_tnx_worker(address, task_queue, server.base_url, store)
        try:
            await rt.resume(Answer(id=result.pending.id, ok=True))
            result = await rt.wait(parent)
            assert (result.status, result.text) == ("done", "parent done")
            parent = await rt.inspect(parent)
            assert parent.children == [f"{parent.id}/asker.1"]  # no duplicate child
            child = await rt.inspect(parent.children[0])
            assert child.state == "closed"
            assert child.last_result is not None
            assert child.last_result.text == "asker done: secret-token"
            # one call each to finish: nothing before the suspension was repeated
            assert llm.calls("m-parent") == 2 and llm.calls("stub-model") == 2
        finally:
            await stop_worker(second)
