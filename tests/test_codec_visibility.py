"""With a payload codec on, no user text reaches a search attribute (issue 24 item 2).

Search attributes are never encrypted (Temporal indexes them): the pending Request's prompt
used to be in clear in ``AgentRequestPrompt`` (in the history's upsert event, kept after the
answer, in describe and in the visibility list). With a codec on, the runtime keeps it out
unless the user opts in (``RuntimeOptions(prompt_in_visibility=True)``); the queue then shows
the Request's id, kind and waiting time, and the prompt is read through the (encrypted)
``view`` query.
"""

from __future__ import annotations

import os
import uuid
from collections.abc import AsyncIterator
from contextlib import asynccontextmanager
from typing import Any

from temporalio.client import Client

from tests.conftest import MODEL
from tests.helpers import eventually
from toolnexus_temporal.activities import LlmConfig, Registry, ToolContext, define_tool, pending
from toolnexus_temporal.activities.store import SqliteConversationStore
from toolnexus_temporal.client import AgentDef, AgentRuntime, Answer, Handle, RuntimeOptions
from toolnexus_temporal.client.codec import AesGcmCodec, with_codec
from toolnexus_temporal.client.testing import ScriptedLLM, text, tool_calls
from toolnexus_temporal.worker import create_worker
from toolnexus_temporal.workflows.contract.names import AGENT_REQUEST_PROMPT

KEY = os.urandom(32)


async def deploy(ctx: ToolContext, target: str) -> str:
    """Deploy once approved."""
    if ctx.answer is None:
        return pending(kind="approval", prompt=f"deploy {target} to production?")
    return f"deployed {target}"


REGISTRY = Registry([AgentDef(name="ops", tools=["deploy"])], tools=[define_tool(deploy)])


@asynccontextmanager
async def encrypted(
    client: Client, llm: ScriptedLLM, store: SqliteConversationStore, options: Any = None
) -> AsyncIterator[AgentRuntime]:
    scope = f"t-{uuid.uuid4().hex[:10]}"
    secure = with_codec(client, AesGcmCodec({"k": KEY}))
    async with (
        create_worker(
            secure,
            registry=REGISTRY,
            llm=LlmConfig(base_url="http://mock.local/v1", model=MODEL),
            task_queue=f"tq-{scope}",
            store=store,
            transport=llm.transport(),
        ) as worker,
        worker,
    ):
        yield await AgentRuntime(
            secure, task_queue=f"tq-{scope}", scope=scope, options=options
        ).start()


async def park_and_answer(rt: AgentRuntime, client: Client, marker: str) -> tuple[Any, bytes]:
    """Park an ``ops`` agent on a prompt holding ``marker``; its queue row (from visibility)
    and, after the answer finished the turn, its raw history and describe as stored."""
    h = await rt.spawn(rt.root, "ops")
    assert isinstance(h, Handle)
    r = await rt.run_turn(h, "ship it")
    assert r.status == "pending" and r.pending is not None
    assert marker in r.pending.prompt  # the prompt itself is intact (encrypted payloads)

    async def listed() -> bool:
        return [row.id for row in await rt.queue()] == [h.id]

    await eventually(listed)
    [row] = await rt.queue()
    wid = rt.workflow_id(h.id)
    plain = client.get_workflow_handle(wid)  # no codec: what the server holds
    described = (await plain.describe()).raw_description.SerializeToString()
    listing = b"".join(
        [
            wf.raw_info.SerializeToString()
            async for wf in client.list_workflows(f'WorkflowId="{wid}"')
        ]
    )
    await rt.answer(h, Answer(id=r.pending.id, ok=True))
    assert (await rt.wait(h)).status == "done"
    history = (await plain.fetch_history()).to_json().encode()
    return row, described + listing + history


async def test_the_prompt_stays_out_of_search_attributes_with_a_codec(
    client: Client, store: SqliteConversationStore
) -> None:
    marker = f"billing-{uuid.uuid4().hex[:8]}"
    llm = ScriptedLLM({MODEL: [tool_calls(("deploy", {"target": marker})), text("shipped")]})
    async with encrypted(client, llm, store) as rt:
        assert rt.options.prompt_in_visibility is False
        row, stored = await park_and_answer(rt, client, marker)
    assert marker.encode() not in stored
    assert row.prompt is None and row.kind == "approval" and row.request_id
    assert row.waiting_since is not None


async def test_a_user_may_opt_in_to_prompts_in_visibility(
    client: Client, store: SqliteConversationStore
) -> None:
    marker = f"billing-{uuid.uuid4().hex[:8]}"
    llm = ScriptedLLM({MODEL: [tool_calls(("deploy", {"target": marker})), text("shipped")]})
    options = RuntimeOptions(prompt_in_visibility=True)
    async with encrypted(client, llm, store, options) as rt:
        row, stored = await park_and_answer(rt, client, marker)
    assert row.prompt == f"deploy {marker} to production?"
    assert marker.encode() in stored  # in clear, as the option says
    assert AGENT_REQUEST_PROMPT.name.encode() in stored
