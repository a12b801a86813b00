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

from toolnexus_temporal.workflows.visibility import Log

with workflow.unsafe.imports_passed_through():
    from pydantic import BaseModel

    from toolnexus_temporal.workflows.messages import ChildReport
    from toolnexus_temporal.workflows.names import SIGNAL_CHILD_REPORT, workflow_id_for
    from toolnexus_temporal.workflows.state import HandleState


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
        """Signals started and not yet delivered (or failed): reports and every
        :meth:`signal_later`."""

    def signal_later(self, handle_id: str, name: str, arg: BaseModel) -> None:
        """Signal another handle from a sync handler; the workflow does not end before the
        signal is delivered (or the target is gone: traced)."""
        target = workflow.get_external_workflow_handle(workflow_id_for(self.s.scope, handle_id))

        async def send() -> None:
            try:
                await target.signal(name, arg)
            except Exception as err:  # the target's workflow is gone
                self.log.trace(f"{self.s.id}: {name} to {handle_id} not delivered ({err})")
            finally:
                self.signals_in_flight -= 1

        self.signals_in_flight += 1
        asyncio.create_task(send())  # noqa: RUF006 (awaited through the counter)

    def send_report(self, parent: str, report: ChildReport) -> None:
        """Signal ``child_report`` to the parent in the background; a parent that has ended
        is logged (nobody is left to tell)."""
        self.signals_in_flight += 1
        asyncio.create_task(self._send_report(parent, report))  # noqa: RUF006 (counted)

    async def _send_report(self, parent_id: str, report: ChildReport) -> None:
        s = self.s
        parent = workflow.get_external_workflow_handle(workflow_id_for(s.scope, parent_id))
        try:
            await parent.signal(SIGNAL_CHILD_REPORT, report)
        except Exception as err:  # the parent's workflow has ended: nobody to tell
            workflow.logger.warning("%s: report to %s failed: %s", s.id, parent_id, err)
        finally:
            self.signals_in_flight -= 1
