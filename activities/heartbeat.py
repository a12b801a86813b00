"""Heartbeat while a long activity body runs, so a cancellation (interrupt) reaches it."""

from __future__ import annotations

import asyncio
import contextlib
from collections.abc import AsyncIterator

from temporalio import activity


@contextlib.asynccontextmanager
async def heartbeating(every_s: float = 1.0) -> AsyncIterator[None]:
    """Heartbeat every ``every_s`` seconds while the body runs, the first after ``every_s``.

    The worker delivers a cancel on the next heartbeat response; with the worker's heartbeat
    throttle at 1 s (``worker.WORKER_DEFAULTS``) an interrupt lands within about a second. A
    body shorter than ``every_s`` (most LLM calls to a fast model) sends no heartbeat at all:
    each is a server round trip, and at 100 turns at once they were a tenth of the worker's
    time.

    Wrap the whole activity body, store I/O included (issue 12, item 14): a slow store write
    outside the heartbeats once failed an LLM call after the model had answered. The body's
    blocking work must run off the event loop (``asyncio.to_thread``, ``threads.py``) for the
    beats to go out.
    """

    async def beat() -> None:
        while True:
            await asyncio.sleep(every_s)
            activity.heartbeat()

    task = asyncio.create_task(beat())
    try:
        yield
    finally:
        task.cancel()
        with contextlib.suppress(asyncio.CancelledError):
            await task
