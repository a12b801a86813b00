"""Cron expressions, read by croniter (a well-kept library; no cron parsing by hand).

croniter is pure when it is given its start time as a number: it reads no clock, and a float
start is read in UTC whatever the worker's time zone, so the same history computes the same
fire times on every worker. Workflow code passes ``workflow.now()`` in, as ms since the
epoch. Deterministic; no I/O.
"""

from __future__ import annotations

import re

from croniter import croniter

CRON_FIELDS = 5
"""Fields of an accepted expression: minute, hour, day of month, month, day of week."""

CRON_FIELD_RANGES = (
    ("minute", "0-59"),
    ("hour", "0-23"),
    ("day of month", "1-31"),
    ("month", "1-12 or JAN-DEC"),
    ("day of week", "0-6 or SUN-SAT, 7 is Sunday too"),
)
"""The five fields in order, each with the values it allows (what an error names)."""

_RANDOM_OR_HASHED = re.compile(r"(^|[,/])[RrHh](\(|/|,|$)")
"""croniter's ``R`` (random) and ``H`` (hashed) fields: not deterministic, refused."""


def cron_error(expr: str) -> str | None:
    """Why ``expr`` is not an accepted cron expression, or None.

    Returns:
        ``cron expression "..." is invalid ...``: not five fields, a random (``R``) or
        hashed (``H``) field, or a field out of its range (named, with the range:
        :data:`CRON_FIELD_RANGES`).
    """
    fields = expr.split()
    if len(fields) != CRON_FIELDS:
        return (
            f'cron expression "{expr[:80]}" is invalid (it has {len(fields)} fields, expected'
            f" {CRON_FIELDS}: minute hour day-of-month month day-of-week)"
        )
    if any(_RANDOM_OR_HASHED.search(field) for field in fields):
        return f'cron expression "{expr[:80]}" is invalid (R and H fields are not supported)'
    if not croniter.is_valid(expr):
        for n, (name, allowed) in enumerate(CRON_FIELD_RANGES):
            alone = " ".join(field if i == n else "*" for i, field in enumerate(fields))
            if not croniter.is_valid(alone):
                return (
                    f'cron expression "{expr[:80]}" is invalid: {name} "{fields[n][:40]}"'
                    f" (allowed: {allowed}, lists a,b, ranges a-b, steps */n)"
                )
        return f'cron expression "{expr[:80]}" is invalid (its fields do not combine)'
    return None


def next_cron_ms(expr: str, after_ms: int) -> int:
    """The first fire time of ``expr`` strictly after ``after_ms``.

    Args:
        expr: a valid expression (see :func:`cron_error`), read in UTC.
        after_ms: ms since the epoch.

    Returns:
        ms since the epoch.
    """
    return int(croniter(expr, after_ms / 1000).get_next(float) * 1000)
