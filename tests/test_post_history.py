"""Posts through the client cannot grow one run towards Temporal's 50 MiB (issue 23 item 6):
past ``inbox.POST_HISTORY_BYTES`` of history the ``admit_post`` validator refuses them, so
nothing reaches history, until the run has continued as new; the client returns the refusal
as ``PostResult(ok=False, error="history full ...")``. A post the inbox would refuse, and one
over the text bound, never reach history either (issue 36 item 6)."""

from __future__ import annotations

import asyncio
import os

from typer.testing import CliRunner

from tests.cli_support import ENV_KEYS
from tests.helpers import Gate, spawn
from tests.parking import REGISTRY
from tests.workers import free_port
from toolnexus_temporal.cli.app import app
from toolnexus_temporal.client import RuntimeOptions
from toolnexus_temporal.client.testing import ScriptedLLM
from toolnexus_temporal.workflows.contract.models import MAX_TEXT, InboxItem
from toolnexus_temporal.workflows.inbox import POST_HISTORY_BYTES


async def test_a_flood_of_refused_posts_does_not_grow_the_run(make_runtime, client) -> None:
    """A turn in flight (no continue-as-new), the inbox full: 200 posts of the longest text
    through the client are refused by the validator, and the run's history does not grow by
    their text (before issue 36 item 6 each was stored, 64,000 characters, until the run
    reached ``POST_HISTORY_BYTES``; that refusal stays as the backstop)."""
    gate = Gate("turn done")
    async with make_runtime(REGISTRY, gate.transport()) as rt:
        h = await spawn(rt, rt.root, "worker")
        await rt.wake(h, "think")  # the turn runs until the gate opens: no continue-as-new
        await asyncio.wait_for(gate.entered.wait(), 30)
        wf = client.get_workflow_handle(rt.workflow_id(h.id))

        async def history_bytes() -> int:
            return (await wf.describe()).raw_description.workflow_execution_info.history_size_bytes

        big = "y" * 64_000  # the longest post
        taken = [await rt.post(h, big) for _ in range(8)]
        assert all(r.ok for r in taken)  # the inbox took eight
        full = await history_bytes()
        errors: list[str | None] = []
        for _ in range(40):
            errors += [r.error for r in await asyncio.gather(*(rt.post(h, big) for _ in range(5)))]
        assert set(errors) == {"inbox full (8)"}
        # refused before history: 200 x 64,000 characters are not there (a workflow task of
        # the runtime's own may still complete meanwhile: a few hundred bytes)
        assert await history_bytes() - full < len(big)
        assert full < POST_HISTORY_BYTES
        gate.release.set()
        assert (await rt.wait(h)).text == "turn done"
        assert (await rt.inspect(h)).inbox_count == 8  # kept for the next wake


async def test_a_post_the_inbox_refuses_never_reaches_history(make_runtime, client) -> None:
    """Issue 36 item 6: a post through the client that the inbox refuses (full, here) is
    refused by the ``admit_post`` validator: the sender gets the reason as
    ``PostResult(ok=False)``, and its text is nowhere in the run's history (before: the
    update was accepted, its 64,000 characters stored, then answered ``ok`` False)."""
    options = RuntimeOptions(inbox_cap=1)
    async with make_runtime(REGISTRY, ScriptedLLM({}).transport(), options=options) as rt:
        h = await spawn(rt, rt.root, "worker")
        assert (await rt.post(h, "kept")).ok
        refused = [await rt.post(h, f"refused {i} " + "z" * 60_000) for i in range(5)]
        assert [(r.ok, r.error) for r in refused] == [(False, "inbox full (1)")] * 5
        assert refused[-1].status.inbox_count == 1
        h = await rt.inspect(h)
        assert h.inbox_count == 1 and h.state == "idle"
        wf = client.get_workflow_handle(rt.workflow_id(h.id))
        stored = b"".join([e.SerializeToString() async for e in wf.fetch_history_events()])
        assert b"kept" in stored
        assert b"refused" not in stored and b"z" * 1000 not in stored


def test_tnx_post_refuses_a_text_over_the_bound_before_connecting() -> None:
    """``tnx post`` with more than ``MAX_TEXT`` characters fails before anything is sent
    (the address is a port nobody listens on): one line naming the bound, exit 2."""
    env = {k: None for k in os.environ if k.startswith(ENV_KEYS)}
    env["TEMPORAL_ADDRESS"] = f"127.0.0.1:{free_port()}"
    result = CliRunner().invoke(app, ["post", "root/worker.1", "x" * (MAX_TEXT + 1)], env=env)
    assert result.exit_code == 2, result.output
    assert "invalid item: text: " in result.output and "64000" in result.output.replace(",", "")
    assert "\n" not in result.output.strip()


async def test_the_signal_fallback_refuses_a_post_before_sending_it(make_runtime, client) -> None:
    """The client's ``post`` signal (its fallback past the update limits) checks the inbox's
    rules on the ``state`` query first: a post the inbox would refuse is not sent, so no
    signal carries it into history (issue 36 item 6)."""
    options = RuntimeOptions(inbox_cap=1)
    async with make_runtime(REGISTRY, ScriptedLLM({}).transport(), options=options) as rt:
        h = await spawn(rt, rt.root, "worker")
        assert (await rt.post(h, "kept")).ok
        refused = await rt._fallbacks.post(h.id, InboxItem(text="refused by signal"))
        assert (refused.ok, refused.error) == (False, "inbox full (1)")
        wf = client.get_workflow_handle(rt.workflow_id(h.id))
        stored = b"".join([e.SerializeToString() async for e in wf.fetch_history_events()])
        assert b"refused by signal" not in stored
