"""Workflow time as milliseconds since the epoch: the one clock of workflow code.

Every time a workflow stores or compares (deadlines, trace stamps, Request ages, tick fire
times, the definition cache) is an ``int`` of ms since the epoch read here, from
``workflow.now()``: the time of the current workflow task, the same on every replay. Pure
rules take that number as an argument (``now_ms``) instead of reading a clock.

Deterministic; no I/O. Call it only from workflow code (``workflow.now()`` raises outside a
workflow).
"""

from __future__ import annotations

from pydantic import AwareDatetime, TypeAdapter, ValidationError
from temporalio import workflow

_WHEN: TypeAdapter[AwareDatetime] = TypeAdapter(AwareDatetime)
"""ISO-8601 times with a zone, and seconds since the epoch (no clock is read)."""


def now_ms() -> int:
    """Workflow time, ms since the epoch (``workflow.now()``, truncated to whole ms).

    Raises:
        RuntimeError: called outside a workflow (``temporalio.workflow`` raises it).
    """
    return int(workflow.now().timestamp() * 1000)


def parse_time_ms(value: str) -> int | None:
    """An ISO-8601 time with a zone as ms since the epoch, or None when unreadable or without
    a zone (``pending`` adds ``Z`` to a time without one)."""
    try:
        when = _WHEN.validate_python(value)
    except ValidationError:
        return None
    return round(when.timestamp() * 1000)


def iso_of_ms(ms: int) -> str:
    """ms since the epoch as an ISO-8601 UTC time (millisecond precision)."""
    return time_of_ms(ms).isoformat(timespec="milliseconds").replace("+00:00", "Z")


def time_of_ms(ms: int) -> AwareDatetime:
    """ms since the epoch as a UTC datetime (a ``Datetime`` search attribute's value)."""
    return _WHEN.validate_python(ms / 1000)


_UNIT_MS = (("d", 86_400_000), ("h", 3_600_000), ("m", 60_000), ("s", 1_000))


def format_duration(ms: int) -> str:
    """A duration in ms as a person writes it: the largest unit that divides it evenly
    (``3_600_000`` → ``1h``, ``5_400_000`` → ``90m``, ``1_500`` → ``1500ms``); the one rule
    of ``tnx`` and of the workflow's trace (walk 7 read ``every 5400s`` there)."""
    for unit, size in _UNIT_MS:
        if ms and ms % size == 0:
            return f"{ms // size}{unit}"
    return f"{ms}ms"
