"""Signals to other handles, sent in the background and counted until delivered.

A sync handler cannot await a signal, so the outbox starts one task per signal and counts
it in :attr:`Outbox.signals_in_flight`; the run loop (and ``wait`` under a finite pool) waits
for the count to reach zero, so a workflow never ends, or continues as new, with a signal
still unsent. Deterministic; the tasks run in the order they were started.
"""

from __future__ import annotations

import asyncio
from typing import Protocol

from temporalio import workflow

from toolnexus_temporal.workflows.visibility.visibility import Log

with workflow.unsafe.imports_passed_through():
    from pydantic import BaseModel

    from toolnexus_temporal.workflows.contract.names import (
        SIGNAL_BUDGET_REPLY,
        SIGNAL_POOL_FLOOR,
        SIGNAL_SLOT_RECALL,
        workflow_id_for,
    )
    from toolnexus_temporal.workflows.contract.state import HandleState


BOOKKEEPING = frozenset({SIGNAL_POOL_FLOOR, SIGNAL_BUDGET_REPLY, SIGNAL_SLOT_RECALL})
"""Signals that only keep budgets and slots in step: one that finds its target closed (it
raced the target's close) has nothing left to do, so it is logged, not put in the trace
(a new user's walk read ``pool_floor ... not delivered`` there as a fault; issue 37)."""


class Signals(Protocol):
    """The sending side of :class:`Outbox` that other components need (a unit test passes a
    fake that records the signals)."""

    def signal_later(self, handle_id: str, name: str, arg: BaseModel) -> None:
        """Signal ``name`` with ``arg`` to handle ``handle_id``, without waiting."""


class Outbox:
    """Background signals from this handle to others (children, the parent).

    Args:
        s: the handle's state model (for its id and scope).
        log: where an undelivered signal is traced.
    """

    def __init__(self, s: HandleState, log: Log) -> None:
        self.s = s
        self.log = log
        self.signals_in_flight = 0
        """Signals started and not yet delivered (or failed), reports to the parent included."""

    def signal_later(self, handle_id: str, name: str, arg: BaseModel) -> None:
        """Signal another handle from a sync handler; the workflow does not end before the
        signal is delivered (or the target is gone: traced)."""
        target = workflow.get_external_workflow_handle(workflow_id_for(self.s.scope, handle_id))

        async def send() -> None:
            try:
                await target.signal(name, arg)
            except Exception as err:  # the target's workflow is gone
                if name in BOOKKEEPING:
                    workflow.logger.info(
                        "%s: %s to %s not needed: %s", self.s.id, name, handle_id, err
                    )
                else:
                    self.log.trace(f"{self.s.id}: {name} to {handle_id} not delivered ({err})")
            finally:
                self.signals_in_flight -= 1

        self.signals_in_flight += 1
        asyncio.create_task(send())  # noqa: RUF006 (awaited through the counter)
