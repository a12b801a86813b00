"""Posts through the client cannot grow one run towards Temporal's 50 MiB (issue 23 item 6):
past ``inbox.POST_HISTORY_BYTES`` of history the ``admit_post`` validator refuses them, so
nothing reaches history, until the run has continued as new; the client returns the refusal
as ``PostResult(ok=False, error="history full ...")``."""

from __future__ import annotations

import asyncio

from tests.helpers import Gate, spawn
from tests.parking import REGISTRY, runs_of
from toolnexus_temporal.workflows.inbox import POST_HISTORY_BYTES


async def test_posts_are_refused_before_history_once_a_run_is_full(make_runtime, client) -> None:
    gate = Gate("turn done")
    async with make_runtime(REGISTRY, gate.transport()) as rt:
        h = await spawn(rt, rt.root, "worker")
        await rt.wake(h, "think")  # the turn runs until the gate opens: no continue-as-new
        await asyncio.wait_for(gate.entered.wait(), 30)
        wf = client.get_workflow_handle(rt.workflow_id(h.id))

        async def history_bytes() -> int:
            return (await wf.describe()).raw_description.workflow_execution_info.history_size_bytes

        big = "y" * 64_000  # the longest post
        errors: list[str | None] = []
        while not any(e and e.startswith("history full") for e in errors):
            batch = await asyncio.gather(*(rt.post(h, big) for _ in range(5)))
            errors += [r.error for r in batch]
            assert len(errors) < 1_000, errors[-5:]
        assert errors.count(None) == 8  # the inbox took eight, then refused the rest loudly
        assert {e for e in errors if e and not e.startswith("history full")} == {"inbox full (8)"}
        full = await history_bytes()
        assert POST_HISTORY_BYTES <= full < POST_HISTORY_BYTES + 2**20
        refused = await rt.post(h, big)
        assert not refused.ok and refused.error is not None
        assert refused.error.startswith("history full (16.")
        # refused before it reached history: its 64,000 characters are not there (a workflow
        # task of the earlier rejections may still complete meanwhile: a few hundred bytes)
        assert await history_bytes() - full < len(big)
        # the turn ends, the idle run continues as new, and posts are taken in again
        gate.release.set()
        assert (await rt.wait(h)).text == "turn done"
        again = await rt.post(h, "small")
        assert again.error == "inbox full (8)"  # judged by the new run, not refused unseen
        assert len(await runs_of(client, rt.workflow_id(h.id))) >= 2
