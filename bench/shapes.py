"""Billable actions of each shape of work (issue 35 item 1), counted from histories.

The plain and the tool turn come from the latency measure's marked turns (``history_plain``,
``history_tool``: ``actions_median``). This measure adds the shapes a contender builds with
:meth:`bench.contender.Contender.action_shapes`:

* ``tick``: a turn the agent's own timer starts (ours: ``AgentDef.tick``; the floor: a
  workflow that sleeps on a timer then runs the plain turn's activity). Marked between
  ticks, at least :data:`TICKS` of them; the cost per tick is the total over the ticks.
* ``spawn``: a child agent started by its parent (ours: ``rt.spawn``; the floor: a parent's
  update that starts a child workflow): the parent's events plus the child's whole history
  once it has settled.
* ``approval``: a turn whose tool waits for a person's yes (ours: a tool that returns
  ``pending``, then ``rt.answer`` and ``rt.wait``; the floor: a turn update that waits for an
  ``approve`` update before it runs the tool activity).
* ``continue_as_new``: what a run continued as new adds: the actions of the turn whose history
  holds the continue-as-new, less the median plain turn's of the same agent.

A shape a contender cannot do is ``{"na": why}``. Queries are billed but never in history:
none of these counts include them (see ``bench.actions``).
"""

from __future__ import annotations

import asyncio
from collections.abc import Awaitable, Callable
from typing import Any, Final

from temporalio.client import Client

from bench.contender import Contender
from bench.history import MultiTracker, TurnCost

SHAPES: Final = ("tick", "spawn", "approval", "continue_as_new")
"""The shapes this measure adds, in report order."""

TICK_EVERY_MS: Final = 1_000
"""A tick's interval (Temporal's timers fire at about 1 s granularity)."""

TICKS: Final = 3
"""Tick turns counted per contender."""

QUIET_S: Final = 0.4
"""How long after a tick turn is seen done the bench marks history: the turn has settled and
the next tick is ``TICK_EVERY_MS`` away."""


def shape_result(cost: TurnCost, per: int = 1, **extra: Any) -> dict[str, Any]:
    """A shape's figures: actions (by kind), events and bytes, each per ``per`` repeats."""
    return {
        "actions": cost.actions / per,
        "action_kinds": {k: v / per for k, v in sorted(cost.action_kinds.items())},
        "events": cost.events / per,
        "bytes": cost.bytes / per,
        **({"repeats": per} if per != 1 else {}),
        **extra,
    }


async def around(tracker: MultiTracker, work: Callable[[], Awaitable[Any]]) -> TurnCost:
    """The history ``work`` adds to the tracked workflows."""
    await tracker.mark()
    await work()
    await tracker.mark()
    costs = await tracker.costs()
    return costs[-1]


async def whole_history(client: Client, workflow_id: str) -> TurnCost:
    """Every event of a workflow's current run."""
    history = await client.get_workflow_handle(workflow_id).fetch_history()
    return TurnCost.of(list(history.events))


async def ticks(tracker: MultiTracker, done: Callable[[], Awaitable[int]]) -> dict[str, Any]:
    """The cost per tick: marks history :data:`QUIET_S` after the first tick turn is done and
    again after :data:`TICKS` more, then divides by the ticks seen in between.

    Args:
        tracker: the workflows a tick writes to.
        done: the tick turns done so far (a query: no history).
    """
    await until(lambda n: n >= 1, done)
    await asyncio.sleep(QUIET_S)
    first = await done()
    await tracker.mark()
    await until(lambda n: n >= first + TICKS, done)
    await asyncio.sleep(QUIET_S)
    await tracker.mark()
    last = await done()
    cost = (await tracker.costs())[-1]
    return shape_result(cost, per=max(last - first, 1))


async def until(ok: Callable[[int], bool], value: Callable[[], Awaitable[int]]) -> int:
    """Poll ``value`` every 20 ms until ``ok`` accepts it (30 s at most)."""
    for _ in range(1500):
        n = await value()
        if ok(n):
            return n
        await asyncio.sleep(0.02)
    raise TimeoutError("the shape never got there in 30 s")


def continue_as_new_cost(costs: list[TurnCost]) -> dict[str, Any]:
    """What continuing as new added: the first turn whose history holds it, less the median
    of the other turns (plain turns of the same agent)."""
    hit = next(
        (c for c in costs if "WORKFLOW_EXECUTION_CONTINUED_AS_NEW" in c.types),
        None,
    )
    if hit is None:
        return {"error": f"no continue-as-new in {len(costs)} turns"}
    others = sorted((c for c in costs if c is not hit), key=lambda c: c.actions)
    base = others[len(others) // 2] if others else TurnCost()
    return {
        "actions": hit.actions - base.actions,
        "action_kinds": {
            k: v for k, v in sorted((hit.action_kinds - base.action_kinds).items()) if v
        },
        "events": hit.events - base.events,
        "bytes": hit.bytes - base.bytes,
        "turn_actions": hit.actions,
        "plain_turn_actions": base.actions,
    }


async def measure_shapes(c: Contender) -> dict[str, Any]:
    """Each shape's billable actions for one contender (``{"na": why}`` where it cannot)."""
    out: dict[str, Any] = {}
    for shape in SHAPES:
        if shape in c.shapes_not_built:
            out[shape] = {"na": c.shapes_not_built[shape]}
            continue
        try:
            out[shape] = await asyncio.wait_for(c.action_shape(shape), 60)
        except Exception as err:  # recorded, never fatal
            out[shape] = {"error": f"{type(err).__name__}: {err}"[:500]}
    return out
