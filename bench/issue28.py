"""The targets of issue 28 (the cost of a turn), judged in one run, and across runs.

Every ratio is to the floor measured in the same run (``bench/floor.py``; for the spawn
rate, Temporal's own floor of a child started by a parent workflow, ``bench/spawn_floor.py``,
which the suite runs on its server after the contenders). One run gives each target a
verdict: ``met``, ``not met`` or ``not measured`` (with why). The latency targets ask for
three runs in a row: ``python -m bench.issue28 RUN1.json RUN2.json RUN3.json`` judges them
across the result files of those runs (each run within the limits, and no run's median
twice another's).
"""

from __future__ import annotations

import json
import sys
from pathlib import Path
from typing import Any

from bench import processes

CPU_PER_TURN_MAX = 1.3
PLAIN_P50_MAX = 1.15
PLAIN_P99_MAX = 1.3
THROUGHPUT_AGENTS = 100
THROUGHPUT_MIN = 0.8
SPAWN_FLOOR_MIN = 0.9
FANOUT_MAX = 1.0
PEERS = ("openai_agents", "actant")
"""The two peers ours must be ahead of (p50, p99, throughput at 100 agents, history bytes per
plain turn)."""

MET, NOT_MET, NOT_MEASURED = "met", "not met", "not measured"


def _num(d: Any, *path: Any) -> float | None:
    for key in path:
        if not isinstance(d, dict):
            return None
        d = d.get(key)
    return float(d) if isinstance(d, int | float) and not isinstance(d, bool) else None


def _verdict(text: str, ok: bool | None, by: str) -> dict[str, Any]:
    return {
        "text": text,
        "verdict": NOT_MEASURED if ok is None else MET if ok else NOT_MET,
        "by": by,
    }


def _throughput(c: dict[str, Any] | None) -> float | None:
    """Turns/s of the 100-agent level (None: not run, or a turn failed or never finished)."""
    for level in _get_levels(c):
        if level.get("agents") == THROUGHPUT_AGENTS:
            if level.get("failed") or level.get("unfinished"):
                return None
            return _num(level, "turns_per_s")
    return None


def _get_levels(c: dict[str, Any] | None) -> list[dict[str, Any]]:
    levels = (c or {}).get("throughput", {})
    return levels.get("levels", []) if isinstance(levels, dict) else []


def _spawn_rate(c: dict[str, Any] | None, agents: int = 100) -> float | None:
    idle = (c or {}).get("idle", {})
    for level in idle.get("levels", []) if isinstance(idle, dict) else []:
        if level.get("agents") == agents:
            return _num(level, "spawns_per_s")
    return None


def _ratio_max(
    text: str, ours: float | None, ref: float | None, limit: float, unit: str
) -> dict[str, Any]:
    if ours is None or not ref:
        return _verdict(text, None, "ours or the floor gave no value")
    r = ours / ref
    return _verdict(
        text, r <= limit, f"{r:.2f}× ({ours:,.1f} vs {ref:,.1f} {unit}; limit {limit:g}×)"
    )


def _ratio_min(
    text: str, ours: float | None, ref: float | None, limit: float, unit: str
) -> dict[str, Any]:
    if ours is None or not ref:
        return _verdict(text, None, "ours or the reference gave no value (or a turn failed)")
    r = ours / ref
    return _verdict(
        text, r >= limit, f"{r:.2f}× ({ours:,.1f} vs {ref:,.1f} {unit}; at least {limit:g}×)"
    )


MEASURES: tuple[tuple[str, tuple[str, ...], bool], ...] = (
    ("plain turn p50", ("latency", "plain", "p50_ms"), False),
    ("plain turn p99", ("latency", "plain", "p99_ms"), False),
    ("throughput, 100 agents", (), True),
    ("history bytes per plain turn", ("latency", "history_plain", "bytes_median"), False),
)
"""What ours must be ahead of both peers on: (name, path in a contender's results, higher is
better); the throughput is read by :func:`_throughput`."""


def _value(c: dict[str, Any] | None, path: tuple[str, ...]) -> float | None:
    return _throughput(c) if not path else _num(c, *path)


def targets(results: dict[str, Any], derived: dict[str, Any]) -> dict[str, dict[str, Any]]:
    """Issue 28's targets for ``ours`` (root slot accounting, the default) in one run.

    Args:
        results: the suite's results (``contenders``, ``spawn_floor``, ``processes``).
        derived: the report's derived figures (``cpu`` from :func:`bench.cpu.derive`).

    Returns:
        Each target by key: ``text``, ``verdict`` (met / not met / not measured), ``by``.
    """
    cs: dict[str, dict[str, Any]] = results.get("contenders", {})
    ours, floor = cs.get("ours"), cs.get("floor")
    out: dict[str, dict[str, Any]] = {}
    cpu_ratio = _num(derived, "cpu", "ours", "parallel_ratio")
    text = f"worker CPU per plain turn (100 agents) at most {CPU_PER_TURN_MAX:g}× the floor's"
    out["cpu_per_turn"] = _verdict(
        text,
        None if cpu_ratio is None else cpu_ratio <= CPU_PER_TURN_MAX,
        "not run" if cpu_ratio is None else f"{cpu_ratio:.2f}×",
    )
    for key, p, limit in (
        ("plain_p50", "p50_ms", PLAIN_P50_MAX),
        ("plain_p99", "p99_ms", PLAIN_P99_MAX),
    ):
        out[key] = _ratio_max(
            f"plain turn {p[:3]} at most {limit:g}× the floor (this run; three in a row: "
            "python -m bench.issue28)",
            _num(ours, "latency", "plain", p),
            _num(floor, "latency", "plain", p),
            limit,
            "ms",
        )
    out["throughput_100"] = _ratio_min(
        f"throughput with {THROUGHPUT_AGENTS} agents (one process) at least "
        f"{THROUGHPUT_MIN:g}× the floor",
        _throughput(ours),
        _throughput(floor),
        THROUGHPUT_MIN,
        "turns/s",
    )
    scale = results.get("processes")
    out["processes_gain"] = (
        processes.target(scale)
        if isinstance(scale, dict) and "contenders" in scale
        else _verdict(
            "from one worker process to two, ours gains at least as much as the floor",
            None,
            "not run" if scale is None else str(scale.get("error", "no result")),
        )
    )
    out["spawn_vs_spawn_floor"] = _ratio_min(
        f"spawn rate (100 agents) at least {SPAWN_FLOOR_MIN:g}× Temporal's floor of a child "
        "started by a parent workflow (bench/spawn_floor.py)",
        _spawn_rate(ours),
        _num(results, "spawn_floor", "child_via_update_per_s"),
        SPAWN_FLOOR_MIN,
        "agents/s",
    )
    out["fanout"] = _ratio_max(
        f"fan-out 1 → 50 wall time at most {FANOUT_MAX:g}× the floor's",
        _num(ours, "fanout", "median_s"),
        _num(floor, "fanout", "median_s"),
        FANOUT_MAX,
        "s",
    )
    for name, path, higher in MEASURES:
        mine = _value(ours, path)
        behind, missing = [], []
        for peer in PEERS:
            theirs = _value(cs.get(peer), path)
            if theirs is None or mine is None:
                missing.append(peer)
            elif (mine <= theirs) if higher else (mine >= theirs):
                behind.append(f"{peer} {theirs:,.1f} vs ours {mine:,.1f}")
        key = "ahead_" + name.split(",")[0].replace(" ", "_")
        text = f"ahead of both peers ({', '.join(PEERS)}) on {name}"
        if behind:
            out[key] = _verdict(text, False, "behind " + "; ".join(behind))
        elif missing:
            out[key] = _verdict(text, None, f"no value for {', '.join(missing)}")
        else:
            out[key] = _verdict(text, True, f"ours {mine:,.1f}")
    return out


def markdown(derived: dict[str, Any]) -> list[str]:
    """The section "Targets of issue 28" of a report (empty when not derived)."""
    ts = derived.get("issue28")
    if not ts:
        return []
    lines = [
        "## Targets of issue 28 (the cost of a turn)",
        "",
        "| target | verdict | by |",
        "|---|---|---|",
    ]
    lines += [f"| {t['text']} | **{t['verdict']}** | {t['by']} |" for t in ts.values()]
    met = sum(1 for t in ts.values() if t["verdict"] == MET)
    lines += ["", f"{met} of {len(ts)} met in this run.", ""]
    return lines


def across_runs(runs: list[dict[str, Any]]) -> dict[str, Any]:
    """The latency targets over runs in a row: each run's p50 and p99 ratio within the
    limits, and no run's p50 of ours more than twice another's.

    Args:
        runs: result files of the suite (their ``contenders``), in the order they ran.
    """
    rows = []
    for r in runs:
        cs = r.get("contenders", {})
        ours, floor = cs.get("ours"), cs.get("floor")
        p50, f50 = (
            _num(ours, "latency", "plain", "p50_ms"),
            _num(floor, "latency", "plain", "p50_ms"),
        )
        p99, f99 = (
            _num(ours, "latency", "plain", "p99_ms"),
            _num(floor, "latency", "plain", "p99_ms"),
        )
        rows.append(
            {
                "stamp": r.get("stamp"),
                "p50_ms": p50,
                "p50_ratio": p50 / f50 if p50 and f50 else None,
                "p99_ratio": p99 / f99 if p99 and f99 else None,
            }
        )
    ok50 = all(x["p50_ratio"] is not None and x["p50_ratio"] <= PLAIN_P50_MAX for x in rows)
    ok99 = all(x["p99_ratio"] is not None and x["p99_ratio"] <= PLAIN_P99_MAX for x in rows)
    medians = [x["p50_ms"] for x in rows if x["p50_ms"]]
    steady = bool(medians) and max(medians) <= 2 * min(medians)
    return {
        "runs": rows,
        "p50_each_run": MET if ok50 and len(rows) >= 3 else NOT_MET,
        "p99_each_run": MET if ok99 and len(rows) >= 3 else NOT_MET,
        "no_run_twice_as_slow": MET if steady else NOT_MET,
    }


def main(argv: list[str] | None = None) -> None:
    """``python -m bench.issue28 RUN.json ...``: the latency targets across those runs."""
    paths = argv if argv is not None else sys.argv[1:]
    if not paths:
        raise SystemExit("usage: python -m bench.issue28 RUN1.json RUN2.json RUN3.json")
    print(json.dumps(across_runs([json.loads(Path(p).read_text()) for p in paths]), indent=2))


if __name__ == "__main__":
    main()
