"""Exactly-once verbs across continue-as-new (issue 23 item 1).

Temporal dedupes update ids per run only: an update the host library sends again with its id
(its same-id retry after an RPC deadline) after the handle continued as new is a new update
to the new run. So every verb update that changes state records its id in the carried state
(``HandleState.updates``), and a repeat returns what the first one did without doing it again:

* ``admit_post``: the item is not appended again (``ok``);
* ``turn``: no second wake; it waits for the result of the turn the first one started;
* ``spawn``: no second child; the child the first one made;
* ``admit_answer``: the outcome the first one had (where it went);
* ``admit_interrupt``: not applied again (it would stop a later turn);
* ``schedule``: not applied again (it would restart the fire time from now);
* ``admit_pause``: not applied again (a pause would undo a later unpause, ``now`` stop a
  later turn).

``wait`` and ``admit_close`` are idempotent by themselves. Only updates that changed state
are recorded (a rejected post may be sent again and go through). The newest
:data:`APPLIED_CAP` ids are kept (a retry comes within seconds; hundreds of updates later an
id is never sent again). Deterministic; no I/O.
"""

from __future__ import annotations

from typing import Final

from temporalio import workflow

with workflow.unsafe.imports_passed_through():
    from toolnexus_temporal.workflows.contract.state import HandleState

APPLIED_CAP: Final = 256
"""Update ids carried across continue-as-new (about 45 bytes each)."""


class UpdateLog:
    """The applied updates of one handle (owns ``HandleState.updates``).

    Args:
        s: the handle's state model.
    """

    def __init__(self, s: HandleState) -> None:
        self.s = s

    def repeat(self) -> str | None:
        """What the first application of the current update returned, when it is a repeat
        of one applied before (in this run or an earlier one); None for a new update (or
        outside an update handler)."""
        info = workflow.current_update_info()
        if info is None:
            return None
        return self.s.updates.applied.get(info.id)

    def record(self, value: str = "") -> None:
        """The current update changed state: keep its id (with ``value``, what a repeat
        returns), dropping the oldest past :data:`APPLIED_CAP`."""
        info = workflow.current_update_info()
        if info is None:
            return
        applied = self.s.updates.applied
        applied[info.id] = value
        while len(applied) > APPLIED_CAP:
            del applied[next(iter(applied))]
