"""Connecting over TLS to a real server: the session's dev server (which has no TLS flags)
behind a TLS-terminating proxy (tests/tlsproxy.py) with a CA made in the test. ``tnx`` and
``connect`` reach it with the CA from a TOML profile, from ``TEMPORAL_TLS_*`` variables or
from flags; a wrong CA, a missing client certificate (mutual TLS) and bad settings fail in one
clear line; an API key reaches the server as ``authorization: Bearer <key>``.
"""

from __future__ import annotations

import asyncio
import os
import sys
import uuid
from collections.abc import AsyncIterator
from dataclasses import dataclass
from pathlib import Path

import pytest
from temporalio.testing import WorkflowEnvironment

from tests.tlsproxy import Pki, TlsProxy, make_pki, tls_proxy
from toolnexus_temporal.activities import Registry
from toolnexus_temporal.cli.demo import DEMO_AGENT
from toolnexus_temporal.cli.demo_setup import SCRIPTED_MODEL, demo_script
from toolnexus_temporal.client import AgentDef, AgentRuntime, Handle
from toolnexus_temporal.client.cluster import ClusterConfig, connect
from toolnexus_temporal.client.errors import ClusterConnectError
from toolnexus_temporal.client.testing import ScriptedLLM, ScriptedLLMServer

BIN = Path(sys.executable).parent
REGISTRY = Registry([AgentDef(name="coordinator", description="plans")])


@dataclass
class Run:
    code: int
    out: str
    err: str

    def __str__(self) -> str:
        return f"exit {self.code}\nstdout:\n{self.out}\nstderr:\n{self.err}"

    def one_error_line(self) -> str:
        lines = self.err.strip().splitlines()
        assert self.code == 2 and len(lines) == 1 and lines[0].startswith("error: "), self
        assert "Traceback" not in self.err, self
        return lines[0]


async def run(program: str, *args: str, environ: dict[str, str]) -> Run:
    """Run ``tnx``/``tnx-worker`` with ``environ`` plus this process's non-Temporal variables
    (HOME points at an empty folder: no user config file leaks in)."""
    base = {k: v for k, v in os.environ.items() if not k.startswith(("TEMPORAL_", "TNX_"))}
    proc = await asyncio.create_subprocess_exec(
        str(BIN / program),
        *args,
        env={**base, "COLUMNS": "200", **environ},
        stdout=asyncio.subprocess.PIPE,
        stderr=asyncio.subprocess.PIPE,
    )
    out, err = await asyncio.wait_for(proc.communicate(), 90)
    assert proc.returncode is not None
    return Run(proc.returncode, out.decode(), err.decode())


@pytest.fixture
def pki(tmp_path: Path) -> Pki:
    return make_pki(tmp_path / "pki")


@pytest.fixture
def other_pki(tmp_path: Path) -> Pki:
    return make_pki(tmp_path / "other", label="someone else")


@pytest.fixture
async def proxy(env: WorkflowEnvironment, pki: Pki) -> AsyncIterator[TlsProxy]:
    async with tls_proxy(pki, env.client.service_client.config.target_host) as running:
        yield running


@pytest.fixture
async def mtls_proxy(env: WorkflowEnvironment, pki: Pki) -> AsyncIterator[TlsProxy]:
    upstream = env.client.service_client.config.target_host
    async with tls_proxy(pki, upstream, require_client_cert=True) as running:
        yield running


@pytest.fixture
async def rt(make_runtime) -> AsyncIterator[AgentRuntime]:  # type: ignore[no-untyped-def]
    """A runtime (plain connection, in-process worker) whose root the CLI lists."""
    async with make_runtime(REGISTRY, ScriptedLLM({}).transport()) as runtime:
        yield runtime


def write_profile(tmp_path: Path, name: str, address: str, ca: Path, **extra: str) -> Path:
    lines = [f"[profile.{name}]", f'address = "{address}"', f"[profile.{name}.tls]"]
    lines += [f'server_ca_cert_path = "{ca}"', 'server_name = "localhost"']
    lines += [f'{key} = "{value}"' for key, value in extra.items()]
    path = tmp_path / "temporal.toml"
    path.write_text("\n".join(lines) + "\n")
    return path


def runtime_env(rt: AgentRuntime, tmp_path: Path, **environ: str) -> dict[str, str]:
    return {
        "HOME": str(tmp_path / "home"),
        "TNX_SCOPE": rt.scope or "",
        "TNX_TASK_QUEUE": rt.task_queue,
        **environ,
    }


# ---------------------------------------------------------------------------- TLS works


async def test_tnx_ls_through_tls_with_the_ca_from_a_toml_profile(
    rt: AgentRuntime, proxy: TlsProxy, pki: Pki, tmp_path: Path
) -> None:
    config_file = write_profile(tmp_path, "secure", proxy.address, pki.ca)
    listed = await run(
        "tnx",
        "ls",
        "--json",
        environ=runtime_env(
            rt, tmp_path, TEMPORAL_CONFIG_FILE=str(config_file), TEMPORAL_PROFILE="secure"
        ),
    )
    assert listed.code == 0, listed
    assert f'"id": "{rt.workflow_id("root")}"' in listed.out, listed
    assert any(h.get(":scheme") == "https" for h in proxy.headers), "not through the proxy"

    # The Python connect reads the same profile; the runtime's verbs work over it.
    config = ClusterConfig.load(
        env={"TEMPORAL_CONFIG_FILE": str(config_file), "HOME": "/nonexistent"}, profile="secure"
    )
    client = await connect(config=config)
    remote = AgentRuntime(client, task_queue=rt.task_queue, scope=rt.scope)
    await remote.start(create=False)
    assert [h.id for h in await remote.list()] == ["root"]


async def test_tnx_ls_through_tls_with_temporal_tls_variables(
    rt: AgentRuntime, proxy: TlsProxy, pki: Pki, tmp_path: Path
) -> None:
    environ = runtime_env(
        rt,
        tmp_path,
        TEMPORAL_ADDRESS=proxy.address,
        TEMPORAL_TLS_SERVER_CA_CERT_PATH=str(pki.ca),
        TEMPORAL_TLS_SERVER_NAME="localhost",
    )
    listed = await run("tnx", "ls", "--json", environ=environ)
    assert listed.code == 0 and f'"id": "{rt.workflow_id("root")}"' in listed.out, listed


async def test_a_wrong_ca_fails_in_one_line(
    rt: AgentRuntime, proxy: TlsProxy, other_pki: Pki, tmp_path: Path
) -> None:
    config_file = write_profile(tmp_path, "default", proxy.address, other_pki.ca)
    environ = runtime_env(rt, tmp_path, TEMPORAL_CONFIG_FILE=str(config_file))
    line = (await run("tnx", "ls", environ=environ)).one_error_line()
    assert f"cannot connect to Temporal at {proxy.address}" in line
    assert "the server's certificate is not signed by the CA given" in line
    assert f"CA from profile 'default' in {config_file}" in line

    with pytest.raises(ClusterConnectError, match="not signed by the CA given"):
        await connect(
            config=ClusterConfig.load(
                env={"HOME": "/nonexistent"}, address=proxy.address, tls_ca_path=other_pki.ca
            )
        )


async def test_tls_to_a_plain_server_fails_in_one_line(
    env: WorkflowEnvironment, pki: Pki, tmp_path: Path
) -> None:
    plain = env.client.service_client.config.target_host
    environ = {"HOME": str(tmp_path), "TEMPORAL_ADDRESS": plain}
    line = (await run("tnx", "ls", "--tls-ca-path", str(pki.ca), environ=environ)).one_error_line()
    assert "the server does not speak TLS" in line


# ---------------------------------------------------------------------------- mutual TLS


async def test_mutual_tls_with_a_client_certificate_from_flags(
    rt: AgentRuntime, mtls_proxy: TlsProxy, pki: Pki, tmp_path: Path
) -> None:
    environ = runtime_env(rt, tmp_path, TEMPORAL_ADDRESS=mtls_proxy.address)
    tls = ["--tls-ca-path", str(pki.ca), "--tls-server-name", "localhost"]
    client_cert = ["--tls-cert-path", str(pki.client_cert), "--tls-key-path", str(pki.client_key)]
    listed = await run("tnx", "ls", "--json", *tls, *client_cert, environ=environ)
    assert listed.code == 0 and f'"id": "{rt.workflow_id("root")}"' in listed.out, listed

    line = (await run("tnx", "ls", *tls, environ=environ)).one_error_line()
    assert "does it require a client certificate" in line


async def test_mutual_tls_refusals_always_name_the_certificate(
    mtls_proxy: TlsProxy, pki: Pki, other_pki: Pki
) -> None:
    """How a refused handshake reaches the client depends on timing (a missing close_notify,
    a broken pipe, a reset, a closed connection): every one gets the hint, 10 times over."""
    wrong_cert = ClusterConfig.load(
        env={"HOME": "/nonexistent"},
        address=mtls_proxy.address,
        tls_ca_path=pki.ca,
        tls_cert_path=other_pki.client_cert,
        tls_key_path=other_pki.client_key,
    )
    no_cert = ClusterConfig.load(
        env={"HOME": "/nonexistent"}, address=mtls_proxy.address, tls_ca_path=pki.ca
    )
    for _ in range(10):
        with pytest.raises(ClusterConnectError, match="does it accept this client certificate"):
            await connect(config=wrong_cert)
        with pytest.raises(ClusterConnectError, match="does it require a client certificate"):
            await connect(config=no_cert)


# ---------------------------------------------------------------------------- API key


async def test_the_api_key_reaches_the_server_as_a_bearer_header(
    proxy: TlsProxy, pki: Pki, monkeypatch: pytest.MonkeyPatch
) -> None:
    for key in [k for k in os.environ if k.startswith("TEMPORAL_")]:
        monkeypatch.delenv(key)
    monkeypatch.setenv("TEMPORAL_API_KEY", "tnx-test-key")
    monkeypatch.setenv("TEMPORAL_TLS_SERVER_CA_CERT_PATH", str(pki.ca))
    monkeypatch.setenv("HOME", "/nonexistent")
    client = await connect(proxy.address)
    await client.count_workflows()
    calls = [h for h in proxy.headers if h.get(":path", "").startswith("/temporal.api")]
    assert calls and all(h.get("authorization") == "Bearer tnx-test-key" for h in calls)
    assert "tnx-test-key" not in str(ClusterConfig.load(address=proxy.address))


async def test_no_api_key_sends_no_authorization(proxy: TlsProxy, pki: Pki) -> None:
    config = ClusterConfig.load(
        env={"HOME": "/nonexistent"}, address=proxy.address, tls_ca_path=pki.ca
    )
    await (await connect(config=config)).count_workflows()
    assert proxy.headers and not any("authorization" in h for h in proxy.headers)


# ---------------------------------------------------------------------------- bad settings


async def test_bad_settings_fail_in_one_line_naming_their_source(tmp_path: Path) -> None:
    home = {"HOME": str(tmp_path)}
    missing = tmp_path / "missing-ca.pem"
    line = (await run("tnx", "ls", "--tls-ca-path", str(missing), environ=home)).one_error_line()
    assert line == f"error: TLS CA (from --tls-ca-path) file {missing} does not exist"

    line = (
        await run("tnx", "ls", environ={**home, "TEMPORAL_TLS_CLIENT_CERT_PATH": str(missing)})
    ).one_error_line()
    assert "(from env TEMPORAL_TLS_CLIENT_CERT_PATH)" in line

    config_file = tmp_path / "temporal.toml"
    config_file.write_text('[profile.default]\naddress = "localhost:7233"\n')
    environ = {**home, "TEMPORAL_CONFIG_FILE": str(config_file)}
    line = (await run("tnx", "ls", "--profile", "staging", environ=environ)).one_error_line()
    assert line == (
        f"error: profile 'staging' (from --profile) is not in {config_file} "
        "(profiles there: default)"
    )

    keyed = {**home, "TEMPORAL_API_KEY": "sekret-value-123"}
    line = (await run("tnx", "ls", "--no-tls", environ=keyed)).one_error_line()
    assert (
        "api key (from env TEMPORAL_API_KEY) is set but TLS is turned off (by --tls/--no-tls)"
        in line
    )
    assert "sekret-value-123" not in line

    line = (
        await run("tnx", "ls", "--address", "http://localhost:7233", environ=home)
    ).one_error_line()
    assert "address (from --address) 'http://localhost:7233' must be host:port" in line


async def test_tnx_worker_reads_the_same_settings(tmp_path: Path) -> None:
    missing = tmp_path / "missing-ca.pem"
    args = ["--registry", "toolnexus_temporal.cli.demo:REGISTRY", "--llm-base-url", "http://x/v1"]
    line = (
        await run(
            "tnx-worker",
            *args,
            "--model",
            "m",
            environ={"HOME": str(tmp_path), "TEMPORAL_TLS_SERVER_CA_CERT_PATH": str(missing)},
        )
    ).one_error_line()
    assert line == (
        f"error: TLS CA (from env TEMPORAL_TLS_SERVER_CA_CERT_PATH) file {missing} does not exist"
    )


# ---------------------------------------------------------------------------- tnx-worker


async def test_tnx_worker_serves_turns_over_mutual_tls_from_a_profile(
    env: WorkflowEnvironment, mtls_proxy: TlsProxy, pki: Pki, tmp_path: Path
) -> None:
    """A ``tnx-worker`` process whose only way to Temporal is the mTLS proxy, configured by a
    TOML profile, runs a turn the test's runtime (plain connection) asks for."""
    config_file = write_profile(
        tmp_path,
        "secure",
        mtls_proxy.address,
        pki.ca,
        client_cert_path=str(pki.client_cert),
        client_key_path=str(pki.client_key),
    )
    task_queue = f"tq-tls-{uuid.uuid4().hex[:8]}"
    base = {k: v for k, v in os.environ.items() if not k.startswith(("TEMPORAL_", "TNX_"))}
    with ScriptedLLMServer(demo_script()) as llm:
        proc = await asyncio.create_subprocess_exec(
            str(BIN / "tnx-worker"),
            *("--registry", "toolnexus_temporal.cli.demo:REGISTRY", "--task-queue", task_queue),
            *("--llm-base-url", llm.base_url, "--model", SCRIPTED_MODEL),
            *("--store", str(tmp_path / "conversations.sqlite")),
            env={
                **base,
                "HOME": str(tmp_path / "home"),
                "TEMPORAL_CONFIG_FILE": str(config_file),
                "TEMPORAL_PROFILE": "secure",
            },
            stdout=asyncio.subprocess.PIPE,
            stderr=asyncio.subprocess.PIPE,
        )
        try:
            assert proc.stdout is not None
            banner = (await asyncio.wait_for(proc.stdout.readline(), 60)).decode()
            assert banner.startswith(f"worker on {mtls_proxy.address} (namespace 'default', TLS")
            assert "client certificate from profile 'secure'" in banner
            rt = await AgentRuntime(
                env.client, task_queue=task_queue, scope=f"t-{uuid.uuid4().hex[:8]}"
            ).start()
            h = await rt.spawn("root", DEMO_AGENT)
            assert isinstance(h, Handle), h
            result = await asyncio.wait_for(rt.run_turn(h, "over TLS"), 60)
            assert result.status == "done", result
            assert result.text == "[scripted LLM] you said: over TLS"
        finally:
            if proc.returncode is None:
                proc.terminate()
            await asyncio.wait_for(proc.wait(), 30)
