"""Workflow time as milliseconds since the epoch: the one clock of workflow code.

Every time a workflow stores or compares (deadlines, trace stamps, Request ages, tick fire
times, the definition cache) is an ``int`` of ms since the epoch read here, from
``workflow.now()``: the time of the current workflow task, the same on every replay. Pure
rules take that number as an argument (``now_ms``) instead of reading a clock.

Deterministic; no I/O. Call it only from workflow code (``workflow.now()`` raises outside a
workflow).
"""

from __future__ import annotations

from temporalio import workflow


def now_ms() -> int:
    """Workflow time, ms since the epoch (``workflow.now()``, truncated to whole ms).

    Raises:
        RuntimeError: called outside a workflow (``temporalio.workflow`` raises it).
    """
    return int(workflow.now().timestamp() * 1000)
