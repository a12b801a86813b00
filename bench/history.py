"""Per-turn history cost of a workflow, from ``fetch_history``.

After each turn a :class:`HistoryTracker` records the run id and history length of each
workflow the turn touched (``describe()``: one cheap call). At the end it fetches each run's
history once and sums ``event.ByteSize()`` over the events each turn added. Runs chained by
continue-as-new are followed, so a turn that continued as new is charged for the events of
both runs.
"""

from __future__ import annotations

from collections import Counter
from dataclasses import dataclass, field
from typing import Any

from temporalio.api.enums.v1 import EventType
from temporalio.api.history.v1 import HistoryEvent
from temporalio.client import Client

from bench.actions import count_actions


@dataclass
class TurnCost:
    """What one turn added to the histories of the workflows it touched: events, bytes, the
    event types, and the Temporal Cloud billable actions (``bench.actions``) by kind."""

    events: int = 0
    bytes: int = 0
    types: Counter[str] = field(default_factory=Counter)
    action_kinds: Counter[str] = field(default_factory=Counter)

    @property
    def actions(self) -> int:
        """Billable actions in all."""
        return sum(self.action_kinds.values())

    def add(self, other: TurnCost) -> None:
        self.events += other.events
        self.bytes += other.bytes
        self.types.update(other.types)
        self.action_kinds.update(other.action_kinds)

    @classmethod
    def of(cls, events: list[HistoryEvent]) -> TurnCost:
        """The cost of a list of one workflow's events."""
        cost = cls(events=len(events), bytes=sum(e.ByteSize() for e in events))
        cost.types.update(_type_name(e) for e in events)
        cost.action_kinds.update(count_actions(events))
        return cost


def _type_name(event: HistoryEvent) -> str:
    return EventType.Name(event.event_type).removeprefix("EVENT_TYPE_")


class HistoryTracker:
    """Marks the history of one workflow id between turns.

    Args:
        client: any client of the namespace.
        workflow_id: the workflow; its runs are followed through continue-as-new.
    """

    def __init__(self, client: Client, workflow_id: str) -> None:
        self.client = client
        self.workflow_id = workflow_id
        self.marks: list[tuple[str, int]] = []
        self.sizes: list[int] = []
        """The server's ``history_size_bytes`` of the current run at each mark."""
        self._runs: dict[str, list[HistoryEvent]] = {}

    async def mark(self) -> None:
        """Record the current run id and history length (call before the first turn and
        after each turn)."""
        desc = await self.client.get_workflow_handle(self.workflow_id).describe()
        self.marks.append((desc.run_id or "", desc.history_length))
        self.sizes.append(desc.raw_description.workflow_execution_info.history_size_bytes)

    async def _events(self, run_id: str) -> list[HistoryEvent]:
        if run_id not in self._runs:
            handle = self.client.get_workflow_handle(self.workflow_id, run_id=run_id)
            history = await handle.fetch_history()
            self._runs[run_id] = list(history.events)
        return self._runs[run_id]

    async def _next_run(self, run_id: str) -> str | None:
        events = await self._events(run_id)
        if events and events[-1].HasField("workflow_execution_continued_as_new_event_attributes"):
            return events[
                -1
            ].workflow_execution_continued_as_new_event_attributes.new_execution_run_id
        return None

    async def costs(self) -> list[TurnCost]:
        """One TurnCost per interval between consecutive marks."""
        out: list[TurnCost] = []
        for (run_a, len_a), (run_b, len_b) in zip(self.marks, self.marks[1:], strict=False):
            segment: list[HistoryEvent] = []
            run, start = run_a, len_a
            hops = 0
            while run != run_b:
                segment.extend((await self._events(run))[start:])
                nxt = await self._next_run(run)
                hops += 1
                if nxt is None or hops > 20:
                    break
                run, start = nxt, 0
            if run == run_b:
                segment.extend((await self._events(run_b))[start:len_b])
            out.append(TurnCost.of(segment))
        return out

    async def total(self) -> tuple[int, int]:
        """(events, bytes) of the latest run at its last mark."""
        run, length = self.marks[-1]
        events = (await self._events(run))[:length]
        return len(events), sum(e.ByteSize() for e in events)


class MultiTracker:
    """Several workflows touched by the same turns (our runtime: the agent and its parent,
    which admits every wake); costs are summed per turn."""

    def __init__(self, trackers: list[HistoryTracker]) -> None:
        self.trackers = trackers

    async def mark(self) -> None:
        for tracker in self.trackers:
            await tracker.mark()

    def current_size(self) -> int:
        """The server's history size of the current runs at the last mark, summed."""
        return sum(t.sizes[-1] for t in self.trackers if t.sizes)

    async def costs(self) -> list[TurnCost]:
        per: list[list[TurnCost]] = [await t.costs() for t in self.trackers]
        out: list[TurnCost] = []
        for turn in zip(*per, strict=True):
            total = TurnCost()
            for part in turn:
                total.add(part)
            out.append(total)
        return out

    async def by_workflow(self) -> dict[str, list[TurnCost]]:
        return {t.workflow_id: await t.costs() for t in self.trackers}


def summarize(costs: list[TurnCost]) -> dict[str, Any]:
    """Median, mean, min and max of per-turn events, bytes and billable actions, and the event
    types and action kinds of the median turn (by events)."""
    if not costs:
        return {}
    events = sorted(c.events for c in costs)
    sizes = sorted(c.bytes for c in costs)
    median_turn = sorted(costs, key=lambda c: c.events)[len(costs) // 2]
    actions = sorted(c.actions for c in costs)
    return {
        "turns": len(costs),
        "events_median": events[len(events) // 2],
        "events_mean": sum(events) / len(events),
        "events_min": events[0],
        "events_max": events[-1],
        "bytes_median": sizes[len(sizes) // 2],
        "bytes_mean": sum(sizes) / len(sizes),
        "bytes_min": sizes[0],
        "bytes_max": sizes[-1],
        "event_types_median_turn": dict(sorted(median_turn.types.items())),
        "actions_median": actions[len(actions) // 2],
        "actions_mean": sum(actions) / len(actions),
        "actions_min": actions[0],
        "actions_max": actions[-1],
        "action_kinds_median_turn": dict(sorted(median_turn.action_kinds.items())),
    }
