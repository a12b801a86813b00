"""The docs' map of where each rule lives (``docs/reference/rules.md``) matches the tree: every
module it lists exists, and every module of ``workflows/`` is listed (a new workflow module
gets its line in the map, a moved one moves there too)."""

from __future__ import annotations

import re
from pathlib import Path

REPO = Path(__file__).resolve().parent.parent
MAP = REPO / "docs" / "reference" / "rules.md"

_MODULE = re.compile(r"`((?:workflows|activities|client|cli|observability)/[\w/]+\.py|worker\.py)`")


def listed() -> list[str]:
    return _MODULE.findall(MAP.read_text())


def test_the_map_lists_modules() -> None:
    assert len(listed()) >= 40


def test_every_listed_module_exists() -> None:
    missing = [m for m in listed() if not (REPO / m).is_file()]
    assert not missing, f"listed in {MAP.name} but not in the tree: {missing}"


def test_every_workflow_module_is_listed() -> None:
    modules = {
        str(p.relative_to(REPO))
        for p in (REPO / "workflows").rglob("*.py")
        if p.name != "__init__.py"
    }
    unlisted = sorted(modules - set(listed()))
    assert not unlisted, f"workflow modules missing from {MAP.name}: {unlisted}"
