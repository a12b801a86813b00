"""Encryption at rest against the dev server: an agent turn with the AES-256-GCM payload codec
leaves no plaintext in the workflow history, the codec server decodes it, keys rotate, and
queries and ``tnx`` keep working."""

from __future__ import annotations

import asyncio
import base64
import json
import os
import signal
import sys
import uuid
from collections.abc import AsyncIterator, Iterator
from contextlib import asynccontextmanager
from pathlib import Path
from typing import Any

import httpx
import pytest
from google.protobuf import json_format
from google.protobuf.message import Message as ProtoMessage
from temporalio.api.common.v1 import Payload, Payloads
from temporalio.api.history.v1 import History
from temporalio.api.sdk.v1 import WorkflowMetadata
from temporalio.client import Client, WorkflowQueryFailedError

from tests.cli_support import Cli
from tests.conftest import MODEL, temporal_binary
from tests.helpers import eventually
from tests.registries import check_secret_tool
from tests.workers import start_tnx_worker
from toolnexus_temporal.activities import LlmConfig, Registry, define_tool
from toolnexus_temporal.activities.store import SqliteConversationStore
from toolnexus_temporal.cli.codec_server import CodecServer
from toolnexus_temporal.client import AgentDef, AgentRuntime, Handle, VerbRejectedError
from toolnexus_temporal.client.codec import (
    AesGcmCodec,
    UnknownKeyError,
    data_converter,
    with_codec,
)
from toolnexus_temporal.client.keycheck import KeyMismatchError
from toolnexus_temporal.client.testing import ScriptedLLM, ScriptedLLMServer, text, tool_calls
from toolnexus_temporal.worker import create_worker, stale_keys
from toolnexus_temporal.workflows.contract.names import workflow_id_for

ROOT = Path(__file__).resolve().parent.parent
KEY_A = os.urandom(32)
KEY_B = os.urandom(32)
UI_ORIGIN = "http://localhost:8233"


async def vault(q: str) -> str:
    """Looks a secret up."""
    return f"vault answer for {q}: RESULT-{q.split('-')[1]}-MARK"


REGISTRY = Registry(
    [
        AgentDef(name="keeper", description="keeps secrets", tools=["vault"]),
        AgentDef(name="asker", description="needs approvals", tools=["check_secret"]),
    ],
    tools=[define_tool(vault), check_secret_tool()],
)


def markers() -> dict[str, str]:
    tag = uuid.uuid4().hex[:6]
    return {
        "prompt": f"PROMPT-{tag}-MARK",
        "arg": f"ARG-{tag}-MARK",
        "result": f"RESULT-{tag}-MARK",  # what vault() returns for the arg
        "final": f"FINAL-{tag}-MARK",
    }


def script(m: dict[str, str]) -> list[Any]:
    return [tool_calls(("vault", {"q": m["arg"]})), text(f"the answer is {m['final']}")]


@asynccontextmanager
async def codec_runtime(
    client: Client,
    store: SqliteConversationStore,
    llm: ScriptedLLM,
    codec: AesGcmCodec,
    *,
    scope: str | None = None,
    worker_codec: AesGcmCodec | None = None,
) -> AsyncIterator[AgentRuntime]:
    """A worker and a runtime whose client encrypts every payload with ``codec`` (the worker
    with ``worker_codec`` when given)."""
    scope = scope or f"t-{uuid.uuid4().hex[:10]}"
    task_queue = f"tq-{scope}"
    secure = with_codec(client, codec)
    async with (
        create_worker(
            with_codec(client, worker_codec or codec),
            registry=REGISTRY,
            llm=LlmConfig(base_url="http://mock.local/v1", model=MODEL),
            task_queue=task_queue,
            store=store,
            transport=llm.transport(),
        ) as worker,
        worker,
    ):
        yield await AgentRuntime(secure, task_queue=task_queue, scope=scope).start()


def walk_payloads(msg: ProtoMessage, skip: bool = False) -> Iterator[tuple[Payload, bool]]:
    """Every Payload inside ``msg``, with whether it sits under search attributes or a
    header (which codecs never encode)."""
    if isinstance(msg, Payload):
        yield msg, skip
        return
    for field, value in msg.ListFields():
        if field.message_type is None:
            continue
        under = skip or field.name in ("search_attributes", "header")
        if field.message_type.GetOptions().map_entry:
            value_field = field.message_type.fields_by_name["value"]
            if value_field.message_type is None:
                continue
            items = list(value.values())
        else:
            items = [value] if isinstance(value, ProtoMessage) else list(value)
        for item in items:
            yield from walk_payloads(item, under)


async def raw_history(client: Client, workflow_id: str) -> History:
    """The history as stored: fetched with the plain client (no codec), payloads untouched."""
    fetched = await client.get_workflow_handle(workflow_id).fetch_history()
    return History(events=fetched.events)


def payloads_json(payloads: list[Payload]) -> dict[str, Any]:
    return json_format.MessageToDict(Payloads(payloads=payloads))


def joined_data(body: dict[str, Any]) -> bytes:
    decoded = json_format.ParseDict(body, Payloads())
    return b"\n".join(p.data for p in decoded.payloads)


async def test_history_holds_no_plaintext_and_the_codec_server_decodes_it(
    client: Client, store: SqliteConversationStore
) -> None:
    m = markers()
    codec = AesGcmCodec({"a": KEY_A})
    llm = ScriptedLLM({MODEL: script(m)})
    async with codec_runtime(client, store, llm, codec) as rt:
        h = await rt.spawn(rt.root, "keeper")
        assert isinstance(h, Handle)
        r = await rt.run_turn(h, f"look up {m['arg']} please {m['prompt']}")
        assert (r.status, r.text) == ("done", f"the answer is {m['final']}")
        # The tool really ran with the argument and the model saw its result.
        assert m["result"] in json.dumps(llm.requests[1]["messages"])

        # Queries (view, trace, list) decode through the codec.
        seen = await rt.inspect(h.id)
        assert seen.last_result is not None and m["final"] in seen.last_result.text
        assert [x.id for x in await rt.list(rt.root)] == [rt.root.id, h.id]
        assert await rt.trace(h)

        # The web UI's summary and current details: encrypted too, readable with the codec.
        wf = rt.client.get_workflow_handle(workflow_id_for(rt.scope, h.id))
        meta = await wf.query("__temporal_workflow_metadata", result_type=WorkflowMetadata)
        assert m["final"] in meta.current_details
        summary = await (await wf.describe()).static_summary()
        assert summary is not None
        assert summary.startswith(f"agent keeper (child of {rt.workflow_id(rt.root.id)})"), summary
        plain_view = await client.get_workflow_handle(wf.id).describe()
        with pytest.raises(KeyError, match="binary/encrypted"):
            await plain_view.static_summary()

        history = await raw_history(client, wf.id)
    stored = history.SerializeToString()
    for marker in m.values():
        assert marker.encode() not in stored, marker
    found = list(walk_payloads(history))
    encoded = [p for p, skipped in found if not skipped]
    assert len(encoded) >= 6  # update args/results, LLM and tool activity inputs and results
    assert all(p.metadata["encoding"] == b"binary/encrypted" for p in encoded)
    assert {p.metadata["encryption-key-id"] for p in encoded} == {b"a"}
    # Search attributes stay readable (Temporal indexes them): state, name, parent, depth.
    assert any(p.metadata.get("encoding") == b"json/plain" for p, skipped in found if skipped)

    server = CodecServer(codec, port=0, origins=[UI_ORIGIN]).start()
    try:
        async with httpx.AsyncClient(base_url=server.url) as http:
            resp = await http.post(
                "/decode", json=payloads_json(encoded), headers={"X-Namespace": "default"}
            )
            assert resp.status_code == 200, resp.text
            assert resp.headers["content-type"] == "application/json"
            plain = joined_data(resp.json())
            for marker in m.values():
                assert marker.encode() in plain, marker

            # Only the last path segment counts (``{namespace}/decode`` endpoints).
            nested = await http.post("/default/decode", json=payloads_json(encoded[:1]))
            assert nested.status_code == 200 and b"binary/encrypted" not in nested.content

            # temporal CLI with --codec-endpoint (a real protocol client) sees plaintext.
            shown = await temporal_show(client, workflow_id_for(rt.scope, h.id), server.url)
            assert m["prompt"] in shown, shown[-2000:]
    finally:
        server.close()


async def temporal_show(client: Client, workflow_id: str, endpoint: str) -> str:
    proc = await asyncio.create_subprocess_exec(
        temporal_binary(),
        "workflow",
        "show",
        "--workflow-id",
        workflow_id,
        "--address",
        client.service_client.config.target_host,
        "--codec-endpoint",
        endpoint,
        "--detailed",
        stdout=asyncio.subprocess.PIPE,
        stderr=asyncio.subprocess.PIPE,
    )
    out, err = await asyncio.wait_for(proc.communicate(), 60)
    assert proc.returncode == 0, err.decode()
    return out.decode()


async def test_codec_server_encode_round_trip_cors_auth_and_errors() -> None:
    codec = AesGcmCodec({"b": KEY_B, "a": KEY_A})
    plain = Payload(metadata={"encoding": b"json/plain"}, data=b'"hello SECRET"')
    server = CodecServer(codec, port=0, origins=[UI_ORIGIN], auth_token="tok3n").start()
    auth = {"Authorization": "Bearer tok3n", "X-Namespace": "default", "Origin": UI_ORIGIN}
    try:
        async with httpx.AsyncClient(base_url=server.url) as http:
            enc = await http.post("/encode", json=payloads_json([plain]), headers=auth)
            assert enc.status_code == 200, enc.text
            assert enc.headers["access-control-allow-origin"] == UI_ORIGIN
            [sealed] = json_format.ParseDict(enc.json(), Payloads()).payloads
            assert sealed.metadata["encryption-key-id"] == b"b" and b"SECRET" not in sealed.data
            dec = await http.post("/decode", json=enc.json(), headers=auth)
            assert json_format.ParseDict(dec.json(), Payloads()).payloads == [plain]

            # CORS preflight from the web UI; another origin gets no CORS grant.
            pre = await http.options(
                "/decode",
                headers={
                    "Origin": UI_ORIGIN,
                    "Access-Control-Request-Method": "POST",
                    "Access-Control-Request-Headers": "content-type,x-namespace",
                },
            )
            assert pre.status_code in (200, 204)
            assert pre.headers["access-control-allow-origin"] == UI_ORIGIN
            assert "POST" in pre.headers["access-control-allow-methods"]
            allowed = pre.headers["access-control-allow-headers"].lower()
            assert {"content-type", "x-namespace", "authorization"} <= {
                h.strip() for h in allowed.split(",")
            }
            other = await http.options("/decode", headers={"Origin": "http://evil.example"})
            assert "access-control-allow-origin" not in other.headers

            # Auth, bad JSON, unknown key id, wrong key under a known id, wrong path.
            no_auth = await http.post("/decode", json=enc.json())
            assert no_auth.status_code == 401
            assert (await http.post("/decode", content=b"{nope", headers=auth)).status_code == 400
            foreign = AesGcmCodec({"zz-old": os.urandom(32)}).encode_one(plain)
            unknown = await http.post("/decode", json=payloads_json([foreign]), headers=auth)
            assert unknown.status_code == 400
            assert "key id 'zz-old'" in unknown.json()["error"]
            forged = AesGcmCodec({"a": os.urandom(32)}).encode_one(plain)
            wrong = await http.post("/decode", json=payloads_json([forged]), headers=auth)
            assert wrong.status_code == 400 and "does not decrypt" in wrong.json()["error"]
            assert (await http.post("/nothing", json={}, headers=auth)).status_code == 404
    finally:
        server.close()


async def test_history_written_under_an_old_key_decodes_after_rotation(
    client: Client, store: SqliteConversationStore
) -> None:
    first, second = markers(), markers()
    scope = f"t-{uuid.uuid4().hex[:10]}"
    llm = ScriptedLLM({MODEL: script(first) + script(second)})
    async with codec_runtime(client, store, llm, AesGcmCodec({"a": KEY_A}), scope=scope) as rt:
        h = await rt.spawn(rt.root, "keeper")
        assert isinstance(h, Handle)
        r = await rt.run_turn(h, f"first {first['arg']} {first['prompt']}")
        assert r.status == "done"
    # A new worker (no cache: it replays the history written under key a) with key b current.
    rotated = AesGcmCodec({"b": KEY_B, "a": KEY_A})
    async with codec_runtime(client, store, llm, rotated, scope=scope) as rt:
        r = await rt.run_turn(h.id, f"second {second['arg']} {second['prompt']}")
        assert (r.status, r.text) == ("done", f"the answer is {second['final']}")
        seen = await rt.inspect(h.id)
        assert seen.turns_total == 4
        # A rejected verb is still a typed error with its message (the failure's message is
        # in its encrypted attributes now).
        assert (await rt.close(h.id)).state == "closed"
        with pytest.raises(VerbRejectedError, match="handle closed"):
            await rt.wake(h.id, f"again {second['prompt']}")
        history = await raw_history(client, workflow_id_for(rt.scope, h.id))
    encoded = [p for p, skipped in walk_payloads(history) if not skipped]
    assert {p.metadata["encryption-key-id"] for p in encoded} == {b"a", b"b"}
    plain = b"\n".join(p.data for p in await rotated.decode(encoded))
    for marker in [*first.values(), *second.values()]:
        assert marker.encode() in plain, marker
    try:
        await AesGcmCodec({"b": KEY_B}).decode(encoded)
    except UnknownKeyError as err:
        assert err.key_id == "a"
    else:
        raise AssertionError("history under key a decoded without key a")


async def test_tnx_reads_encrypted_agents_with_the_keys_and_says_why_without(
    client: Client, env: Any, store: SqliteConversationStore, tmp_path: Path
) -> None:
    m = markers()
    codec = AesGcmCodec({"a": KEY_A})
    approval = [tool_calls(("check_secret", {})), text("asker done")]
    llm = ScriptedLLM({MODEL: script(m) + approval})
    async with codec_runtime(client, store, llm, codec) as rt:
        h = await rt.spawn(rt.root, "keeper")
        assert isinstance(h, Handle)
        assert (await rt.run_turn(h, m["prompt"])).status == "done"
        asker = await rt.spawn(rt.root, "asker")
        assert isinstance(asker, Handle)
        assert (await rt.run_turn(asker, "get the secret")).status == "pending"
        # The approval queue: a search-attribute query (plain) and view queries (encrypted).
        for _ in range(50):  # visibility is eventually consistent
            if [x.id for x in await rt.pending()] == [asker.id]:
                break
            await asyncio.sleep(0.2)
        assert [x.id for x in await rt.pending()] == [asker.id]

        tnx = Cli(env, rt, store=tmp_path / "conv.sqlite")
        tnx.environ["TNX_CODEC_KEYS"] = f"a:{base64.b64encode(KEY_A).decode()}"
        await tnx.ok("answer", asker.id, "--approve")
        assert (await rt.wait(asker)).text == "asker done"
        tree = (await tnx.ok("ls", "--json")).json()
        assert [x["id"] for x in tree] == [rt.workflow_id(i) for i in ("root", h.id, asker.id)]
        seen = (await tnx.ok("inspect", h.id, "--json")).json()
        assert m["final"] in seen["last_result"]["text"]
        assert h.id in (await tnx.ok("ls")).out
        post = await tnx.ok("post", h.id, f"note {m['arg']}", "--json")
        assert post.json()["ok"] is True

        tnx.environ["TNX_CODEC_KEYS"] = f"other:{base64.b64encode(KEY_B).decode()}"
        wrong = await tnx("inspect", h.id)
        assert wrong.code == 2 and "key id 'a'" in wrong.err, wrong

        tnx.environ["TNX_CODEC_KEYS"] = "a:c2hvcnQ="
        bad = await tnx("ls")
        assert bad.code == 2 and "'a' is 5 bytes" in bad.err, bad

        del tnx.environ["TNX_CODEC_KEYS"]
        without = await tnx("inspect", h.id)
        assert without.code == 2 and "TNX_CODEC_KEYS" in without.err, without


async def test_tnx_codec_server_command_serves_and_refuses_bad_keys() -> None:
    tnx = Path(sys.executable).parent / "tnx"
    env = {k: v for k, v in os.environ.items() if not k.startswith("TNX_")}
    bad = await asyncio.create_subprocess_exec(
        str(tnx),
        "codec-server",
        "--keys",
        "k:c2hvcnQ=",
        env=env,
        stdout=asyncio.subprocess.PIPE,
        stderr=asyncio.subprocess.PIPE,
    )
    _, err = await asyncio.wait_for(bad.communicate(), 60)
    assert bad.returncode == 2 and "'k' is 5 bytes" in err.decode(), err.decode()

    key = base64.b64encode(KEY_A).decode()
    proc = await asyncio.create_subprocess_exec(
        str(tnx),
        "codec-server",
        "--port",
        "0",
        "--cors-origin",
        "http://ui.example:8080",
        env={**env, "TNX_CODEC_KEYS": f"a:{key}"},
        stdout=asyncio.subprocess.PIPE,
        stderr=asyncio.subprocess.PIPE,
    )
    try:
        assert proc.stdout is not None
        line = (await asyncio.wait_for(proc.stdout.readline(), 60)).decode()
        assert "current a" in line and "http://ui.example:8080" in line, line
        url = line.split()[3]
        sealed = AesGcmCodec({"a": KEY_A}).encode_one(Payload(data=b"from the CLI"))
        async with httpx.AsyncClient(base_url=url) as http:
            resp = await http.post(
                "/decode",
                json=payloads_json([sealed]),
                headers={"Origin": "http://ui.example:8080"},
            )
            assert resp.status_code == 200, resp.text
            assert resp.headers["access-control-allow-origin"] == "http://ui.example:8080"
            assert joined_data(resp.json()) == b"from the CLI"
            assert (await http.get("/healthz")).text == "ok\n"
    finally:
        proc.terminate()
        await asyncio.wait_for(proc.wait(), 30)


async def test_a_worker_without_the_key_refuses_to_start_or_stops_and_loses_nothing(
    client: Client, store: SqliteConversationStore
) -> None:
    """A worker without key a does not start (the key canary); one that skipped the check
    (as one started before the canary existed would) fails the first task it takes with the
    key id (readable with the codec), reads the canary and stops polling; a query it got
    says why; a worker with the key then runs the turn."""
    m = markers()
    scope = f"t-{uuid.uuid4().hex[:10]}"
    llm = ScriptedLLM({MODEL: [text("first"), text(m["final"])]})
    async with codec_runtime(client, store, llm, AesGcmCodec({"a": KEY_A}), scope=scope) as rt:
        h = await rt.spawn(rt.root, "keeper")
        assert isinstance(h, Handle)
        assert (await rt.run_turn(h, "first")).status == "done"
    wf_id = workflow_id_for(scope, h.id)
    both = AesGcmCodec({"b": KEY_B, "a": KEY_A})
    rt = AgentRuntime(with_codec(client, both), task_queue=f"tq-{scope}", scope=scope)

    def worker(codec: AesGcmCodec, **options: Any) -> Any:
        return create_worker(
            with_codec(client, codec),
            registry=REGISTRY,
            llm=LlmConfig(base_url="http://mock.local/v1", model=MODEL),
            task_queue=f"tq-{scope}",
            store=store,
            transport=llm.transport(),
            **options,
        )

    with pytest.raises(KeyMismatchError, match=r"key id 'a'.*known keys \(b\)"):
        async with worker(AesGcmCodec({"b": KEY_B})):
            raise AssertionError("a worker without key a started")
    async with worker(AesGcmCodec({"b": KEY_B}), check_keys=False) as w, w:
        with pytest.raises(WorkflowQueryFailedError, match=r"key id 'a'.*known keys \(b\)"):
            await rt.inspect(h.id)
        await eventually(lambda: stale_keys(w) is not None, what="the worker stopped itself")
    async with worker(AesGcmCodec({"b": KEY_B}), check_keys=False) as w, w:
        turn = asyncio.create_task(rt.run_turn(h.id, m["prompt"]))
        failed: list[Any] = []

        async def task_failed() -> bool:
            history = await raw_history(client, wf_id)
            failed[:] = [
                e for e in history.events if e.HasField("workflow_task_failed_event_attributes")
            ]
            return bool(failed)

        await eventually(task_failed, what="a failed workflow task")
        failure = failed[0].workflow_task_failed_event_attributes.failure
        assert failure.message == "Encoded failure"  # the reason is encrypted too
        reason = await data_converter(both).decode_failure(failure)
        assert "key id 'a'" in str(reason), reason
        await eventually(lambda: stale_keys(w) is not None, what="the worker stopped itself")
        assert not turn.done()
    async with worker(both) as w, w:
        r = await asyncio.wait_for(turn, 60)
        assert (r.status, r.text) == ("done", m["final"])
        assert (await rt.inspect(h.id)).turns_total == 2


async def test_tnx_worker_encrypts_with_its_codec_keys(client: Client, tmp_path: Path) -> None:
    """``tnx-worker --codec-keys`` (and TNX_CODEC_KEYS) runs agents whose history is encrypted;
    a bad key stops it at start-up with the entry's id."""
    worker_bin = str(Path(sys.executable).parent / "tnx-worker")
    root = ROOT
    env = {k: v for k, v in os.environ.items() if not k.startswith("TNX_")}
    env["PYTHONPATH"] = str(root)
    bad = await asyncio.create_subprocess_exec(
        worker_bin,
        "--registry",
        "tests.registries:APPROVALS",
        "--llm-base-url",
        "http://127.0.0.1:9/v1",
        "--model",
        "m",
        "--codec-keys",
        "k1:c2hvcnQ=",
        cwd=root,
        env=env,
        stdout=asyncio.subprocess.PIPE,
        stderr=asyncio.subprocess.PIPE,
    )
    _, err = await asyncio.wait_for(bad.communicate(), 60)
    assert bad.returncode == 2 and "'k1' is 5 bytes" in err.decode(), err.decode()

    m = markers()
    scope = f"t-{uuid.uuid4().hex[:10]}"
    llm = ScriptedLLM({MODEL: [text(m["final"])]})
    with ScriptedLLMServer(llm) as llm_server:
        proc = await start_tnx_worker(
            client.service_client.config.target_host,
            f"tq-{scope}",
            llm_server.base_url,
            tmp_path / "store.sqlite",
            model=MODEL,
            ready=lambda line: b"codec=aes-256-gcm key=w1" in line,
            env={**env, "TNX_CODEC_KEYS": f"w1:{base64.b64encode(KEY_B).decode()}"},
        )
        try:
            codec = AesGcmCodec({"w1": KEY_B})
            rt = await AgentRuntime(
                with_codec(client, codec), task_queue=f"tq-{scope}", scope=scope
            ).start()
            h = await rt.spawn(rt.root, "asker")
            assert isinstance(h, Handle)
            assert (await rt.run_turn(h, m["prompt"])).text == m["final"]
            history = await raw_history(client, workflow_id_for(scope, h.id))
        finally:
            proc.send_signal(signal.SIGTERM)
            await asyncio.wait_for(proc.wait(), 30)
    stored = history.SerializeToString()
    assert m["prompt"].encode() not in stored and m["final"].encode() not in stored
    encoded = [p for p, skipped in walk_payloads(history) if not skipped]
    assert {p.metadata["encryption-key-id"] for p in encoded} == {b"w1"}
    plain = b"\n".join(p.data for p in await codec.decode(encoded))
    assert m["prompt"].encode() in plain and m["final"].encode() in plain
