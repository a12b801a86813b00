"""Heartbeat while a long activity body runs, so a cancellation (interrupt) reaches it."""

from __future__ import annotations

import asyncio
import contextlib
from collections.abc import AsyncIterator

from temporalio import activity


@contextlib.asynccontextmanager
async def heartbeating(every_s: float = 1.0) -> AsyncIterator[None]:
    """Heartbeat every ``every_s`` seconds while the body runs.

    The worker delivers a cancel on the next heartbeat response; with the worker's heartbeat
    throttle at 1 s (``worker.WORKER_DEFAULTS``) an interrupt lands within about a second.
    """

    async def beat() -> None:
        while True:
            activity.heartbeat()
            await asyncio.sleep(every_s)

    task = asyncio.create_task(beat())
    try:
        yield
    finally:
        task.cancel()
        with contextlib.suppress(asyncio.CancelledError):
            await task
