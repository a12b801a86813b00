"""The ``tnx`` CLI runs on the README's install (``pip install -e .``), which brings typer
but not click (typer 0.2x no longer depends on it): no product module imports ``click``
(the third new-user walk of issue 37 found ``tnx ls`` crashing on a fresh install with
``No module named 'click'``)."""

from __future__ import annotations

import ast
from pathlib import Path

ROOT = Path(__file__).resolve().parents[2]
PRODUCT = ("cli", "client", "activities", "workflows", "observability")


def test_no_product_module_imports_click() -> None:
    found = []
    files = [p for d in PRODUCT for p in (ROOT / d).rglob("*.py")] + [ROOT / "worker.py"]
    for path in files:
        for node in ast.walk(ast.parse(path.read_text(), str(path))):
            names = []
            if isinstance(node, ast.Import):
                names = [alias.name for alias in node.names]
            elif isinstance(node, ast.ImportFrom) and node.module:
                names = [node.module]
            if any(name == "click" or name.startswith("click.") for name in names):
                found.append(f"{path.relative_to(ROOT)}:{node.lineno}")
    assert not found, found
