"""The docs' map of where each rule lives (``docs/reference/rules.md``) matches the tree: every
module it lists exists, and every module of ``workflows/``, ``activities/``, ``client/``,
``cli/`` and ``observability/`` is listed (a new module gets its line in the map, a moved one
moves there too)."""

from __future__ import annotations

import re
from pathlib import Path

import pytest

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


@pytest.mark.parametrize("folder", ["workflows", "activities", "client", "cli", "observability"])
def test_every_module_is_listed(folder: str) -> None:
    """Every module of ``folder`` (its package ``__init__.py`` files aside, except the host
    library's, which is its public surface) has a line in the map."""
    modules = {
        str(p.relative_to(REPO))
        for p in (REPO / folder).rglob("*.py")
        if p.name != "__init__.py" or str(p.relative_to(REPO)) == "client/__init__.py"
    }
    unlisted = sorted(modules - set(listed()))
    assert not unlisted, f"{folder}/ modules missing from {MAP.name}: {unlisted}"
