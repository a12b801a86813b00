"""Pure rules behind issue 14 items 3 and 5: dates and ages as ``tnx`` shows them, when a
poller counts as a live worker, the no-worker hint, and when a pending Request was made."""

from __future__ import annotations

import io
from datetime import UTC, datetime, timedelta, timezone

from rich.console import Console

from toolnexus_temporal.cli import render
from toolnexus_temporal.cli.ops import connect_message
from toolnexus_temporal.cli.workercheck import again_in, no_worker_line
from toolnexus_temporal.client.errors import NoWorkerError
from toolnexus_temporal.client.handle import Handle
from toolnexus_temporal.client.reachability import (
    LIVE_POLLER_S,
    Poll,
    WorkerSeen,
    pollers_of,
)
from toolnexus_temporal.workflows.contract.models import Request, TraceLine
from toolnexus_temporal.workflows.contract.state import HandleState
from toolnexus_temporal.workflows.rules.approvals import stamp_pending_since

AT_MS = 1_764_583_200_123
"""2025-12-01 10:00:00.123 UTC."""

MINUTE = 60_000
HOUR = 60 * MINUTE
DAY = 24 * HOUR


def test_stamp_is_an_iso_date_and_time_in_the_zone_given() -> None:
    assert render.stamp(AT_MS, UTC) == "2025-12-01 10:00:00.123"
    assert render.stamp(AT_MS, timezone(timedelta(hours=-3, minutes=-30))) == (
        "2025-12-01 06:30:00.123"
    )
    assert render.stamp(AT_MS + 14 * HOUR, UTC) == "2025-12-02 00:00:00.123"


def test_zone_names_utc_an_offset_or_local_time() -> None:
    assert render.zone(AT_MS, UTC) == "UTC"
    assert render.zone(AT_MS, timezone(timedelta(hours=5, minutes=45))) == "UTC+05:45"
    assert render.zone(AT_MS, timezone(timedelta(hours=-3, minutes=-30))) == "UTC-03:30"
    local = render.zone(AT_MS)
    assert local.startswith("local time (UTC") and local.endswith(")")


def test_age_shows_its_two_largest_units() -> None:
    assert render.age(0) == "0s"
    assert render.age(999) == "0s"
    assert render.age(45_000) == "45s"
    assert render.age(12 * MINUTE + 3_000) == "12m 3s"
    assert render.age(3 * HOUR + 12 * MINUTE + 59_000) == "3h 12m"
    assert render.age(2 * DAY + 3 * HOUR + 59 * MINUTE) == "2d 3h"
    assert render.age(400 * DAY) == "400d 0h"
    assert render.age(-5_000) == "0s"  # clock skew: never a negative age


def test_waiting_counts_from_the_request() -> None:
    assert render.waiting(AT_MS, AT_MS + 2 * DAY + 3 * HOUR) == "waiting 2d 3h"
    assert render.waiting(None, AT_MS) == render.NONE


def handle(**fields: object) -> Handle:
    return Handle.model_validate({"id": "root/asker.1", "name": "asker", **fields})


def request(n: int = 1) -> Request:
    return Request(id=f"root/asker.1#{n}", kind="approval", prompt="approve secret access?")


def text_of(table: object, width: int = 200) -> str:
    console = Console(width=width, record=True, file=io.StringIO())
    console.print(table)
    return console.export_text()


def test_tables_show_how_long_a_request_has_waited() -> None:
    parked = handle(state="suspended", pending_req=request(), pending_since_ms=AT_MS)
    idle = handle(id="root/other.2", name="other")
    now = AT_MS + 2 * DAY + 3 * HOUR + 5 * MINUTE
    ls = text_of(render.tree_table([parked, idle], now))
    assert "WAITING" in ls
    row = next(line for line in ls.splitlines() if "root/asker.1" in line)
    assert "suspended" in row and "waiting 2d 3h" in row
    assert "waiting" not in next(line for line in ls.splitlines() if "root/other.2" in line)
    queue = text_of(render.pending_table([parked], now))
    assert "waiting 2d 3h" in queue and "root/asker.1#1" in queue
    shown = text_of(render.handle_table(parked, now))
    assert f"{render.stamp(AT_MS)} (waiting 2d 3h)" in shown
    assert "read at" in shown and render.zone(now) in shown


def test_trace_lines_carry_dates_and_name_the_zone() -> None:
    lines = [
        TraceLine(seq=1, at_ms=AT_MS, line="root/asker.1: idle→running (wake)"),
        TraceLine(seq=2, at_ms=AT_MS + 3 * DAY, line="root/asker.1: running→idle (done)"),
    ]
    shown = text_of(render.trace_table(lines, UTC))
    assert "2025-12-01 10:00:00.123  root/asker.1: idle→running" in shown
    assert "2025-12-04 10:00:00.123  root/asker.1: running→idle" in shown
    assert "times: UTC" in shown


def test_a_poller_is_live_while_it_polled_within_the_window() -> None:
    now = datetime(2025, 12, 1, 10, 0, tzinfo=UTC)

    def polls(*ages_s: float) -> list[Poll]:
        return [Poll(f"w{i}", now - timedelta(seconds=age)) for i, age in enumerate(ages_s)]

    assert not pollers_of("q", [], now).live  # a fresh queue: no worker ever
    assert pollers_of("q", [], now).last_seen_s is None
    fresh = pollers_of("q", polls(59), now)
    assert fresh.live and fresh.count == 1
    stopped = pollers_of("q", polls(LIVE_POLLER_S + 1, 200), now)
    assert not stopped.live and stopped.last_seen_s == LIVE_POLLER_S + 1
    assert stopped.count == 2
    ahead = pollers_of("q", polls(-3), now)  # a server clock ahead
    assert ahead.live and ahead.last_seen_s == 0.0


def test_a_worker_that_said_it_stopped_is_gone_at_once() -> None:
    """Issue 24 item 4: the server lists a stopped worker's poller for minutes; its last
    heartbeat (``ListWorkers``: status shutting down) after that poll began tells it stopped."""
    now = datetime(2025, 12, 1, 10, 0, tzinfo=UTC)
    poll = Poll("42@host", now - timedelta(seconds=5))
    said_stop = WorkerSeen("42@host", stopped=True, at=now - timedelta(seconds=2))
    gone = pollers_of("q", [poll], now, [said_stop])
    assert not gone.live and gone.last_seen_s == 5.0
    # a worker of the same identity that polled again after it stopped (restarted) is live
    again = Poll("42@host", now - timedelta(seconds=1))
    assert pollers_of("q", [again], now, [said_stop]).live
    # a newer running heartbeat of that identity wins over an older stop
    running = WorkerSeen("42@host", stopped=False, at=now - timedelta(seconds=1))
    assert pollers_of("q", [poll], now, [said_stop, running]).live
    # another worker's stop says nothing of this one
    other = WorkerSeen("7@other", stopped=True, at=now)
    assert pollers_of("q", [poll], now, [other]).live
    # one of two workers stopped: the queue is still served
    both = [poll, Poll("7@other", now - timedelta(seconds=30))]
    assert pollers_of("q", both, now, [said_stop]).live


def test_the_no_worker_hint_names_queue_scope_and_how_to_start_one() -> None:
    err = NoWorkerError("tq-1", "default", None)
    assert "tnx-worker --task-queue tq-1 --registry MODULE:REGISTRY" in str(err)
    line = no_worker_line(
        err, "namespace 'default' at h:1, scope 's1'", "--address h:1 --namespace n"
    )
    assert line.startswith("no worker polls task queue 'tq-1' (namespace 'default' at h:1, ")
    assert "scope 's1'; none has polled it in the last 5 minutes" in line
    assert "restarted" not in line  # walk 7: said 12 minutes into a server's life
    assert line.endswith(
        "`tnx-worker --task-queue tq-1 --registry MODULE:REGISTRY --address h:1 --namespace n`"
    )
    demo = no_worker_line(NoWorkerError("tnx-demo", "default", None), "here", "")
    assert "--registry toolnexus_temporal.cli.demo:REGISTRY`" in demo  # walk 7 guessed it
    from toolnexus_temporal.cli.demo import REGISTRY  # and it is the demo's registry

    assert REGISTRY.names()
    stale = no_worker_line(NoWorkerError("tq-1", "default", 312.4), "here", "")
    assert "its last worker began its last poll 5m 12s ago" in stale and "REGISTRY`" in stale


def test_a_connection_failure_is_one_line_with_the_address_and_what_to_do() -> None:
    refused = (
        "Failed client connect: Server connection error: tonic::transport::Error(Transport,\n"
        ' ConnectError("tcp connect error", 127.0.0.1:1, Os { code: 111, kind: '
        'ConnectionRefused, message: "Connection refused" }))'
    )
    assert connect_message("127.0.0.1:1", refused) == (
        "cannot connect to Temporal at 127.0.0.1:1: connection refused "
        "(is the server running? `tnx server start`, or pass --address)"
    )
    other = connect_message("h:2", "x\n" * 400)
    assert "\n" not in other and len(other) < 400
    assert other.startswith("cannot connect") and other.endswith("…")


def test_pending_since_follows_the_pending_request() -> None:
    s = HandleState(id="root/asker.1", task_queue="q")
    stamp_pending_since(s, AT_MS)
    assert s.approval.pending_since_ms is None
    s.approval.pending_req = request(1)
    stamp_pending_since(s, AT_MS)
    stamp_pending_since(s, AT_MS + HOUR)  # the same Request still waits: unchanged
    assert s.approval.pending_since_ms == AT_MS
    s.approval.pending_req = request(2)  # another Request surfaced while suspended
    stamp_pending_since(s, AT_MS + 2 * HOUR)
    assert (s.approval.pending_since_ms, s.approval.pending_since_id) == (
        AT_MS + 2 * HOUR,
        "root/asker.1#2",
    )
    s.approval.pending_req = None
    stamp_pending_since(s, AT_MS + 3 * HOUR)
    assert s.approval.pending_since_ms is None and s.approval.pending_since_id is None


def test_trace_lines_print_ids_as_tnx_prints_ids() -> None:
    """Issue 37 item 1: an id copied from ``tnx trace`` pastes back (with its scope); a
    user name ``root@host`` and the word root stay as they are."""
    shown = lambda hid: f"demo/{hid}"  # noqa: E731 (Options.shown under --scope demo)
    line = "root/a.1: audit root/a.1/b.2#1: ok via signal by root@vm (the root cause)"
    assert render.scoped_ids(line, shown) == (
        "demo/root/a.1: audit demo/root/a.1/b.2#1: ok via signal by root@vm (the root cause)"
    )
    assert render.scoped_ids("root: idle→running (wake)", shown) == "demo/root: idle→running (wake)"
    assert render.scoped_ids("demo/root/a.1 as printed", shown) == "demo/root/a.1 as printed"
    table = text_of(render.trace_table([TraceLine(seq=1, at_ms=AT_MS, line=line)], shown=shown))
    assert "demo/root/a.1: audit demo/root/a.1/b.2#1" in table


def test_the_no_runtime_hint_repeats_the_command_as_run_in_a_runtime_that_exists() -> None:
    """Issue 37 item 1: a command that found no runtime is printed again whole (the id
    pasted, every option, shell-quoted) with the ``--scope`` of a runtime that exists; an id
    pasted with the missing scope loses it, and an earlier ``--scope`` is dropped."""
    words = ["inspect", "root/coordinator.1/deployer.2", "--json"]
    assert again_in(words, None, "demo", env_scope=False) == (
        "tnx inspect root/coordinator.1/deployer.2 --json --scope demo"
    )
    pasted = ["answer", "walk9/root/a.1", "--scope=walk9", "--edit", '{"x": 1}']
    # an id of the missing scope is that scope's agent: the hint lists the other runtime
    assert again_in(pasted, "walk9", "demo", env_scope=False) == "tnx ls --scope demo"
    watched = ["ls", "--watch", "--scope", "walk9"]
    assert again_in(watched, "walk9", None, env_scope=False) == "tnx ls --watch"
    # TNX_SCOPE names the missing scope: the unscoped runtime needs an empty --scope
    assert again_in(["pending"], "walk9", None, env_scope=True) == "tnx pending --scope ''"


def test_a_queued_edit_says_so() -> None:
    """Walk 9: ``tnx pending`` showed an edited approval as ``approve by carol``."""
    from datetime import UTC, datetime

    from toolnexus_temporal.client.queued import QueuedAnswer

    at = datetime(2026, 12, 8, 1, 46, 8, tzinfo=UTC)
    edit = QueuedAnswer("root/a.1#1", True, "carol", at, edited=True)
    assert edit.line() == "approve with an edit by carol, sent 01:46:08 UTC"
    raw = QueuedAnswer("root/a.1#1", False, None, at, identity="temporal-cli:root@vm")
    assert raw.line() == "decline from temporal-cli:root@vm, sent 01:46:08 UTC"
