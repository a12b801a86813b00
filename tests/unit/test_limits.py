"""Values bounded before they reach the server (issue 23 item 3): search attribute values in
UTF-8 bytes, workflow ids, summaries; a spawn whose child id would be too long is a SpawnError,
never a failed workflow task of the parent."""

from __future__ import annotations

import json

import pytest
from pydantic import ValidationError

from tests.unit.fakes import handle
from toolnexus_temporal.workflows.children.children import spawn_check
from toolnexus_temporal.workflows.contract.limits import (
    SEARCH_ATTRIBUTE_TEXT_BYTES,
    SUMMARY_BYTES,
    WORKFLOW_ID_BYTES,
    fit,
    workflow_id_error,
)
from toolnexus_temporal.workflows.contract.messages import ResolveAgentResult
from toolnexus_temporal.workflows.contract.models import AGENT_NAME_MAX, AgentDef, Request
from toolnexus_temporal.workflows.visibility.operator import request_attributes, static_summary


def test_fit_cuts_utf8_at_a_character_boundary() -> None:
    assert fit("short", 10) == "short"
    cut = fit("é" * 3000, SEARCH_ATTRIBUTE_TEXT_BYTES)
    assert len(cut.encode()) <= SEARCH_ATTRIBUTE_TEXT_BYTES and cut.endswith("…")
    assert set(cut[:-1]) == {"é"}
    assert fit("🙂" * 100, 9) == "🙂…"  # 4 + 3 bytes: no half character


def test_request_attributes_fit_the_server_limit() -> None:
    req = Request(id="root/ops.1#1", kind="k" * 3000, prompt="p" * 3000)
    for update in request_attributes(req, None):
        value = update.value
        assert isinstance(value, str)
        assert len(json.dumps(value)) <= SEARCH_ATTRIBUTE_TEXT_BYTES, update.key.name


def test_a_child_id_over_the_limit_is_a_spawn_error() -> None:
    name = "n" * AGENT_NAME_MAX
    deep = "root/" + "/".join(f"{name}.1" for _ in range(9))  # 9 levels of 102 bytes
    s = handle(id=deep, depth=1)
    error = spawn_check(s, name, ResolveAgentResult(defn=AgentDef(name=name)), 0)
    assert error is not None and f"over Temporal's {WORKFLOW_ID_BYTES}" in error
    shallow = handle(id="root/a.1", depth=1)
    assert spawn_check(shallow, name, ResolveAgentResult(defn=AgentDef(name=name)), 0) is None
    assert workflow_id_error("x" * WORKFLOW_ID_BYTES) is None
    assert workflow_id_error("x" * (WORKFLOW_ID_BYTES + 1)) is not None


def test_agent_names_are_bounded() -> None:
    AgentDef(name="a" * AGENT_NAME_MAX)
    with pytest.raises(ValidationError):
        AgentDef(name="a" * (AGENT_NAME_MAX + 1))


def test_static_summary_fits() -> None:
    s = handle(id="root/" + "x" * 900 + ".1", parent="root/" + "x" * 400)
    assert len(static_summary(s).encode()) <= SUMMARY_BYTES


def test_trace_times_read_as_iso_utc() -> None:
    """``TraceEntry.at`` (the trace query's readable time) agrees with ``datetime``."""
    import random
    from datetime import UTC, datetime

    from toolnexus_temporal.workflows.contract.models import iso_utc

    rng = random.Random(7)
    samples = [0, 951_782_400_000, 4_107_542_399_999, 1_764_623_523_123]  # 2000-02-29 ...
    samples += [rng.randrange(0, 10**13) for _ in range(2_000)]
    for at_ms in samples:
        at = datetime.fromtimestamp(at_ms / 1000, UTC)
        expected = at.strftime("%Y-%m-%dT%H:%M:%S") + f".{at_ms % 1000:03d}Z"
        assert iso_utc(at_ms) == expected, at_ms


def test_an_escalation_queue_the_server_would_refuse_is_refused_at_the_definition() -> None:
    """Its name is the ``AgentEscalatedTo`` value operators query for, so it is never cut:
    200 emoji (2,402 JSON bytes) made the server terminate the parked workflow
    ("BadSearchAttributes: ... AgentEscalatedTo value size 2402 exceeds size limit 2048")."""
    from toolnexus_temporal.workflows.contract.models import ApprovalPolicy, Escalation

    with pytest.raises(ValidationError, match="AgentEscalatedTo"):
        Escalation(after_ms=300, queue="😀" * 200)
    with pytest.raises(ValidationError, match="AgentEscalatedTo"):
        AgentDef.model_validate({"name": "w", "approval": {"escalate": {"queue": "😀" * 200}}})
    fits = Escalation(queue="é" * 200)  # 1,202 JSON bytes
    assert len(json.dumps(fits.queue)) <= SEARCH_ATTRIBUTE_TEXT_BYTES
    assert ApprovalPolicy(escalate=Escalation(queue="ops-oncall")).escalate is not None
