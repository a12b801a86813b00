"""The ``tnx.fork_transcript`` activity: a fork's conversation (``rt.fork``, ``tnx fork``).

The parent that spawns a fork runs it before the child's workflow starts: it reads the
original's committed transcript (its first ``ForkSpec.upto`` messages: a prefix that no later
turn of the original rewrites, since a turn only ever rolls back to its own start), keeps its
first ``ForkSpec.turns`` turns (``context.fork_prefix``) and writes them under the fork's new
store key, in one write from message 0. A retried attempt writes the same messages again:
the copy is idempotent. A turn past the ones offered writes nothing and returns the refusal.
"""

from __future__ import annotations

from temporalio import activity

from toolnexus_temporal.activities.store import ConversationStore, StoreError
from toolnexus_temporal.workflows.contract.context import fork_prefix
from toolnexus_temporal.workflows.contract.messages import ForkCopyInput, ForkCopyResult
from toolnexus_temporal.workflows.contract.names import FORK_TRANSCRIPT_ACTIVITY


class ForkActivities:
    """Registers ``tnx.fork_transcript`` on a worker.

    Args:
        store: the worker's conversation store (the one its LLM activity uses).
    """

    def __init__(self, store: ConversationStore) -> None:
        self.store = store

    @activity.defn(name=FORK_TRANSCRIPT_ACTIVITY)
    async def fork_transcript(self, inp: ForkCopyInput) -> ForkCopyResult:
        """Copy the first ``inp.fork.turns`` turns of the original's conversation to
        ``inp.target_key`` (module docstring).

        Returns:
            The fork's length in messages and the turns offered, or ``error`` (a turn past
            the last one offered; nothing written).

        Raises:
            StoreError: the store holds fewer than ``inp.fork.upto`` messages of the
                original (the wrong store, or lost data); retried by Temporal like any
                activity error, and the spawn fails with it.
        """
        fork = inp.fork
        messages = await self.store.read(fork.store_key, fork.upto)
        if len(messages) < fork.upto:
            raise StoreError(
                f"conversation {fork.store_key!r}: {fork.source} committed {fork.upto} "
                f"message(s) but the store holds {len(messages)}"
            )
        kept, available = fork_prefix(messages, fork.turns)
        if kept is None:
            last = "no complete turn" if available == 0 else f"its last is turn {available}"
            return ForkCopyResult(
                available=available,
                error=f"turn {fork.turns} is past the turns of {fork.source} ({last})",
            )
        length = await self.store.write(inp.target_key, 0, kept, fence=0)
        return ForkCopyResult(length=length, available=available)
