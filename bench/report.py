"""Derived figures (ratios to the floor, targets), the markdown table and the PNG plots."""

from __future__ import annotations

from pathlib import Path
from typing import Any

from bench.contenders import ORDER

LATENCY_TARGET = 1.2
"""Our wake → result latency within this factor of the floor's."""

EVENTS_PER_CALL_TARGET = 6
"""At most this many history events per LLM call (plus a constant per wake)."""


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
    """Ratios to the floor for every contender, and whether our targets are met."""
    cs: dict[str, dict[str, Any]] = results.get("contenders", {})
    floor = cs.get("floor", {})
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
            for what in ("events_median", "bytes_median"):
                ratios[f"history_{kind}_{what}"] = _ratio(
                    _get(c, "latency", f"history_{kind}", what),
                    _get(floor, "latency", f"history_{kind}", what),
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
        ratios["spawns_per_s"] = _ratio(
            _get(c, "idle", "spawns_per_s"), _get(floor, "idle", "spawns_per_s")
        )
        ratios["rss_per_agent"] = _ratio(
            _get(c, "idle", "rss_per_agent_bytes"), _get(floor, "idle", "rss_per_agent_bytes")
        )
        out["ratios_to_floor"][name] = ratios
        split = history_split(c)
        if split is not None:
            out["history_split"][name] = split
    for variant in OUR_VARIANTS:
        if variant in cs:
            out.setdefault("targets_by_variant", {})[variant] = targets(
                cs[variant], out, cs, variant
            )
    if "ours" in cs:
        out["targets"] = out["targets_by_variant"]["ours"]  # the headline verdict
    return out


OUR_VARIANTS = ("ours", "ours_direct")
"""Our runtime's contenders, each judged against the targets."""


def targets(
    ours: dict[str, Any], derived: dict[str, Any], cs: dict[str, Any], name: str = "ours"
) -> dict[str, Any]:
    r = derived["ratios_to_floor"].get(name, {})
    plain, tool = r.get("latency_plain_p50_ms"), r.get("latency_tool_p50_ms")
    latency_met = (
        plain is not None
        and tool is not None
        and plain <= LATENCY_TARGET
        and tool <= LATENCY_TARGET
    )
    split = derived["history_split"].get(name)
    per_call = split["events_per_llm_call"] if split else None
    peer_growth = cs.get("openai_agents", {}).get("growth", {})
    growth = ours.get("growth", {})
    return {
        "latency": {
            "target": f"wake → result p50 within {LATENCY_TARGET}× the floor (plain and tool turn)",
            "plain_p50_ratio": plain,
            "tool_p50_ratio": tool,
            "plain_p99_ratio": r.get("latency_plain_p99_ms"),
            "met": latency_met if plain is not None else None,
        },
        "events": {
            "target": f"at most {EVENTS_PER_CALL_TARGET} history events per LLM call, plus a "
            "constant per wake",
            "events_per_llm_call": per_call,
            "events_per_wake": split["events_per_wake"] if split else None,
            "floor_events_per_llm_call": _get(
                derived["history_split"], "floor", "events_per_llm_call"
            ),
            "met": per_call <= EVENTS_PER_CALL_TARGET if per_call is not None else None,
        },
        "flat_history": {
            "target": "history bytes per turn flat over the conversation (fitted slope under "
            "20 B/turn), where the peer's grow",
            "ours_slope_bytes_per_turn": growth.get("slope_bytes_per_turn"),
            "ours_growth_over_run_bytes": growth.get("growth_over_run_bytes"),
            "ours_mean_bytes_per_turn": growth.get("mean_bytes_per_turn"),
            "ours_turns": growth.get("turns"),
            "peer_slope_bytes_per_turn": peer_growth.get("slope_bytes_per_turn"),
            "peer_turns": peer_growth.get("turns"),
            "peer_stopped": peer_growth.get("stopped"),
            "peer_projected_turn_at_50mib": peer_growth.get("projected_turn_at_50mib"),
            "met": growth.get("flat"),
        },
    }


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


def _yes(v: Any) -> str:
    return "—" if v is None else ("**met**" if v else "**not met**")


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
    for agents, _per_agent in size.get("throughput", []):
        row(
            f"throughput, {agents} agent{'s' if agents > 1 else ''} in parallel (turns/s)",
            _throughput_cell(cs, ratios, agents),
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
    idle = size.get("idle_agents")
    row(f"spawn rate, {idle} agents (agents/s)", value(("idle", "spawns_per_s"), "spawns_per_s", 1))
    row(
        f"worker RSS growth with {idle} idle agents (MiB)",
        value(("idle", "rss_delta_bytes"), None, 1, 1 / 2**20),
    )
    row(
        "worker RSS per idle agent (KiB)",
        value(("idle", "rss_per_agent_bytes"), "rss_per_agent", 1, 1 / 1024),
    )
    lines.append("")

    by_variant = d.get("targets_by_variant") or ({"ours": d["targets"]} if d.get("targets") else {})
    if by_variant:
        lines += ["## Targets", ""]
    for variant, t in by_variant.items():
        lat, ev, flat = t.get("latency", {}), t.get("events", {}), t.get("flat_history", {})
        lines += [
            f"| target | {cs[variant]['label']} | result |",
            "|---|---|---|",
            f"| {lat.get('target')} | plain {_num(lat.get('plain_p50_ratio'), 2)}×, tool "
            f"{_num(lat.get('tool_p50_ratio'), 2)}× (p99 plain "
            f"{_num(lat.get('plain_p99_ratio'), 2)}×) | {_yes(lat.get('met'))} |",
            f"| {ev.get('target')} | {_num(ev.get('events_per_llm_call'), 1)} per LLM call + "
            f"{_num(ev.get('events_per_wake'), 1)} per wake (floor: "
            f"{_num(ev.get('floor_events_per_llm_call'), 1)} per call) | {_yes(ev.get('met'))} |",
            f"| {flat.get('target')} | slope {_num(flat.get('ours_slope_bytes_per_turn'), 1)} "
            f"B/turn over {_num(flat.get('ours_turns'))} turns (mean "
            f"{_num(flat.get('ours_mean_bytes_per_turn'))} B/turn); peer slope "
            f"{_num(flat.get('peer_slope_bytes_per_turn'), 1)} B/turn over "
            f"{_num(flat.get('peer_turns'))} turns | {_yes(flat.get('met'))} |",
            "",
        ]

    stopped = next(
        (
            t["flat_history"]["peer_stopped"]
            for t in by_variant.values()
            if t.get("flat_history", {}).get("peer_stopped")
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
        c = cs[n]
        if "error" in c:
            problems.append(f"- {c['label']}: session failed: {c['error']}")
        for key, v in c.items():
            if isinstance(v, dict) and "error" in v:
                problems.append(f"- {c['label']}: {key} failed: {v['error']}")
        for level in _get(c, "throughput", "levels") or []:
            if "error" in level:
                problems.append(
                    f"- {c['label']}: throughput with {level['agents']} agents failed: "
                    f"{level['error']}"
                )
            if level.get("workaround"):
                problems.append(
                    f"- † {c['label']}: throughput with {level['agents']} agents fails as "
                    f"shipped ({level['as_shipped_error'][:300]}); the figure is with a "
                    f"workaround: {level['workaround']}"
                    + (
                        ". The parent's history is saved for replay: "
                        + ", ".join(level["evidence"])
                        if level.get("evidence")
                        else ""
                    )
                )
            if level.get("rejected_and_retried"):
                problems.append(
                    f"- {c['label']}: throughput with {level['agents']} agents: the server "
                    f"rejected {level['rejected_and_retried']} wakes (over its limit of 10 "
                    "updates in flight per workflow, on the root); the bench retried them"
                )
        if _get(c, "idle", "rejected_and_retried"):
            problems.append(
                f"- {c['label']}: spawns: the server rejected "
                f"{c['idle']['rejected_and_retried']} spawns (updates in flight on the root); "
                "the bench retried them"
            )
        stopped = _get(c, "growth", "stopped")
        if stopped:
            problems.append(f"- {c['label']}: growth conversation {stopped}")
    if problems:
        lines += ["## Skipped, failed or cut short", "", *problems, ""]
    return "\n".join(lines)


def _throughput_cell(cs: dict[str, Any], ratios: dict[str, Any], agents: int) -> Any:
    def cell(n: str) -> str:
        level = _level(cs[n], agents)
        if level is None:
            return "—"
        if "error" in level:
            return "failed"
        rr = ratios.get(n, {}).get(f"throughput_{agents}") if n != "floor" else None
        retried = level.get("rejected_and_retried")
        note = f" [{retried} wakes retried]" if retried else ""
        if level.get("workaround"):
            note += " † (fails as shipped)"
        return _num(level["turns_per_s"], 1) + _x(rr) + note

    return cell


def _limit_cell(cs: dict[str, Any]) -> Any:
    def cell(n: str) -> str:
        g = cs[n].get("growth") or {}
        if "turns" not in g:
            return "—"
        runs = max((g.get("runs") or {}).values(), default=1)
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
