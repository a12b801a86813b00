"""The tick rules (workflows/ticks.py, contract/cron.py) as pure functions: fire times,
the catch-up count after a late timer, the one coalesced tick item, its rendering
(CONTRACT §4), the inbox cap that ticks never fill, the refused start from outside."""

from __future__ import annotations

import pytest
from pydantic import ValidationError

from toolnexus_temporal.workflows.contract.cron import cron_error, next_cron_ms
from toolnexus_temporal.workflows.contract.models import AgentDef, InboxItem, TickSpec
from toolnexus_temporal.workflows.contract.state import AgentInput, HandleState
from toolnexus_temporal.workflows.inbox import post_error, restore_drained
from toolnexus_temporal.workflows.rules.render import render_inbox
from toolnexus_temporal.workflows.ticks import (
    CATCH_UP_SCAN,
    add_ticks,
    catch_up,
    first_fire_ms,
    is_tick,
    start_input,
)

T0 = 1_795_996_800_000  # 2026-11-30 (ms since the epoch), a whole hour
assert T0 % 3_600_000 == 0


def test_interval_fire_times_and_catch_up() -> None:
    spec = TickSpec(every_ms=1_000)
    assert first_fire_ms(spec, T0) == T0 + 1_000
    assert catch_up(spec, T0 + 1_000, T0 + 1_004) == (1, T0 + 2_000)  # on time
    # an outage of an hour: ONE tick standing for 3,600 fire times, the next after now
    assert catch_up(spec, T0 + 1_000, T0 + 3_600_500) == (3_600, T0 + 3_601_000)
    # a timer seen a moment early still counts one
    assert catch_up(spec, T0 + 1_000, T0 + 999) == (1, T0 + 2_000)


def test_cron_fire_times_in_utc_and_catch_up() -> None:
    spec = TickSpec(cron="*/5 * * * *")
    assert first_fire_ms(spec, T0) == T0 + 300_000  # strictly after
    assert next_cron_ms("0 * * * *", T0 + 1) % 3_600_000 == 0
    assert catch_up(spec, T0 + 300_000, T0 + 300_010) == (1, T0 + 600_000)
    assert catch_up(spec, T0 + 300_000, T0 + 3_600_000) == (12, T0 + 3_900_000)
    every_minute = TickSpec(cron="* * * * *")
    count, nxt = catch_up(every_minute, T0 + 60_000, T0 + 60_000 * 20_000)
    assert count == CATCH_UP_SCAN and nxt == T0 + 60_000 * 20_001  # bounded scan


def test_schedules_are_validated() -> None:
    assert cron_error("0 9 * * MON-FRI") is None
    assert "it has 6 fields, expected 5" in (cron_error("* * * * * *") or "")
    assert 'minute "61" (allowed: 0-59' in (cron_error("61 * * * *") or "")
    assert "R and H" in (cron_error("H * * * *") or "")
    for bad in (
        {},
        {"every_ms": 1_000, "cron": "* * * * *"},
        {"every_ms": 999},
        {"cron": "bogus"},
        {"every_ms": 1_000, "wake": "yes"},
    ):
        with pytest.raises(ValidationError):
            TickSpec.model_validate(bad)
    defn = AgentDef(name="a", tick=TickSpec(every_ms=60_000, prompt="p", wake=False))
    assert AgentDef.model_validate(defn.model_dump(by_alias=True)) == defn


def test_ticks_coalesce_into_one_item_and_render_the_contract_line() -> None:
    items: list[InboxItem] = [InboxItem(from_="ops", channel="chat", text="hi")]
    add_ticks(items, 1)
    add_ticks(items, 3)
    add_ticks(items, 1)
    ticks = [item for item in items if is_tick(item)]
    assert len(items) == 2 and len(ticks) == 1 and ticks[0].count == 5
    assert render_inbox(items).splitlines()[1:] == [
        "1. [from=ops channel=chat] hi",
        "2. [from=clock channel=timer] tick (x5 coalesced)",
    ]
    # a plain timer item (no count) counts one, as before
    plain = [InboxItem(from_="clock", channel="timer", text="tick")]
    assert (
        render_inbox(plain).splitlines()[1] == "1. [from=clock channel=timer] tick (x1 coalesced)"
    )


def test_the_tick_item_never_fills_the_inbox() -> None:
    s = HandleState(id="root/a.1", task_queue="q", defn=AgentDef(name="a"))
    add_ticks(s.intake.items, 40)
    for k in range(s.options.inbox_cap):
        assert post_error(s, InboxItem(text=f"p{k}")) is None
        s.intake.items.append(InboxItem(text=f"p{k}"))
    assert post_error(s, InboxItem(text="one more")) == "inbox full (8)"
    # an interrupted turn's drained tick item merges with ticks that came meanwhile
    s.intake.turn_inbox = [InboxItem(from_="clock", channel="timer", text="tick", count=2)]
    restore_drained(s)
    ticks = [item for item in s.intake.items if is_tick(item)]
    assert len(ticks) == 1 and ticks[0].count == 42 and s.intake.items[0] is not None
    assert is_tick(s.intake.items[0])


def test_a_start_without_agent_input_says_how_to_schedule() -> None:
    for raw in (None, "hello", {"state": "x"}, 3):
        message = start_input(raw)
        assert isinstance(message, str)
        assert "AgentDef.tick" in message and "tnx schedule" in message
        assert "rt.schedule" in message
    good = AgentInput(state=HandleState(id="root/a.1", task_queue="q"))
    assert start_input(good) is good
    assert start_input(good.model_dump(by_alias=True)) == good


def test_the_trace_says_a_schedule_as_a_person_writes_it() -> None:
    """Walk 7: ``--every 1.5h`` was traced as ``every 5400s``; the trace and ``tnx`` share
    one rule (``clock.format_duration``)."""
    from toolnexus_temporal.workflows.contract.models import TickSpec
    from toolnexus_temporal.workflows.ticks import describe

    assert describe(TickSpec(every_ms=5_400_000)) == "every 90m"
    assert describe(TickSpec(every_ms=3_600_000, wake=False)) == "every 1h (inbox only)"
    assert describe(TickSpec(every_ms=1_500)) == "every 1500ms"
