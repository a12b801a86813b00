"""Test support lives in one place (issue 33 item 6): no module under ``tests/`` imports from a
test file (``test_*.py``), and ``free_port`` is defined once, in ``tests/workers.py``. What
several test files share goes into a support module (``tests.conftest.SUPPORT_MODULES``):
``tests/helpers.py``, ``tests/workers.py``, ``tests/parking.py``, ``tests/cli_support.py``...

An ``ast`` walk of every ``.py`` file under ``tests/``, imports inside functions included."""

from __future__ import annotations

import ast
from collections.abc import Iterator
from pathlib import Path

TESTS = Path(__file__).resolve().parents[1]
"""The ``tests/`` folder."""

FREE_PORT_HOME = TESTS / "workers.py"
"""The one module that may define ``free_port``."""


def _modules(root: Path) -> Iterator[tuple[Path, ast.Module]]:
    for path in sorted(root.rglob("*.py")):
        yield path, ast.parse(path.read_text(), filename=str(path))


def _is_test_module(dotted: str) -> bool:
    return dotted.rsplit(".", 1)[-1].startswith("test_")


def _imported(node: ast.Import | ast.ImportFrom) -> list[str]:
    """The modules an import statement loads: ``from tests import test_x`` and ``from
    tests.test_x import y`` both load ``tests.test_x`` (relative: ``.test_x``)."""
    if isinstance(node, ast.Import):
        return [alias.name for alias in node.names]
    base = "." * node.level + (node.module or "")
    if node.module and _is_test_module(node.module):
        return [base]
    joiner = "." if node.module else ""
    return [base + joiner + alias.name for alias in node.names]


def imports_of_test_files(root: Path = TESTS) -> list[str]:
    """``path:line imports module`` for every import of a ``test_*`` module under ``root``."""
    found = []
    for path, tree in _modules(root):
        for node in ast.walk(tree):
            if isinstance(node, ast.Import | ast.ImportFrom):
                for module in _imported(node):
                    if _is_test_module(module):
                        where = path.relative_to(root.parent)
                        found.append(f"{where}:{node.lineno} imports {module}")
    return found


def free_port_definitions(root: Path = TESTS) -> list[str]:
    """``path:line`` of every ``def free_port`` under ``root``, at any depth."""
    return [
        f"{path.relative_to(root.parent)}:{node.lineno}"
        for path, tree in _modules(root)
        for node in ast.walk(tree)
        if isinstance(node, ast.FunctionDef | ast.AsyncFunctionDef) and node.name == "free_port"
    ]


def test_no_module_under_tests_imports_a_test_file() -> None:
    found = imports_of_test_files()
    assert not found, (
        "a test file imports from another test file; move what they share into a support "
        "module (tests/helpers.py, tests/workers.py, tests/parking.py, ...):\n  "
        + "\n  ".join(found)
    )


def test_free_port_is_defined_once_in_the_workers_module() -> None:
    home = f"{FREE_PORT_HOME.relative_to(TESTS.parent)}:"
    found = free_port_definitions()
    others = [where for where in found if not where.startswith(home)]
    assert not others, (
        "free_port is defined outside tests/workers.py; import it from there:\n  "
        + "\n  ".join(others)
    )
    assert len(found) == 1, found


def test_the_walk_sees_each_kind_of_import(tmp_path: Path) -> None:
    """The guard's own check: every spelling of an import of a test file is found, and an
    import of a support module is not."""
    root = tmp_path / "tests"
    root.mkdir()
    (root / "test_a.py").write_text(
        "from tests.test_b import x\n"
        "import tests.unit.test_c\n"
        "from tests import test_d\n"
        "from .test_e import y\n"
        "from tests.helpers import spawn\n"
        "def f():\n"
        "    from tests.test_f import z\n"
        "    def free_port(): ...\n"
    )
    modules = [line.split(" imports ")[1] for line in imports_of_test_files(root)]
    assert modules == [
        "tests.test_b",
        "tests.unit.test_c",
        "tests.test_d",
        ".test_e",
        "tests.test_f",
    ]
    assert free_port_definitions(root) == ["tests/test_a.py:8"]
