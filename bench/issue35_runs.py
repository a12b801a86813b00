"""Issue 35's targets across runs in a row: ``python -m bench.issue35_runs RUN.json ...``.

Each run is judged on its own against the floor of the same run, with issue 35's limits
(stricter than issue 28's on worker CPU and spawn); a target is met only when every run
meets it. The figures come from the suite's result files (``bench/results/<stamp>.json``):
the latency, throughput, fan-out, history and billable-action counts of each contender, the
spawn floor, and the derived worker CPU ratio. Nothing is hard-coded but the limits.

Prints a markdown table (one row per target, one column per run) and the count met.
"""

from __future__ import annotations

import json
import sys
from pathlib import Path
from typing import Any, Final

from bench import issue28, issue35

PLAIN_P50_MAX: Final = 1.15
PLAIN_P99_MAX: Final = 1.3
THROUGHPUT_MIN: Final = 0.8
CPU_PER_TURN_MAX: Final = 1.1
SPAWN_FLOOR_MIN: Final = 1.0
FANOUT_MAX: Final = 1.0

_num = issue28._num


def _ratio(ours: float | None, ref: float | None) -> float | None:
    return ours / ref if ours is not None and ref else None


def _cell(value: float | None, ok: bool | None, fmt: str) -> dict[str, Any]:
    return {"value": value, "ok": ok, "text": "n/a" if value is None else fmt.format(value)}


def judge(results: dict[str, Any]) -> dict[str, dict[str, Any]]:
    """Issue 35's targets for ``ours`` in one run: ``{key: {text, value, ok, text}}``."""
    cs: dict[str, dict[str, Any]] = results.get("contenders", {})
    ours, floor = cs.get("ours"), cs.get("floor")
    out: dict[str, dict[str, Any]] = {}

    for key, verdict in issue35.targets(results).items():
        ok = None if verdict["verdict"] == issue35.NOT_MEASURED else verdict["verdict"] == "met"
        out[key] = {"title": verdict["text"], "ok": ok, "text": verdict["by"]}

    def at_most(key: str, title: str, r: float | None, limit: float) -> None:
        out[key] = {"title": title} | _cell(r, None if r is None else r <= limit, "{:.2f}×")

    def at_least(key: str, title: str, r: float | None, limit: float) -> None:
        out[key] = {"title": title} | _cell(r, None if r is None else r >= limit, "{:.2f}×")

    for p, limit in (("p50_ms", PLAIN_P50_MAX), ("p99_ms", PLAIN_P99_MAX)):
        at_most(
            f"plain_{p[:3]}",
            f"plain turn {p[:3]} at most {limit:g}× the floor",
            _ratio(_num(ours, "latency", "plain", p), _num(floor, "latency", "plain", p)),
            limit,
        )
    at_least(
        "throughput_100",
        f"throughput with 100 agents at least {THROUGHPUT_MIN:g}× the floor",
        _ratio(issue28._throughput(ours), issue28._throughput(floor)),
        THROUGHPUT_MIN,
    )
    derived = results.get("derived") or {}
    at_most(
        "cpu_per_turn",
        f"worker CPU per plain turn (100 agents) at most {CPU_PER_TURN_MAX:g}× the floor",
        _num(derived, "cpu", "ours", "parallel_ratio"),
        CPU_PER_TURN_MAX,
    )
    at_least(
        "spawn",
        f"spawn rate (100 agents) at least {SPAWN_FLOOR_MIN:g}× the child-spawn floor",
        _ratio(issue28._spawn_rate(ours), _num(results, "spawn_floor", "child_via_update_per_s")),
        SPAWN_FLOOR_MIN,
    )
    at_most(
        "fanout",
        f"fan-out 1 → 50 at most {FANOUT_MAX:g}× the floor",
        _ratio(_num(ours, "fanout", "median_s"), _num(floor, "fanout", "median_s")),
        FANOUT_MAX,
    )
    tab = issue35.table(results)
    ahead: tuple[tuple[str, Any, bool], ...] = (
        ("plain turn p50", lambda c, n: _num(c, "latency", "plain", "p50_ms"), False),
        ("plain turn p99", lambda c, n: _num(c, "latency", "plain", "p99_ms"), False),
        ("throughput with 100 agents", lambda c, n: issue28._throughput(c), True),
        (
            "billable actions per plain turn",
            lambda c, n: _num((tab.get(n) or {}).get("plain"), "actions"),
            False,
        ),
        (
            "history bytes per plain turn",
            lambda c, n: _num(c, "latency", "history_plain", "bytes_median"),
            False,
        ),
    )
    for title, read, higher in ahead:
        mine = read(ours, "ours")
        parts, ok = [], True if mine is not None else None
        for peer in issue28.PEERS:
            theirs = read(cs.get(peer), peer)
            if mine is None or theirs is None:
                parts.append(f"{peer} n/a")
                ok = None if ok is not False else ok
                continue
            better = mine > theirs if higher else mine < theirs
            ok = ok and better if ok is not None else ok
            parts.append(f"{peer} {theirs:,.1f}")
        out["ahead_" + title.replace(" ", "_")] = {
            "title": f"ahead of both peers on {title}",
            "ok": ok,
            "text": ("ours n/a; " if mine is None else f"ours {mine:,.1f}; ") + ", ".join(parts),
        }
    return out


def markdown(runs: list[tuple[str, dict[str, Any]]]) -> list[str]:
    """The table of issue 35's targets over ``runs`` (``(label, results)``, in order)."""
    judged = [(label, judge(r)) for label, r in runs]
    keys = list(judged[0][1]) if judged else []
    lines = [
        "| target | " + " | ".join(label for label, _ in judged) + " | every run |",
        "|---" * (len(judged) + 2) + "|",
    ]
    met = 0
    for key in keys:
        cells = [j.get(key, {"ok": None, "text": "n/a"}) for _, j in judged]
        every = all(c["ok"] is True for c in cells)
        met += every
        mark = {True: "✓", False: "✗", None: "?"}
        lines.append(
            f"| {judged[0][1][key]['title']} | "
            + " | ".join(f"{mark[c['ok']]} {c['text']}" for c in cells)
            + f" | **{'met' if every else 'not met'}** |"
        )
    lines += ["", f"{met} of {len(keys)} targets met in every run."]
    return lines


def main(argv: list[str] | None = None) -> None:
    """``python -m bench.issue35_runs RUN.json ...``: the table, runs in the order given."""
    paths = argv if argv is not None else sys.argv[1:]
    if not paths:
        raise SystemExit("usage: python -m bench.issue35_runs RUN1.json RUN2.json ...")
    runs = [(Path(p).stem, json.loads(Path(p).read_text())) for p in paths]
    print("\n".join(markdown(runs)))


if __name__ == "__main__":
    main()
