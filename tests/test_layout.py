"""The package layout holds (no Temporal server needed): the host library loads no worker, no
activity, no CLI dependency and no workflow component; ``tnx --version`` and ``tnx --help``
load no worker, LLM or telemetry module; the host library's calls send the workflow's handler
names and types."""

from __future__ import annotations

import ast
import json
import subprocess
import sys
from pathlib import Path
from types import UnionType
from typing import Any, Union, get_args, get_origin

import pytest
from temporalio import workflow

from toolnexus_temporal.client import rpc
from toolnexus_temporal.client.handlers import AgentWorkflowStub
from toolnexus_temporal.workflows.agent import AgentWorkflow
from toolnexus_temporal.workflows.contract import names

HOST_IMPORT = """
import json, sys
import toolnexus_temporal.client
from toolnexus_temporal.client import AgentRuntime
assert AgentRuntime.__module__ == "toolnexus_temporal.client.runtime"
print(json.dumps(sorted(sys.modules)))
"""

CLI_RUN = """
import json, sys
from toolnexus_temporal.cli.app import app
sys.argv = ["tnx", *sys.argv[1:]]
try:
    app()
except SystemExit:
    pass
print(json.dumps(sorted(sys.modules)), file=sys.stderr)
"""
"""Runs ``tnx ARGS`` in this interpreter and prints the loaded modules on stderr."""

FORBIDDEN = (
    "toolnexus_temporal.worker",
    "toolnexus_temporal.activities",
    "toolnexus_temporal.cli",
    "typer",
)
"""What the host library must not load (type-only imports are fine)."""

WORKFLOWS_ALLOWED = ("toolnexus_temporal.workflows.contract",)
"""What of ``toolnexus_temporal.workflows`` the host library may load besides the package:
the contract (types, names, pure rules), never a workflow component."""

CLI_FORBIDDEN = (
    "toolnexus_temporal.worker",
    "toolnexus_temporal.activities",
    "toolnexus_temporal.observability",
    "toolnexus_temporal.client",
    "toolnexus_temporal.workflows",
    "opentelemetry",
    "httpx",
    "temporalio.client",
    "temporalio.worker",
)
"""What ``tnx --version`` and ``tnx --help`` must not load: no worker, LLM (activities) or
telemetry module, and not the host library or the Temporal client either (they are what makes
a start slow: ``bench/cli_start.py``)."""


def _under(module: str, package: str) -> bool:
    return module == package or module.startswith(f"{package}.")


def _loaded(code: str, *argv: str, stream: str = "stdout") -> set[str]:
    """The modules a fresh interpreter has loaded after running ``code`` with ``argv``."""
    done = subprocess.run(
        [sys.executable, "-c", code, *argv], capture_output=True, text=True, check=True
    )
    out = done.stdout if stream == "stdout" else done.stderr.splitlines()[-1]
    return set(json.loads(out))


def host_violations(loaded: set[str]) -> list[str]:
    """The modules of ``loaded`` the host library must not load."""
    return sorted(
        m
        for m in loaded
        if any(_under(m, p) for p in FORBIDDEN)
        or (
            _under(m, "toolnexus_temporal.workflows")
            and m != "toolnexus_temporal.workflows"
            and not any(_under(m, p) for p in WORKFLOWS_ALLOWED)
        )
    )


def test_host_library_imports_no_worker_activities_cli_or_workflow_component() -> None:
    """A fresh interpreter: what ``import toolnexus_temporal.client`` loads."""
    loaded = _loaded(HOST_IMPORT)
    assert "toolnexus_temporal.client.runtime" in loaded
    unwanted = host_violations(loaded)
    assert not unwanted, unwanted


@pytest.mark.parametrize("flag", ["--version", "--help"])
def test_tnx_version_and_help_load_no_worker_llm_or_telemetry(flag: str) -> None:
    """A fresh interpreter: what ``tnx --version`` and ``tnx --help`` load (the commands'
    implementations load only when a command runs)."""
    loaded = _loaded(CLI_RUN, flag, stream="stderr")
    assert "toolnexus_temporal.cli.app" in loaded
    unwanted = sorted(m for m in loaded if any(_under(m, p) for p in CLI_FORBIDDEN))
    assert not unwanted, unwanted


def _definition(cls: type) -> Any:
    return workflow._Definition.must_from_class(cls)


def _sent(arg_type: Any) -> Any:
    """What a client sends for a handler argument of ``arg_type``: ``X`` for ``X | Any`` (a
    handler whose validator parses loose input too)."""
    if get_origin(arg_type) in (Union, UnionType):
        kept = [t for t in get_args(arg_type) if t is not Any]
        if len(kept) == 1:
            return kept[0]
    return arg_type


def test_the_client_stub_sends_the_workflow_handlers_names_and_types() -> None:
    """Every handler the host library calls (``client/handlers.py``) has the workflow's
    handler's name, argument types and result type: the stub and ``AgentWorkflow`` agree."""
    stub, real = _definition(AgentWorkflowStub), _definition(AgentWorkflow)
    assert stub.name == real.name == names.WORKFLOW_TYPE
    assert stub.ret_type == real.ret_type
    assert stub.queries.keys() <= real.queries.keys()
    assert stub.updates.keys() <= real.updates.keys()
    for name, query in stub.queries.items():
        assert query.ret_type == real.queries[name].ret_type, name
        assert query.arg_types == real.queries[name].arg_types, name
    for name, update in stub.updates.items():
        assert update.ret_type == real.updates[name].ret_type, name
        real_args = [_sent(t) for t in real.updates[name].arg_types]
        assert update.arg_types == real_args, name


def test_update_names_come_from_the_handlers() -> None:
    """The typed calls send the durable names of ``workflows/contract/names.py``."""
    sent = {
        rpc.update_name(update)
        for update in (
            AgentWorkflowStub.spawn,
            AgentWorkflowStub.turn,
            AgentWorkflowStub.admit_post,
            AgentWorkflowStub.admit_interrupt,
            AgentWorkflowStub.admit_close,
            AgentWorkflowStub.admit_answer,
            AgentWorkflowStub.wait,
        )
    }
    assert sent == {
        names.UPDATE_SPAWN,
        names.UPDATE_TURN,
        names.UPDATE_POST,
        names.UPDATE_INTERRUPT,
        names.UPDATE_CLOSE,
        names.UPDATE_ANSWER,
        names.UPDATE_WAIT,
    }
    assert rpc.SHORT_UPDATES < sent


def test_light_cli_declarations_name_what_the_implementation_reads() -> None:
    """``tnx codec-server``'s options are declared without the codec (``cli/app.py`` stays
    light): the environment variables they name are the codec's."""
    import typer.main

    from toolnexus_temporal.cli.app import app
    from toolnexus_temporal.client.codec import ENV_KEY_FILE, ENV_KEYS

    group: Any = typer.main.get_command(app)
    command = group.commands["codec-server"]
    envvars = {p.name: p.envvar for p in command.params}
    assert envvars["keys"] == ENV_KEYS
    assert envvars["key_file"] == ENV_KEY_FILE


OBSERVABILITY = Path(__file__).resolve().parent.parent / "observability"
OBSERVABILITY_MAY_IMPORT = (
    "toolnexus_temporal.observability",
    "toolnexus_temporal.workflows.contract",
)
"""What ``observability/`` may import of the package: itself and the workflow contract. It is
imported downward by ``client/``, ``activities/``, ``worker.py`` and ``cli/`` (issue 33,
item 3), so an import of any of them (or of a workflow component) would tie two floors both
ways."""


def test_observability_imports_only_itself_and_the_contract() -> None:
    """Every import in ``observability/`` (module-level, in functions, under TYPE_CHECKING)."""
    wrong = []
    for path in sorted(OBSERVABILITY.glob("*.py")):
        for node in ast.walk(ast.parse(path.read_text())):
            if isinstance(node, ast.ImportFrom) and node.level:
                continue  # relative: inside the package
            names = (
                [node.module or ""]
                if isinstance(node, ast.ImportFrom)
                else [a.name for a in node.names]
                if isinstance(node, ast.Import)
                else []
            )
            for name in names:
                if _under(name, "toolnexus_temporal") and not any(
                    _under(name, p) for p in OBSERVABILITY_MAY_IMPORT
                ):
                    wrong.append(f"{path.name}:{node.lineno} imports {name}")
    assert not wrong, wrong
