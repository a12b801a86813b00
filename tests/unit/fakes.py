"""Fakes and builders for the unit tests: plain data, no Temporal server."""

from __future__ import annotations

from typing import Any

from pydantic import BaseModel

from toolnexus_temporal.workflows.contract.models import AgentDef, Budget
from toolnexus_temporal.workflows.contract.state import ChildInfo, HandleState


class FakeLog:
    """Records trace lines and rejections (the ``Log`` protocol)."""

    def __init__(self) -> None:
        self.lines: list[str] = []
        self.rejected: list[tuple[str, str]] = []

    def trace(self, line: str) -> None:
        self.lines.append(line)

    def reject(self, verb: str, error: str) -> None:
        self.rejected.append((verb, error))


class FakeSignals:
    """Records signals instead of sending them (the ``Signals`` protocol)."""

    def __init__(self) -> None:
        self.sent: list[tuple[str, str, BaseModel]] = []

    def signal_later(self, handle_id: str, name: str, arg: BaseModel) -> None:
        self.sent.append((handle_id, name, arg))


def handle(**fields: Any) -> HandleState:
    """A spawned handle ``root/a.1`` (with a definition), fields overridden."""
    base: dict[str, Any] = {
        "id": "root/a.1",
        "task_queue": "q",
        "defn": AgentDef(name="a"),
        "parent": "root",
        "depth": 1,
    }
    return HandleState(**{**base, **fields})


def parent_with(*children: str, max_concurrent: int | None = 1, **fields: Any) -> HandleState:
    """A parent ``p`` whose children (``p/x.1``...) are known and idle."""
    return handle(
        id="p",
        budget=Budget(max_concurrent=max_concurrent),
        children=list(children),
        children_info={c: ChildInfo() for c in children},
        **fields,
    )
