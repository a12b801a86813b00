"""``reachability.guarded``'s rule (no server): a query that waits is given up with
``NoWorkerError`` at the first check when the server lists only stopped pollers, and at the
second when it lists none, since a server that just restarted lists none while its workers
reconnect (issue 37 item 10: for 5-8 s after a restart the runtime said "no worker has polled
it; start one" with the worker about to poll)."""

from __future__ import annotations

import asyncio

import pytest

from toolnexus_temporal.client import reachability
from toolnexus_temporal.client.errors import NoWorkerError


class Probe:
    """A probe that always finds no worker (``last_seen_s`` as given) and counts checks."""

    def __init__(self, last_seen_s: float | None) -> None:
        self.last_seen_s = last_seen_s
        self.checks = 0
        self.checked = asyncio.Event()

    async def check(self) -> None:
        self.checks += 1
        self.checked.set()
        raise NoWorkerError("tq", "default", self.last_seen_s)


@pytest.fixture(autouse=True)
def quick(monkeypatch: pytest.MonkeyPatch) -> None:
    monkeypatch.setattr(reachability, "PROBE_AFTER_S", 0.01)
    monkeypatch.setattr(reachability, "PROBE_EVERY_S", 0.05)


async def test_a_query_answered_after_a_check_that_found_no_poller_is_returned() -> None:
    """Nothing listed (a restarted server): the query that answers after the first check
    (the worker polled again) returns its result; before, the first check raised."""
    probe = Probe(last_seen_s=None)

    async def query() -> str:
        await probe.checked.wait()
        return "answered"

    assert await reachability.guarded(query, probe) == "answered"  # type: ignore[arg-type]
    assert probe.checks == 1


async def test_nothing_listed_twice_gives_up() -> None:
    probe = Probe(last_seen_s=None)
    with pytest.raises(NoWorkerError):
        await reachability.guarded(asyncio.Event().wait, probe)  # type: ignore[arg-type]
    assert probe.checks == 2


async def test_a_stopped_worker_still_listed_gives_up_at_the_first_check() -> None:
    probe = Probe(last_seen_s=141.0)
    with pytest.raises(NoWorkerError) as caught:
        await reachability.guarded(asyncio.Event().wait, probe)  # type: ignore[arg-type]
    assert probe.checks == 1 and "its last worker began its last poll 2m 21s ago" in str(
        caught.value
    )
