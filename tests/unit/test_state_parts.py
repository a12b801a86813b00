"""``HandleState`` parts (issue 22): one home per field, one model on the wire."""

from __future__ import annotations

import json

from tests.unit.fakes import PARTS, handle
from toolnexus_temporal.workflows.contract.state import AgentInput, HandleState, Lease


def test_every_field_has_one_home() -> None:
    top = set(HandleState.model_fields) - set(PARTS)
    names = [name for model in PARTS.values() for name in model.model_fields]
    assert len(names) == len(set(names)) and not top & set(names)
    assert set(PARTS) == {
        "leases",
        "approval",
        "roster",
        "intake",
        "usage",
        "turn",
        "updates",
        "background",
        "ticks",
        "pause",
    }
    for model in PARTS.values():
        assert model.__doc__ and "owner" in model.__doc__


def test_a_part_at_its_defaults_is_left_off_the_wire() -> None:
    s = HandleState(id="root", task_queue="q")
    wire = json.loads(AgentInput(state=s).model_dump_json())
    assert not set(wire["state"]) & set(PARTS)
    assert AgentInput.model_validate(wire).state == s


def test_a_set_part_field_travels_nested_and_comes_back() -> None:
    s = handle(held={"p/x.1": Lease(id=2)}, pending_since_ms=5, items=[], turns_total=3)
    wire = json.loads(AgentInput(state=s).model_dump_json())["state"]
    assert wire["leases"] == {"held": {"p/x.1": {"id": 2}}}
    assert wire["approval"] == {"pending_since_ms": 5} and wire["turn"] == {"turns_total": 3}
    assert "intake" not in wire
    assert AgentInput.model_validate({"state": wire}).state == s
