"""``Registry.load`` of a module whose definitions are invalid (an ``McpServer`` named
``a__b``, an ``AgentDef`` without a description): a ``RegistryError`` of one line naming the
model and the field, which ``tnx-worker`` prints as a usage error (exit 2), not a page of
pydantic traceback."""

from __future__ import annotations

import sys
from pathlib import Path

import pytest
from typer.testing import CliRunner

from toolnexus_temporal.activities.registry import Registry, RegistryError
from toolnexus_temporal.cli import worker_cmd

BAD = """
from toolnexus_temporal import AgentDef, McpServer, Registry
SERVER = McpServer(name="a__b", command="true")
REGISTRY = Registry([AgentDef(name="x", description="x", mcp=[SERVER])])
"""


@pytest.fixture
def bad_module(tmp_path: Path, monkeypatch: pytest.MonkeyPatch) -> str:
    name = "tnx_bad_registry_for_test"
    (tmp_path / f"{name}.py").write_text(BAD)
    monkeypatch.syspath_prepend(str(tmp_path))
    monkeypatch.delitem(sys.modules, name, raising=False)
    return name


def test_an_invalid_definition_is_a_registry_error_of_one_line(bad_module: str) -> None:
    with pytest.raises(RegistryError) as caught:
        Registry.load(f"{bad_module}:REGISTRY")
    message = str(caught.value)
    assert "McpServer" in message and "name" in message and "'a__b'" in message, message
    assert "\n" not in message


def test_tnx_worker_makes_it_a_usage_error(bad_module: str) -> None:
    args = ["--registry", f"{bad_module}:REGISTRY", "--llm-base-url", "http://x/v1", "--model", "m"]
    result = CliRunner().invoke(worker_cmd.app, args)
    assert result.exit_code == 2, result.output
    assert "McpServer" in result.output and "Traceback" not in result.output
