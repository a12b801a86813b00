"""The signal forms of the verbs, for when Temporal refuses their update for a limit.

Temporal admits 10 updates in flight per workflow and 2,000 per run; the handle itself caps
the ``wait``/``turn`` updates it holds (``WAITERS_MAX``). When :class:`~.rpc.HandleRpc`
reports :class:`~.errors.UpdateLimitError`, a verb sends its public signal instead (signals
take no update slot) and confirms the outcome with queries (queries take none either, and
a query after a signal sees it: Temporal answers it after the workflow task that carries
the signal):

* ``wait``: poll the ``view`` query until the result sequence moves (backoff 50 ms to 1 s);
* ``turn`` (``wake``, ``run_turn``): the ``wake`` signal carrying a fresh message id, then
  poll the ``message`` query for that message's outcome (backoff as for ``wait``): the result
  of the turn that held the message (never an earlier or a later turn's, whatever the
  double-texting policies of the messages around it), ``AgentBusy`` when the ``reject``
  policy refused it, ``closed`` when the handle closed before a turn answered it, and
  :class:`~.errors.MessageOutcomeLostError` when the handle no longer records it (evicted
  by 256 later named messages or 128 KiB of later answering results);
* ``interrupt``: the ``interrupt`` signal, then poll until the handle is not running;
* ``close``: the ``close`` signal, then poll until the handle is closed;
* ``answer``: the ``answer`` signal to the handle parked on the Request, then poll until it
  left that Request; the trace says whether it was accepted;
* ``post``: the ``post`` signal; the trace says whether it was rejected.

The waits here have no deadline of their own, like the updates they replace.
"""

from __future__ import annotations

import asyncio
import uuid
from typing import Final

from toolnexus_temporal.client.errors import (
    AgentBusy,
    AnswerRejectedError,
    MessageOutcomeLostError,
    VerbRejectedError,
)
from toolnexus_temporal.client.handlers import AgentWorkflowStub
from toolnexus_temporal.client.rpc import HandleRpc
from toolnexus_temporal.workflows.contract.messages import (
    AnswerResult,
    CloseRequest,
    MessageOutcome,
    PostResult,
    WaitResponse,
    WakeRequest,
)
from toolnexus_temporal.workflows.contract.models import (
    Answer,
    HandleStatus,
    HandleView,
    InboxItem,
    TaskResult,
)
from toolnexus_temporal.workflows.contract.names import (
    SIGNAL_ANSWER,
    SIGNAL_CLOSE,
    SIGNAL_INTERRUPT,
    SIGNAL_POST,
    SIGNAL_WAKE,
)
from toolnexus_temporal.workflows.contract.posts import post_error

POLL_FIRST_S: Final = 0.05
"""The first pause between two polls of the view, s (doubling)."""

POLL_MAX_S: Final = 1.0
"""The longest pause between two polls of the view, s."""


def status_of_view(view: HandleView) -> HandleStatus:
    """The small status a verb returns, from a full view."""
    return HandleStatus.model_validate(
        {
            **view.model_dump(include=set(HandleStatus.model_fields)),
            "children_count": len(view.children),
        }
    )


def settled(view: HandleView) -> bool:
    """The view of a handle whose ``wait`` returns at once: idle, closed, or parked on a
    Request (the workflow's ``is_settled``, from what the view shows)."""
    if view.queued:
        return False
    if view.state == "suspended":
        last = view.last_result
        return (
            last is not None
            and last.pending is not None
            and view.pending_req is not None
            and last.pending.id == view.pending_req.id
        )
    return view.state != "running"


def closed_result(hid: str) -> TaskResult:
    """What a waiter gets from a handle closed without a newer result."""
    return TaskResult(status="closed", is_error=True, text=f"{hid} is closed")


def outcome_response(hid: str, out: MessageOutcome) -> WaitResponse | None:
    """The sender's answer from a ``message`` query's outcome; None while it waits.

    Raises:
        AgentBusy: ``busy``.
        VerbRejectedError: ``refused``.
        MessageOutcomeLostError: ``unknown``.
    """
    if out.status == "answered" and out.result is not None:
        return WaitResponse(result=out.result, status=out.handle)
    if out.status == "closed":
        return WaitResponse(result=closed_result(hid), status=out.handle)
    if out.status == "busy":
        raise AgentBusy(hid, "turn", out.error or "busy")
    if out.status == "refused":
        raise VerbRejectedError(hid, "turn", out.error or "refused")
    if out.status in ("unknown", "answered"):  # answered without its result: evicted too
        raise MessageOutcomeLostError(hid, out.id)
    return None


class Fallbacks:
    """The signal form of each verb, confirmed by queries (see the module docstring).

    Args:
        rpc: the runtime's typed calls.
    """

    def __init__(self, rpc: HandleRpc) -> None:
        self._rpc = rpc

    async def _view(self, hid: str) -> HandleView:
        return await self._rpc.query(hid, AgentWorkflowStub.view)

    async def wait(
        self, hid: str, timeout_ms: int | None, after_seq: int | None = None
    ) -> WaitResponse:
        """``wait`` by polling the view: the last result at once when the handle is settled
        (and ``after_seq`` is None), else the first result past ``after_seq`` (or past the
        current one), ``closed`` when it closes first, ``timeout`` after ``timeout_ms``.

        Raises:
            HandleNotFoundError: no such handle.
        """
        loop = asyncio.get_running_loop()
        deadline = None if timeout_ms is None else loop.time() + timeout_ms / 1000
        seen, delay = after_seq, POLL_FIRST_S
        while True:
            view = await self._view(hid)
            status = status_of_view(view)
            if seen is None:
                if settled(view) and (view.last_result is not None or view.state == "closed"):
                    return WaitResponse(
                        result=view.last_result or closed_result(hid), status=status
                    )
                seen = view.result_seq
            if view.result_seq > seen and view.last_result is not None:
                return WaitResponse(result=view.last_result, status=status)
            if view.state == "closed":
                return WaitResponse(result=closed_result(hid), status=status)
            left = None if deadline is None else deadline - loop.time()
            if left is not None and left <= 0:
                text = f"no result within {timeout_ms} ms; the turn keeps running"
                result = TaskResult(status="timeout", is_error=True, text=text)
                return WaitResponse(result=result, status=status)
            await asyncio.sleep(delay if left is None else min(delay, left))
            delay = min(delay * 2, POLL_MAX_S)

    async def wake(self, hid: str, prompt: str | None, policy: str | None = None) -> str:
        """``wake`` as a signal (with its double-texting ``policy``) carrying a fresh message
        id, which the handle records (:meth:`outcome` reads it back).

        Returns:
            The message id (32 hex digits).

        Raises:
            VerbRejectedError: the handle is closed.
            HandleNotFoundError: no such handle.
        """
        message_id = uuid.uuid4().hex
        req = WakeRequest(prompt=prompt, policy=policy, message_id=message_id)
        await self._rpc.signal(hid, SIGNAL_WAKE, req)
        return message_id

    async def admitted(self, hid: str, message_id: str) -> None:
        """Check once that the handle kept the message ``message_id`` (the ``message`` query
        after the signal sees it): the ``wake`` verb's refusal, as its update raises it.

        Raises:
            AgentBusy: the ``reject`` policy refused it.
            VerbRejectedError: the handle refused it (closed or closing).
            HandleNotFoundError: no such handle.
        """
        out = await self._rpc.query_of(hid, AgentWorkflowStub.message, message_id)
        if out.status in ("busy", "refused"):
            outcome_response(hid, out)

    async def turn(self, hid: str, prompt: str | None, policy: str | None = None) -> WaitResponse:
        """The ``turn`` update's outcome through the ``wake`` signal and polling: the result
        of the turn that held this message (:meth:`outcome`).

        Raises: as :meth:`wake` and :meth:`outcome`.
        """
        return await self.outcome(hid, await self.wake(hid, prompt, policy), None)

    async def outcome(self, hid: str, message_id: str, timeout_ms: int | None) -> WaitResponse:
        """Poll the ``message`` query (backoff 50 ms to 1 s) until the message the ``wake``
        signal carried as ``message_id`` is answered.

        Returns:
            The result of the turn that held it (the first result after that turn started,
            past any turn the ``interrupt`` policy stopped and whose messages went on);
            ``closed`` when the handle closed before; ``timeout`` after ``timeout_ms`` (None:
            never; the message keeps waiting).

        Raises:
            AgentBusy: the ``reject`` policy refused it (the handle was busy).
            VerbRejectedError: the handle refused it (closed or closing).
            MessageOutcomeLostError: no record of it (evicted before it was read).
            HandleNotFoundError: no such handle.
        """
        loop = asyncio.get_running_loop()
        deadline = None if timeout_ms is None else loop.time() + timeout_ms / 1000
        delay = POLL_FIRST_S
        while True:
            out = await self._rpc.query_of(hid, AgentWorkflowStub.message, message_id)
            resp = outcome_response(hid, out)
            if resp is not None:
                return resp
            left = None if deadline is None else deadline - loop.time()
            if left is not None and left <= 0:
                text = f"no result within {timeout_ms} ms; the message keeps its place"
                result = TaskResult(status="timeout", is_error=True, text=text)
                return WaitResponse(result=result, status=out.handle)
            await asyncio.sleep(delay if left is None else min(delay, left))
            delay = min(delay * 2, POLL_MAX_S)

    async def interrupt(self, hid: str) -> HandleStatus:
        """``interrupt`` as a signal; returns once the handle is no longer running or parked.

        Raises:
            HandleNotFoundError: no such handle.
        """
        try:
            await self._rpc.signal(hid, SIGNAL_INTERRUPT, None)
        except VerbRejectedError:  # closed: interrupt is a no-op
            return status_of_view(await self._view(hid))
        delay = POLL_FIRST_S
        while True:
            view = await self._view(hid)
            if view.state not in ("running", "suspended"):
                return status_of_view(view)
            await asyncio.sleep(delay)
            delay = min(delay * 2, POLL_MAX_S)

    async def close(self, hid: str, req: CloseRequest) -> None:
        """``close`` as a signal; returns once the handle is closed.

        Raises:
            HandleNotFoundError: no such handle.
        """
        try:
            await self._rpc.signal(hid, SIGNAL_CLOSE, req)
        except VerbRejectedError:  # already closed
            return
        delay = POLL_FIRST_S
        while not await self._rpc.is_closed(hid):
            if (await self._view(hid)).state == "closed":
                return
            await asyncio.sleep(delay)
            delay = min(delay * 2, POLL_MAX_S)

    async def post(self, hid: str, item: InboxItem) -> PostResult:
        """``post`` as a signal; a rejection is read back from the trace. A post the inbox
        would refuse now (``contract.posts.post_error`` over the ``state`` query) is refused without
        sending it, so it never reaches history (issue 36 item 6); one refused by a race
        after the check is read back from the trace as before.

        Raises:
            HandleNotFoundError: no such handle.
        """
        state = await self._rpc.query(hid, AgentWorkflowStub.state)
        refused = post_error(state, item)
        if refused is not None:
            view = await self._view(hid)
            return PostResult(ok=False, error=refused, status=status_of_view(view))
        before = await self._last_seq(hid)
        try:
            await self._rpc.signal(hid, SIGNAL_POST, item)
        except VerbRejectedError:
            view = await self._view(hid)
            return PostResult(ok=False, error="inbox closed", status=status_of_view(view))
        lines = await self._rpc.query(hid, AgentWorkflowStub.trace)
        status = status_of_view(await self._view(hid))
        for line in lines:
            if line.seq > before and ": post REJECTED (" in line.line:
                # "{id}: post REJECTED ({error}; from=... channel=...)"
                error = line.line.split(": post REJECTED (", 1)[1].rpartition("; from=")[0]
                return PostResult(ok=False, error=error or line.line, status=status)
        return PostResult(ok=True, status=status)

    async def answer(self, hid: str, answer: Answer) -> AnswerResult:
        """``answer`` as a signal to the handle at or below ``hid`` parked on the Request
        (the topmost one); returns once it left that Request.

        Raises:
            AnswerRejectedError: no handle there is parked on it, or the workflow refused it.
            HandleNotFoundError: no such handle.
        """
        target = await self._parked_on(hid, answer.id)
        if target is None:
            raise AnswerRejectedError(answer.id, f"{hid} has no pending request {answer.id!r}")
        before = await self._last_seq(target)
        try:
            await self._rpc.signal(target, SIGNAL_ANSWER, answer)
        except VerbRejectedError as err:
            raise AnswerRejectedError(answer.id, f"{target} is closed") from err
        delay = POLL_FIRST_S
        while True:
            view = await self._view(target)
            for line in await self._rpc.query(target, AgentWorkflowStub.trace):
                if line.seq <= before:
                    continue
                if f": answer {answer.id} (" in line.line:
                    return AnswerResult(ok=True, answered=target, status=status_of_view(view))
                if "answer REJECTED" in line.line and answer.id in line.line:
                    raise AnswerRejectedError(answer.id, line.line)
            if view.pending_req is None or view.pending_req.id != answer.id:
                # left the Request without a line for this Answer: cancelled meanwhile
                raise AnswerRejectedError(answer.id, view.last_error or "request cancelled")
            await asyncio.sleep(delay)
            delay = min(delay * 2, POLL_MAX_S)

    async def _parked_on(self, hid: str, request_id: str) -> str | None:
        """The topmost handle from ``hid`` down to the Request's owner whose pending Request
        is ``request_id``."""
        origin = request_id.rpartition("#")[0]
        path = [hid]
        if origin.startswith(f"{hid}/"):
            parts = origin.split("/")
            path += ["/".join(parts[:n]) for n in range(hid.count("/") + 2, len(parts) + 1)]
        for candidate in path:
            view = await self._view(candidate)
            if view.pending_req is not None and view.pending_req.id == request_id:
                return candidate
        return None

    async def _last_seq(self, hid: str) -> int:
        lines = await self._rpc.query(hid, AgentWorkflowStub.trace)
        return lines[-1].seq if lines else 0
