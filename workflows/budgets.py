"""Budget pools (CONTRACT §3 spawn, §6): the ledger of tokens, tool calls and money (USD, exact
decimals: ``Budget.max_cost_usd``) a subtree spent,
the live remainder under an ancestor's pool, carving a child's pools at spawn, and the
budget check before every LLM call and tool batch.

A handle's pools are ``min(own limit, the parent's live remainder)``, carved at spawn. Usage
rolls up through ``child_report``; in between, a parent pushes each child a
:class:`~toolnexus_temporal.workflows.contract.state.PoolFloor`: the remainder of the tightest pool
above it, with the child's spending the parent knew of (the basis). The child subtracts what
it spent since, so siblings draining one pool are seen live. Before spending under a finite
pool a child asks (``budget_ask`` → ``budget_reply``), so siblings overshoot a shared pool
by at most the calls already in flight.

The rules are plain functions over ``HandleState`` with ``now_ms`` passed in;
:class:`BudgetLedger` applies them from workflow code. ``None`` always means unlimited.
"""

from __future__ import annotations

from collections.abc import Iterable
from decimal import Decimal
from typing import NamedTuple

from temporalio import workflow

from toolnexus_temporal.workflows.outbox import Signals
from toolnexus_temporal.workflows.rules.roster import update_child

with workflow.unsafe.imports_passed_through():
    from toolnexus_temporal.workflows.contract.clock import now_ms
    from toolnexus_temporal.workflows.contract.messages import BudgetAsk, BudgetReply
    from toolnexus_temporal.workflows.contract.models import Budget, Cost, LimitName
    from toolnexus_temporal.workflows.contract.names import (
        SIGNAL_BUDGET_ASK,
        SIGNAL_BUDGET_REPLY,
        SIGNAL_POOL_FLOOR,
    )
    from toolnexus_temporal.workflows.contract.state import HandleState, PoolFloor


def min_opt(a: int | None, b: int | None) -> int | None:
    """``min()`` where None means unlimited."""
    if a is None:
        return b
    if b is None:
        return a
    return min(a, b)


def min_usd(a: Decimal | None, b: Decimal | None) -> Decimal | None:
    """``min()`` of two money amounts where None means unlimited."""
    if a is None:
        return b
    if b is None:
        return a
    return min(a, b)


def recount(s: HandleState) -> None:
    """Recompute subtree usage (tokens, tool calls, money) and the remaining pools from the
    handle's own usage, its children's last reports and the closed children it no longer
    keeps."""
    infos = s.roster.children_info.values()
    cost = s.turn.own_cost + s.roster.closed_cost
    for i in infos:
        cost = cost + i.cost
    s.usage.cost = cost
    if s.pool_cost_limit is not None:
        s.usage.pool_cost_usd = s.pool_cost_limit - cost.priced_usd
    s.usage.usage_total = (
        s.turn.own_tokens + s.roster.closed_usage_total + sum(i.usage_total for i in infos)
    )
    s.usage.subtree_tool_calls = (
        s.turn.tool_calls_total
        + s.roster.closed_tool_calls
        + sum(i.subtree_tool_calls for i in infos)
    )
    if s.pool_tokens_limit is not None:
        s.usage.pool_tokens = s.pool_tokens_limit - s.usage.usage_total
    if s.pool_tool_calls_limit is not None:
        s.usage.pool_tool_calls = s.pool_tool_calls_limit - s.usage.subtree_tool_calls


def remaining(s: HandleState) -> tuple[int | None, int | None]:
    """The live remainder for this handle: (tokens, tool calls).

    Its own pool, capped by the tightest ancestor pool as last pushed (``s.floor``), less
    what this subtree spent since that floor's basis.
    """
    tokens, tool_calls = s.usage.pool_tokens, s.usage.pool_tool_calls
    floor = s.usage.floor
    if floor is not None:
        if floor.tokens is not None:
            tokens = min_opt(tokens, floor.tokens - (s.usage.usage_total - floor.basis_tokens))
        if floor.tool_calls is not None:
            spent = s.usage.subtree_tool_calls - floor.basis_tool_calls
            tool_calls = min_opt(tool_calls, floor.tool_calls - spent)
    return tokens, tool_calls


def remaining_cost(s: HandleState) -> Decimal | None:
    """The live remainder of the money pool, USD (None: unlimited), as :func:`remaining`
    for tokens: the handle's own pool capped by the tightest ancestor's as last pushed, less
    what this subtree spent since that floor's basis. Only priced calls count (an unpriced
    model cannot run under a finite pool: ``LlmCallInput.need_price``)."""
    usd = s.usage.pool_cost_usd
    floor = s.usage.floor
    if floor is not None and floor.cost_usd is not None:
        spent = s.usage.cost.priced_usd - floor.basis_cost_usd
        usd = min_usd(usd, floor.cost_usd - spent)
    return usd


def budget_limit(s: HandleState, tool_calls: int, now_ms: float) -> LimitName | None:
    """The limit that forbids the next LLM call (``tool_calls`` 0) or a batch of
    ``tool_calls`` tool calls, or None (CONTRACT §6).

    Checked in this order: the wall-clock deadline (``wallMs``, ``now_ms`` in ms since the
    epoch), the token pool (``tokens``: none left), the money pool (``costUsd``: none left),
    the tool-call pool (``toolCalls``: fewer left than the batch needs).
    """
    if s.wall_deadline_ms is not None and now_ms >= s.wall_deadline_ms:
        return "wallMs"
    tokens, calls_left = remaining(s)
    if tokens is not None and tokens <= 0:
        return "tokens"
    usd = remaining_cost(s)
    if usd is not None and usd <= 0:
        return "costUsd"
    if tool_calls and calls_left is not None and calls_left < tool_calls:
        return "toolCalls"
    return None


def exhausted(s: HandleState, now_ms: float) -> str | None:
    """Why this handle may not spawn for budget reasons (CONTRACT §3 spawn: ``budget
    exhausted (tokens|toolCalls|wallMs)``), or None."""
    tokens, tool_calls = remaining(s)
    if tokens is not None and tokens <= 0:
        return "budget exhausted (tokens)"
    if tool_calls is not None and tool_calls <= 0:
        return "budget exhausted (toolCalls)"
    usd = remaining_cost(s)
    if usd is not None and usd <= 0:
        return "budget exhausted (costUsd)"
    deadline = s.wall_deadline_ms
    if deadline is not None and now_ms >= deadline:
        return "budget exhausted (wallMs)"
    return None


def newer_cost(seen: Cost, known: Cost) -> bool:
    """Whether the subtree cost ``seen`` (an ask's, a last view's) is ahead of ``known``:
    costs only grow, so more money or more unpriced calls is newer."""
    return seen.priced_usd > known.priced_usd or seen.unpriced > known.unpriced


def drop_floors(s: HandleState, children: Iterable[str]) -> None:
    """Closed ``children`` left the roster (``roster.compact``): forget the floors pushed to
    them."""
    for child_id in children:
        s.usage.pushed_floors.pop(child_id, None)


class ChildPools(NamedTuple):
    """A child's budget and pools, carved from its parent at spawn."""

    budget: Budget
    """The child's effective budget (``max_depth`` capped by the parent's)."""
    tokens_limit: int | None
    """The child's token pool."""
    tool_calls_limit: int | None
    """The child's tool-call pool."""
    wall_deadline_ms: int | None
    """The child's deadline, ms since the epoch."""
    floor: PoolFloor | None
    """The parent's live remainder, when some pool above is finite."""
    cost_limit: Decimal | None = None
    """The child's money pool, USD."""


def carve(parent: HandleState, budget: Budget, now_ms: int) -> ChildPools:
    """Carve a child's pools from ``parent`` (CONTRACT §3 spawn).

    Each pool is ``min(the child's own limit, the parent's live remainder)``; the deadline is
    ``min(now_ms + max_wall_ms, the parent's deadline)``; a subtree is never deeper than any
    ancestor allows.

    Args:
        parent: the spawning handle's state.
        budget: the child's own budget (the spawn override, or its definition's).
        now_ms: workflow time of the spawn, ms since the epoch.
    """
    budget = budget.model_copy(
        update={"max_depth": min_opt(budget.max_depth, parent.budget.max_depth)}
    )
    own_deadline = now_ms + budget.max_wall_ms if budget.max_wall_ms is not None else None
    live_tokens, live_tool_calls = remaining(parent)
    live_usd = remaining_cost(parent)
    floor = (
        PoolFloor(tokens=live_tokens, tool_calls=live_tool_calls, cost_usd=live_usd)
        if live_tokens is not None or live_tool_calls is not None or live_usd is not None
        else None
    )
    return ChildPools(
        budget=budget,
        tokens_limit=min_opt(budget.max_tokens, live_tokens),
        tool_calls_limit=min_opt(budget.max_tool_calls, live_tool_calls),
        wall_deadline_ms=min_opt(own_deadline, parent.wall_deadline_ms),
        floor=floor,
        cost_limit=min_usd(budget.max_cost_usd, live_usd),
    )


def floors_to_push(s: HandleState) -> list[tuple[str, PoolFloor]]:
    """The floors to push to open children, in spawn order: each child whose floor changed
    since the last push (recorded in ``s.pushed_floors``). None when every pool above and
    here is unlimited."""
    tokens, tool_calls = remaining(s)
    usd = remaining_cost(s)
    if tokens is None and tool_calls is None and usd is None:
        return []
    pushes: list[tuple[str, PoolFloor]] = []
    for child_id, info in s.roster.children_info.items():
        if info.state == "closed":
            continue
        floor = PoolFloor(
            tokens=tokens,
            tool_calls=tool_calls,
            basis_tokens=info.usage_total,
            basis_tool_calls=info.subtree_tool_calls,
            cost_usd=usd,
            basis_cost_usd=info.cost.priced_usd,
        )
        if s.usage.pushed_floors.get(child_id) != floor:
            s.usage.pushed_floors[child_id] = floor
            pushes.append((child_id, floor))
    return pushes


class BudgetLedger:
    """The budget ledger of one handle (CONTRACT §6).

    Owns ``HandleState.usage`` (:class:`UsageState`: ``usage_total``, ``subtree_tool_calls``,
    ``cost``, the ``pool_*`` remainders, ``floor`` and ``pushed_floors``); per run, the
    ``budget_ask`` sequence and the replies not yet read.

    Args:
        s: the handle's state model.
        outbox: sends ``pool_floor``, ``budget_ask`` and ``budget_reply``.
    """

    def __init__(self, s: HandleState, outbox: Signals) -> None:
        self.s = s
        self.outbox = outbox
        self.ask_seq = 0
        self.replies: dict[int, BudgetReply] = {}
        self.waiting: set[int] = set()
        """Asks of this run not answered yet."""

    def recount(self) -> None:
        """See :func:`recount`."""
        recount(self.s)

    def remaining(self) -> tuple[int | None, int | None]:
        """See :func:`remaining`."""
        return remaining(self.s)

    def remaining_cost(self) -> Decimal | None:
        """See :func:`remaining_cost`."""
        return remaining_cost(self.s)

    def limit(self, tool_calls: int) -> LimitName | None:
        """:func:`budget_limit` at the current workflow time."""
        return budget_limit(self.s, tool_calls, now_ms())

    def push_floors(self) -> None:
        """Tell children the live remainder of the tightest pool above them, when it changed
        (only when some pool is finite): siblings' spending drains everyone's budget."""
        for child_id, floor in floors_to_push(self.s):
            nonce = self.s.roster.children_info[child_id].nonce
            sent = floor.model_copy(update={"nonce": nonce}) if nonce else floor
            self.outbox.signal_later(child_id, SIGNAL_POOL_FLOOR, sent)

    async def refresh(self) -> None:
        """When a finite pool sits above this handle, ask the parent for its live remainder
        (the parent asks its own parent first), so siblings can overshoot a shared pool by
        at most the calls already in flight."""
        s = self.s
        if s.parent is None or s.usage.floor is None:
            return
        floor = s.usage.floor
        if floor.tokens is None and floor.tool_calls is None and floor.cost_usd is None:
            return
        self.ask_seq += 1
        seq = self.ask_seq
        self.outbox.signal_later(
            s.parent,
            SIGNAL_BUDGET_ASK,
            BudgetAsk(
                child=s.id,
                seq=seq,
                usage_total=s.usage.usage_total,
                subtree_tool_calls=s.usage.subtree_tool_calls,
                nonce=s.nonce,
                cost=s.usage.cost,
            ),
        )
        self.waiting.add(seq)
        try:
            await workflow.wait_condition(lambda: seq in self.replies)
        finally:
            self.waiting.discard(seq)
        reply = self.replies.pop(seq)
        s.usage.floor = PoolFloor(
            tokens=reply.tokens,
            tool_calls=reply.tool_calls,
            basis_tokens=s.usage.usage_total,
            basis_tool_calls=s.usage.subtree_tool_calls,
            cost_usd=reply.cost_usd,
            basis_cost_usd=s.usage.cost.priced_usd,
        )

    async def on_ask(self, ask: BudgetAsk) -> None:
        """A child asks for the live remainder before spending: take its usage into the
        ledger, refresh this handle's own remainder, reply (signal ``budget_reply``)."""
        s = self.s
        info = s.roster.children_info.get(ask.child)
        if info is None:
            return
        if (
            ask.usage_total > info.usage_total
            or ask.subtree_tool_calls > info.subtree_tool_calls
            or newer_cost(ask.cost, info.cost)
        ):
            update_child(
                s,
                ask.child,
                usage_total=max(ask.usage_total, info.usage_total),
                subtree_tool_calls=max(ask.subtree_tool_calls, info.subtree_tool_calls),
                cost=ask.cost if newer_cost(ask.cost, info.cost) else info.cost,
            )
            self.recount()
        await self.refresh()
        tokens, tool_calls = self.remaining()
        self.outbox.signal_later(
            ask.child,
            SIGNAL_BUDGET_REPLY,
            BudgetReply(
                seq=ask.seq,
                tokens=tokens,
                tool_calls=tool_calls,
                cost_usd=self.remaining_cost(),
                nonce=info.nonce,
            ),
        )

    def on_reply(self, reply: BudgetReply) -> str | None:
        """The parent's answer to this handle's ``budget_ask``.

        Returns:
            None (kept), or why it is not an answer to an ask of this run still waiting
            (nothing changes; a late answer to an abandoned ask is dropped).
        """
        if reply.seq not in self.waiting:
            if 1 <= reply.seq <= self.ask_seq:
                return None  # the ask was abandoned (an interrupted turn): nothing waits
            return f"no budget_ask {reply.seq} was sent"
        self.replies[reply.seq] = reply
        return None

    def on_floor(self, floor: PoolFloor) -> None:
        """The parent pushed a new floor: keep it (without its nonce), and pass the change
        down."""
        self.s.usage.floor = floor.model_copy(update={"nonce": None}) if floor.nonce else floor
        self.push_floors()
