"""``tnx schedule|unschedule|pause|unpause`` as the real executable against the dev server
(issue 25 items 1 and 3), and the paused state and next tick in ``tnx ls``."""

from __future__ import annotations

from typing import Any

from tests.cli_support import Cli
from tests.ticking import Recorder, ticker_registry


async def test_schedule_pause_and_ls_from_the_shell(make_runtime: Any, env: Any) -> None:
    async with make_runtime(ticker_registry(), Recorder().transport()) as rt:
        tnx = Cli(env, rt)
        await tnx.ok("spawn", "root", "ticker")
        await tnx.ok("spawn", "root", "ticker")
        none = (await tnx.ok("schedule", "ls")).out  # walk 6: not a bare header
        assert none.startswith("no agent has a tick schedule"), none
        done = await tnx.ok("schedule", "root/ticker.1", "--every", "1h", "--prompt", "look")
        assert done.out.startswith(
            f"schedule {rt.workflow_id('root/ticker.1')} → every 1h · next "
        ), done
        odd = await tnx.ok("schedule", "root/ticker.1", "--every", "1.5h", "--prompt", "look")
        assert "→ every 1.5h · next " in odd.out, odd  # echoed as written, not as 90m
        await tnx.ok("schedule", "root/ticker.1", "--every", "1h", "--prompt", "look")
        cron = await tnx.ok("schedule", "root/ticker.2", "--cron", "0 9 * * 1", "--json")
        assert cron.json()["tick"]["cron"] == "0 9 * * 1" and cron.json()["next_tick_ms"]
        listed = (await tnx.ok("schedule", "ls", "--json")).json()
        assert [h["id"] for h in listed] == [
            rt.workflow_id("root/ticker.1"),
            rt.workflow_id("root/ticker.2"),
        ]
        table = (await tnx.ok("schedule", "ls")).out
        assert "every 1h" in table and 'cron "0 9 * * 1" (UTC)' in table, table

        bad = await tnx("schedule", "root/ticker.1", "--cron", "0 25 * * *")
        assert bad.code == 2 and bad.err.startswith("error: --cron: cron expression"), bad
        assert 'hour "25" (allowed: 0-23' in bad.err, bad
        assert len(bad.err.strip().splitlines()) == 1 and "pydantic" not in bad.err, bad
        both = await tnx("schedule", "root/ticker.1", "--every", "5s", "--cron", "* * * * *")
        assert both.code == 2 and "exactly one" in both.err, both
        nonsense = await tnx("schedule", "root/ticker.1", "--every", "soon")
        assert nonsense.code == 2 and "not a duration" in nonsense.err, nonsense
        short = await tnx("schedule", "root/ticker.1", "--every", "200ms")
        assert short.code == 2 and "--every 200ms: must be 1s to 366d" in short.err, short
        assert len(short.err.strip().splitlines()) == 1 and "validation" not in short.err, short

        await tnx.ok("pause", "root", "--subtree")
        tree = (await tnx.ok("ls", "--json")).json()
        assert [h["paused"] for h in tree] == [False, True, True]
        table = (await tnx.ok("ls", columns=100)).out
        rows = [line for line in table.splitlines() if "root/ticker" in line]
        assert all("idle paused" in row for row in rows), table
        assert "NEXT TICK" in table
        # walk 7: inspect's children line says paused too (visibility, as tnx ls)
        parent = (await tnx.ok("inspect", "root", columns=300)).out
        assert f"{rt.workflow_id('root/ticker.2')} (idle paused)" in parent, parent
        await tnx.ok("unpause", "root/ticker.2")
        assert (await tnx.ok("inspect", "root/ticker.2", "--json")).json()["paused"] is False
        inspected = (await tnx.ok("inspect", "root/ticker.1")).out
        assert "yes: no turn starts until unpaused" in inspected, inspected
        await tnx.ok("unschedule", "root/ticker.1")
        listed = (await tnx.ok("schedule", "ls", "--json")).json()
        assert [h["id"] for h in listed] == [rt.workflow_id("root/ticker.2")]
        await rt.close(rt.root)
