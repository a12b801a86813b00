"""The client side of a wake: the slot relay with the parent, and the ``turn`` updates a runtime
has in flight, per handle id.

A wake is one ``turn`` update on the handle's workflow, sent by :meth:`Turns.start` and
answered when the workflow has accepted it; a later ``wait`` awaits that same update
(:meth:`Turns.wait`). Under a parent that limits ``max_concurrent``, :meth:`Turns.admit` first
sends the parent's ``wake_child`` update (with ``relay``): the parent takes a slot and returns
a grant for the ``turn`` update to carry, or queues the wake FIFO and starts it itself when a
sibling hands its slot over (the handle is then ``queued``, and a wait waits for a result
beyond ``after_seq``). What this runtime has seen settle (:meth:`Turns.note`) rides along with
the next ``wake_child`` to a sibling, so the parent can free a slot whose report is still in
flight. The parent and child sides of this protocol live in the workflow.

Nothing here is stored on the Handle: a Handle is a read model, and two Handle objects (or a
Handle and an id) for the same handle share the runtime's book.
"""

from __future__ import annotations

import asyncio
import itertools
from dataclasses import dataclass
from typing import Final

from temporalio.client import WorkflowUpdateHandle

from toolnexus_temporal.client.errors import HandleNotFoundError, VerbRejectedError
from toolnexus_temporal.client.handle import Handle, HandleRef, handle_id
from toolnexus_temporal.client.rpc import HandleRpc
from toolnexus_temporal.workflows.agent import AgentWorkflow
from toolnexus_temporal.workflows.messages import (
    TurnRequest,
    WaitRequest,
    WaitResponse,
    WakeChildRequest,
    WakeChildResult,
)

SETTLED_PER_WAKE: Final = 256
"""Most settled siblings one ``wake_child`` carries (``WakeChildRequest.settled``'s bound)."""


@dataclass
class _Turn:
    """A ``turn`` update this runtime started and no wait has returned yet."""

    update: WorkflowUpdateHandle[WaitResponse]
    result: asyncio.Future[WaitResponse] | None = None
    """The one await of the update's result, shared by concurrent waits."""


class Turns:
    """The wakes of one runtime: slots taken from parents, turns in flight, results seen.

    Args:
        rpc: the runtime's typed calls.
    """

    def __init__(self, rpc: HandleRpc) -> None:
        self._rpc = rpc
        self._in_flight: dict[str, _Turn] = {}
        """Per handle id: the ``turn`` update of its last wake, until a wait returns."""
        self._queued_after: dict[str, int] = {}
        """Per handle id: ``after_seq`` of a wake the parent queued (the turn it starts later
        settles a result beyond it)."""
        self._settled: dict[str, int] = {}
        """Per handle id: the result count seen settle, not yet told to the parent."""

    async def admit(self, h: HandleRef, prompt: str | None) -> tuple[Handle, int | None]:
        """Take a slot from a parent that limits ``max_concurrent`` (``wake_child`` with relay).

        A queued wake sets the handle's ``queued`` (the parent starts it later). A no-op (the
        parent's books say the handle is running or suspended) returns no grant: the ``turn``
        update still goes to the handle, which knows its own state best (running or
        suspended: it waits; idle because the parent had not yet heard its last turn settle:
        it asks the parent for a slot itself).

        Args:
            h: the handle to wake (its Handle object is refreshed in place).
            prompt: the wake prompt.

        Returns:
            The handle (a new Handle when given an id) and the grant for the ``turn`` update
            (None: no slot to deliver).

        Raises:
            VerbRejectedError: the root, or the parent refused (closed handle, ...).
            HandleNotFoundError: no such handle.
        """
        hid = handle_id(h)
        parent_id, sep, _ = hid.rpartition("/")
        if not sep:
            raise VerbRejectedError(
                hid, "wake", "the root handle never runs an LLM: wake a spawned handle"
            )
        handle = h if isinstance(h, Handle) else await self._inspect(hid)
        if handle.slot_parent is False:
            return handle, None
        # What the caller has seen settle tells the parent about a report still in flight.
        siblings = (
            (sibling, seq)
            for sibling, seq in self._settled.items()
            if sibling != hid and sibling.rpartition("/")[0] == parent_id
        )
        settled = dict(itertools.islice(siblings, SETTLED_PER_WAKE))
        request = WakeChildRequest(
            child=hid,
            prompt=prompt,
            seen_result_seq=max(handle.result_seq, self._settled.get(hid, 0)),
            relay=True,
            settled=settled,
        )
        try:
            res: WakeChildResult = await self._rpc.update(
                parent_id, AgentWorkflow.wake_child, request
            )
        except HandleNotFoundError:
            raise HandleNotFoundError(hid) from None
        except VerbRejectedError as err:
            if "is not a child" in err.reason:
                raise HandleNotFoundError(hid) from None
            raise VerbRejectedError(hid, "wake", err.reason) from None
        for sibling, seq in settled.items():
            if self._settled.get(sibling) == seq:
                del self._settled[sibling]
        queued = res.outcome == "queued"
        handle.apply_wake(res.state, queued=queued)
        if res.grant is None and queued:
            self._queued_after[hid] = res.after_seq
        return handle, res.grant

    async def start(self, hid: str, req: TurnRequest) -> None:
        """Send the ``turn`` update and return once the workflow accepted it; a later
        :meth:`wait` awaits it.

        Raises:
            VerbRejectedError: the handle refused it (closed, ...).
            HandleNotFoundError: no such handle.
        """
        update = await self._rpc.start_update(hid, AgentWorkflow.turn, req)
        self._in_flight[hid] = _Turn(update)

    async def run(self, hid: str, req: TurnRequest) -> WaitResponse:
        """Run one ``turn`` update to its result (a wake and its wait in one message).

        Raises:
            VerbRejectedError: the handle refused it (closed, ...).
            HandleNotFoundError: no such handle.
        """
        self._in_flight.pop(hid, None)  # a newer turn: a later wait is for it, not an older one
        resp = await self._rpc.update(hid, AgentWorkflow.turn, req)
        self.note(resp)
        return resp

    async def wait(self, hid: str, timeout_ms: int | None) -> WaitResponse | None:
        """Await the handle's next result: the ``turn`` update :meth:`start` sent (awaited
        again after a timeout: the same update, never a second one), else the ``wait`` update
        (after a queued wake: for a result beyond its ``after_seq``).

        Args:
            hid: the handle id.
            timeout_ms: give up after this many ms (None: never).

        Returns:
            The response (from the ``wait`` update, status ``timeout`` when ``timeout_ms``
            passed first), or None when ``timeout_ms`` passed before the ``turn`` update's
            result (the turn keeps running).

        Raises:
            VerbRejectedError: the update failed (``verb`` tells which), or the handle closed.
            HandleNotFoundError: no such handle.
        """
        turn = self._in_flight.get(hid)
        if turn is None:
            req = WaitRequest(timeout_ms=timeout_ms, after_seq=self._queued_after.get(hid))
            resp = await self._rpc.update(hid, AgentWorkflow.wait, req)
            self.note(resp)
            return resp
        if turn.result is None:
            turn.result = asyncio.ensure_future(
                self._rpc.result(hid, AgentWorkflow.turn, turn.update)
            )
        pending = turn.result
        timeout = None if timeout_ms is None else timeout_ms / 1000
        try:
            resp = await asyncio.wait_for(asyncio.shield(pending), timeout)
        except TimeoutError:
            return None
        finally:
            if pending.done() and self._in_flight.get(hid) is turn:
                del self._in_flight[hid]
        self.note(resp)
        return resp

    def note(self, resp: WaitResponse) -> None:
        """Book a settled result: for the parent's next ``wake_child`` (``settled``), and as
        the end of a queued wake."""
        if resp.result.status == "timeout":
            return
        self._settled[resp.status.id] = resp.status.result_seq
        self._queued_after.pop(resp.status.id, None)

    async def _inspect(self, hid: str) -> Handle:
        return Handle.from_view(await self._rpc.query(hid, AgentWorkflow.view))
