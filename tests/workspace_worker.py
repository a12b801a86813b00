"""A worker process for the workspace tests (``python -m tests.workspace_worker ...``): agent
``dev`` with the workspace tool ``step``, the scripted LLM over loopback HTTP, a shared
SQLite store, its own workspace root and Temporal identity.

Args (positional): address, task queue, LLM base URL, store path, workspace root, identity.
The process prints ``ready`` once its worker polls.
"""

from __future__ import annotations

import asyncio
import json
import sys
import time

from toolnexus_temporal import Registry, ToolContext, define_tool
from toolnexus_temporal.activities import LlmConfig, SqliteConversationStore
from toolnexus_temporal.client import AgentDef
from toolnexus_temporal.client.cluster import connect
from toolnexus_temporal.worker import create_worker


def step(name: str, ctx: ToolContext) -> str:
    """Leave a file in the workspace and list what is there; ``hang`` then never returns
    (the test kills the worker mid-call)."""
    assert ctx.workspace is not None
    (ctx.workspace / name).write_text(name)
    if name == "hang":
        time.sleep(3600)
    files = sorted(p.name for p in ctx.workspace.iterdir())
    return json.dumps({"dir": str(ctx.workspace), "files": files})


def registry() -> Registry:
    """Agent ``dev`` with the workspace tool ``step``."""
    return Registry(
        [AgentDef(name="dev", tools=["step"])], tools=[define_tool(step, workspace=True)]
    )


REGISTRY = registry()
"""For ``tnx-worker --registry tests.workspace_worker:REGISTRY``."""


async def main(address: str, queue: str, base_url: str, store: str, root: str, ident: str) -> None:
    client = await connect(address, "default")
    async with create_worker(
        client,
        registry=registry(),
        llm=LlmConfig(base_url=base_url, model="stub-model"),
        task_queue=queue,
        store=SqliteConversationStore(store),
        workspace_root=root,
        identity=ident,
    ) as worker:
        async with worker:
            print("ready", flush=True)
            await asyncio.Event().wait()


if __name__ == "__main__":
    asyncio.run(main(*sys.argv[1:7]))
