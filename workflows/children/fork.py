"""A fork's conversation (``rt.fork``, ``tnx fork``): the parent that spawns it copies the
original's first turns under a new store key before the fork's workflow starts.

Deterministic; the copy is the ``tnx.fork_transcript`` activity (``activities/fork.py``). A
refused fork (a turn past the original's last, a copy that failed) is a SpawnError text, and
nothing is spawned: the parent's roster and its ids are as they were.

The fork's store key is ``{namespace}/{original's workflow id}@fork-{uuid}``: a copy of that
conversation, unique (a workflow uuid, the same on replay) whoever spawns it.
"""

from __future__ import annotations

from datetime import timedelta
from typing import NamedTuple

from temporalio import workflow
from temporalio.common import RetryPolicy
from temporalio.exceptions import ActivityError

with workflow.unsafe.imports_passed_through():
    from toolnexus_temporal.workflows.contract.limits import SUMMARY_BYTES, fit
    from toolnexus_temporal.workflows.contract.messages import (
        ForkCopyInput,
        ForkCopyResult,
        ForkSpec,
    )
    from toolnexus_temporal.workflows.contract.models import AgentDef
    from toolnexus_temporal.workflows.contract.names import (
        FORK_TRANSCRIPT_ACTIVITY,
        workflow_id_for,
    )
    from toolnexus_temporal.workflows.contract.state import HandleState

COPY_TIMEOUT = timedelta(seconds=60)
"""One attempt of the copy (a read and a write of one transcript)."""


class Forked(NamedTuple):
    """A copied conversation: the fork's ``store_key`` and its ``length`` in messages."""

    store_key: str
    length: int


async def copy_conversation(s: HandleState, fork: ForkSpec) -> Forked | str:
    """Copy the first ``fork.turns`` turns of ``fork.source``'s conversation for a new child
    of ``s``.

    Returns:
        The copy, or the refusal text (``fork refused: ...``); nothing is copied then.
    """
    info = workflow.info()
    key = f"{info.namespace}/{workflow_id_for(s.scope, fork.source)}@fork-{workflow.uuid4()}"
    try:
        result: ForkCopyResult = await workflow.execute_activity(
            FORK_TRANSCRIPT_ACTIVITY,
            ForkCopyInput(fork=fork, target_key=key),
            result_type=ForkCopyResult,
            start_to_close_timeout=COPY_TIMEOUT,
            retry_policy=RetryPolicy(maximum_attempts=5, non_retryable_error_types=["StoreError"]),
            summary=fit(f"fork {fork.source} at turn {fork.turns}", SUMMARY_BYTES),
        )
    except ActivityError as err:
        cause = err.cause or err
        return f"fork refused: the copy of {fork.source}'s conversation failed ({cause})"
    if result.error is not None:
        return f"fork refused: {result.error}"
    return Forked(store_key=key, length=result.length)


def forked_defn(defn: AgentDef, fork: ForkSpec | None) -> AgentDef:
    """The fork's definition: ``defn`` with the fork's ``model`` when it names one."""
    if fork is None or fork.model is None:
        return defn
    return defn.model_copy(update={"model": fork.model})
