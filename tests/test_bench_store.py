"""The benchmark's store option (issue 13): which contenders ``--store`` runs, and the store
comparison it reports. Pure: no server (``tests/test_bench_smoke.py`` runs the suite)."""

from __future__ import annotations

from bench import report
from bench.__main__ import with_store
from bench.contenders import DEFAULT, ORDER, make


def test_store_option_picks_the_contenders() -> None:
    assert "ours_pg" in ORDER and "ours_pg" not in DEFAULT
    assert make("ours_pg").name == "ours_pg"
    assert with_store(["floor", "ours"], "sqlite") == ["floor", "ours"]
    assert with_store(["floor", "ours"], "postgres") == ["floor", "ours_pg"]
    assert with_store(["floor", "ours"], "both") == ["floor", "ours", "ours_pg"]
    assert with_store(["floor"], "both") == ["floor"]  # no ours: nothing to compare


def test_store_comparison_is_a_ratio_of_the_same_run() -> None:
    def contender(p50: float) -> dict[str, object]:
        lat = {"p50_ms": p50, "p95_ms": p50 * 2, "p99_ms": p50 * 3}
        return {"label": "x", "latency": {"plain": lat, "tool": lat}}

    results = {"contenders": {"ours": contender(40.0), "ours_pg": contender(50.0)}}
    derived = report.derive(results)
    assert derived["store"]["plain_p50_ms"] == {"sqlite": 40.0, "postgres": 50.0, "ratio": 1.25}
    table = "\n".join(report.store_markdown({**results, "derived": derived}))
    assert "| plain p50 | 40.0 | 50.0 | 1.25 |" in table
    assert report.store_markdown({"contenders": {"ours": contender(1.0)}, "derived": {}}) == []
