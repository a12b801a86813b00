"""Run a sync (``def``) tool in a thread that an interrupt really stops (issue 12, item 11).

``asyncio.to_thread`` leaves the thread running when the activity is cancelled: the tool
went on for seconds after ``interrupt`` had returned. :func:`run_stoppable` raises
:class:`ToolCancelled` inside the thread (``PyThreadState_SetAsyncExc``) and waits for the
thread to end before the activity acknowledges its cancellation; the workflow waits for that
acknowledgement (``WAIT_CANCELLATION_COMPLETED``), so the handle reports idle only after the
tool stopped.

The exception lands at the thread's next Python bytecode: a step blocked in C (``time.sleep``,
a socket read) finishes that call first, then stops. A tool that catches ``BaseException``
and goes on keeps the interrupt waiting until it returns or its activity times out
(``timeout_ms``).
"""

from __future__ import annotations

import asyncio
import contextlib
import contextvars
import ctypes
import threading
from collections.abc import Callable
from typing import Any


class ToolCancelled(BaseException):
    """Raised inside a sync tool's thread when its call was cancelled (an interrupt, a close
    or the wall limit). A ``BaseException``, so ``except Exception`` in a tool does not
    swallow it."""


def _raise_in(thread: threading.Thread) -> None:
    if thread.ident is not None and thread.is_alive():
        ctypes.pythonapi.PyThreadState_SetAsyncExc(
            ctypes.c_ulong(thread.ident), ctypes.py_object(ToolCancelled)
        )


async def run_stoppable(fn: Callable[..., Any], /, **kwargs: Any) -> Any:
    """``fn(**kwargs)`` in a new daemon thread (with the caller's context variables, so
    ``activity.heartbeat`` works in it); cancellation stops the thread first.

    Returns:
        What ``fn`` returned.

    Raises:
        asyncio.CancelledError: the call was cancelled; raised once the thread has ended.
        BaseException: whatever ``fn`` raised.
    """
    loop = asyncio.get_running_loop()
    done: asyncio.Future[Any] = loop.create_future()
    context = contextvars.copy_context()

    def settle(ok: bool, value: Any) -> None:
        if done.done():
            return
        if ok:
            done.set_result(value)
        else:
            done.set_exception(value)

    def target() -> None:
        ok, value = False, None
        try:
            try:
                value, ok = context.run(fn, **kwargs), True
            except BaseException as err:
                value = err
        except BaseException as err:  # ToolCancelled landing right after fn ended
            ok, value = False, err
        with contextlib.suppress(RuntimeError):  # the loop closed (worker shut down)
            loop.call_soon_threadsafe(settle, ok, value)

    thread = threading.Thread(target=target, name=f"tool-{getattr(fn, '__name__', 'fn')}")
    thread.daemon = True
    thread.start()
    try:
        return await asyncio.shield(done)
    except asyncio.CancelledError:
        _raise_in(thread)
        # Until the thread ended (it may die before it could report, hence is_alive).
        while not done.done() and thread.is_alive():
            try:
                await asyncio.wait([done], timeout=0.05)
            except asyncio.CancelledError:
                continue
        if done.done() and not done.cancelled():
            done.exception()  # retrieved: ToolCancelled is the expected end
        raise
