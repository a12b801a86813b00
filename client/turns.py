"""The client side of a wake: the ``turn`` updates a runtime has in flight, per handle id.

A wake is one ``turn`` update on the handle's workflow, sent by :meth:`Turns.start` and
answered when the workflow has accepted it; a later ``wait`` awaits that same update
(:meth:`Turns.wait`) rather than sending another. That is a cache of what this runtime sent,
not coordination state: the handle itself takes its ``max_concurrent`` slot from its parent
(a lease it keeps across turns, or a FIFO queue: see ``workflows/leases.py``), so a wake from
``tnx``, ``temporal workflow signal``, the web UI, another process or a restarted host behaves
the same; a ``wait`` from any of them is the ``wait`` update, which waits for a queued turn.

Nothing here is stored on the Handle: a Handle is a read model, and two Handle objects (or a
Handle and an id) for the same handle share the runtime's book.
"""

from __future__ import annotations

import asyncio
from dataclasses import dataclass

from temporalio.client import WorkflowUpdateHandle

from toolnexus_temporal.client.errors import (
    HandleNotFoundError,
    InvalidPolicyError,
    UpdateLimitError,
    VerbRejectedError,
)
from toolnexus_temporal.client.fallback import Fallbacks
from toolnexus_temporal.client.handle import HandleRef, handle_id
from toolnexus_temporal.client.handlers import AgentWorkflowStub
from toolnexus_temporal.client.rpc import FALLBACK_AFTER_S, HandleRpc
from toolnexus_temporal.workflows.contract.messages import TurnRequest, WaitRequest, WaitResponse
from toolnexus_temporal.workflows.contract.policy import policy_error


def turn_request(prompt: str | None, policy: str | None, via: str) -> TurnRequest:
    """The ``turn`` update's input: ``prompt``, the double-texting ``policy`` (None: the
    agent's) and who sends it (``via``: ``run_turn``, ``wake``, ``tnx``).

    Raises:
        InvalidPolicyError: ``policy`` is not ``enqueue``, ``interrupt``, ``reject`` or
            ``debounce:MS`` (one line; nothing is sent).
    """
    if policy is not None:
        error = policy_error(policy)
        if error is not None:
            raise InvalidPolicyError(policy, error)
    return TurnRequest(prompt=prompt, policy=policy, via=via)


@dataclass
class _Turn:
    """A ``turn`` update this runtime started and no wait has returned yet."""

    update: WorkflowUpdateHandle[WaitResponse] | None
    result: asyncio.Future[WaitResponse] | None = None
    message_id: str | None = None
    """Sent by the ``wake`` signal instead (the update refused for a limit): its id."""
    """The one await of the update's result, shared by concurrent waits."""


class Turns:
    """The ``turn`` updates of one runtime that no wait has returned yet.

    Args:
        rpc: the runtime's typed calls.
    """

    def __init__(self, rpc: HandleRpc, fallbacks: Fallbacks) -> None:
        self._rpc = rpc
        self._fallbacks = fallbacks
        self._in_flight: dict[str, _Turn] = {}
        """Per handle id: the ``turn`` update of its last wake, until a wait returns."""

    @staticmethod
    def check_wakeable(h: HandleRef) -> str:
        """The handle id of ``h``.

        Raises:
            VerbRejectedError: ``h`` is the root, which never runs an LLM.
        """
        hid = handle_id(h)
        if "/" not in hid:
            raise VerbRejectedError(
                hid, "wake", "the root handle never runs an LLM: wake a spawned handle"
            )
        return hid

    async def start(self, hid: str, req: TurnRequest) -> None:
        """Send the ``turn`` update and return once the workflow accepted it; a later
        :meth:`wait` awaits it. Refused for a limit: the ``wake`` signal instead.

        Raises:
            VerbRejectedError: the handle refused it (closed, ...).
            HandleNotFoundError: no such handle.
        """
        self._in_flight.pop(hid, None)
        try:
            update = await self._rpc.start_update(hid, AgentWorkflowStub.turn, req)
        except UpdateLimitError:  # the wake signal, and a later wait polls its outcome
            message_id = await self._fallbacks.wake(hid, req.prompt, req.policy)
            await self._fallbacks.admitted(hid, message_id)
            self._in_flight[hid] = _Turn(None, message_id=message_id)
            return
        self._in_flight[hid] = _Turn(update)

    async def run(self, hid: str, req: TurnRequest) -> WaitResponse:
        """Run one ``turn`` update to its result (a wake and its wait in one message);
        refused for a limit, the ``wake`` signal and a wait by polling.

        Raises:
            VerbRejectedError: the handle refused it (closed, ...).
            HandleNotFoundError: no such handle.
        """
        self._in_flight.pop(hid, None)  # a newer turn: a later wait is for it, not an older one
        try:
            resp = await self._rpc.update(
                hid, AgentWorkflowStub.turn, req, limit_wait_s=FALLBACK_AFTER_S
            )
        except UpdateLimitError:
            return await self._fallbacks.turn(hid, req.prompt, req.policy)
        return await self.again(hid, resp, None)

    async def again(
        self,
        hid: str,
        resp: WaitResponse,
        timeout_ms: int | None,
        since: float | None = None,
    ) -> WaitResponse:
        """Follow a response that says "ask again" (``again_after_seq``: the paused handle's
        run continued as new while this update waited) with the ``wait`` update on the next
        run, until a real response comes or ``timeout_ms`` passes, counted from ``since``
        (the event loop's time the caller's first update was sent; None: from now). A wait
        held for most of its timeout in the run that yielded gets only the rest (it was given
        the whole timeout again: 12.2 s for ``timeout_ms=8000``).

        Returns:
            The first response without ``again_after_seq`` (``timeout`` once ``timeout_ms``
            passed).

        Raises:
            VerbRejectedError: the update failed, or the handle closed.
            HandleNotFoundError: no such handle.
        """
        loop = asyncio.get_running_loop()
        start = loop.time() if since is None else since
        deadline = None if timeout_ms is None else start + timeout_ms / 1000
        while resp.again_after_seq is not None:
            await asyncio.sleep(AGAIN_AFTER_S)  # the next run starts meanwhile
            left = None if deadline is None else max(int((deadline - loop.time()) * 1000), 0)
            req = WaitRequest(timeout_ms=left, after_seq=resp.again_after_seq)
            try:
                resp = await self._rpc.update(
                    hid, AgentWorkflowStub.wait, req, limit_wait_s=FALLBACK_AFTER_S
                )
            except UpdateLimitError:
                return await self._fallbacks.wait(hid, left, req.after_seq)
        return resp

    async def wait(self, hid: str, timeout_ms: int | None) -> WaitResponse | None:
        """Await the handle's next result: the ``turn`` update :meth:`start` sent (awaited
        again after a timeout: the same update, never a second one), else the ``wait``
        update.

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
            req = WaitRequest(timeout_ms=timeout_ms)
            since = asyncio.get_running_loop().time()
            try:
                resp = await self._rpc.update(
                    hid, AgentWorkflowStub.wait, req, limit_wait_s=FALLBACK_AFTER_S
                )
            except UpdateLimitError:  # too many waiters, or the run's update limit
                return await self._fallbacks.wait(hid, timeout_ms)
            return await self.again(hid, resp, timeout_ms, since)
        if turn.update is None and turn.message_id is not None:  # sent by signal
            resp = await self._fallbacks.outcome(hid, turn.message_id, timeout_ms)
            if resp.result.status == "timeout":
                return None
            if self._in_flight.get(hid) is turn:
                del self._in_flight[hid]
            return resp
        if turn.result is None:
            assert turn.update is not None
            turn.result = asyncio.ensure_future(self._turn_result(hid, turn.update))
        pending = turn.result
        timeout = None if timeout_ms is None else timeout_ms / 1000
        try:
            return await asyncio.wait_for(asyncio.shield(pending), timeout)
        except TimeoutError:
            return None
        finally:
            if pending.done() and self._in_flight.get(hid) is turn:
                del self._in_flight[hid]

    async def _turn_result(
        self, hid: str, update: WorkflowUpdateHandle[WaitResponse]
    ) -> WaitResponse:
        """The result of a ``turn`` update :meth:`start` sent, asked again on the next run
        when it says so (:meth:`again`; the caller's ``wait_for`` bounds the time)."""
        resp = await self._rpc.result(hid, AgentWorkflowStub.turn, update)
        return await self.again(hid, resp, None)

    async def fresh(self, hid: str, resp: WaitResponse, timeout_ms: int | None) -> WaitResponse:
        """A ``pending`` result whose Request belongs to a descendant (``<owner id>#n``) that
        has already taken its Answer is stale: the Answer was signalled to the owner (as the
        web UI's approval queue lists it) and its report is still on its way up. Then this
        waits for the handle's next result instead (issue 12: a wait after an accepted Answer
        returns the continued turn's next result). One ``view`` query of the owner per
        descendant's ``pending`` result.

        Returns:
            ``resp``, or the next response (``timeout`` after ``timeout_ms``).

        Raises:
            HandleNotFoundError: no such handle.
        """
        for _ in range(STALE_CHECKS):
            req = resp.result.pending
            if resp.result.status != "pending" or req is None:
                return resp
            owner = req.id.rsplit("#", 1)[0]
            if owner == hid or not owner.startswith(hid + "/"):
                return resp
            try:
                view = await self._rpc.query(owner, AgentWorkflowStub.view)
            except (HandleNotFoundError, VerbRejectedError):
                return resp  # the owner is gone: nothing fresher to wait for
            if view.state == "suspended" and view.pending_req is not None:
                if view.pending_req.id == req.id:
                    return resp  # still waiting for its Answer: the result is current
            req_next = WaitRequest(timeout_ms=timeout_ms, after_seq=resp.status.result_seq)
            since = asyncio.get_running_loop().time()
            try:
                resp = await self._rpc.update(
                    hid, AgentWorkflowStub.wait, req_next, limit_wait_s=FALLBACK_AFTER_S
                )
            except UpdateLimitError:
                resp = await self._fallbacks.wait(hid, timeout_ms, resp.status.result_seq)
            resp = await self.again(hid, resp, timeout_ms, since)
        return resp


AGAIN_AFTER_S = 0.2
"""Seconds :meth:`Turns.again` lets pass before it asks the next run (the run that said
"ask again" is ending; asked at once, it would say so again)."""

STALE_CHECKS = 8
"""How many stale ``pending`` results :meth:`Turns.fresh` skips before it returns one."""
