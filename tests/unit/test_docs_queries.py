"""Every visibility query the docs give for a list of agents shows one row per live handle
(issue 24 item 1): a run that continued as new keeps the search attributes it had when it
closed (``AgentState``, ``AgentPaused``, ``AgentEscalatedTo``, ...), so a query on them lists
each handle once per run unless it also says ``ExecutionStatus="Running"``."""

from __future__ import annotations

import re
from pathlib import Path

import pytest

ROOT = Path(__file__).resolve().parents[2]
SOURCES = [
    *sorted((ROOT / "docs").rglob("*.md")),
    *sorted((ROOT / "docs" / "examples").glob("*.sh")),
    ROOT / "README.md",
    ROOT / "workflows" / "contract" / "names.py",
]
LIST = re.compile(r"temporal workflow (?:list|count) [^\n]*?--query '([^']+)'")
KEPT_BY_A_CLOSED_RUN = re.compile(r"\bAgent(State|Paused|EscalatedTo|Request\w*|WaitingSince)\b")


def listed_queries() -> list[tuple[str, str]]:
    found: list[tuple[str, str]] = []
    for path in SOURCES:
        for query in LIST.findall(path.read_text()):
            found.append((str(path.relative_to(ROOT)), query))
    return found


def test_the_docs_give_list_queries() -> None:
    assert len([q for _, q in listed_queries() if KEPT_BY_A_CLOSED_RUN.search(q)]) >= 3


@pytest.mark.parametrize(("where", "query"), listed_queries())
def test_a_list_of_agents_leaves_closed_runs_out(where: str, query: str) -> None:
    if KEPT_BY_A_CLOSED_RUN.search(query):
        assert 'ExecutionStatus="Running"' in query, (where, query)
