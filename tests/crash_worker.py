"""A worker process for crash tests (``python -m tests.crash_worker ...``): one agent ``w``,
the scripted LLM over loopback HTTP, and a store that can hang right after it recorded an
LLM reply (so the test can ``kill -9`` the process between the answer and the activity's
completion).

Args (positional): address, task queue, LLM base URL, store path, marker path, mode
(``hang_after_reply`` or ``plain``). The process prints ``ready`` once its worker polls and,
in ``hang_after_reply`` mode, creates the marker file once a reply is stored.
"""

from __future__ import annotations

import asyncio
import sys
import time
from pathlib import Path
from typing import Any

from toolnexus_temporal.activities import LlmConfig, SqliteConversationStore
from toolnexus_temporal.client import AgentDef
from toolnexus_temporal.client.cluster import connect
from toolnexus_temporal.worker import create_worker
from toolnexus_temporal.workflows.contract.models import Message

REGISTRY = {"w": AgentDef(name="w")}


class HangingStore(SqliteConversationStore):
    """Hangs (forever) right after the first write that stored an assistant reply."""

    def __init__(self, path: Path, marker: Path) -> None:
        super().__init__(path)
        self.marker = marker

    def _write(
        self, conv_id: str, base_len: int, messages: list[Message], *a: Any, **k: Any
    ) -> int:
        out = super()._write(conv_id, base_len, messages, *a, **k)
        if any(m.role == "assistant" for m in messages) and not self.marker.exists():
            self.marker.write_text("stored")
            time.sleep(3600)
        return out


async def main(address: str, queue: str, base_url: str, store: str, marker: str, mode: str) -> None:
    client = await connect(address, "default")
    conv_store = (
        HangingStore(Path(store), Path(marker))
        if mode == "hang_after_reply"
        else SqliteConversationStore(store)
    )
    async with create_worker(
        client,
        registry=REGISTRY,
        llm=LlmConfig(base_url=base_url, model="stub-model"),
        task_queue=queue,
        store=conv_store,
    ) as worker:
        async with worker:
            print("ready", flush=True)
            await asyncio.Event().wait()


if __name__ == "__main__":
    asyncio.run(main(*sys.argv[1:7]))
