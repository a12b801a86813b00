"""The rooms of ``workflows/`` are floors: a module imports only from rooms on lower floors
(or from its own room), never back up the order, nor sideways into another room on its own
floor unless :data:`ALLOWED_SIDEWAYS` says why.

A room is a folder of ``workflows/`` or a module at its root. :data:`FLOORS` is the one
declared order, lowest first; ``docs/contributing.md`` and the docstring of
``workflows/agent.py`` describe the same order. Every import counts: at module level, inside a
function, and under ``TYPE_CHECKING`` (a type-only import still ties two rooms together).
Checked statically, with ``ast``, on every module of ``workflows/``.
"""

from __future__ import annotations

import ast
import re
from pathlib import Path
from typing import NamedTuple

WORKFLOWS = Path(__file__).resolve().parents[2] / "workflows"
PACKAGE = "toolnexus_temporal.workflows"

FLOORS: tuple[tuple[str, ...], ...] = (
    ("contract",),  # types, names, limits, the clock: the durable surface
    ("rules",),  # pure rules over the state, one module per concept
    ("visibility",),  # trace lines, views, search attributes, the operator's view
    ("outbox",),  # signals to other handles, counted until delivered
    ("leases", "budgets", "trust"),  # slots, budgets, nonces
    ("machine",),  # the state machine, the turn's scratch, the one result path
    ("inbox",),  # posts, wake admission, the turn's input
    ("approvals",),  # suspension, Answers, expiry and audit
    ("children",),  # spawn, reports, definitions, background children, the task tool
    ("turn", "ticks"),  # the LLM loop and its tools; scheduled wakes
    ("lifecycle",),  # wait, interrupt, close, the run loop, continue-as-new carry-over
    ("pause",),  # pause and unpause
    ("agent",),  # the workflow class: wiring and handlers
)
"""The rooms of ``workflows/``, lowest floor first."""

ALLOWED_SIDEWAYS: frozenset[tuple[str, str]] = frozenset()
"""(importing room, imported room) pairs on one floor that may import each other, each with
its reason in a comment. None today."""

FLOOR_OF = {room: n for n, rooms in enumerate(FLOORS) for room in rooms}


class Import(NamedTuple):
    line: int
    target: str  # the imported module, dotted, relative to the workflows package


def room_of(module: str) -> str:
    """The room of ``module`` (dotted, relative to ``workflows``): its first part."""
    return module.split(".", 1)[0]


def module_of(path: Path) -> str:
    """The dotted name of ``path`` relative to ``workflows/`` (``turn.turn``; a package's
    ``__init__`` is the package)."""
    parts = list(path.relative_to(WORKFLOWS).with_suffix("").parts)
    if parts[-1] == "__init__":
        parts.pop()
    return ".".join(parts)


def imports_of(source: str, module: str, is_package: bool) -> list[Import]:
    """Every import of a ``workflows`` module in ``source`` (anywhere in the tree: module
    level, functions, ``if TYPE_CHECKING:``), relative imports resolved."""
    found: list[Import] = []
    for node in ast.walk(ast.parse(source)):
        if isinstance(node, ast.Import):
            for alias in node.names:
                if alias.name.startswith(PACKAGE + "."):
                    found.append(Import(node.lineno, alias.name[len(PACKAGE) + 1 :]))
        elif isinstance(node, ast.ImportFrom):
            if node.level:
                base = module.split(".") if module else []
                base = base if is_package else base[:-1]
                base = base[: len(base) - (node.level - 1)]
                dotted = ".".join([*base, *([node.module] if node.module else [])])
            elif node.module == PACKAGE or (node.module or "").startswith(PACKAGE + "."):
                dotted = node.module[len(PACKAGE) + 1 :] if node.module != PACKAGE else ""
            else:
                continue
            if dotted:
                found.append(Import(node.lineno, dotted))
            else:  # from toolnexus_temporal.workflows import agent, turn
                found += [Import(node.lineno, alias.name) for alias in node.names]
    return found


def violations(source: str, module: str, is_package: bool = False, where: str = "") -> list[str]:
    """Why each import of ``source`` (the text of ``module``, shown as ``where``) breaks the
    order, one line each (empty: none does)."""
    here = room_of(module)
    where = where or module
    out: list[str] = []
    for imp in imports_of(source, module, is_package):
        there = room_of(imp.target)
        if there == here:
            continue
        if there not in FLOOR_OF:
            out.append(f"{where}:{imp.line}: imports {imp.target}, a room FLOORS does not list")
            continue
        up, down = FLOOR_OF[here], FLOOR_OF[there]
        if down > up:
            out.append(
                f"{where}:{imp.line}: {here} (floor {up}) imports {imp.target}, "
                f"up the order ({there} is on floor {down})"
            )
        elif down == up and (here, there) not in ALLOWED_SIDEWAYS:
            out.append(
                f"{where}:{imp.line}: {here} imports {imp.target}, sideways on floor {up} "
                f"(not in ALLOWED_SIDEWAYS)"
            )
    return out


def modules() -> list[Path]:
    return [p for p in sorted(WORKFLOWS.rglob("*.py")) if p != WORKFLOWS / "__init__.py"]


def test_every_room_is_on_one_floor() -> None:
    rooms = {room_of(module_of(p)) for p in modules()}
    declared = [room for floor in FLOORS for room in floor]
    assert len(declared) == len(set(declared)), "a room is on two floors"
    assert rooms == set(declared), (
        f"not in FLOORS: {sorted(rooms - set(declared))}; "
        f"in FLOORS, not in workflows/: {sorted(set(declared) - rooms)}"
    )


def test_no_import_runs_up_or_sideways() -> None:
    found: list[str] = []
    for path in modules():
        module = module_of(path)
        where = str(path.relative_to(WORKFLOWS.parent))
        found += violations(path.read_text(), module, path.name == "__init__.py", where)
    assert not found, "imports against the floors of workflows/:\n" + "\n".join(found)


def floors_named(text: str) -> list[str]:
    """The rooms named, in order, in the paragraph of ``text`` that starts with ``Floors of
    workflows/, lowest first:`` (each as a backticked folder, ``name/``, or module, ``name.py``)."""
    start = text.index("Floors of workflows/, lowest first:")
    paragraph = text[start:].split("\n\n", 1)[0]
    names = re.findall(r"`([a-z_]+)(?:/|\.py)`", paragraph)
    return names


def test_the_order_is_described_where_contributors_read_it() -> None:
    """docs/contributing.md and agent.py's docstring name the floors in this order."""
    expected = [room for floor in FLOORS for room in floor]
    docs = (WORKFLOWS.parent / "docs" / "contributing.md").read_text()
    agent = ast.get_docstring(ast.parse((WORKFLOWS / "agent.py").read_text())) or ""
    assert floors_named(docs) == expected, "docs/contributing.md"
    assert floors_named(agent) == expected, "workflows/agent.py"


def test_the_check_catches_what_it_guards() -> None:
    """An import up the order, one sideways, and each inside a function and under
    TYPE_CHECKING, are all found; a downward one is not."""
    planted = (
        "from typing import TYPE_CHECKING\n"
        "from toolnexus_temporal.workflows.contract.names import SIGNAL_WAKE\n"  # down: fine
        "if TYPE_CHECKING:\n"
        "    from toolnexus_temporal.workflows.agent import AgentWorkflow\n"  # up
        "def f():\n"
        "    from toolnexus_temporal.workflows import turn\n"  # up, in a function
        "    from .budgets import carve\n"  # sideways (leases and budgets share a floor)
        "    import toolnexus_temporal.workflows.inbox\n"  # up
    )
    found = violations(planted, "leases")
    assert [v.split(":")[1] for v in found] == ["4", "6", "7", "8"], found
    assert "up the order" in found[0] and "sideways" in found[2]
