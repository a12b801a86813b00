"""Small helpers shared by the test modules."""

from __future__ import annotations

import asyncio
from collections.abc import Awaitable, Callable
from typing import Any

from toolnexus_temporal.client import Budget, Handle


async def spawn(rt: Any, parent: Any, name: str, budget: Budget | None = None) -> Handle:
    """``rt.spawn`` that must succeed."""
    h = await rt.spawn(parent, name, budget)
    assert isinstance(h, Handle), h
    return h


async def eventually(check: Callable[[], Awaitable[bool]], tries: int = 100) -> None:
    """Poll ``check`` every 0.1 s until it holds (for state that settles by a signal)."""
    for _ in range(tries):
        if await check():
            return
        await asyncio.sleep(0.1)
    raise AssertionError("condition never held")
