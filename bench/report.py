"""Derived figures (ratios to the floor, the targets of issue 11), the markdown table and the
PNG plots."""

from __future__ import annotations

from collections.abc import Callable
from pathlib import Path
from typing import Any

from bench import cpu, issue28, issue35, processes
from bench.contenders import ORDER

OUR_VARIANTS = ("ours", "ours_direct")
"""Our runtime's contenders, each judged against the targets (``ours``, with root slot
accounting, is the headline verdict)."""

PEER = "openai_agents"
"""The Temporal peer the fan-out target compares against."""

# The targets of issue 11 (ratios are to the floor measured in the same run).
PLAIN_P50_MAX = 1.1
PLAIN_P99_MAX = 1.3
TOOL_P50_MAX = 1.05
EVENTS_PER_PLAIN_TURN_MAX = 13
EVENTS_PER_WAKE_MAX = 7
BYTES_PER_PLAIN_TURN_MAX = 1.5
THROUGHPUT_AGENTS = 100
THROUGHPUT_MIN = 0.8
WAKE_ALL_AGENTS = 1000
SPAWN_RATE_MIN = 0.8
SPAWN_RATE_LEVELS = (100, 1000)
FANOUT_TASKS = 50
RSS_PER_AGENT_MAX = 1.5
FLAT_SLOPE = 20.0
"""History bytes per turn are "flat" under this fitted slope (bytes per turn, per turn)."""

MET, NOT_MET, NOT_MEASURED = "met", "not met", "not measured"


def _get(d: Any, *path: Any) -> Any:
    for key in path:
        if isinstance(d, dict):
            d = d.get(key)
        elif isinstance(d, list) and isinstance(key, int) and -len(d) <= key < len(d):
            d = d[key]
        else:
            return None
    return d


def _ratio(a: Any, b: Any) -> float | None:
    if isinstance(a, int | float) and isinstance(b, int | float) and b:
        return float(a) / float(b)
    return None


def _level(c: dict[str, Any], agents: int) -> dict[str, Any] | None:
    for level in _get(c, "throughput", "levels") or []:
        if level["agents"] == agents:
            return dict(level)
    return None


def _idle_level(c: dict[str, Any], agents: int) -> dict[str, Any] | None:
    for level in _get(c, "idle", "levels") or []:
        if level.get("agents") == agents:
            return dict(level)
    return None


def rss_level(results: dict[str, Any]) -> int | None:
    """The spawn level the RSS per idle agent is read at: the largest of the size."""
    levels = _get(results, "size", "spawn_levels") or []
    return max(levels) if levels else None


def history_split(c: dict[str, Any]) -> dict[str, Any] | None:
    """Events per LLM call and per wake, from a 1-call turn (E1) and a tool turn (E2).

    A tool turn adds one LLM call and the tool call that caused it, two activities alike:
    ``(E2 - E1) / 2`` events per LLM call (per activity), and the rest of a plain turn,
    ``E1 - (E2 - E1) / 2``, is the constant per wake."""
    e1 = _get(c, "latency", "history_plain", "events_median")
    e2 = _get(c, "latency", "history_tool", "events_median")
    b1 = _get(c, "latency", "history_plain", "bytes_median")
    b2 = _get(c, "latency", "history_tool", "bytes_median")
    if e1 is None or e2 is None:
        return None
    return {
        "events_plain_turn": e1,
        "events_tool_turn": e2,
        "events_per_llm_round_trip": e2 - e1,
        "events_per_llm_call": (e2 - e1) / 2,
        "events_per_wake": e1 - (e2 - e1) / 2,
        "bytes_plain_turn": b1,
        "bytes_tool_turn": b2,
        "bytes_per_llm_round_trip": (b2 - b1) if b1 is not None and b2 is not None else None,
    }


def derive(results: dict[str, Any]) -> dict[str, Any]:
    """Ratios to the floor for every contender, and the targets for each of our variants."""
    cs: dict[str, dict[str, Any]] = results.get("contenders", {})
    floor = cs.get("floor", {})
    rss_at = rss_level(results)
    out: dict[str, Any] = {"ratios_to_floor": {}, "history_split": {}, "targets": {}}
    for name, c in cs.items():
        ratios: dict[str, Any] = {}
        for kind in ("plain", "tool"):
            for p in ("p50_ms", "p95_ms", "p99_ms", "mean_ms"):
                ratios[f"latency_{kind}_{p}"] = _ratio(
                    _get(c, "latency", kind, p), _get(floor, "latency", kind, p)
                )
        for level in _get(c, "throughput", "levels") or []:
            agents = level["agents"]
            ratios[f"throughput_{agents}"] = _ratio(
                level.get("turns_per_s"), _get(_level(floor, agents), "turns_per_s")
            )
        for kind in ("plain", "tool"):
            for what in ("events_median", "bytes_median", "actions_median"):
                ratios[f"history_{kind}_{what}"] = _ratio(
                    _get(c, "latency", f"history_{kind}", what),
                    _get(floor, "latency", f"history_{kind}", what),
                )
        ratios["wake_all_seconds"] = _ratio(
            _get(c, "wake_all", "seconds"), _get(floor, "wake_all", "seconds")
        )
        ratios["growth_mean_bytes"] = _ratio(
            _get(c, "growth", "mean_bytes_per_turn"), _get(floor, "growth", "mean_bytes_per_turn")
        )
        ratios["fanout_median_s"] = _ratio(
            _get(c, "fanout", "median_s"), _get(floor, "fanout", "median_s")
        )
        ratios["fanout_events"] = _ratio(
            _get(c, "fanout", "events"), _get(floor, "fanout", "events")
        )
        for level in _get(c, "idle", "levels") or []:
            agents = level.get("agents")
            ratios[f"spawns_per_s_{agents}"] = _ratio(
                level.get("spawns_per_s"), _get(_idle_level(floor, agents), "spawns_per_s")
            )
        if rss_at is not None:
            ratios["rss_per_agent"] = _ratio(
                _get(_idle_level(c, rss_at), "rss_per_agent_bytes"),
                _get(_idle_level(floor, rss_at), "rss_per_agent_bytes"),
            )
        out["ratios_to_floor"][name] = ratios
        split = history_split(c)
        if split is not None:
            out["history_split"][name] = split
    for variant in OUR_VARIANTS:
        if variant in cs:
            out.setdefault("targets_by_variant", {})[variant] = targets(results, out, variant)
    if "ours" in cs:
        out["targets"] = out["targets_by_variant"]["ours"]  # the headline verdict
    if "ours" in cs and "ours_pg" in cs:
        out["store"] = store_ratios(cs["ours"], cs["ours_pg"])
    worker_cpu = {n: c["cpu"] for n, c in cs.items() if isinstance(c.get("cpu"), dict)}
    if worker_cpu:
        out["cpu"] = cpu.derive(worker_cpu)
    if "ours" in cs:
        out["issue28"] = issue28.targets(results, out)
    out["actions"] = issue35.table(results)
    if "ours" in cs and "floor" in cs:
        out["issue35"] = issue35.targets(results)
    return out


def store_ratios(sqlite: dict[str, Any], postgres: dict[str, Any]) -> dict[str, Any]:
    """Our runtime on the PostgreSQL store against the SQLite store, same run (issue 13):
    each latency figure of both and ``postgres / sqlite``."""
    out: dict[str, Any] = {}
    for kind in ("plain", "tool"):
        for p in ("p50_ms", "p95_ms", "p99_ms"):
            a, b = _get(sqlite, "latency", kind, p), _get(postgres, "latency", kind, p)
            out[f"{kind}_{p}"] = {"sqlite": a, "postgres": b, "ratio": _ratio(b, a)}
    return out


def store_markdown(results: dict[str, Any]) -> list[str]:
    """The store comparison (``--store both``) as a short table; empty without it."""
    figures: dict[str, Any] = _get(results, "derived", "store") or {}
    if not figures:
        return []
    lines = [
        "## Conversation store: PostgreSQL vs SQLite (issue 13)",
        "",
        "Our runtime with each store in this run (`ours` on SQLite, `ours_pg` on PostgreSQL).",
        "",
        "| turn latency | SQLite ms | PostgreSQL ms | PostgreSQL / SQLite |",
        "|---|---|---|---|",
    ]
    for key, f in figures.items():
        ratio = f["ratio"]
        lines.append(
            f"| {key.replace('_ms', '').replace('_', ' ')} | {_num(f['sqlite'], 1)} | "
            f"{_num(f['postgres'], 1)} | {'—' if ratio is None else f'{ratio:.2f}'} |"
        )
    lines.append("")
    return lines


# ---------------------------------------------------------------------- targets


def _g(v: Any) -> str:
    """A count as short as it reads (13, 5.5), or — when missing."""
    return f"{v:g}" if isinstance(v, int | float) else "—"


def _pct(x: float) -> str:
    """A fraction as a percentage: 0.2234 -> 22%, 0.034 -> 3.4%."""
    p = abs(x) * 100
    return f"{p:.0f}%" if p >= 10 else f"{p:.1f}%"


def _target(
    text: str,
    verdict: str,
    *,
    by: str | None = None,
    measured: str | None = None,
    values: dict[str, Any] | None = None,
    note: str | None = None,
    extra: bool = False,
) -> dict[str, Any]:
    """One judged target: its text, what was measured, met / not met / not measured, and by
    how much."""
    return {
        "target": text,
        "verdict": verdict,
        "met": None if verdict == NOT_MEASURED else verdict == MET,
        "by": by,
        "measured": measured,
        "values": values or {},
        "note": note,
        "extra": extra,
    }


def _not_measured(text: str, why: str, **kw: Any) -> dict[str, Any]:
    return _target(text, NOT_MEASURED, by=why, **kw)


def _failed(text: str, why: str, **kw: Any) -> dict[str, Any]:
    return _target(text, NOT_MET, by=f"the measure failed: {why}", **kw)


def judge_max_ratio(text: str, ratio: float, limit: float, **kw: Any) -> dict[str, Any]:
    """At most ``limit`` × the floor."""
    met = ratio <= limit
    how = f"margin {limit - ratio:.2f}×" if met else f"{_pct(ratio / limit - 1)} over"
    return _target(text, MET if met else NOT_MET, by=f"{ratio:.2f}× vs {limit:.2f}×: {how}", **kw)


def judge_min_ratio(text: str, ratio: float, limit: float, **kw: Any) -> dict[str, Any]:
    """At least ``limit`` × the floor."""
    met = ratio >= limit
    how = f"margin {ratio - limit:.2f}×" if met else f"{_pct(1 - ratio / limit)} short"
    return _target(text, MET if met else NOT_MET, by=f"{ratio:.2f}× vs {limit:.2f}×: {how}", **kw)


def judge_max_count(text: str, value: float, limit: float, **kw: Any) -> dict[str, Any]:
    """At most ``limit`` (events)."""
    met = value <= limit
    how = (
        f"margin {limit - value:g}"
        if met
        else f"{value - limit:g} over ({_pct(value / limit - 1)})"
    )
    return _target(text, MET if met else NOT_MET, by=f"{value:g} vs {limit:g}: {how}", **kw)


def _measure_error(c: dict[str, Any], measure: str) -> str | None:
    return _get(c, measure, "error") or (_get(c, "error") if measure not in c else None)


def _ratio_target(
    text: str,
    c: dict[str, Any],
    floor: dict[str, Any] | None,
    path: tuple[Any, ...],
    limit: float,
    judge: Callable[..., dict[str, Any]],
    unit: str,
    digits: int = 1,
    note: str | None = None,
) -> dict[str, Any]:
    """A target on our value at ``path`` against the floor's, both from this run."""
    ours_v, floor_v = _get(c, *path), _get(floor, *path) if floor else None
    if not isinstance(ours_v, int | float):
        err = _measure_error(c, path[0])
        return _failed(text, err) if err else _not_measured(text, "not run", note=note)
    if floor is None:
        return _not_measured(text, "the floor did not run (no reference)", note=note)
    if not isinstance(floor_v, int | float) or not floor_v:
        why = _measure_error(floor, path[0]) or "no value"
        return _not_measured(text, f"the floor's measure gave no reference ({why})", note=note)
    ratio = ours_v / floor_v
    measured = f"{ours_v:,.{digits}f} {unit} vs the floor's {floor_v:,.{digits}f} {unit}"
    values = {"ours": ours_v, "floor": floor_v, "ratio": ratio, "limit": limit}
    return judge(text, ratio, limit, measured=measured, values=values, note=note)


def targets(results: dict[str, Any], derived: dict[str, Any], name: str) -> dict[str, Any]:
    """Every target of issue 11 for one of our variants, judged against the floor (and, for
    the fan-out, the peer) of the same run; plus flat history, our strength, as an extra."""
    cs: dict[str, dict[str, Any]] = results.get("contenders", {})
    c = cs[name]
    floor = cs.get("floor")
    size = results.get("size", {})
    out: dict[str, Any] = {}

    for key, kind, p, limit, title in (
        ("latency_plain_p50", "plain", "p50", PLAIN_P50_MAX, "plain turn"),
        ("latency_plain_p99", "plain", "p99", PLAIN_P99_MAX, "plain turn"),
        ("latency_tool_p50", "tool", "p50", TOOL_P50_MAX, "tool turn"),
    ):
        out[key] = _ratio_target(
            f"{title}: wake → result {p} within {limit:g}× the floor",
            c,
            floor,
            ("latency", kind, f"{p}_ms"),
            limit,
            judge_max_ratio,
            "ms",
        )

    split = derived["history_split"].get(name)
    text = f"at most {EVENTS_PER_PLAIN_TURN_MAX} history events per plain turn"
    if split is None:
        err = _measure_error(c, "latency")
        out["events_plain_turn"] = _failed(text, err) if err else _not_measured(text, "not run")
    else:
        e1 = split["events_plain_turn"]
        out["events_plain_turn"] = judge_max_count(
            text,
            e1,
            EVENTS_PER_PLAIN_TURN_MAX,
            measured=f"median turn; the floor's: "
            f"{_g(_get(derived, 'history_split', 'floor', 'events_plain_turn'))}",
            values={"ours": e1, "limit": EVENTS_PER_PLAIN_TURN_MAX},
        )
    text = f"at most {EVENTS_PER_WAKE_MAX} history events per wake (plain turn − one LLM call)"
    if split is None:
        err = _measure_error(c, "latency")
        out["events_per_wake"] = _failed(text, err) if err else _not_measured(text, "not run")
    else:
        w = split["events_per_wake"]
        out["events_per_wake"] = judge_max_count(
            text,
            w,
            EVENTS_PER_WAKE_MAX,
            measured=f"{w:g} per wake + {split['events_per_llm_call']:g} per LLM call; the "
            f"floor's: {_g(_get(derived, 'history_split', 'floor', 'events_per_wake'))} + "
            f"{_g(_get(derived, 'history_split', 'floor', 'events_per_llm_call'))}",
            values={"ours": w, "per_llm_call": split["events_per_llm_call"]},
        )
    out["bytes_plain_turn"] = _ratio_target(
        f"history bytes per plain turn at most {BYTES_PER_PLAIN_TURN_MAX:g}× the floor",
        c,
        floor,
        ("latency", "history_plain", "bytes_median"),
        BYTES_PER_PLAIN_TURN_MAX,
        judge_max_ratio,
        "B",
        digits=0,
    )

    out["throughput_100"] = _throughput_target(c, floor)
    out["wake_all"] = _wake_all_target(c, floor, size)
    for agents in SPAWN_RATE_LEVELS:
        out[f"spawn_rate_{agents}"] = _spawn_target(c, floor, agents)
    out["fanout_vs_peer"] = _fanout_target(c, cs.get(PEER), size)
    out["rss_per_idle_agent"] = _rss_target(c, floor, rss_level(results))
    out["flat_history"] = _flat_target(c, cs.get(PEER))
    return out


def _throughput_target(c: dict[str, Any], floor: dict[str, Any] | None) -> dict[str, Any]:
    text = (
        f"throughput with {THROUGHPUT_AGENTS} agents in parallel at least "
        f"{THROUGHPUT_MIN:g}× the floor"
    )
    level = _level(c, THROUGHPUT_AGENTS)
    if level is None:
        err = _measure_error(c, "throughput")
        if err:
            return _failed(text, err)
        return _not_measured(text, f"no {THROUGHPUT_AGENTS}-agent level at this size")
    if "error" in level:
        return _failed(text, level["error"])
    failed = level.get("failed", 0) + level.get("warmup_failed", 0)
    retried = level.get("retried_turns", 0)
    counts = f"{failed} turns failed (warm-up included), {retried} retried after RESOURCE_EXHAUSTED"
    f_level = _level(floor, THROUGHPUT_AGENTS) if floor else None
    ours_v, floor_v = level.get("turns_per_s"), _get(f_level, "turns_per_s")
    if not isinstance(floor_v, int | float) or not floor_v:
        if failed:
            return _target(
                text,
                NOT_MET,
                by=f"{failed} failed turns fail it (no floor reference for the rate)",
                measured=counts,
            )
        return _not_measured(text, "the floor gave no reference", measured=counts)
    ratio = (ours_v or 0.0) / floor_v
    measured = f"{ours_v or 0:,.1f} turns/s vs the floor's {floor_v:,.1f}; {counts}"
    values = {
        "ours": ours_v,
        "floor": floor_v,
        "ratio": ratio,
        "limit": THROUGHPUT_MIN,
        "failed": failed,
        "retried_turns": retried,
    }
    judged = judge_min_ratio(text, ratio, THROUGHPUT_MIN, measured=measured, values=values)
    if failed:  # a rate of turns that fail is no pass
        judged.update(
            verdict=NOT_MET, met=False, by=f"{judged['by']}; {failed} failed turns fail it"
        )
    return judged


def _wake_all_target(
    c: dict[str, Any], floor: dict[str, Any] | None, size: dict[str, Any]
) -> dict[str, Any]:
    text = f"{WAKE_ALL_AGENTS:,} agents woken at once: all done (no failed turn)"
    w = c.get("wake_all")
    n = size.get("wake_all")
    note = (
        None
        if not isinstance(n, int) or n == WAKE_ALL_AGENTS
        else f"at {n} agents (size {size.get('name')}); the target is for "
        f"{WAKE_ALL_AGENTS:,}: --size full"
    )
    if not w:
        err = _measure_error(c, "wake_all")
        return _failed(text, err, note=note) if err else _not_measured(text, "not run", note=note)
    if "error" in w:
        return _failed(text, w["error"], note=note)
    if w.get("after_unfinished"):
        after = "ran after " + "; ".join(w["after_unfinished"])
        note = f"{note}; {after}" if note else after
    done, agents, failed = w["done"], w["agents"], w["failed"]
    retried = w.get("retried_turns", 0)
    floor_s = _get(floor, "wake_all", "seconds") if floor else None
    measured = (
        f"{done:,} of {agents:,} done, {failed:,} failed, {retried:,} retried after "
        f"RESOURCE_EXHAUSTED, in {w['seconds']:.1f} s"
        + (f" (floor {floor_s:.1f} s)" if isinstance(floor_s, int | float) else "")
    )
    values = {
        "agents": agents,
        "done": done,
        "failed": failed,
        "unfinished": w.get("unfinished", 0),
        "retried_turns": retried,
        "rejected_and_retried": w.get("rejected_and_retried", 0),
        "seconds": w["seconds"],
        "floor_seconds": floor_s,
    }
    if failed == 0 and done == agents:
        by = "all done" + (
            f" (but {retried} turns needed a retry after RESOURCE_EXHAUSTED)" if retried else ""
        )
        return _target(text, MET, by=by, measured=measured, values=values, note=note)
    by = f"{failed:,} of {agents:,} turns failed ({_pct(failed / agents)})"
    if w.get("unfinished"):
        by += f", {w['unfinished']} of them cut by the timeout"
    return _target(text, NOT_MET, by=by, measured=measured, values=values, note=note)


def _spawn_target(c: dict[str, Any], floor: dict[str, Any] | None, agents: int) -> dict[str, Any]:
    text = f"spawn rate with {agents:,} agents at least {SPAWN_RATE_MIN:g}× the floor"
    level = _idle_level(c, agents)
    if level is None:
        err = _measure_error(c, "idle")
        if err:
            return _failed(text, err)
        return _not_measured(text, f"no {agents:,}-agent spawn level at this size")
    if "error" in level:
        return _failed(text, level["error"])
    f_level = _idle_level(floor, agents) if floor else None
    ours_v, floor_v = level.get("spawns_per_s"), _get(f_level, "spawns_per_s")
    if not isinstance(floor_v, int | float) or not floor_v:
        return _not_measured(text, "the floor gave no reference")
    ratio = (ours_v or 0.0) / floor_v
    return judge_min_ratio(
        text,
        ratio,
        SPAWN_RATE_MIN,
        measured=f"{ours_v:,.1f} agents/s vs the floor's {floor_v:,.1f}",
        values={"ours": ours_v, "floor": floor_v, "ratio": ratio, "limit": SPAWN_RATE_MIN},
    )


def _fanout_target(
    c: dict[str, Any], peer: dict[str, Any] | None, size: dict[str, Any]
) -> dict[str, Any]:
    text = f"fan-out 1 → {FANOUT_TASKS}: wall time faster than the peer (openai-agents)"
    tasks = size.get("fanout")
    note = (
        None
        if tasks == FANOUT_TASKS
        else f"at 1 → {tasks} (size {size.get('name')}); the target is for 1 → {FANOUT_TASKS}"
    )
    ours_s = _get(c, "fanout", "median_s")
    if not isinstance(ours_s, int | float):
        err = _measure_error(c, "fanout")
        return _failed(text, err, note=note) if err else _not_measured(text, "not run", note=note)
    peer_s = _get(peer, "fanout", "median_s") if peer else None
    if not isinstance(peer_s, int | float) or not peer_s:
        why = "the peer did not run" if peer is None else "the peer's fan-out gave no value"
        return _not_measured(text, why, measured=f"ours {ours_s:.2f} s", note=note)
    x = ours_s / peer_s
    met = ours_s < peer_s
    reps = _get(c, "fanout", "reps") or 1
    how = (
        f"margin {peer_s - ours_s:.2f} s ({x:.2f}× the peer's)"
        if met
        else f"{_pct(x - 1)} over ({x:.2f}× the peer's)"
    )
    return _target(
        text,
        MET if met else NOT_MET,
        by=f"{ours_s:.2f} s vs {peer_s:.2f} s: {how}",
        measured=f"median of {reps} run{'s' if reps != 1 else ''} each",
        values={"ours_s": ours_s, "peer_s": peer_s, "ratio": x},
        note=note,
    )


def _rss_target(c: dict[str, Any], floor: dict[str, Any] | None, at: int | None) -> dict[str, Any]:
    text = f"worker RSS per idle agent at most {RSS_PER_AGENT_MAX:g}× the floor"
    if at is None:
        return _not_measured(text, "no spawn level at this size")
    level = _idle_level(c, at)
    if level is None or "error" in level:
        err = _get(level, "error") or _measure_error(c, "idle")
        return _failed(text, err) if err else _not_measured(text, "not run")
    f_level = _idle_level(floor, at) if floor else None
    ours_v, floor_v = level.get("rss_per_agent_bytes"), _get(f_level, "rss_per_agent_bytes")
    if not isinstance(floor_v, int | float) or floor_v <= 0 or not isinstance(ours_v, int | float):
        return _not_measured(text, "the floor gave no reference")
    ratio = ours_v / floor_v
    return judge_max_ratio(
        text,
        ratio,
        RSS_PER_AGENT_MAX,
        measured=f"{ours_v / 1024:,.1f} KiB vs the floor's {floor_v / 1024:,.1f} KiB, with "
        f"{at:,} idle agents",
        values={"ours": ours_v, "floor": floor_v, "ratio": ratio, "agents": at},
    )


def _flat_target(c: dict[str, Any], peer: dict[str, Any] | None) -> dict[str, Any]:
    text = (
        f"extra: history bytes per turn flat over a long conversation (fitted slope under "
        f"{FLAT_SLOPE:g} B/turn), where the peer's grow"
    )
    g = c.get("growth") or {}
    fit = g.get("slope_bytes_per_turn")
    if fit is None:
        err = g.get("error")
        if err:
            return _failed(text, err, extra=True)
        if "turns" in g:
            return _not_measured(text, f"too few turns to fit a slope ({g['turns']})", extra=True)
        return _not_measured(text, "not run", extra=True)
    pg = (peer or {}).get("growth") or {}
    peer_fit = pg.get("slope_bytes_per_turn")
    measured = (
        f"slope {fit:,.1f} B/turn over {g.get('turns'):,} turns (mean "
        f"{g.get('mean_bytes_per_turn') or 0:,.0f} B/turn)"
        + (
            f"; peer slope {peer_fit:,.1f} B/turn over {pg.get('turns'):,} turns"
            if peer_fit is not None
            else ""
        )
    )
    met = abs(fit) < FLAT_SLOPE
    how = (
        f"margin {FLAT_SLOPE - abs(fit):.1f} B/turn"
        if met
        else f"{_pct(abs(fit) / FLAT_SLOPE - 1)} over"
    )
    return _target(
        text,
        MET if met else NOT_MET,
        by=f"{fit:,.1f} vs ±{FLAT_SLOPE:g} B/turn: {how}",
        measured=measured,
        values={
            "ours_slope_bytes_per_turn": fit,
            "ours_turns": g.get("turns"),
            "ours_mean_bytes_per_turn": g.get("mean_bytes_per_turn"),
            "peer_slope_bytes_per_turn": peer_fit,
            "peer_turns": pg.get("turns"),
            "peer_stopped": pg.get("stopped"),
            "peer_projected_turn_at_50mib": pg.get("projected_turn_at_50mib"),
        },
        extra=True,
    )


def target_cell(t: dict[str, Any]) -> str:
    """One judged target as a markdown cell."""
    cell = f"**{t.get('verdict', NOT_MEASURED)}**"
    if t.get("by"):
        cell += f": {t['by']}"
    if t.get("measured"):
        cell += f" — {t['measured']}"
    if t.get("note"):
        cell += f" — *{t['note']}*"
    return cell.replace("|", "\\|")


def targets_markdown(results: dict[str, Any]) -> list[str]:
    """The targets table, both of our variants side by side, and a tally per variant."""
    cs: dict[str, dict[str, Any]] = results.get("contenders", {})
    by_variant: dict[str, Any] = _get(results, "derived", "targets_by_variant") or {}
    if not by_variant:
        return []
    variants = [v for v in OUR_VARIANTS if v in by_variant]
    lines = [
        "## Targets (issue 11)",
        "",
        "Every ratio is to the floor measured in this run. `toolnexus-temporal` is the headline "
        "(default settings, root slot accounting on); the variant with no root slot limit is "
        "judged too. A target whose measure did not run is *not measured*; a measure that "
        "failed is *not met*.",
        "",
        "| target | " + " | ".join(cs[v]["label"] for v in variants) + " |",
        "|---" * (len(variants) + 1) + "|",
    ]
    keys = list(by_variant[variants[0]])
    for key in keys:
        text = by_variant[variants[0]][key]["target"]
        lines.append(
            f"| {text} | "
            + " | ".join(target_cell(by_variant[v].get(key, {})) for v in variants)
            + " |"
        )
    lines.append("")
    for v in variants:
        ts = [t for t in by_variant[v].values() if not t.get("extra")]
        count = {k: sum(1 for t in ts if t["verdict"] == k) for k in (MET, NOT_MET, NOT_MEASURED)}
        lines.append(
            f"- {cs[v]['label']}: {count[MET]} of {len(ts)} targets met, {count[NOT_MET]} not "
            f"met, {count[NOT_MEASURED]} not measured"
        )
    lines.append("")
    return lines


# ---------------------------------------------------------------------- markdown


def _num(v: Any, digits: int = 0) -> str:
    if v is None:
        return "—"
    if isinstance(v, float):
        return f"{v:,.{digits}f}"
    return f"{v:,}"


def _x(r: Any) -> str:
    if r is None:
        return ""
    return f" ({r:.2f}×)" if r < 10 else f" ({r:.0f}×)"


def markdown(results: dict[str, Any]) -> str:
    cs: dict[str, dict[str, Any]] = results.get("contenders", {})
    names = [n for n in ORDER if n in cs]
    d = results.get("derived", {})
    ratios = d.get("ratios_to_floor", {})
    splits = d.get("history_split", {})
    m = results.get("machine", {})
    size = results.get("size", {})
    lines = [
        f"# toolnexus-temporal benchmarks — {results.get('stamp')} (size `{size.get('name')}`)",
        "",
        f"Machine: {m.get('cpu')}, {m.get('cores')} cores, "
        f"{(m.get('ram_bytes') or 0) / 2**30:.0f} GiB RAM; Python {m.get('python')}, "
        f"temporalio {m.get('temporalio')}, {m.get('temporal_cli')}; commit {m.get('commit')}.",
        f"Dev server: {results.get('setup', {}).get('dev_server')}. "
        f"LLM: {results.get('setup', {}).get('llm')}. Suite time: "
        f"{results.get('elapsed_s', 0):.0f} s.",
        "",
        "Ratios in parentheses are to the floor (a minimal hand-written Temporal workflow doing "
        "the same activities): lower is better for times, events and bytes, higher for rates.",
        "",
    ]
    header = "| measure | " + " | ".join(cs[n]["label"] for n in names) + " |"
    lines += [header, "|---" * (len(names) + 1) + "|"]

    def row(title: str, cell: Any) -> None:
        lines.append(f"| {title} | " + " | ".join(cell(n) for n in names) + " |")

    def value(path: tuple[Any, ...], ratio: str | None, digits: int = 0, scale: float = 1) -> Any:
        def cell(n: str) -> str:
            v = _get(cs[n], *path)
            if isinstance(v, dict) and ("error" in v or "skipped" in v):
                return "—"
            if isinstance(v, int | float) and scale != 1:
                v = v * scale
            err = _get(cs[n], path[0], "error") or _get(cs[n], path[0], "skipped")
            if v is None and err:
                return "n/a"
            rr = ratios.get(n, {}).get(ratio) if ratio and n != "floor" else None
            return _num(v, digits) + _x(rr)

        return cell

    turns_plain = _get(size, "latency_turns")
    turns_tool = _get(size, "tool_turns")
    for kind, title, n in (("plain", "plain turn", turns_plain), ("tool", "tool turn", turns_tool)):
        for p in ("p50", "p95", "p99", "mean"):
            row(
                f"wake → result {p}, {title} (ms, {n} turns)",
                value(("latency", kind, f"{p}_ms"), f"latency_{kind}_{p}_ms", 1),
            )
        row(f"{title}s over 500 ms (of {n})", value(("latency", kind, "over_500ms"), None))
    levels = [agents for agents, _per_agent in size.get("throughput", [])]
    for agents in levels:
        row(
            f"throughput, {agents} agent{'s' if agents > 1 else ''} in parallel (turns/s)",
            _throughput_cell(cs, ratios, agents),
        )
    row(
        f"throughput: turns failed / retried ({' / '.join(str(a) for a in levels)} agents)",
        lambda n: _throughput_failures(cs[n], levels),
    )
    wake_n = size.get("wake_all")
    if wake_n:
        row(
            f"wake all {wake_n:,} at once: wall time (s)",
            value(("wake_all", "seconds"), "wake_all_seconds", 2),
        )
        row(f"wake all {wake_n:,} at once: turns done / failed", _wake_all_cell(cs))
        row(
            f"wake all {wake_n:,} at once: turns retried after RESOURCE_EXHAUSTED",
            value(("wake_all", "retried_turns"), None),
        )
        row(
            f"wake all {wake_n:,} at once: turn p50 / max (ms)",
            lambda n: _pair(
                cs[n], ("wake_all", "latency", "p50_ms"), ("wake_all", "latency", "max_ms")
            ),
        )
    for kind, title in (("plain", "plain turn"), ("tool", "tool turn")):
        row(
            f"history events / {title}",
            value(("latency", f"history_{kind}", "events_median"), f"history_{kind}_events_median"),
        )
        row(
            f"history bytes / {title}",
            value(("latency", f"history_{kind}", "bytes_median"), f"history_{kind}_bytes_median"),
        )
        row(
            f"billable actions / {title} (Temporal Cloud)",
            value(
                ("latency", f"history_{kind}", "actions_median"), f"history_{kind}_actions_median"
            ),
        )
    row(
        "events per LLM call (tool turn − plain turn) / 2",
        lambda n: _num(_get(splits, n, "events_per_llm_call"), 1),
    )
    row(
        "events per wake (plain turn − one LLM call)",
        lambda n: _num(_get(splits, n, "events_per_wake"), 1),
    )
    growth_turns = size.get("history_turns")
    row(
        f"growth: history bytes/turn, turns 2–11 (of {growth_turns}, ~1 KB message)",
        value(("growth", "first10_mean_bytes"), None),
    )
    row("growth: history bytes/turn, last 10 turns", value(("growth", "last10_mean_bytes"), None))
    row(
        "growth: slope of bytes/turn (bytes per turn, per turn)",
        value(("growth", "slope_bytes_per_turn"), None, 1),
    )
    row("growth: turns run", lambda n: _growth_turns(cs[n]))
    row("growth: one run's history reaches 50 MiB at turn (projected)", _limit_cell(cs))
    fan = size.get("fanout")
    row(
        f"fan-out 1 → {fan}: wake → result (s, median)",
        value(("fanout", "median_s"), "fanout_median_s", 2),
    )
    row(
        f"fan-out 1 → {fan}: history events (all workflows)",
        value(("fanout", "events"), "fanout_events"),
    )
    row(f"fan-out 1 → {fan}: history bytes", value(("fanout", "bytes"), None))
    for agents in size.get("spawn_levels") or []:
        row(
            f"spawn rate, {agents:,} agents (agents/s)",
            _idle_cell(cs, ratios, agents, "spawns_per_s", f"spawns_per_s_{agents}", 1),
        )
    rss_at = rss_level(results)
    if rss_at is not None:
        row(
            f"worker RSS growth with {rss_at:,} idle agents (MiB)",
            _idle_cell(cs, ratios, rss_at, "rss_delta_bytes", None, 1, 1 / 2**20),
        )
        row(
            f"worker RSS per idle agent, {rss_at:,} agents (KiB)",
            _idle_cell(cs, ratios, rss_at, "rss_per_agent_bytes", "rss_per_agent", 1, 1 / 1024),
        )
    lines.append("")

    lines += targets_markdown(results)
    lines += issue28.markdown(results.get("derived") or {})
    lines += issue35.markdown(results)
    lines += cpu.markdown(results)
    lines += store_markdown(results)
    lines += processes.markdown(results.get("processes"))
    stopped = next(
        (
            t["flat_history"]["values"].get("peer_stopped")
            for t in (d.get("targets_by_variant") or {}).values()
            if _get(t, "flat_history", "values", "peer_stopped")
        ),
        None,
    )
    if stopped:
        lines += [f"The peer's conversation {stopped}.", ""]
    lines += _diagnosis(cs, names)
    lines += _event_types(cs, names)
    lines += ["## LLM calls answered per contender (sanity check)", ""]
    for n in names:
        calls = cs[n].get("llm_calls", {})
        listing = ", ".join(f"{k}: {v}" for k, v in calls.items()) or "none"
        lines.append(f"- {cs[n]['label']}: {listing}")
    lines.append("")
    problems = []
    for n, reason in results.get("skipped", {}).items():
        problems.append(f"- **{n} skipped**: {reason}")
    for n in names:
        problems += _problems(cs[n])
    if problems:
        lines += ["## Skipped, failed, retried or cut short", "", *problems, ""]
    return "\n".join(lines)


def _problems(c: dict[str, Any]) -> list[str]:
    out: list[str] = []
    label = c["label"]
    if "error" in c:
        out.append(f"- {label}: session failed: {c['error']}")
    for key, v in c.items():
        if isinstance(v, dict) and "error" in v:
            out.append(f"- {label}: {key} failed: {v['error']}")
        if isinstance(v, dict) and "skipped" in v:
            out.append(f"- {label}: {key} not measured: {v['skipped']}")
        if isinstance(v, dict) and v.get("after_unfinished"):
            out.append(
                f"- {label}: {key} ran after a measure that left turns behind "
                f"({'; '.join(v['after_unfinished'])}), after a pause; it may be slowed by them"
            )
    for level in _get(c, "throughput", "levels") or []:
        agents = level["agents"]
        if "error" in level:
            out.append(f"- {label}: throughput with {agents} agents failed: {level['error']}")
        failed = level.get("failed", 0) + level.get("warmup_failed", 0)
        if failed:
            out.append(
                f"- {label}: throughput with {agents} agents: {failed} turns failed: "
                f"warm-up {level.get('warmup_failed', 0)} of {agents} "
                f"({level.get('warmup_unfinished', 0)} cut by the timeout), timed "
                f"{level.get('failed', 0)} of {level.get('turns', 0)} "
                f"({level.get('unfinished', 0)} cut by the timeout or never started); errors "
                "before the timeout: " + _errors(level.get("errors"))
            )
        if level.get("workaround_skipped"):
            out.append(
                f"- {label}: throughput with {agents} agents: no rerun with the workaround "
                f"({level['workaround_skipped']})"
            )
        again = level.get("with_workaround")
        if again:
            what = (
                f"failed again: {again['error']}"
                if "error" in again
                else f"{_num(again.get('turns_per_s'), 1)} turns/s, "
                f"{again.get('failed', 0) + again.get('warmup_failed', 0)} failed"
            )
            out.append(
                f"- † {label}: throughput with {agents} agents, for reference only, again with "
                f"a workaround ({again['workaround']}): {what}"
                + (
                    ". The parent's history is saved for replay: " + ", ".join(level["evidence"])
                    if level.get("evidence")
                    else ""
                )
            )
        if level.get("rejected_and_retried"):
            out.append(
                f"- {label}: throughput with {agents} agents: the server rejected "
                f"{level['rejected_and_retried']} wakes ({level.get('retried_turns', 0)} turns) "
                "as over its limit of 10 updates in flight per workflow; the bench retried them"
            )
    w = c.get("wake_all") or {}
    if w.get("failed"):
        out.append(
            f"- {label}: wake all {w['agents']}: {w['failed']} turns failed "
            f"({w.get('unfinished', 0)} cut by the timeout); errors before the timeout: "
            + _errors(w.get("errors"))
        )
    if w.get("rejected_and_retried"):
        out.append(
            f"- {label}: wake all {w['agents']}: the server rejected {w['rejected_and_retried']} "
            f"wakes ({w.get('retried_turns', 0)} turns) with RESOURCE_EXHAUSTED; the bench "
            "retried them"
        )
    for level in _get(c, "idle", "levels") or []:
        if "error" in level:
            out.append(
                f"- {label}: spawn/idle with {level['agents']} agents failed: {level['error']}"
            )
        if level.get("rejected_and_retried"):
            out.append(
                f"- {label}: spawning {level['agents']} agents: the server rejected "
                f"{level['rejected_and_retried']} spawns (updates in flight on the root); the "
                "bench retried them"
            )
    stopped = _get(c, "growth", "stopped")
    if stopped:
        out.append(f"- {label}: growth conversation {stopped}")
    return out


def _errors(errors: dict[str, int] | None) -> str:
    if not errors:
        return "none recorded"
    return "; ".join(f"{count}× {msg[:200]}" for msg, count in errors.items())


def _pair(c: dict[str, Any], a: tuple[Any, ...], b: tuple[Any, ...]) -> str:
    va, vb = _get(c, *a), _get(c, *b)
    if va is None and vb is None:
        return "n/a" if _get(c, a[0], "error") else "—"
    return f"{_num(va, 1)} / {_num(vb, 1)}"


def _wake_all_cell(cs: dict[str, Any]) -> Any:
    def cell(n: str) -> str:
        w = cs[n].get("wake_all") or {}
        if "done" not in w:
            return "n/a" if "error" in w else "—"
        return f"{w['done']:,} / {w['failed']:,}" + (
            f" ({w['unfinished']} unfinished)" if w.get("unfinished") else ""
        )

    return cell


def _idle_cell(
    cs: dict[str, Any],
    ratios: dict[str, Any],
    agents: int,
    key: str,
    ratio: str | None,
    digits: int = 0,
    scale: float = 1,
) -> Any:
    def cell(n: str) -> str:
        level = _idle_level(cs[n], agents)
        if level is None:
            return "n/a" if _get(cs[n], "idle", "error") else "—"
        if "error" in level:
            return "failed"
        v = level.get(key)
        if isinstance(v, int | float):
            v = v * scale
        rr = ratios.get(n, {}).get(ratio) if ratio and n != "floor" else None
        return _num(v, digits) + _x(rr)

    return cell


def _throughput_failures(c: dict[str, Any], levels: list[int]) -> str:
    cells = []
    for agents in levels:
        level = _level(c, agents)
        if level is None or "done" not in level:
            cells.append("—" if level is None else "failed")
            continue
        failed = level.get("failed", 0) + level.get("warmup_failed", 0)
        cells.append(f"{failed} / {level.get('retried_turns', 0)}")
    return ", ".join(cells) if any(cell != "—" for cell in cells) else "—"


def _throughput_cell(cs: dict[str, Any], ratios: dict[str, Any], agents: int) -> Any:
    def cell(n: str) -> str:
        level = _level(cs[n], agents)
        if level is None:
            return "—"
        if "error" in level:
            return "failed"
        rr = ratios.get(n, {}).get(f"throughput_{agents}") if n != "floor" else None
        failed = level.get("failed", 0) + level.get("warmup_failed", 0)
        note = f" [{failed} failed]" if failed else ""
        if level.get("with_workaround"):
            note += " †"
        return _num(level["turns_per_s"], 1) + _x(rr) + note

    return cell


def _limit_cell(cs: dict[str, Any]) -> Any:
    def cell(n: str) -> str:
        g = cs[n].get("growth") or {}
        if "turns" not in g:
            return "—"
        runs = max((g.get("runs") or {}).values(), default=1)
        if n == "actant":  # each turn a new execution (bench/actant_peer.py); the first mark: none
            return f"never: a new run every turn ({g['turns']} turns)"
        if runs > 1:
            return f"never: continued as new {runs - 1}× in {g['turns']} turns"
        return _num(g.get("projected_turn_at_50mib"))

    return cell


def _growth_turns(c: dict[str, Any]) -> str:
    g = c.get("growth") or {}
    if "turns" not in g:
        return "—"
    return _num(g["turns"]) + (" (cut short)" if g.get("stopped") else "")


def _diagnosis(cs: dict[str, Any], names: list[str]) -> list[str]:
    out: list[str] = []
    for n in names:
        for kind, title in (("plain", "plain turns"), ("tool", "tool turns")):
            d = _get(cs[n], "latency", f"diagnosis_{kind}")
            lat = _get(cs[n], "latency", kind)
            if not d or not lat or not d.get("wake_signals"):
                continue
            total = lat["mean_ms"] * lat["turns"] / 1000
            out.append(
                f"- {cs[n]['label']}, {title}: {lat['turns']} timed turns took "
                f"{_num(total, 1)} s, of which {_num(d['wake_signal_delay_total_s'], 1)} s "
                f"was wake signals in flight from the parent to the agent ({d['wake_signals']} "
                f"signals: p50 {_num(d['wake_signal_delay_p50_ms'], 1)} ms, max "
                f"{_num(d['wake_signal_delay_max_ms'])} ms, {d['wake_signals_over_500ms']} over "
                "500 ms)."
            )
    if not out:
        return []
    return [
        "## Where the latency tail comes from",
        "",
        "Wakes that reached the agent as a signal from its parent (a queued wake that the "
        "parent starts later, or the design before 2026-11-30): the time from the parent's "
        "signal to its arrival in the agent's history:",
        "",
        *out,
        "",
    ]


def _event_types(cs: dict[str, Any], names: list[str]) -> list[str]:
    durable = [
        n for n in names if _get(cs[n], "latency", "history_plain", "event_types_median_turn")
    ]
    if not durable:
        return []
    out = ["## Where a turn's history events come from (median turn)", ""]
    for kind, title in (("plain", "plain turn"), ("tool", "tool turn")):
        types: set[str] = set()
        for n in durable:
            types |= set(_get(cs[n], "latency", f"history_{kind}", "event_types_median_turn") or {})
        out += [
            f"{title}:",
            "",
            "| event type | " + " | ".join(cs[n]["label"] for n in durable) + " |",
            "|---" * (len(durable) + 1) + "|",
        ]
        for ty in sorted(types):
            cells = [
                str(
                    (
                        _get(cs[n], "latency", f"history_{kind}", "event_types_median_turn") or {}
                    ).get(ty, 0)
                )
                for n in durable
            ]
            out.append(f"| {ty} | " + " | ".join(cells) + " |")
        out.append("")
    return out


# ---------------------------------------------------------------------- plots


COLORS = {
    "floor": "#7f7f7f",
    "ours": "#d62728",
    "ours_direct": "#ff7f0e",
    "ours_pg": "#9467bd",
    "toolnexus": "#2ca02c",
    "openai_agents": "#1f77b4",
}


def plots(results: dict[str, Any], out_dir: Path, stamp: str) -> dict[str, str] | None:
    """Write the PNGs; returns their paths by name (None without matplotlib)."""
    try:
        import matplotlib

        matplotlib.use("Agg")
        import matplotlib.pyplot as plt
    except ImportError:
        return None
    cs: dict[str, dict[str, Any]] = results.get("contenders", {})
    names = [n for n in ORDER if n in cs]
    files: dict[str, str] = {}
    if not names:
        return files
    title_tail = f"({results.get('stamp')}, size {results.get('size', {}).get('name')})"

    # Latency percentiles, plain and tool turn.
    fig, axes = plt.subplots(1, 2, figsize=(12, 5), sharey=True)
    for ax, kind, title in zip(
        axes,
        ("plain", "tool"),
        ("plain turn (1 LLM call)", "tool turn (LLM → tool → LLM)"),
        strict=True,
    ):
        present = [n for n in names if _get(cs[n], "latency", kind, "p50_ms") is not None]
        width = 0.8 / max(len(present), 1)
        for i, n in enumerate(present):
            vals = [_get(cs[n], "latency", kind, f"{p}_ms") for p in ("p50", "p95", "p99")]
            xs = [j + (i - (len(present) - 1) / 2) * width for j in range(3)]
            bars = ax.bar(xs, vals, width, label=cs[n]["label"], color=COLORS.get(n))
            for bar, v in zip(bars, vals, strict=True):
                ax.annotate(
                    f"{v:.0f}" if v >= 10 else f"{v:.1f}",
                    (bar.get_x() + bar.get_width() / 2, v),
                    ha="center",
                    va="bottom",
                    fontsize=7,
                )
        ax.set_xticks(range(3), ["p50", "p95", "p99"])
        ax.set_yscale("log")
        ax.set_title(title)
        ax.grid(axis="y", which="both", alpha=0.3)
    axes[0].set_ylabel("wake → result (ms, log scale)")
    axes[0].legend(fontsize=8)
    fig.suptitle(f"Latency of one agent's turn, turns back to back {title_tail}")
    files["latency_png"] = _save(plt, fig, out_dir / f"{stamp}-latency.png")

    # Throughput against parallel agents.
    fig, ax = plt.subplots(figsize=(7, 5))
    for n in names:
        levels = [lv for lv in _get(cs[n], "throughput", "levels") or [] if "turns_per_s" in lv]
        if not levels:
            continue
        xs = [lv["agents"] for lv in levels]
        ys = [lv["turns_per_s"] for lv in levels]
        ax.plot(xs, ys, marker="o", label=cs[n]["label"], color=COLORS.get(n))
        for x, y in zip(xs, ys, strict=True):
            ax.annotate(
                f"{y:.0f}" if y >= 10 else f"{y:.1f}",
                (x, y),
                textcoords="offset points",
                xytext=(0, 6),
                ha="center",
                fontsize=8,
            )
    ax.set_xscale("log")
    ax.set_yscale("log")
    ax.set_xlabel("agents in parallel (log scale)")
    ax.set_ylabel("turns / s (log scale)")
    ax.set_title(f"Throughput {title_tail}")
    ax.grid(which="both", alpha=0.3)
    ax.legend(fontsize=8)
    files["throughput_png"] = _save(plt, fig, out_dir / f"{stamp}-throughput.png")

    # History bytes per turn against the turn number: linear scale (growth reads as a line)
    # and log scale (the flat ones stay readable).
    series = {
        n: _get(cs[n], "growth", "bytes_per_turn") or []
        for n in names
        if len(_get(cs[n], "growth", "bytes_per_turn") or []) >= 2
    }
    if series:
        fig, axes = plt.subplots(1, 2, figsize=(14, 5.5))
        for ax, scale in zip(axes, ("linear", "log"), strict=True):
            for n, values in series.items():
                fit = _get(cs[n], "growth", "slope_bytes_per_turn")
                label = cs[n]["label"] + (f" (slope {fit:,.0f} B/turn)" if fit is not None else "")
                ax.plot(
                    range(2, len(values) + 1),
                    [v / 1024 for v in values[1:]],
                    label=label,
                    color=COLORS.get(n),
                    linewidth=1.2,
                )
            ax.set_yscale(scale)
            ax.set_xlabel("turn number (~1 KB user message and ~1 KB reply per turn)")
            ax.set_ylabel(f"history KiB added by the turn ({scale} scale)")
            ax.grid(which="both", alpha=0.3)
        axes[0].legend(fontsize=8)
        fig.suptitle(f"History bytes per turn as the conversation grows {title_tail}")
        files["history_png"] = _save(plt, fig, out_dir / f"{stamp}-history.png")
    return files


def _save(plt: Any, fig: Any, path: Path) -> str:
    """Lay out, write and close one figure; returns its path."""
    fig.tight_layout()
    fig.savefig(path, dpi=110)
    plt.close(fig)
    return str(path)


def write(results: dict[str, Any], out_dir: Path, stamp: str) -> dict[str, str]:
    """Write the markdown and the plots; returns their paths."""
    out_dir.mkdir(parents=True, exist_ok=True)
    files = plots(results, out_dir, stamp)
    md = markdown(results)
    if files:
        md += (
            "\n## Plots\n\n"
            + "\n".join(f"![{name}]({Path(path).name})" for name, path in files.items())
            + "\n"
        )
    elif files is None:
        md += (
            "\nPlots skipped: matplotlib is not installed "
            "(pip install -r bench/requirements.txt).\n"
        )
    md_path = out_dir / f"{stamp}.md"
    md_path.write_text(md)
    return {"markdown": str(md_path), **(files or {})}
