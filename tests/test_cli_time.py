"""Time for long-lived agents (issue 14 item 5): dates in ``tnx trace`` and ``tnx inspect``,
the age of each pending Request in ``tnx pending`` and ``tnx ls``, ``tnx ls --watch``; run
as the real executable against the dev server (see tests/test_cli.py)."""

from __future__ import annotations

import asyncio
import re
import signal
import sys
import time
from typing import Any

from tests.cli_support import TNX, Cli
from tests.registries import APPROVALS
from toolnexus_temporal.client import Handle
from toolnexus_temporal.client.testing import ScriptedLLM, text, tool_calls

DATED = re.compile(r"^\d{4}-\d{2}-\d{2} \d{2}:\d{2}:\d{2}\.\d{3}  ")
"""A trace line as ``tnx trace`` prints it: ISO date and time, then the line."""


CTRL_C_ABLE = (
    sys.executable,
    "-c",
    "import os, signal, sys; signal.signal(signal.SIGINT, signal.SIG_DFL); "
    "os.execv(sys.argv[1], sys.argv[1:])",
)
"""Run a program with Ctrl-C (SIGINT) at its default, as in a terminal: a test runner started
in the background by a non-interactive shell (``cmd &``) ignores SIGINT and its children
inherit that, and Python then installs no KeyboardInterrupt handler."""


def asker_llm() -> ScriptedLLM:
    return ScriptedLLM({"stub-model": [tool_calls(("check_secret", {})), text("asker done")]})


async def parked_asker(rt: Any) -> Handle:
    asker = await rt.spawn(rt.root, "asker")
    assert isinstance(asker, Handle)
    assert (await rt.run_turn(asker, "go")).status == "pending"
    return await rt.inspect(asker)  # a verb's status leaves the view's extras out


async def test_trace_and_inspect_show_dates(make_runtime, env) -> None:
    async with make_runtime(APPROVALS, asker_llm().transport()) as rt:
        cli = Cli(env, rt)
        asker = await parked_asker(rt)
        trace = (await cli.ok("trace", columns=200)).out.splitlines()
        dated = [line for line in trace if DATED.match(line)]
        assert len(dated) >= 3 and any("running→suspended" in line for line in dated), trace
        assert trace[-1].startswith("times: local time (UTC"), trace

        shown = (await cli.ok("inspect", asker.id, columns=200)).out
        since = re.search(r"since\s+(\d{4}-\d{2}-\d{2} [\d:.]+) \(waiting (\d+)s\)", shown)
        assert since is not None, shown
        assert since.group(1)[:19] in "\n".join(dated)  # the time it parked, to the second
        assert re.search(r"read at\s+\d{4}-\d{2}-\d{2} [\d:.]+ local time \(UTC", shown), shown


async def test_pending_and_ls_show_how_long_a_request_waited(make_runtime, env) -> None:
    async with make_runtime(APPROVALS, asker_llm().transport()) as rt:
        cli = Cli(env, rt)
        before_ms = int(time.time() * 1000)
        asker = await parked_asker(rt)
        after_ms = int(time.time() * 1000)
        assert asker.pending_since_ms is not None
        assert before_ms - 1_000 <= asker.pending_since_ms <= after_ms + 1_000

        queue: list[Any] = []
        for _ in range(50):  # visibility is eventually consistent
            queue = (await cli.ok("pending", "--json")).json()
            if queue:
                break
            await asyncio.sleep(0.2)
        assert [(q["id"], q["since_ms"]) for q in queue] == [
            (rt.workflow_id(asker.id), asker.pending_since_ms)
        ]
        table = (await cli.ok("pending", columns=200)).out
        row = next(r for r in table.splitlines() if r.startswith(rt.workflow_id(asker.id)))
        assert re.search(r"waiting \d+(s|m \d+s)", row), table

        tree = (await cli.ok("ls", columns=200)).out
        row = next(line for line in tree.splitlines() if asker.id in line)
        assert re.search(r"suspended\s+waiting \d+(s|m \d+s)", row), tree
        assert "WAITING" in tree

        # Answered: no age any more.
        await cli.ok("answer", asker.id, "--approve")
        assert (await rt.wait(asker)).status == "done"
        after = (await cli.ok("inspect", asker.id, "--json")).json()
        assert after["pending_since_ms"] is None and after["pending_req"] is None


async def test_ls_watch_refreshes_until_ctrl_c(make_runtime, env) -> None:
    async with make_runtime(APPROVALS, asker_llm().transport()) as rt:
        cli = Cli(env, rt)
        proc = await asyncio.create_subprocess_exec(
            *CTRL_C_ABLE,
            str(TNX),
            "ls",
            "--watch",
            "--interval",
            "0.3",
            env={**cli.environ, "COLUMNS": "200"},
            stdout=asyncio.subprocess.PIPE,
            stderr=asyncio.subprocess.PIPE,
        )
        assert proc.stdout is not None and proc.stderr is not None
        seen: list[str] = []

        async def until(predicate: Any) -> None:
            while not predicate():
                line = await asyncio.wait_for(proc.stdout.readline(), 90)  # type: ignore[union-attr]
                assert line, "\n".join(seen)
                seen.append(line.decode().rstrip("\n"))

        head = f"— tnx ls {rt.workflow_id('root')} · every 0.3s · "  # the id as tnx prints ids
        headers = lambda: [s for s in seen if s.startswith(head)]  # noqa: E731
        await until(lambda: len(headers()) >= 2)
        assert "Ctrl-C stops" in headers()[0] and "local time (UTC" in headers()[0]
        asker = await parked_asker(rt)  # the next refresh shows it, with its age
        await until(lambda: any(asker.id in s and "waiting" in s for s in seen))
        proc.send_signal(signal.SIGINT)
        _, err = await asyncio.wait_for(proc.communicate(), 60)
        assert proc.returncode == 0, err.decode()
        assert "Traceback" not in err.decode()
