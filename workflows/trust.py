"""Trust between handles: runtime-internal signals are checked against what the
receiver knows, so anyone who can signal a workflow cannot forge them (issue 12 item 9).

At spawn a parent gives each child a **nonce** (``workflow.uuid4()``, deterministic), kept
in the child's state (``HandleState.nonce``) and in the parent's ``children_info``. Every
message between the two carries it:

* child → parent: ``child_report``, ``slot_request``, ``slot_release``, ``budget_ask``
  must name a current child of the receiver and carry that child's nonce;
* parent → child: ``pool_floor``, ``budget_reply``, ``slot_recall`` and a ``wake`` that
  carries a grant must carry the receiver's own nonce (a ``budget_reply`` also answers an
  ask the child sent, a grant carries a lease id). The root has no parent: these are always
  rejected there.

Anything else is rejected loudly (a ``REJECTED`` trace line and ``last_error``) and changes
nothing. A message from a closed child dropped from the books (``roster.compact``) is
ignored with a trace line. The nonces never appear in the ``view`` or ``state`` queries, only in
history: anyone who can read a workflow's history can still forge its messages.

Plain functions over ``HandleState``; :class:`Trust` applies them with a log.
Deterministic; no I/O.
"""

from __future__ import annotations

from temporalio import workflow

from toolnexus_temporal.workflows.rules.roster import was_child
from toolnexus_temporal.workflows.visibility.visibility import Log

with workflow.unsafe.imports_passed_through():
    from toolnexus_temporal.workflows.contract.messages import WakeRequest
    from toolnexus_temporal.workflows.contract.state import HandleState

CLOSED_CHILD = "closed child"
"""The error of :func:`child_message_error` for a closed child no longer in the books."""


def child_message_error(s: HandleState, child: str, nonce: str | None) -> str | None:
    """Why a message that says it comes from child ``child`` with ``nonce`` is not trusted
    (it must be a current child with its own nonce), or None. :data:`CLOSED_CHILD` for a
    closed child dropped from ``children_info``."""
    info = s.roster.children_info.get(child)
    if info is None:
        return CLOSED_CHILD if was_child(s, child) else f"{child} is not a child of {s.id}"
    if info.nonce is None or nonce != info.nonce:
        return f"not sent by {child} (wrong nonce)"
    return None


def parent_message_error(s: HandleState, nonce: str | None) -> str | None:
    """Why a message that says it comes from this handle's parent is not trusted (the root
    has none; else it carries the nonce the parent gave at spawn), or None."""
    if s.parent is None:
        return "the root has no parent"
    if s.nonce is None or nonce != s.nonce:
        return f"not sent by {s.parent} (wrong nonce)"
    return None


def grant_error(s: HandleState, req: WakeRequest) -> str | None:
    """Why a ``wake`` that carries a slot grant (``granted``) is not trusted, or None: it
    must come from the parent and name a lease."""
    error = parent_message_error(s, req.nonce)
    if error is None and req.lease is None:
        error = "a grant without a lease"
    return error


def masked(s: HandleState) -> HandleState:
    """A copy of ``s`` without its nonces (what the ``state`` query shows)."""
    if s.nonce is None and all(i.nonce is None for i in s.roster.children_info.values()):
        return s
    infos = {c: i.model_copy(update={"nonce": None}) for c, i in s.roster.children_info.items()}
    roster = s.roster.model_copy(update={"children_info": infos})
    return s.model_copy(update={"nonce": None, "roster": roster})


class Trust:
    """Checks internal signals for one handle and rejects forged ones loudly.

    Args:
        s: the handle's state model.
        log: trace lines and rejections.
    """

    def __init__(self, s: HandleState, log: Log) -> None:
        self.s = s
        self.log = log

    def from_child(self, verb: str, child: str, nonce: str | None) -> bool:
        """A message ``verb`` that says it comes from child ``child`` may be applied;
        else it is rejected loudly (a closed child's: only traced)."""
        error = child_message_error(self.s, child, nonce)
        if error == CLOSED_CHILD:
            self.log.trace(f"{self.s.id}: {verb} from closed child {child} ignored")
            return False
        return self._ok(verb, error)

    def from_parent(self, verb: str, nonce: str | None) -> bool:
        """A message ``verb`` that says it comes from the parent may be applied; else it is
        rejected loudly."""
        return self._ok(verb, parent_message_error(self.s, nonce))

    def grant(self, req: WakeRequest) -> bool:
        """A ``wake`` with a slot grant may be applied; else it is rejected loudly."""
        return self._ok("wake", grant_error(self.s, req))

    def _ok(self, verb: str, error: str | None) -> bool:
        if error is None:
            return True
        self.log.reject(verb, error)
        return False
