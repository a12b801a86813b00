"""Every write to a ``HandleState`` part goes through its owner (issue 33 item 1).

An ``ast`` walk over ``workflows/`` and ``client/`` finds each write to the handle state:
assignment and augmented-assignment targets, ``del``, and mutating calls (``append``, ``pop``,
``update``, ...) on a chain that starts at the state (``s``, ``self.s``, ``state``) or at a
simple alias of a part (``a = s.approval``, ``info = s.roster.children_info[cid]``), followed
within one function. A write to a part, or to a top-level field listed in ``WRITERS``, from a
module not declared as its owner there (``contract/state.py``) fails. Outside ``workflows/``
nothing may write at all (``client/recover.py`` calls ``trust.restore_nonces``).
"""

from __future__ import annotations

import ast
from dataclasses import dataclass
from pathlib import Path

import pytest

from toolnexus_temporal.workflows.contract.state import WRITERS, HandleState

ROOT = Path(__file__).resolve().parents[2]
SCANNED = ("workflows", "client")
MUTATORS = {
    "append",
    "extend",
    "insert",
    "pop",
    "popitem",
    "remove",
    "clear",
    "update",
    "setdefault",
    "sort",
    "reverse",
    "add",
    "discard",
}
STATE_ROOTS = {"s", "state"}
"""Names that hold a ``HandleState`` (locals, ``self.s``, ``inp.state``)."""
FIELDS = set(HandleState.model_fields)


@dataclass(frozen=True)
class Write:
    """One write found: ``module`` (path under the repository), ``line``, ``part`` (a part
    name or a top-level field), ``field`` (the part's field, or "")."""

    module: str
    line: int
    part: str
    field: str

    def __str__(self) -> str:
        where = f"{self.part}.{self.field}" if self.field else self.part
        return f"{self.module}:{self.line} writes {where}"


def _chain(node: ast.expr) -> tuple[ast.expr, list[str]]:
    """The root of an attribute/subscript chain and its attribute names, outermost last."""
    names: list[str] = []
    while isinstance(node, ast.Attribute | ast.Subscript):
        if isinstance(node, ast.Attribute):
            names.append(node.attr)
        node = node.value
    return node, names[::-1]


def _path(node: ast.expr, aliases: dict[str, tuple[str, ...]]) -> tuple[str, ...] | None:
    """The state path an expression names (``("approval", "parked")``), or None."""
    root, names = _chain(node)
    if isinstance(root, ast.Name):
        if root.id in aliases:
            return (*aliases[root.id], *names)
        if root.id in STATE_ROOTS:
            return tuple(names)
        if root.id == "self" and names[:1] == ["s"]:
            return tuple(names[1:])
        return None
    if isinstance(root, ast.Call):  # s.roster.children_info.get(c) and the like
        return None
    return None


def _state_path(node: ast.expr, aliases: dict[str, tuple[str, ...]]) -> tuple[str, ...] | None:
    """Like ``_path`` but only for expressions inside the state (a part or a field)."""
    path = _path(node, aliases)
    if path is None or not path or path[0] not in FIELDS:
        return None
    return path


def _targets(target: ast.expr) -> list[ast.expr]:
    if isinstance(target, ast.Tuple | ast.List):
        return [t for el in target.elts for t in _targets(el)]
    if isinstance(target, ast.Starred):
        return _targets(target.value)
    return [target]


def _alias_source(value: ast.expr) -> ast.expr:
    """``s.roster.children_info.get(c)`` aliases ``s.roster.children_info``."""
    if (
        isinstance(value, ast.Call)
        and isinstance(value.func, ast.Attribute)
        and value.func.attr in {"get", "setdefault"}
    ):
        return value.func.value
    return value


class _Scan(ast.NodeVisitor):
    def __init__(self, module: str) -> None:
        self.module = module
        self.writes: list[Write] = []
        self.aliases: dict[str, tuple[str, ...]] = {}

    def _found(self, path: tuple[str, ...] | None, line: int, whole: bool) -> None:
        if path is None or not path:
            return
        part = path[0]
        if len(path) == 1 and not whole:
            return
        self.writes.append(Write(self.module, line, part, path[1] if len(path) > 1 else ""))

    def _function(self, node: ast.FunctionDef | ast.AsyncFunctionDef) -> None:
        outer, self.aliases = self.aliases, {}
        self.generic_visit(node)
        self.aliases = outer

    visit_FunctionDef = _function
    visit_AsyncFunctionDef = _function

    def _write(self, target: ast.expr, line: int) -> None:
        for t in _targets(target):
            if isinstance(t, ast.Name):
                continue
            path = _state_path(t, self.aliases)
            if path is not None:
                # ``s.approval = x`` replaces the part; ``s.last_error = x`` a field
                self._found(path, line, whole=True)

    def visit_Assign(self, node: ast.Assign) -> None:
        for target in node.targets:
            self._write(target, node.lineno)
        if len(node.targets) == 1 and isinstance(node.targets[0], ast.Name):
            path = _state_path(_alias_source(node.value), self.aliases)
            name = node.targets[0].id
            if path is not None and path[0] in PARTS_AND_LISTS:
                self.aliases[name] = path
            else:
                self.aliases.pop(name, None)
        self.generic_visit(node)

    def visit_AugAssign(self, node: ast.AugAssign) -> None:
        self._write(node.target, node.lineno)
        self.generic_visit(node)

    def visit_AnnAssign(self, node: ast.AnnAssign) -> None:
        if node.value is not None:
            self._write(node.target, node.lineno)
        self.generic_visit(node)

    def visit_Delete(self, node: ast.Delete) -> None:
        for target in node.targets:
            self._write(target, node.lineno)
        self.generic_visit(node)

    def visit_Call(self, node: ast.Call) -> None:
        func = node.func
        if isinstance(func, ast.Attribute) and func.attr in MUTATORS:
            path = _state_path(func.value, self.aliases)
            if path is not None:
                self._found(path, node.lineno, whole=True)
        self.generic_visit(node)


PARTS_AND_LISTS = FIELDS
"""Aliases followed: any chain into the state (a part, a field's list or dict, an entry)."""


def scan(path: Path, module: str) -> list[Write]:
    """The writes to handle state in one source file."""
    visitor = _Scan(module)
    visitor.visit(ast.parse(path.read_text(), filename=str(path)))
    return visitor.writes


def owner_allows(write: Write) -> bool:
    """Whether ``WRITERS`` lets the write's module write its part (or top-level field)."""
    if not write.module.startswith("workflows/"):
        return False
    inside = write.module.removeprefix("workflows/")
    owners = WRITERS.get(write.part)
    if owners is None:
        return True  # a top-level field with no declared owner: set at creation
    return any(inside == o or (o.endswith("/") and inside.startswith(o)) for o in owners)


def all_writes() -> list[Write]:
    found: list[Write] = []
    for top in SCANNED:
        for path in sorted((ROOT / top).rglob("*.py")):
            found += scan(path, str(path.relative_to(ROOT)))
    return found


def test_the_scan_sees_the_known_writes() -> None:
    writes = all_writes()
    parts = {w.part for w in writes}
    assert {"approval", "intake", "leases", "roster", "usage", "turn", "last_error"} <= parts


def test_every_part_has_a_declared_owner() -> None:
    for name, info in HandleState.model_fields.items():
        cls = info.annotation
        if isinstance(cls, type) and cls.__name__.endswith("State"):  # LeaseState, ...
            assert name in WRITERS, f"part {name} has no owner in contract/state.py WRITERS"
    for part, owners in WRITERS.items():
        assert part in FIELDS, part
        for owner in owners:
            assert (ROOT / "workflows" / owner).exists(), f"{part}: {owner} does not exist"


def test_each_part_is_written_by_its_owner_only() -> None:
    foreign = [str(w) for w in all_writes() if not owner_allows(w)]
    assert not foreign, "writes from outside the owner (contract/state.py WRITERS):\n" + (
        "\n".join(foreign)
    )


@pytest.mark.parametrize(
    "source",
    [
        "def f(s):\n    s.approval.parked = None\n",
        "def f(self):\n    a = self.s.approval\n    a.escalated_to = 'x'\n",
        "def f(s):\n    s.roster.children_info.pop('c')\n",
        "def f(s, c):\n    info = s.roster.children_info[c]\n    info.parked = True\n",
        "def f(s):\n    del s.leases.held['c']\n",
        "def f(s):\n    x, s.intake.turn_inbox = 1, []\n",
        "def f(state):\n    state.usage.usage_total += 1\n",
    ],
)
def test_the_scan_finds_a_planted_write(source: str, tmp_path: Path) -> None:
    path = tmp_path / "planted.py"
    path.write_text(source)
    (write,) = scan(path, "workflows/turn/planted.py")
    assert not owner_allows(write)


def test_no_callback_is_set_after_construction() -> None:
    """``agent.py`` wires the components through their constructors: no ``self._x.attr = ...``
    (a collaborator or callback set on a component after it was built)."""
    tree = ast.parse((ROOT / "workflows" / "agent.py").read_text())
    late = [
        f"agent.py:{node.lineno}"
        for node in ast.walk(tree)
        if isinstance(node, ast.Assign)
        for target in node.targets
        if isinstance(target, ast.Attribute)
        and isinstance(target.value, ast.Attribute)
        and isinstance(target.value.value, ast.Name)
        and target.value.value.id == "self"
    ]
    assert not late, f"set after construction: {late}"
