"""The ``tnx`` host verbs, run as the real executable against the real dev server.

Each CLI call is a subprocess started with ``asyncio.create_subprocess_exec``: the in-process
worker lives on the test's event loop and must keep serving while the CLI runs.
"""

from __future__ import annotations

import asyncio
import re
import shlex
import uuid
from typing import Any

import httpx
import pytest
from temporalio.service import RPCError, RPCStatusCode

from tests.cli_support import Cli
from tests.helpers import Gate
from toolnexus_temporal.activities import Registry
from toolnexus_temporal.client import AgentDef, Handle, RuntimeOptions
from toolnexus_temporal.client.testing import ScriptedLLM, text

AGENTS = [
    AgentDef(name="coordinator", description="splits and delegates"),
    AgentDef(name="explore", description="read-only research"),
    AgentDef(name="peer", description="team member"),
]


async def test_spawn_and_ls_show_the_tree(make_runtime, env) -> None:
    async with make_runtime(Registry(AGENTS), ScriptedLLM({}).transport()) as rt:
        tnx = Cli(env, rt)
        # every id the CLI prints is the workflow id, which pastes back (issue 37 item 1)
        assert (await tnx.ok("spawn", "root", "coordinator")).out == (
            f"{rt.workflow_id('root/coordinator.1')}\n"
        )
        peer = await tnx.ok("spawn", "root", "peer", "--budget", '{"max_tokens": 500}', "--json")
        assert (
            peer.json()["id"] == rt.workflow_id("root/peer.2") and peer.json()["pool_tokens"] == 500
        )
        grandchild = await tnx.ok("spawn", "root/coordinator.1", "explore")
        assert grandchild.out.strip() == rt.workflow_id("root/coordinator.1/explore.1")
        for scope in (rt.scope or "", ""):  # as printed, with or without --scope
            pasted = await tnx.ok("inspect", grandchild.out.strip(), "--scope", scope, "--json")
            # --json prints ids as the text does (walk 8): with the scope
            assert pasted.json()["id"] == rt.workflow_id("root/coordinator.1/explore.1")

        tree = (await tnx.ok("ls", "--json")).json()
        w = rt.workflow_id
        assert [(h["id"], h["depth"], h["state"]) for h in tree] == [
            (w("root"), 0, "idle"),
            (w("root/coordinator.1"), 1, "idle"),
            (w("root/coordinator.1/explore.1"), 2, "idle"),
            (w("root/peer.2"), 1, "idle"),
        ]
        assert tree[0]["children"] == [w("root/coordinator.1"), w("root/peer.2")]

        table = (await tnx.ok("ls", columns=80)).out
        assert "…" not in table, table  # piped: whole, whatever the width of the ids
        rows = [line for line in table.splitlines() if "root" in line]
        assert [row.split()[0] for row in rows] == [h["id"] for h in tree]
        indented = f"    {rt.workflow_id('root/coordinator.1/explore.1')}"  # by depth
        assert rows[2].startswith(indented)
        assert "500/∞" in rows[3] and "∞/∞" in rows[0]

        unknown = await tnx("spawn", "root", "nope")
        assert unknown.code == 1, unknown
        assert 'unknown agent "nope" (known: coordinator, explore, peer)' in unknown.err
        assert unknown.out == ""

        bad = await tnx("spawn", "root", "peer", "--budget", '{"max_turns": 0}')
        assert bad.code == 2 and "--budget: max_turns must be at least 1, got 0" in bad.err, bad


async def test_post_wake_wait_inspect_trace(make_runtime, env, store) -> None:
    llm = ScriptedLLM(
        {"stub-model": [text("scripted answer"), httpx.Response(400, json={"error": "nope"})]}
    )
    async with make_runtime(
        Registry(AGENTS), llm.transport(), options=RuntimeOptions(inbox_cap=1)
    ) as rt:
        tnx = Cli(env, rt, store.path)
        h = await rt.spawn(rt.root, "peer")
        assert isinstance(h, Handle)

        posted = await tnx.ok(
            "post", h.id, "hello there", "--from", "root", "--channel", "ops", "--json"
        )
        assert posted.json()["ok"] is True and posted.json()["status"]["inbox_count"] == 1
        full = await tnx("post", h.id, "one too many")
        assert full.code == 1 and "inbox full (1)" in full.err, full

        woke = await tnx.ok("wake", h.id, "do it")
        assert woke.out.startswith(f"wake {rt.workflow_id(h.id)} → ")
        result = (await tnx.ok("wait", h.id, "--timeout-ms", "20000", "--json")).json()
        assert (result["status"], result["text"], result["is_error"]) == (
            "done",
            "scripted answer",
            False,
        )

        view = (await tnx.ok("inspect", h.id, "--transcript", "--json")).json()
        assert view["state"] == "idle" and view["turns_total"] == 1
        assert view["inbox_count"] == 0 and view["defn"]["name"] == "peer"
        assert view["last_result"]["text"] == "scripted answer"
        assert [m["role"] for m in view["transcript"]] == ["user", "assistant"]
        prompt = view["transcript"][0]["content"]
        assert "[from=root channel=ops] hello there" in prompt and "do it" in prompt

        # piped, the output is whole at any COLUMNS (issue 24 item 8; on a terminal it fits
        # the width and cuts long texts: tests/unit/test_narrow_output.py)
        shown = (await tnx.ok("inspect", h.id, "--transcript", columns=80)).out
        assert "…" not in shown, shown
        seen = (await tnx.ok("inspect", h.id, "--model-view", "--json")).json()["model_view"]
        assert [m["content"] for m in seen["messages"]] == [
            m["content"] for m in view["transcript"]
        ], "no context policy: the model is sent the whole transcript"
        assert "model view (2 message(s)" in (await tnx.ok("inspect", h.id, "--model-view")).out
        assert "scripted answer" in shown and "team member" in shown
        assert re.search(r"last result\s+done · turns 1", shown), shown
        assert re.search(r"^1\s+user\s+do it \[inbox: 1 item\(s\).*hello there", shown, re.M), shown

        lines = [line["line"] for line in (await tnx.ok("trace", "--json")).json()]
        wid = rt.workflow_id(h.id)  # --json lines print ids as the text does (walk 8)
        assert f"{wid}: idle→running (wake)" in lines
        assert f"{wid}: running→idle (done)" in lines
        # the refused post was refused before history (issue 36 item 6): loud to its sender
        # only, no trace line
        assert not any("one too many" in line or "post REJECTED" in line for line in lines)
        trace = (await tnx.ok("trace", h.id)).out
        assert re.search(
            rf"^\d{{4}}-\d\d-\d\d \d\d:\d\d:\d\d\.\d{{3}}\s+"
            rf"{re.escape(rt.workflow_id(h.id))}: idle→running \(wake\)\s*$",  # ids as printed
            trace,
            re.M,
        ), trace

        # A failed turn: wait prints the error result and exits 1.
        await rt.wake(h, "again")
        failed = await tnx("wait", h.id)
        assert failed.code == 1 and failed.out.startswith("error"), failed


async def test_interrupt_close_and_errors(make_runtime, env) -> None:
    gate = Gate(reply="late")
    async with make_runtime(Registry(AGENTS), httpx.MockTransport(gate.handle)) as rt:
        tnx = Cli(env, rt)
        h = await rt.spawn(rt.root, "peer")
        assert isinstance(h, Handle)
        await rt.wake(h, "work slowly")
        await asyncio.wait_for(gate.entered.wait(), 10)

        interrupted = (await tnx.ok("interrupt", h.id, "--json")).json()
        assert interrupted["state"] == "idle"
        assert interrupted["last_result"]["status"] == "interrupted"

        closed = await tnx.ok("close", h.id, "--reason", "bye")
        assert closed.out.strip() == f"close {rt.workflow_id(h.id)} → closed"
        assert (await tnx.ok("inspect", h.id, "--json")).json()["state"] == "closed"
        again = await tnx("wake", h.id, "again")
        assert again.code == 1 and "rejected" in again.err, again
        # a client error names the id as tnx prints it, with the scope (issue 37 item 1)
        assert f"on {rt.workflow_id(h.id)!r} rejected" in again.err, again
        assert f"{h.id}: idle→closed (bye)" in await rt.trace_lines(h)

        other_scope = f"t-{uuid.uuid4().hex[:10]}"
        ghost, refused, no_root, no_namespace = await asyncio.gather(
            tnx("inspect", "root/ghost.1"),
            tnx("ls", "--address", "127.0.0.1:1"),
            tnx("ls", "--scope", other_scope),
            tnx("ls", "--namespace", "no-such-namespace"),
        )
        for run, code, message in (
            (ghost, 1, f"no handle {rt.workflow_id('root/ghost.1')!r}"),
            (refused, 2, "cannot connect to Temporal at 127.0.0.1:1"),
            (no_root, 1, "no runtime to attach to"),
            (no_namespace, 2, "namespace 'no-such-namespace' does not exist"),
        ):
            assert run.code == code and run.out == "", run
            assert run.err.startswith("error: ") and message in run.err, run
            assert len(run.err.strip().splitlines()) == 1, run
        # Issue 37 item 2: the runtimes that exist are named with the option that reaches
        # them (this test's runtime among them), never the advice to create a second one.
        assert "the runtime" in no_root.err and "creates it" not in no_root.err, no_root
        # each runtime with the command it ran (walk 6: with three runtimes it gave one)
        runs = re.findall(r"`(tnx ls[^`]*)`", no_root.err)
        assert runs and len(set(runs)) == len(runs), no_root  # one per runtime there is
        assert f"`tnx ls --scope {rt.scope}`" in no_root.err or rt.scope is None, no_root
        pending_elsewhere = await tnx("pending", "--scope", other_scope)
        assert "`tnx pending --scope " in pending_elsewhere.err, pending_elsewhere
        # Issue 37 item 1: the hint repeats the whole command, the id pasted with it, in a
        # runtime that exists, and runs as printed.
        pasted = await tnx("inspect", "root/ghost.1", "--scope", other_scope)
        hint = re.search(r"`(tnx inspect root/ghost\.1 --scope [^`]+)`", pasted.err)
        assert hint is not None, pasted
        rerun = await tnx(*shlex.split(hint.group(1))[1:])
        assert "no runtime to attach to" not in rerun.err and "ghost.1" in rerun.err, rerun
        # an id that names the missing scope is that scope's agent, not another runtime's:
        # the hint lists a runtime that exists (walk 5)
        scoped = await tnx("inspect", f"{other_scope}/root/ghost.1")
        hint = re.search(r"`(tnx ls --scope [^`]+)`", scoped.err)
        assert hint is not None, scoped
        assert (await tnx(*shlex.split(hint.group(1))[1:])).code == 0
        # walk 6: an id without `root/`, or a Request id, gets what to type instead
        bare, request_id = await asyncio.gather(
            tnx("inspect", "ghost.1"), tnx("inspect", "root/ghost.1#2")
        )
        assert f"a handle id starts with 'root': {rt.workflow_id('root/ghost.1')}?" in bare.err
        owner = rt.workflow_id("root/ghost.1")  # a Request id names its agent (walk 9)
        assert f"no handle {owner!r}" in request_id.err, request_id
        # walk 8: spawn's PARENT names its scope as ID does (it was refused with no scope set)
        if rt.scope:
            unscoped = Cli(env, rt)
            unscoped.environ["TNX_SCOPE"] = ""
            child = await unscoped("spawn", rt.workflow_id(rt.root.id), "peer")
            assert child.code == 0, child
            assert child.out.startswith(f"{rt.workflow_id('root')}/peer."), child
        # an id's scope wins over TNX_SCOPE (ambient), not over a --scope typed with it
        clash = await tnx("inspect", f"{other_scope}/root/ghost.1", "--scope", "elsewhere")
        assert clash.code == 2 and f"is an id of scope {other_scope!r}" in clash.err, clash
        # walk 9: spawn under a deeper parent never starts a runtime (only `spawn root NAME`)
        deeper = await tnx("spawn", "root/ghost.1", "peer", "--scope", other_scope)
        assert deeper.code == 1 and "no runtime to attach to" in deeper.err, deeper
        # Read-only commands attach; they never create a root.
        with pytest.raises(RPCError) as missing:
            await rt.client.get_workflow_handle(f"{other_scope}/root").describe()
        assert missing.value.status == RPCStatusCode.NOT_FOUND


async def test_pending_and_answer_drive_the_approval_queue(make_runtime, env) -> None:
    from tests.registries import APPROVALS
    from toolnexus_temporal.client.testing import tool_calls

    llm = ScriptedLLM(
        {
            "m-parent": [
                tool_calls(("task", {"agent": "asker", "prompt": "get it"})),
                text("parent done"),
            ],
            "stub-model": [tool_calls(("check_secret", {})), text("asker done")],
        }
    )
    async with make_runtime(APPROVALS, llm.transport()) as rt:
        cli = Cli(env, rt)
        parent = await rt.spawn(rt.root, "parent")
        assert isinstance(parent, Handle)
        assert (await rt.run_turn(parent, "go")).status == "pending"
        child_id = f"{parent.id}/asker.1"

        queue: list[Any] = []
        for _ in range(50):  # visibility is eventually consistent
            run = await cli("pending", "--json")
            assert run.code == 0, run
            queue = run.json()
            if len(queue) == 2:
                break
            await asyncio.sleep(0.2)
        assert [q["id"] for q in queue] == [rt.workflow_id(parent.id), rt.workflow_id(child_id)]
        assert {q["request"]["kind"] for q in queue} == {"approval"}
        assert queue[1]["request"]["data"]["path"] == ["root", "parent.1", "asker.1"]
        table = await cli("pending", columns=200)
        assert "approve secret access?" in table.out and "tnx answer" in table.out
        # the REQUEST column as every id is printed: with the scope, so it pastes back
        request_id = queue[1]["request"]["id"]  # --json prints it so too (walk 8)
        assert request_id.startswith(f"{rt.scope}/") or not rt.scope, request_id
        assert f" {request_id}" in table.out, table.out

        bad = await cli("answer", parent.id)
        assert bad.code == 2 and "exactly one of" in bad.err
        # walk 6: the REQUEST column's id pasted as ID answers that Request of its agent
        pasted = request_id
        run = await cli("answer", pasted, "--approve", "--data", '{"by": "cli"}', "--json")
        assert run.code == 0, run
        assert run.json()["answered"] == rt.workflow_id(child_id)  # the handle that asked
        result = await rt.wait(parent)
        assert (result.status, result.text) == ("done", "parent done")
        again = await cli("answer", parent.id, "--approve")
        assert again.code == 1 and "no pending request" in again.err
        # the audit: the answer routed down, who sent it (tnx's default identity and --by)
        from toolnexus_temporal.client.cluster import default_answerer

        audit = await cli("audit", parent.id, "--subtree", "--json")
        assert audit.code == 0, audit
        (record,) = audit.json()
        assert (record["handle_id"], record["path"], record["ok"]) == (
            rt.workflow_id(child_id),
            "update",
            True,
        )
        assert record["by"] == default_answerer() and record["data"] == {"by": "cli"}
        assert record["identity"] == f"{default_answerer()} (tnx)"
        assert record["verified"] is False and record["principal"] is None
        own = await cli("audit", parent.id, "--json")
        assert own.code == 0 and own.json() == []  # the parent raised none itself
        text_form = await cli("audit", child_id, columns=200)
        assert "via update" in text_form.out and "unverified" in text_form.out
        # the Request id as tnx prints ids, with the scope (issue 37 item 1)
        assert f"  {record['request_id']}  ok  via update" in text_form.out
        missing = await cli("audit", f"{parent.id}/nobody.9")
        assert missing.code != 0 and missing.err


async def test_ctrl_c_on_a_waiting_verb_says_interrupted(make_runtime, env) -> None:
    """Ctrl-C on ``tnx wait`` while a worker runs the turn printed "Timeout or cancellation
    ... (is a worker serving task queue ...?)" (walk 5): the SDK turns the cancelled update
    into its timeout error. It says ``interrupted`` (exit 130)."""
    import signal

    from temporalio.api.enums.v1 import EventType

    from tests.cli_support import TNX

    gate = Gate()
    async with make_runtime(Registry(AGENTS), gate.transport()) as rt:
        cli = Cli(env, rt)
        h = await rt.spawn(rt.root, "explore")
        assert isinstance(h, Handle)
        await rt.wake(h, "go")
        await gate.entered.wait()  # the turn is in its LLM call: a wait waits
        wf = env.client.get_workflow_handle(rt.workflow_id(h.id))

        async def accepted() -> int:
            kinds = [e.event_type async for e in wf.fetch_history_events()]
            return kinds.count(EventType.EVENT_TYPE_WORKFLOW_EXECUTION_UPDATE_ACCEPTED)

        before = await accepted()
        proc = await asyncio.create_subprocess_exec(
            str(TNX),
            "wait",
            rt.workflow_id(h.id),
            env=cli.environ,
            stdout=asyncio.subprocess.PIPE,
            stderr=asyncio.subprocess.PIPE,
        )
        for _ in range(300):  # until the workflow took the CLI's wait (an accepted update)
            if await accepted() > before:
                break
            await asyncio.sleep(0.05)
        else:
            raise AssertionError("the CLI's wait never reached the workflow")
        proc.send_signal(signal.SIGINT)
        _, err = await asyncio.wait_for(proc.communicate(), 30)
        assert proc.returncode == 130, (proc.returncode, err.decode())
        assert err.decode().strip() == "error: interrupted", err.decode()
        gate.release.set()
