"""One import root (issue 10): the distribution installs exactly one top-level package, the
public API imports from it in one line, and a user's own ``workflows``/``activities``/
``client``/``worker`` modules are never shadowed by ours."""

from __future__ import annotations

import asyncio
import json
import os
import shutil
import subprocess
import sys
import textwrap
import uuid
from pathlib import Path

import pytest
from temporalio.testing import WorkflowEnvironment

import toolnexus_temporal
from tests.helpers import communicate
from toolnexus_temporal.client.testing import ScriptedLLM, ScriptedLLMServer, text, tool_calls

ROOT = Path(__file__).resolve().parent.parent
BIN = Path(sys.executable).parent

PUBLIC = {
    "AgentDef",
    "AgentRuntime",
    "Answer",
    "AnswerRejectedError",
    "AnswerResult",
    "ApprovalPolicy",
    "AuditRecord",
    "Budget",
    "ContextPolicy",
    "ClusterConfig",
    "ClusterConfigError",
    "ClusterConnectError",
    "ConversationStore",
    "Escalation",
    "Handle",
    "HandleNotFoundError",
    "InboxItem",
    "LlmConfig",
    "McpServer",
    "NoWorkerError",
    "PostResult",
    "PostgresConversationStore",
    "Registry",
    "RegistryError",
    "Request",
    "RecoverRefusedError",
    "RuntimeOptions",
    "SpawnError",
    "SqliteConversationStore",
    "StoreConfigError",
    "StoreError",
    "StoreUnavailableError",
    "TaskResult",
    "TickSpec",
    "TnxError",
    "Tool",
    "ToolContext",
    "VerbRejectedError",
    "connect",
    "create_worker",
    "define_tool",
    "load_prices",
    "open_store",
    "pending",
    "Cost",
    "ModelPrice",
    "AgentBusy",
    "InvalidPolicyError",
}
"""The public API of issue 10, plus what the verbs return and the store and tool types a
registry author needs, the money types (issue 34: ``Cost``, ``ModelPrice``,
``load_prices``) and the double-texting errors (issue 34: ``AgentBusy``, ``InvalidPolicyError``)."""


def test_all_is_the_public_api_sorted_and_importable() -> None:
    assert toolnexus_temporal.__all__ == sorted(toolnexus_temporal.__all__)
    assert set(toolnexus_temporal.__all__) == PUBLIC
    for name in toolnexus_temporal.__all__:
        value = getattr(toolnexus_temporal, name)
        assert value is not None
        # the object is the one its defining module holds (no copies, no stale aliases)
        assert value.__module__.startswith("toolnexus_temporal."), (name, value.__module__)
    assert set(toolnexus_temporal.__all__) <= set(dir(toolnexus_temporal))
    with pytest.raises(AttributeError, match="no attribute 'nope'"):
        _ = toolnexus_temporal.nope  # type: ignore[attr-defined]


def test_one_line_import_in_a_fresh_interpreter() -> None:
    """``from toolnexus_temporal import ...`` of every public name, as a user writes it."""
    names = ", ".join(sorted(PUBLIC))
    code = f"from toolnexus_temporal import {names}; print('ok')"
    done = subprocess.run(
        [sys.executable, "-c", code], cwd="/", capture_output=True, text=True, timeout=60
    )
    assert done.returncode == 0 and done.stdout.strip() == "ok", done.stderr


def _copy_sources(dest: Path) -> Path:
    """The repository's tracked files (symlinks kept), so a build never touches the tree."""
    listed = subprocess.run(
        ["git", "ls-files", "-z"], cwd=ROOT, capture_output=True, check=True
    ).stdout.decode()
    for rel in filter(None, listed.split("\0")):
        src = ROOT / rel
        target = dest / rel
        target.parent.mkdir(parents=True, exist_ok=True)
        if src.is_symlink():
            target.symlink_to(os.readlink(src))
        elif src.is_file():
            shutil.copy2(src, target)
    return dest


@pytest.mark.stress  # pip install into a fresh venv
def test_pip_install_adds_one_top_level_package(tmp_path: Path) -> None:
    """``pip install .`` into a fresh venv: one package, ``toolnexus_temporal``, plus the
    ``tnx`` and ``tnx-worker`` commands; nothing named client/workflows/activities/worker."""
    source = _copy_sources(tmp_path / "src")
    venv = tmp_path / "venv"
    subprocess.run([sys.executable, "-m", "venv", str(venv)], check=True, timeout=120)
    install = subprocess.run(
        [str(venv / "bin" / "pip"), "install", "-q", "--no-deps", str(source)],
        capture_output=True,
        text=True,
        timeout=600,
    )
    assert install.returncode == 0, install.stderr[-3000:]
    listing = subprocess.run(
        [
            str(venv / "bin" / "python"),
            "-c",
            "import importlib.metadata as m, json;"
            "d = m.distribution('toolnexus-temporal');"
            "print(json.dumps([str(f) for f in d.files]))",
        ],
        cwd=tmp_path,  # not the checkout: its editable egg-info would answer instead
        capture_output=True,
        text=True,
        check=True,
        timeout=60,
    )
    files = json.loads(listing.stdout)
    top = {f.split("/")[0] for f in files if not f.startswith("..")}
    top = {t for t in top if not t.endswith(".dist-info") and t != "__pycache__"}
    assert top == {"toolnexus_temporal"}, sorted(top)
    for sub in ("workflows", "activities", "client", "cli", "observability"):
        assert f"toolnexus_temporal/{sub}/__init__.py" in files, sub
    assert "toolnexus_temporal/worker.py" in files
    assert "toolnexus_temporal/py.typed" in files
    for command in ("tnx", "tnx-worker"):
        assert (venv / "bin" / command).exists(), command
    site = Path(
        subprocess.run(
            [
                str(venv / "bin" / "python"),
                "-c",
                "import sysconfig; print(sysconfig.get_paths()['purelib'])",
            ],
            cwd=tmp_path,
            capture_output=True,
            text=True,
            check=True,
        ).stdout.strip()
    )
    for generic in ("client", "workflows", "activities", "worker.py", "cli", "observability"):
        assert not (site / generic).exists(), generic


# ---- a user's own Temporal project beside ours ----------------------------------------

USER_MODULES = {
    "workflows.py": '''
        """The user's own workflows module (every Temporal sample has one)."""
        USER_WORKFLOWS = True
    ''',
    "activities.py": '''
        """The user's own activities module."""


        async def send_email(to: str) -> str:
            """Send an email (pretend)."""
            return f"email sent to {to}"
    ''',
    "client.py": '''
        """The user's own client module."""
        USER_CLIENT = True
    ''',
    "worker.py": '''
        """The user's own worker script: must not run when anything imports it by mistake."""
        raise SystemExit("the user's worker.py was imported")
    ''',
    "agents.py": '''
        """A registry that imports the user's own modules."""
        from activities import send_email
        from client import USER_CLIENT
        from workflows import USER_WORKFLOWS

        from toolnexus_temporal import AgentDef, Registry, define_tool

        assert USER_CLIENT and USER_WORKFLOWS
        REGISTRY = Registry(
            [AgentDef(name="mailer", tools=["send_email"], model="m-mailer")],
            tools=[define_tool(send_email)],
        )
    ''',
}


def _readme_example() -> str:
    """The README's Python example, as written: docs/examples/approval.py, which the README
    shows verbatim (tests/test_docs.py checks that)."""
    return (ROOT / "docs" / "examples" / "approval.py").read_text()


def _scratch_project(tmp_path: Path) -> Path:
    project = tmp_path / "user-project"
    project.mkdir()
    for name, body in USER_MODULES.items():
        (project / name).write_text(textwrap.dedent(body).lstrip())
    return project


def _env_without_repo() -> dict[str, str]:
    """The environment of a user's shell: nothing puts this repository on sys.path."""
    env = {k: v for k, v in os.environ.items() if k != "PYTHONPATH"}
    return env


async def test_readme_example_runs_in_a_project_with_its_own_modules(
    env: WorkflowEnvironment, tmp_path: Path
) -> None:
    example = _readme_example()
    imports = [line for line in example.splitlines() if line.startswith(("from ", "import "))]
    assert all(
        line.startswith(("import asyncio", "import os", "from toolnexus_temporal"))
        for line in imports
    ), imports
    project = _scratch_project(tmp_path)
    # Its own task queue and scope: tests/test_docs.py runs the same example on this server,
    # and a root left by a process that has just exited can hold a workflow task that process
    # took while it stopped (the server times it out after 10 s; sdk-rust#1080).
    scope = f"my-app-{uuid.uuid4().hex[:8]}"
    (project / "example.py").write_text(example.replace('"my-app"', f'"{scope}"'))
    assert example.count('"my-app"') == 3, "the example's task queue and scope moved"
    address = env.client.service_client.config.target_host
    proc = await asyncio.create_subprocess_exec(
        sys.executable,
        "example.py",
        cwd=project,
        env={**_env_without_repo(), "TEMPORAL_ADDRESS": address, "PYTHONFAULTHANDLER": "1"},
        stdout=asyncio.subprocess.PIPE,
        stderr=asyncio.subprocess.PIPE,
    )
    out, err = await communicate(proc, 120)
    assert proc.returncode == 0, err.decode()[-3000:]
    assert out.decode().strip().splitlines()[-1] == "billing is deployed"


async def test_tnx_worker_loads_a_registry_that_imports_user_modules(
    env: WorkflowEnvironment, tmp_path: Path
) -> None:
    from toolnexus_temporal import AgentRuntime, Handle

    project = _scratch_project(tmp_path)
    llm = ScriptedLLM(
        {"m-mailer": [tool_calls(("send_email", {"to": "ops@example.com"})), text("mailed")]}
    )
    address = env.client.service_client.config.target_host
    scope = f"t-{uuid.uuid4().hex[:10]}"
    task_queue = f"tq-{scope}"
    with ScriptedLLMServer(llm) as server:
        proc = await asyncio.create_subprocess_exec(
            str(BIN / "tnx-worker"),
            "--registry",
            "agents:REGISTRY",
            "--address",
            address,
            "--task-queue",
            task_queue,
            "--llm-base-url",
            server.base_url,
            "--model",
            "m-mailer",
            "--store",
            str(tmp_path / "store.sqlite"),
            cwd=project,
            env=_env_without_repo(),
            stdout=asyncio.subprocess.PIPE,
            stderr=asyncio.subprocess.STDOUT,
        )
        try:
            assert proc.stdout is not None
            line = await asyncio.wait_for(proc.stdout.readline(), 60)
            assert line.startswith(b"worker on"), line + await proc.stdout.read(4000)
            rt = await AgentRuntime(env.client, task_queue=task_queue, scope=scope).start()
            h = await rt.spawn(rt.root, "mailer")
            assert isinstance(h, Handle), h
            result = await rt.run_turn(h, "mail ops")
            assert (result.status, result.text) == ("done", "mailed")
            # the tool result the model saw came from the user's own activities module
            tool_messages = [m for m in llm.requests[-1]["messages"] if m["role"] == "tool"]
            assert tool_messages[0]["content"] == "email sent to ops@example.com"
        finally:
            proc.terminate()
            await asyncio.wait_for(proc.wait(), 30)
