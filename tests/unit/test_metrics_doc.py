"""docs/guide/metrics.md lists every metric of ``workflows/contract/metrics.py`` with its
kind, unit and labels, and names nothing that is not defined there."""

from __future__ import annotations

import re
from pathlib import Path

from toolnexus_temporal.workflows.contract.metrics import ALL_METRICS

PAGE = Path(__file__).resolve().parents[2] / "docs" / "guide" / "metrics.md"
_ROW = re.compile(r"^\| `(tnx_\w+)` \| (\w+) \| ([\w]+) \| ([^|]*) \| (\w+) \|", re.M)


def rows() -> dict[str, tuple[str, str, tuple[str, ...], str]]:
    out = {}
    for name, kind, unit, labels, source in _ROW.findall(PAGE.read_text()):
        out[name] = (kind, unit, tuple(re.findall(r"`(\w+)`", labels)), source)
    return out


def test_every_metric_is_documented_as_defined() -> None:
    documented = rows()
    defined = {m.name: (m.kind, m.unit, m.labels, m.source) for m in ALL_METRICS}
    assert documented == defined


def test_names_follow_the_conventions() -> None:
    for m in ALL_METRICS:
        assert m.name.startswith("tnx_"), m
        assert m.name.endswith("_total") == (m.kind == "counter"), m
        assert (m.unit == "ms") == m.name.endswith("_milliseconds"), m
        assert not {"id", "handle", "handle_id", "workflow_id"} & set(m.labels), m
