"""Heartbeat while a long activity body runs, so a cancellation (interrupt) reaches it, and
carry the body's live output (issue 14, item 4) in the heartbeat details."""

from __future__ import annotations

import asyncio
import contextlib
import time
from collections.abc import AsyncIterator, Callable
from typing import Any

from temporalio import activity

PUBLISH_EVERY_S = 0.1
"""Seconds between two heartbeats sent because the body published something new (the SDK
then throttles what reaches the server: ``worker.WORKER_DEFAULTS``)."""

QUIET_START_S = 0.25
"""No published heartbeat before the body has run this long: a fast call (a scripted model,
a short reply) sends none at all, as before live output existed."""


class Beat:
    """What the body of :func:`heartbeating` publishes with its heartbeats.

    The body sets :attr:`source` (called when a heartbeat goes out; its value is the
    heartbeat's one detail) and calls :meth:`poke` when the value changed; the heartbeat loop
    then sends it within ``PUBLISH_EVERY_S`` (after ``QUIET_START_S``), and every periodic
    heartbeat carries it too, so an empty heartbeat never erases it on the server.
    """

    def __init__(self) -> None:
        self.source: Callable[[], Any] | None = None
        self._poked = asyncio.Event()

    def poke(self) -> None:
        """Ask for a heartbeat with the current value of :attr:`source` soon."""
        self._poked.set()

    def send(self) -> None:
        """One heartbeat now, with the current details (none when no source is set)."""
        self._poked.clear()
        if self.source is None:
            activity.heartbeat()
        else:
            activity.heartbeat(self.source())


@contextlib.asynccontextmanager
async def heartbeating(every_s: float = 1.0) -> AsyncIterator[Beat]:
    """Heartbeat every ``every_s`` seconds while the body runs, the first after ``every_s``,
    and sooner when the body publishes through the yielded :class:`Beat`.

    The worker delivers a cancel on the next heartbeat response; with the worker's heartbeat
    throttle at 1 s (``worker.WORKER_DEFAULTS``) an interrupt lands within about a second. A
    body shorter than ``every_s`` (most LLM calls to a fast model) that publishes nothing, or
    only within ``QUIET_START_S``, sends no heartbeat at all: each is a server round trip, and
    at 100 turns at once they were a tenth of the worker's time.

    Wrap the whole activity body, store I/O included (issue 12, item 14): a slow store write
    outside the heartbeats once failed an LLM call after the model had answered. The body's
    blocking work must run off the event loop (``asyncio.to_thread``, ``threads.py``) for the
    beats to go out.
    """
    beat = Beat()
    start = time.monotonic()
    ended = False

    async def beats() -> None:
        last_sent = start
        while not ended:
            due = last_sent + every_s - time.monotonic()
            try:
                # asyncio.timeout, not wait_for: on Python 3.11 wait_for drops a cancel that
                # meets the completion of what it waits for (a publish just before the body
                # ended), and this loop then never ended (nor did the activity).
                async with asyncio.timeout(max(due, 0.0)):
                    await beat._poked.wait()
                earliest = max(start + QUIET_START_S, last_sent + PUBLISH_EVERY_S)
                hold = earliest - time.monotonic()
                if hold > 0:
                    await asyncio.sleep(hold)
            except TimeoutError:
                pass
            if not ended:
                beat.send()
            last_sent = time.monotonic()

    task = asyncio.create_task(beats())
    try:
        yield beat
    finally:
        ended = True
        task.cancel()
        with contextlib.suppress(asyncio.CancelledError):
            await task
