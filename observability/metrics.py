"""The metrics activities record (``workflows/contract/metrics.py``): each LLM HTTP round
trip and each tool attempt, counted by outcome and timed, in ms. The tool metrics are put
around the ``tnx.tool_call`` activity by the activity interceptor (``observability/activity.py``);
the LLM metrics time the HTTP round trip alone, inside the LLM activity (``activities/llm.py``).

Recorded through ``activity.metric_meter()``, the worker runtime's meter with the activity's
``namespace``, ``task_queue`` and ``activity_type`` (the SDK adds them); without a metrics
runtime it is the SDK's no-op meter. One record per attempt: a retried call counts again.
"""

from __future__ import annotations

import asyncio
import time
from collections.abc import Iterator
from contextlib import AbstractContextManager, contextmanager
from dataclasses import dataclass

from temporalio import activity

from toolnexus_temporal.workflows.contract.mcp import MCP_SEP
from toolnexus_temporal.workflows.contract.metrics import (
    LLM_CALLS,
    LLM_LATENCY,
    TOOL_CALLS,
    TOOL_LATENCY,
    MetricDef,
)
from toolnexus_temporal.workflows.contract.models import ToolResult


@dataclass
class Outcome:
    """The outcome label of the call being timed: ``ok`` unless the caller says otherwise
    (:func:`tool_outcome`); an exception makes it ``error``, a cancellation ``cancelled``."""

    value: str = "ok"
    label: str | None = None
    """Replaces the call's label value when set (an unknown MCP tool: :func:`unknown_mcp_tool`)."""


def unknown_mcp_tool(tool: str) -> str:
    """The ``tool`` label of a call of a tool its MCP server does not offer: the server's name
    and ``__(unknown)``, so a model that invents names makes one series per server, not one
    per invention (labels stay low-cardinality, docs/guide/metrics.md)."""
    return f"{tool.partition(MCP_SEP)[0]}{MCP_SEP}(unknown)"


@contextmanager
def _timed(calls: MetricDef, latency: MetricDef, label: str, value: str) -> Iterator[Outcome]:
    outcome = Outcome()
    started = time.monotonic()
    try:
        yield outcome
    except asyncio.CancelledError:
        outcome.value = "cancelled"
        raise
    except BaseException:
        outcome.value = "error"
        raise
    finally:
        elapsed_ms = round((time.monotonic() - started) * 1000)
        meter = activity.metric_meter()
        value = outcome.label or value
        meter.create_counter(calls.name, calls.description, calls.unit).add(
            1, {label: value, "outcome": outcome.value}
        )
        meter.create_histogram(latency.name, latency.description, latency.unit).record(
            elapsed_ms, {label: value}
        )


def llm_call(model: str) -> AbstractContextManager[Outcome]:
    """Time one LLM HTTP round trip to ``model`` (``tnx_llm_calls_total{model,outcome}``,
    ``tnx_llm_call_latency_milliseconds{model}``): ``with metrics.llm_call(model): ...``."""
    return _timed(LLM_CALLS, LLM_LATENCY, "model", model)


def tool_call(tool: str) -> AbstractContextManager[Outcome]:
    """Time one tool attempt (``tnx_tool_calls_total{tool,outcome}``,
    ``tnx_tool_call_latency_milliseconds{tool}``); set the outcome from the result with
    :func:`tool_outcome`."""
    return _timed(TOOL_CALLS, TOOL_LATENCY, "tool", tool)


def tool_outcome(result: ToolResult) -> str:
    """``pending`` for a suspension (``metadata["pending"]``), ``error`` for an ``is_error``
    result, else ``ok``."""
    if result.metadata.get("pending") is not None:
        return "pending"
    return "error" if result.is_error else "ok"
