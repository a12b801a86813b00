"""The client-side ``Handle``: a read model of one agent, refreshed by every verb.

A Handle holds only what the workflow reported; what the runtime has in flight for it (the
``turn`` update of a wake) is kept by the runtime, per handle id
(:mod:`toolnexus_temporal.client.turns`).
"""

from __future__ import annotations

from decimal import Decimal

from pydantic import BaseModel, ConfigDict, Field

from toolnexus_temporal.workflows.contract.models import (
    AgentDef,
    Cost,
    HandleStateName,
    HandleStatus,
    HandleView,
    Request,
    TaskResult,
    TickSpec,
    Usd,
)


class Handle(BaseModel):
    """One spawned agent as its holder sees it (CONTRACT §2).

    Never constructed by hand: ``AgentRuntime.spawn`` returns it, and each verb that takes it
    refreshes its fields in place from the workflow (:meth:`apply`, :meth:`apply_status`).
    ``parent`` and ``children`` are handle ids.

    Attributes:
        id: deterministic, parent-scoped (``root/worker.1``).
        name: the agent name (``root`` for the root).
        parent: the parent's id; None for the root.
        depth: 0 for the root.
        state: ``idle``, ``running``, ``suspended`` or ``closed``.
        inbox_count: items waiting for the next wake.
        children: child ids in spawn order.
        usage_total: tokens of this handle and its descendants.
        turns_total: LLM round trips over the lifetime.
        tool_calls_total: tool calls over the lifetime.
        pool_tokens: remaining token pool (None = unlimited).
        pool_tool_calls: remaining tool-call pool (None = unlimited).
        wall_deadline_ms: deadline, ms since the epoch (None = none).
        pending_req: the Request while suspended.
        last_result: the most recent settled result (readable after close).
        conv_id: the conversation store key (== id).
        transcript_len: committed transcript messages.
        result_seq: results settled so far (a wait waits for the next one).
        last_error: the last rejected input or failure seen by the workflow.
        defn: the agent definition (None for the root).
        queued: a wake waits in the parent's FIFO queue for a ``max_concurrent`` slot
            (CONTRACT §6), as the handle's workflow says.
        slot_parent: the parent limits ``max_concurrent``: a wake of this handle needs one of
            the parent's slots (a lease it may already hold).
        pending_since_ms: when ``pending_req`` was made, ms since the epoch (workflow time;
            None without one, or for a Request made before the field existed).
        escalated_to: where ``pending_req`` escalated (``queue:NAME`` or
            ``interpreter:NAME``); None: it has not (or nothing is pending).
        paused: the handle is paused: it takes posts and ticks, starts no turn
            (``AgentRuntime.pause``).
        tick: the tick schedule in force (``AgentRuntime.schedule``), or None.
        next_tick_ms: when the next tick fires, ms since the epoch (workflow time), or None.
        cost: money spent by this handle and its descendants (:class:`Cost`: exact USD of
            the priced calls, and how many were unpriced); :attr:`cost_usd` reads it.
        pool_cost_usd: remaining money pool, USD (None = unlimited).
        messages_waiting: messages (wakes from hosts) waiting for a turn to hold them: an
            ``idle`` handle with some has a debounce window open, is paused, or waits for a
            slot (``docs/guide/live-agent.md``).
        window_ends_ms: when the open debounce window ends (one turn then holds the waiting
            messages), ms since the epoch (workflow time); None: no window open.
    """

    model_config = ConfigDict(validate_assignment=True)

    id: str
    name: str
    parent: str | None = None
    depth: int = 0
    state: HandleStateName = "idle"
    inbox_count: int = 0
    children: list[str] = Field(default_factory=list)
    usage_total: int = 0
    turns_total: int = 0
    tool_calls_total: int = 0
    pool_tokens: int | None = None
    pool_tool_calls: int | None = None
    wall_deadline_ms: int | None = None
    pending_req: Request | None = None
    last_result: TaskResult | None = None
    conv_id: str = ""
    transcript_len: int = 0
    result_seq: int = 0
    last_error: str | None = None
    defn: AgentDef | None = None
    queued: bool = False
    slot_parent: bool | None = None
    pending_since_ms: int | None = None
    escalated_to: str | None = None
    paused: bool = False
    tick: TickSpec | None = None
    next_tick_ms: int | None = None
    cost: Cost = Field(default_factory=Cost)
    pool_cost_usd: Usd | None = None
    messages_waiting: int = 0
    window_ends_ms: int | None = None

    @property
    def cost_usd(self) -> Decimal | None:
        """Money spent by this handle and its descendants, USD, exact; None when some call
        was of a model the worker has no price for (cost unknown, never 0)."""
        return self.cost.usd

    @classmethod
    def from_view(cls, view: HandleView) -> Handle:
        """Build from a workflow's HandleView."""
        return cls.model_validate(view.model_dump(exclude={"store_key"}))

    def apply(self, view: HandleView) -> None:
        """Refresh every field from a newer view of the same handle.

        Raises:
            ValueError: the view belongs to another handle.
        """
        if view.id != self.id:
            raise ValueError(f"view of {view.id!r} applied to handle {self.id!r}")
        fresh = Handle.from_view(view)
        for key in type(self).model_fields:
            setattr(self, key, getattr(fresh, key))

    def apply_status(self, status: HandleStatus, result: TaskResult | None = None) -> None:
        """Refresh the fields a verb's status carries (and ``last_result`` from a wait).

        Raises:
            ValueError: the status belongs to another handle.
        """
        if status.id != self.id:
            raise ValueError(f"status of {status.id!r} applied to handle {self.id!r}")
        for key in HandleStatus.model_fields:
            if key in type(self).model_fields:
                setattr(self, key, getattr(status, key))
        if self.pending_req is None:
            self.pending_since_ms = None
        if result is not None and result.status != "timeout":
            self.last_result = result


HandleRef = Handle | str
"""A Handle, or a handle id such as ``"root/worker.1"``."""


def handle_id(h: HandleRef) -> str:
    """The handle id of a Handle or an id."""
    return h.id if isinstance(h, Handle) else h
