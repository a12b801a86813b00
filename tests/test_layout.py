"""The package layout holds (no Temporal server needed): the host library loads no worker, no
activity and no CLI dependency; its calls name the workflow's handlers by reference."""

from __future__ import annotations

import json
import subprocess
import sys

from toolnexus_temporal.client import rpc
from toolnexus_temporal.workflows.agent import AgentWorkflow
from toolnexus_temporal.workflows.contract import names

HOST_IMPORT = """
import json, sys
import toolnexus_temporal.client
from toolnexus_temporal.client import AgentRuntime
assert AgentRuntime.__module__ == "toolnexus_temporal.client.runtime"
print(json.dumps(sorted(sys.modules)))
"""

FORBIDDEN = (
    "toolnexus_temporal.worker",
    "toolnexus_temporal.activities",
    "toolnexus_temporal.cli",
    "typer",
)
"""What the host library must not load (type-only imports are fine)."""


def _under(module: str, package: str) -> bool:
    return module == package or module.startswith(f"{package}.")


def test_host_library_imports_no_worker_activities_or_cli() -> None:
    """A fresh interpreter: what ``import toolnexus_temporal.client`` loads."""
    done = subprocess.run(
        [sys.executable, "-c", HOST_IMPORT], capture_output=True, text=True, check=True
    )
    loaded = set(json.loads(done.stdout))
    assert "toolnexus_temporal.client.runtime" in loaded
    unwanted = sorted(m for m in loaded if any(_under(m, p) for p in FORBIDDEN))
    assert not unwanted, unwanted


def test_update_names_come_from_the_handlers() -> None:
    """The typed calls send the durable names of ``workflows/contract/names.py``."""
    sent = {
        rpc.update_name(update)
        for update in (
            AgentWorkflow.spawn,
            AgentWorkflow.turn,
            AgentWorkflow.admit_post,
            AgentWorkflow.admit_interrupt,
            AgentWorkflow.admit_close,
            AgentWorkflow.admit_answer,
            AgentWorkflow.wait,
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
