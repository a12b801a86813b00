"""The roster of a parent's children: spawn ids, the children every view lists, and what a
parent carries of them across continue-as-new (CONTRACT §2 ``children``, §3 spawn).

A parent that spawned, ran and closed 10,000 children must not carry 10,000 ids and reports
into every run, so:

* ``spawned`` records every child in spawn order as one character naming its agent in
  ``spawned_names`` (a child's id is ``{parent}/{name}.{n}``, ``n`` its spawn number), so
  the view still lists all children in spawn order (the contract's ``children`` never
  shrinks) at one byte per child (two past 62 agent names);
* at continue-as-new (:func:`compact`) closed children leave ``children``,
  ``children_info`` and ``pushed_floors``; their usage stays in ``closed_usage_total`` /
  ``closed_tool_calls`` (the roll-up is unchanged), ``spawn_count`` keeps ids unique and
  ``max_children`` counting closed children;
* the carried trace keeps its newest lines within :data:`TRACE_CARRY_BYTES`.

Plain functions over ``HandleState``; deterministic, no I/O.
"""

from __future__ import annotations

from collections.abc import Mapping
from typing import Any, Final

from temporalio import workflow

with workflow.unsafe.imports_passed_through():
    from toolnexus_temporal.workflows.contract.state import ChildInfo, HandleState

_CODES: Final = "0123456789abcdefghijklmnopqrstuvwxyzABCDEFGHIJKLMNOPQRSTUVWXYZ"
"""The characters of the first 62 agent names in ``spawned`` (later ones: U+0100 on)."""

TRACE_CARRY_BYTES: Final = 32_000
"""Trace text (bytes of the lines) a handle carries into its next run at most:
older lines are dropped (``trace_seq`` keeps counting), as the ``trace_cap`` rule does."""


def next_child_id(s: HandleState, name: str) -> str:
    """The handle id the next spawn of agent ``name`` under ``s`` gets:
    ``{s.id}/{name}.{n}``, ``n`` one more than the spawns so far."""
    return f"{s.id}/{name}.{s.roster.spawn_count + 1}"


def record_spawn(s: HandleState, name: str, nonce: str | None = None) -> str:
    """Number a new child of ``s`` with agent name ``name`` and record it (``spawn_count``,
    ``children``, ``children_info`` with the child's ``nonce``, and ``spawned``).

    Returns:
        The child's handle id, ``{s.id}/{name}.{n}``.
    """
    child_id = next_child_id(s, name)
    s.roster.spawn_count += 1
    s.roster.children.append(child_id)
    s.roster.children_info[child_id] = ChildInfo(nonce=nonce)
    if name not in s.roster.spawned_names:
        s.roster.spawned_names.append(name)
    s.roster.spawned += _code(s.roster.spawned_names.index(name))
    return child_id


def _code(index: int) -> str:
    return _CODES[index] if index < len(_CODES) else chr(0x100 + index)


def _name_of(s: HandleState, code: str) -> str:
    at = _CODES.find(code)
    return s.roster.spawned_names[at if at >= 0 else ord(code) - 0x100]


def all_children(s: HandleState) -> list[str]:
    """Every child ever spawned under ``s``, in spawn order (closed ones included)."""
    return [f"{s.id}/{_name_of(s, code)}.{n}" for n, code in enumerate(s.roster.spawned, start=1)]


def children_count(s: HandleState) -> int:
    """How many children ``s`` ever spawned (closed ones included)."""
    return len(s.roster.spawned)


def was_child(s: HandleState, child_id: str) -> bool:
    """``child_id`` is, or was, a child of ``s`` (a closed child dropped by :func:`compact`
    included)."""
    if child_id in s.roster.children_info:
        return True
    if not child_id.startswith(f"{s.id}/"):
        return False
    name, _, number = child_id[len(s.id) + 1 :].rpartition(".")
    if not number.isdigit():
        return False
    n = int(number)
    return 1 <= n <= len(s.roster.spawned) and _name_of(s, s.roster.spawned[n - 1]) == name


def update_child(s: HandleState, child_id: str, **changes: Any) -> ChildInfo:
    """Change what this handle knows of child ``child_id`` (its ``children_info`` entry, which
    must exist): the one way other components write it. ``changes``: ``ChildInfo`` fields.

    Returns:
        The new entry.
    """
    info = s.roster.children_info[child_id].model_copy(update=changes)
    s.roster.children_info[child_id] = info
    return info


def compact(s: HandleState) -> list[str]:
    """What a handle carries into its next run: closed children leave ``children`` and
    ``children_info`` (their usage moves to the ``closed_*`` totals), and the trace keeps its
    newest lines within :data:`TRACE_CARRY_BYTES`.

    Returns:
        The closed children that left (their ``pushed_floors`` go too:
        ``budgets.drop_floors``).
    """
    closed = [c for c, info in s.roster.children_info.items() if info.state == "closed"]
    for child_id in closed:
        info = s.roster.children_info.pop(child_id)
        s.roster.closed_usage_total += info.usage_total
        s.roster.closed_tool_calls += info.subtree_tool_calls
        s.roster.closed_cost = s.roster.closed_cost + info.cost
    if closed:
        s.roster.children = [c for c in s.roster.children if c in s.roster.children_info]
    size, keep = 0, len(s.trace)
    for line in reversed(s.trace):
        size += len(line.line.encode()) + 40  # the line, its seq, its time and the JSON
        if size > TRACE_CARRY_BYTES:
            break
        keep -= 1
    if keep:
        del s.trace[:keep]
    return closed


def restarted(
    s: HandleState, run_id: str, own_nonce: str | None, child_nonces: Mapping[str, str]
) -> None:
    """Make the state a ``recovery`` query returned (nonces masked) the input of a run started
    again from the terminated run ``run_id`` (``AgentRuntime.recover``): the nonces put back
    (the handle's own, and its children's by child id, read from that run's history), the
    run it came from recorded, and a report owed to the parent (which marked it closed
    meanwhile)."""
    s.nonce = own_nonce
    for child in list(s.roster.children_info):
        if child in child_nonces:
            update_child(s, child, nonce=child_nonces[child])
    s.recovered_from = run_id
    s.report_owed = s.parent is not None
