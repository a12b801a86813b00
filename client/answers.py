"""The owner's word on an Answer routed through its ancestors."""

from __future__ import annotations

import asyncio

from toolnexus_temporal.client.errors import AnswerRejectedError, HandleNotFoundError
from toolnexus_temporal.client.handlers import AgentWorkflowStub
from toolnexus_temporal.client.rpc import HandleRpc
from toolnexus_temporal.workflows.contract.messages import AnswerResult
from toolnexus_temporal.workflows.contract.models import Answer

CONFIRM_S = 10.0
"""How long :func:`confirm_at_owner` waits for the owner of a routed Answer's id to take or
reject it (s)."""


async def confirm_at_owner(rpc: HandleRpc, answer: Answer, result: AnswerResult) -> None:
    """Confirm an Answer routed through ancestors at the handle that owns its id.

    ``admit_answer`` returns once the next handle on the path took or forwarded it, so an id
    that the owner rejects (a wrong number under a live handle) is read back from the owner's
    state (``answer_id`` / ``answer_error``), for up to :data:`CONFIRM_S`; past that, the
    forwarding is all that is known.

    Raises:
        AnswerRejectedError: the owner rejected it, or does not exist.
    """
    owner = answer.id.rpartition("#")[0]
    if not owner or result.answered in (None, owner):
        return
    loop = asyncio.get_running_loop()
    deadline, delay = loop.time() + CONFIRM_S, 0.05
    while loop.time() < deadline:
        try:
            state = await rpc.query(owner, AgentWorkflowStub.state)
        except HandleNotFoundError as err:
            raise AnswerRejectedError(answer.id, f"{owner} does not exist") from err
        if state.approval.answer_id == answer.id:
            if state.approval.answer_error is not None:
                raise AnswerRejectedError(answer.id, state.approval.answer_error)
            return
        await asyncio.sleep(delay)
        delay = min(delay * 2, 0.5)
