"""What lets the worker pass the whole workflow package through the sandbox (worker.py
``SANDBOX_PASSTHROUGH``): workflow code imports nothing that does I/O or reads clocks or
randomness, and keeps no mutable state at module level (one module copy serves every workflow
in the worker process). Checked statically, on every module of ``workflows/``."""

from __future__ import annotations

import ast
from pathlib import Path

import pytest

WORKFLOWS = Path(__file__).resolve().parents[2] / "workflows"
MODULES = sorted(WORKFLOWS.rglob("*.py"))

ALLOWED_IMPORTS = {
    "__future__",
    "asyncio",  # on the workflow's deterministic event loop
    "collections.abc",
    "datetime",  # timedelta only (below)
    "json",
    "decimal",  # money (Budget.max_cost_usd, Cost): exact, pure arithmetic
    "hashlib",  # approvals/audit.py: the sha256 of an Answer (pure, no I/O)
    "re",  # contract/cron.py: a pattern, compiled once
    "types",
    "typing",
    "pydantic",
    "temporalio",
    "temporalio.common",
    "temporalio.exceptions",
    "croniter",  # pure given a numeric start time (contract/cron.py); passed through
}
ALLOWED_FROM_DATETIME = {"timedelta"}
FORBIDDEN_CALLS = {"print", "open", "input", "exec", "eval", "__import__"}
MUTABLE = (ast.Dict, ast.List, ast.Set, ast.ListComp, ast.DictComp, ast.SetComp)


def _imports(tree: ast.Module) -> list[tuple[str, list[str]]]:
    found: list[tuple[str, list[str]]] = []
    for node in ast.walk(tree):
        if isinstance(node, ast.Import):
            found += [(alias.name, []) for alias in node.names]
        elif isinstance(node, ast.ImportFrom) and node.level == 0 and node.module:
            found.append((node.module, [alias.name for alias in node.names]))
    return found


def test_every_module_is_checked() -> None:
    assert {p.name for p in MODULES} >= {"agent.py", "turn.py", "leases.py", "budgets.py"}


@pytest.mark.parametrize("path", MODULES, ids=lambda p: p.name)
def test_imports_are_deterministic(path: Path) -> None:
    for module, names in _imports(ast.parse(path.read_text())):
        if module.startswith("toolnexus_temporal."):
            assert module.startswith("toolnexus_temporal.workflows"), (path.name, module)
            continue
        if module == "toolnexus_temporal":
            raise AssertionError(f"{path.name}: import the workflows package, not the root")
        assert module in ALLOWED_IMPORTS, (path.name, module)
        if module == "datetime":
            assert set(names) <= ALLOWED_FROM_DATETIME, (path.name, names)


@pytest.mark.parametrize("path", MODULES, ids=lambda p: p.name)
def test_no_io_calls(path: Path) -> None:
    for node in ast.walk(ast.parse(path.read_text())):
        if isinstance(node, ast.Call) and isinstance(node.func, ast.Name):
            assert node.func.id not in FORBIDDEN_CALLS, (path.name, node.lineno, node.func.id)


@pytest.mark.parametrize("path", MODULES, ids=lambda p: p.name)
def test_no_mutable_module_state(path: Path) -> None:
    for node in ast.parse(path.read_text()).body:
        if isinstance(node, ast.Global):
            raise AssertionError(f"{path.name}:{node.lineno}: global statement")
        value = node.value if isinstance(node, ast.Assign | ast.AnnAssign) else None
        if value is None:
            continue
        mutable = isinstance(value, MUTABLE) or (
            isinstance(value, ast.Call)
            and isinstance(value.func, ast.Name)
            and value.func.id in {"dict", "list", "set", "bytearray"}
        )
        assert not mutable, f"{path.name}:{node.lineno}: mutable module-level value"


def test_the_guard_catches_what_it_guards() -> None:
    """The checks above fail on the mistakes they exist for."""
    bad = ast.parse("import time\nfrom datetime import datetime\nSEEN = {}\nprint(1)\n")
    modules = dict(_imports(bad))
    assert "time" not in ALLOWED_IMPORTS and "time" in modules
    assert not set(modules["datetime"]) <= ALLOWED_FROM_DATETIME
    assert isinstance(bad.body[2], ast.Assign) and isinstance(bad.body[2].value, MUTABLE)
    call = bad.body[3]
    assert isinstance(call, ast.Expr) and isinstance(call.value, ast.Call)
    assert isinstance(call.value.func, ast.Name) and call.value.func.id in FORBIDDEN_CALLS
