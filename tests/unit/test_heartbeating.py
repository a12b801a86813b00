"""``heartbeating`` ends when its body ends, however the body's last publish and the end
meet (a CI run hung for good: an interrupted LLM call never finished, so its worker never
shut down)."""

from __future__ import annotations

import asyncio

import pytest

from toolnexus_temporal.activities import heartbeat
from toolnexus_temporal.activities.heartbeat import heartbeating


@pytest.fixture
def sent(monkeypatch: pytest.MonkeyPatch) -> list[tuple[object, ...]]:
    """The heartbeats sent (no activity context here)."""
    beats: list[tuple[object, ...]] = []
    monkeypatch.setattr(heartbeat.activity, "heartbeat", lambda *details: beats.append(details))
    return beats


async def test_a_publish_right_before_the_body_ends_never_keeps_the_beats_alive(sent) -> None:
    """The body publishes and ends in the same step of the event loop: the heartbeat loop's
    wait for that publish completes just as it is cancelled. On Python 3.11,
    ``asyncio.wait_for`` then returned the result and dropped the cancel, the loop went on
    beating, and ``heartbeating`` never returned (the activity hung). Looped: every iteration
    meets that moment."""

    async def body() -> None:
        async with heartbeating(every_s=30) as beat:
            beat.source = lambda: "text so far"
            await asyncio.sleep(0)  # the heartbeat loop now waits for a publish
            beat.poke()

    for i in range(50):
        task = asyncio.ensure_future(body())
        done, _ = await asyncio.wait({task}, timeout=5)
        assert task in done, f"heartbeating never returned (iteration {i})"
        task.result()
    assert sent == []  # the body ended within QUIET_START_S: nothing was sent


async def test_a_cancelled_body_ends_the_beats_too(sent) -> None:
    """An interrupt cancels the activity while it publishes: ``heartbeating`` ends and the
    cancel reaches the caller."""

    async def body() -> None:
        async with heartbeating(every_s=30) as beat:
            while True:
                beat.poke()
                await asyncio.sleep(0)

    for _ in range(50):
        task = asyncio.ensure_future(body())
        await asyncio.sleep(0.001)
        task.cancel()
        done, _ = await asyncio.wait({task}, timeout=5)
        assert task in done, "heartbeating did not end after its body was cancelled"
        assert task.cancelled()


async def test_beats_go_out_while_the_body_runs(sent) -> None:
    async with heartbeating(every_s=0.05) as beat:
        beat.source = lambda: "x"
        await asyncio.sleep(0.3)
    assert sent and all(details == ("x",) for details in sent)
