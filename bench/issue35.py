"""Issue 35's billable actions, judged in one run: the table of Temporal Cloud actions per
shape of work for every durable contender, the verdicts of the issue's action and event
targets, and the ``tnx`` wall times.

Every figure comes from the run's results (``bench.actions`` over each contender's
histories; ``bench.cli_start`` for the wall times); nothing is hard-coded but the limits.
"""

from __future__ import annotations

from typing import Any, Final

from bench.shapes import SHAPES

EVENTS_PLAIN_MAX: Final = 11
"""History events per plain turn, at most."""

TNX_START_MAX_S: Final = 0.3
"""``tnx --version`` wall time, and ``tnx ls`` less one visibility query, at most (s)."""

ROWS: Final = (
    ("plain", "plain turn"),
    ("tool", "tool turn"),
    ("tick", "tick turn (ours: AgentDef.tick; floor: timer + activity)"),
    ("spawn", "spawn (a child agent started by its parent)"),
    ("approval", "approval round trip"),
    ("continue_as_new", "continue-as-new (what it adds to a turn)"),
)

MET, NOT_MET, NOT_MEASURED = "met", "not met", "not measured"


def _num(v: Any) -> float | None:
    return float(v) if isinstance(v, int | float) and not isinstance(v, bool) else None


def shape_cell(c: dict[str, Any], shape: str) -> dict[str, Any]:
    """One contender's figures for one shape: ``actions``, ``events``, ``bytes`` and
    ``action_kinds``; or ``na`` (why it cannot) or ``error``."""
    if shape in ("plain", "tool"):
        h = (c.get("latency") or {}).get(f"history_{shape}") or {}
        if "actions_median" not in h:
            err = (c.get("latency") or {}).get("error")
            return {"error": err} if err else {"na": "no history measured"}
        return {
            "actions": h["actions_median"],
            "events": h.get("events_median"),
            "bytes": h.get("bytes_median"),
            "action_kinds": h.get("action_kinds_median_turn", {}),
        }
    assert shape in SHAPES
    a = c.get("actions") or {}
    if "skipped" in a or "error" in a:
        return {"na": a.get("skipped") or a.get("error")}
    return dict(a.get(shape) or {"na": "not measured"})


def table(results: dict[str, Any]) -> dict[str, dict[str, Any]]:
    """``{contender: {shape: cell}}`` for every durable contender of the run."""
    cs: dict[str, dict[str, Any]] = results.get("contenders", {})
    return {
        name: {shape: shape_cell(c, shape) for shape, _ in ROWS}
        for name, c in cs.items()
        if c.get("durable", True)
    }


def _verdict(text: str, value: float | None, limit: float | None, by_what: str) -> dict[str, Any]:
    if value is None or limit is None:
        return {"text": text, "verdict": NOT_MEASURED, "by": by_what or "not measured"}
    ok = value <= limit + 1e-9
    diff = value - limit
    by = f"{value:.3g} vs {limit:.3g}: " + (
        f"margin {-diff:.3g}"
        if ok
        else f"{diff:.3g} over ({diff / limit:.0%})"
        if limit
        else "over"
    )
    return {"text": text, "verdict": MET if ok else NOT_MET, "by": by}


def targets(results: dict[str, Any], name: str = "ours") -> dict[str, dict[str, Any]]:
    """Issue 35's targets for contender ``name`` against the floor of the same run."""
    tab = table(results)
    ours, floor = tab.get(name, {}), tab.get("floor", {})

    def actions(cells: dict[str, Any], shape: str) -> float | None:
        return _num((cells.get(shape) or {}).get("actions"))

    def timer(cells: dict[str, Any]) -> float | None:
        return _num(((cells.get("tick") or {}).get("action_kinds") or {}).get("timer started"))

    out: dict[str, dict[str, Any]] = {}
    for shape in ("plain", "tool"):
        out[f"actions_{shape}"] = _verdict(
            f"billable actions per {shape} turn equal to the floor's (at most)",
            actions(ours, shape),
            actions(floor, shape),
            "",
        )
    fp, ft = actions(floor, "plain"), timer(floor)
    out["actions_tick"] = _verdict(
        "billable actions per tick turn at most the floor's plain turn plus the timer",
        actions(ours, "tick"),
        None if fp is None or ft is None else fp + ft,
        "",
    )
    out["events_plain"] = _verdict(
        f"at most {EVENTS_PLAIN_MAX} history events per plain turn",
        _num((ours.get("plain") or {}).get("events")),
        EVENTS_PLAIN_MAX,
        "",
    )
    wall = (results.get("contenders", {}).get(name) or {}).get("tnx_wall") or {}
    wall = {} if "skipped" in wall else wall
    out["tnx_version"] = _verdict(
        f"`tnx --version` under {TNX_START_MAX_S} s (process wall time, p50)",
        _num((wall.get("version") or {}).get("p50_s")),
        TNX_START_MAX_S,
        wall.get("error", ""),
    )
    query = _num((wall.get("visibility_query") or {}).get("p50_s"))
    out["tnx_ls"] = _verdict(
        f"`tnx ls` under {TNX_START_MAX_S} s plus one visibility query (p50, the query "
        "measured alone through the client)",
        _num((wall.get("ls") or {}).get("p50_s")),
        None if query is None else round(TNX_START_MAX_S + query, 4),
        wall.get("error", ""),
    )
    return out


def _cell(cell: dict[str, Any]) -> str:
    if "na" in cell:
        return f"n/a: {cell['na']}"
    if "error" in cell:
        return f"error: {str(cell['error'])[:120]}"
    kinds = ", ".join(f"{k} {v:.3g}" for k, v in (cell.get("action_kinds") or {}).items() if v)
    events, size = _num(cell.get("events")), _num(cell.get("bytes"))
    extra = f"; {events:.3g} events, {size:,.0f} B" if events is not None and size else ""
    return f"**{_num(cell.get('actions')) or 0:.3g}** ({kinds}{extra})"


def markdown(results: dict[str, Any]) -> list[str]:
    """The sections "Billable actions" and "Targets of issue 35" of a report."""
    d = results.get("derived") or {}
    tab = d.get("actions") or {}
    if not tab:
        return []
    names = list(tab)
    labels = [results["contenders"][n].get("label", n) for n in names]
    lines = [
        "## Billable actions (Temporal Cloud)",
        "",
        "Actions as Temporal Cloud bills them ([the published list]"
        "(https://docs.temporal.io/cloud/actions); `bench/actions.py` maps each history event), "
        "counted from each contender's histories (ours: the agent's and its parent's), with the "
        "events and bytes of the same turns. Queries are billed but never in history: not "
        "counted. Plain and tool turn: the median of the marked turns; tick: per tick over "
        "several; the rest: one run.",
        "",
        "| shape | " + " | ".join(labels) + " |",
        "|---" * (len(names) + 1) + "|",
    ]
    for shape, title in ROWS:
        lines.append(f"| {title} | " + " | ".join(_cell(tab[n][shape]) for n in names) + " |")
    lines.append("")
    ts = d.get("issue35") or {}
    wall = (results.get("contenders", {}).get("ours") or {}).get("tnx_wall") or {}
    if wall:
        lines += ["### `tnx` wall time (ours)", "", wall_line(wall), ""]
    if ts:
        lines += ["## Targets of issue 35 (the price of a turn)", "", "| target | verdict | by |"]
        lines += ["|---|---|---|"]
        lines += [f"| {t['text']} | **{t['verdict']}** | {t['by']} |" for t in ts.values()]
        met = sum(1 for t in ts.values() if t["verdict"] == MET)
        lines += ["", f"{met} of {len(ts)} met in this run.", ""]
    return lines


def wall_line(wall: dict[str, Any]) -> str:
    """One line of the ``tnx`` wall times."""
    if "error" in wall:
        return f"not measured: {wall['error']}"
    parts = []
    for key, title in (
        ("version", "`tnx --version`"),
        ("ls", "`tnx ls`"),
        ("visibility_query", "the visibility query alone (client)"),
    ):
        w = wall.get(key) or {}
        if "p50_s" in w:
            parts.append(
                f"{title}: p50 {w['p50_s']:.3f} s (fastest {w['min_s']:.3f}, slowest "
                f"{w['max_s']:.3f}, {w['runs']} runs"
                + (f", CPU p50 {w['cpu_p50_s']:.3f} s" if "cpu_p50_s" in w else "")
                + ")"
            )
    note = wall.get("note")
    return "; ".join(parts) + (f". {note}" if note else ".")
