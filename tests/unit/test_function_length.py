"""No product function is over 80 lines (issue 33, item 3).

The rule: every function or method (``def`` or ``async def``, nested ones too) in
``workflows/``, ``activities/``, ``client/``, ``cli/``, ``observability/`` and ``worker.py`` is
at most :data:`MAX_LINES` lines long, counted from its ``def`` line to its last line
(``ast``'s ``lineno`` .. ``end_lineno``; decorators not counted) less the lines of its
docstring. A longer function is split, or listed in :data:`ALLOWED` with the reason it may
stay; an entry whose function is gone or short again fails too, so the list only shrinks.
"""

from __future__ import annotations

import ast
from pathlib import Path

REPO = Path(__file__).resolve().parents[2]
ROOTS = ("workflows", "activities", "client", "cli", "observability", "worker.py")
MAX_LINES = 80

ALLOWED: dict[str, str] = {}
"""``path:qualified name`` of a function allowed over :data:`MAX_LINES`, and why."""


def _length(fn: ast.FunctionDef | ast.AsyncFunctionDef) -> int:
    lines = (fn.end_lineno or fn.lineno) - fn.lineno + 1
    first = fn.body[0]
    if (
        isinstance(first, ast.Expr)
        and isinstance(first.value, ast.Constant)
        and isinstance(first.value.value, str)
    ):
        lines -= (first.end_lineno or first.lineno) - first.lineno + 1
    return lines


def _functions(
    tree: ast.AST, prefix: str = ""
) -> list[tuple[str, ast.FunctionDef | ast.AsyncFunctionDef]]:
    found = []
    for node in ast.iter_child_nodes(tree):
        if isinstance(node, ast.FunctionDef | ast.AsyncFunctionDef):
            found.append((prefix + node.name, node))
            found += _functions(node, f"{prefix}{node.name}.")
        elif isinstance(node, ast.ClassDef):
            found += _functions(node, f"{prefix}{node.name}.")
        else:
            found += _functions(node, prefix)
    return found


def long_functions() -> dict[str, int]:
    """``path:qualified name`` -> lines, of every product function over :data:`MAX_LINES`."""
    files: list[Path] = []
    for root in ROOTS:
        path = REPO / root
        files += [path] if path.is_file() else sorted(path.rglob("*.py"))
    found = {}
    for path in files:
        tree = ast.parse(path.read_text(), filename=str(path))
        for name, fn in _functions(tree):
            if _length(fn) > MAX_LINES:
                found[f"{path.relative_to(REPO)}:{name}"] = _length(fn)
    return found


def test_no_function_is_over_the_limit() -> None:
    over = {name: n for name, n in long_functions().items() if name not in ALLOWED}
    assert not over, (
        f"functions over {MAX_LINES} lines (docstring not counted); split them, or list one "
        f"in ALLOWED with the reason: {over}"
    )


def test_every_allowed_function_is_still_long() -> None:
    stale = sorted(set(ALLOWED) - set(long_functions()))
    assert not stale, f"ALLOWED lists functions that are gone or short now: drop them: {stale}"
