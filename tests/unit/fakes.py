"""Fakes and builders for the unit tests: plain data, no Temporal server."""

from __future__ import annotations

from typing import Any

from pydantic import BaseModel

from toolnexus_temporal.workflows.contract.models import AgentDef, Budget, WireModel
from toolnexus_temporal.workflows.contract.state import ChildInfo, HandleState

PARTS: dict[str, type[WireModel]] = {
    name: field.default_factory
    for name, field in HandleState.model_fields.items()
    if isinstance(field.default_factory, type)
    and issubclass(field.default_factory, WireModel)
    and field.default_factory.__module__ == HandleState.__module__
}
"""The parts of ``HandleState`` by attribute name (``approval``: ``ApprovalState``)."""

_PART_OF = {name: part for part, model in PARTS.items() for name in model.model_fields}
"""The part of ``HandleState`` each part field lives in (``pending_req`` -> ``approval``)."""


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


def state_fields(**fields: Any) -> dict[str, Any]:
    """``HandleState`` keyword arguments from flat ones: a field of a part (``pending_req``,
    ``held``) goes into its part (``approval``, ``leases``); a part given whole (a model or a
    dict) is merged with the part fields given flat."""
    out: dict[str, Any] = {}
    nested: dict[str, dict[str, Any]] = {}
    for name, value in fields.items():
        if name in PARTS:
            given = value.model_dump(exclude_unset=True) if isinstance(value, BaseModel) else value
            nested.setdefault(name, {}).update(given)
        elif name in _PART_OF:
            nested.setdefault(_PART_OF[name], {})[name] = value
        else:
            out[name] = value
    return {**out, **{part: PARTS[part].model_validate(v) for part, v in nested.items()}}


def handle(**fields: Any) -> HandleState:
    """A spawned handle ``root/a.1`` (with a definition), fields overridden; a field of a
    part may be given flat (see :func:`state_fields`)."""
    base: dict[str, Any] = {
        "id": "root/a.1",
        "task_queue": "q",
        "defn": AgentDef(name="a"),
        "parent": "root",
        "depth": 1,
    }
    return HandleState(**{**base, **state_fields(**fields)})


def parent_with(*children: str, max_concurrent: int | None = 1, **fields: Any) -> HandleState:
    """A parent ``p`` whose children (``p/x.1``...) are known and idle."""
    return handle(
        id="p",
        budget=Budget(max_concurrent=max_concurrent),
        children=list(children),
        children_info={c: ChildInfo() for c in children},
        **fields,
    )
