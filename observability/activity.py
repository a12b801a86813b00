"""The activity interceptor (issue 33, item 3): the spans and metrics of the activities, put
around them in one place instead of in each activity body (the shape of Temporal's
``temporalio.contrib.opentelemetry``: an ``Interceptor`` whose ``intercept_activity`` returns
an ``ActivityInboundInterceptor``). ``create_worker`` installs :class:`ActivityObserver` after
the tracing interceptor (``observability/otel.py``), so the spans below are children of its
``RunActivity`` span and made only when tracing is on (:data:`~.spans.ACTIVE_TRACER`).

* ``tnx.tool_call``: the ``execute_tool {tool}`` span (:func:`~.spans.tool_span`) and the
  tool metrics (``tnx_tool_calls_total{tool,outcome}``, ``tnx_tool_call_latency_milliseconds``,
  :func:`~.metrics.tool_call`) around the attempt; the outcome from the ToolResult
  (:func:`~.metrics.tool_outcome`). A tool the worker does not know at all is neither
  counted nor traced (the model made its name up: no series or span name per invention); one
  an MCP server of the worker owns but does not offer (``UnknownTool``) counts as
  ``<server>__(unknown)`` (:func:`~.metrics.unknown_mcp_tool`) and its span is renamed so.
* ``tnx.llm_call`` and ``tnx.llm_summarize``: the ``chat {model}`` span
  (:func:`~.spans.llm_span`) around the attempt; the activity records the request and the
  answer on it (:func:`~.spans.current_llm`). The LLM metrics time the HTTP round trip alone
  (after the worker's LLM cap, docs/guide/metrics.md), so the activity's one HTTP call
  records them (:func:`~.metrics.llm_call`).

Other activities pass through untouched. Heartbeats stay with the activities
(``activities/heartbeat.py``): an LLM call's heartbeats carry its live output.
"""

from __future__ import annotations

from collections.abc import Callable
from typing import Any

import temporalio.worker
from temporalio import activity
from temporalio.exceptions import ApplicationError

from toolnexus_temporal.observability import metrics, spans
from toolnexus_temporal.workflows.contract.messages import ToolCallInput
from toolnexus_temporal.workflows.contract.models import ToolResult
from toolnexus_temporal.workflows.contract.names import (
    LLM_CALL_ACTIVITY,
    LLM_SUMMARIZE_ACTIVITY,
    TOOL_CALL_ACTIVITY,
)

LlmTarget = Callable[[Any], tuple[str, str]]
"""The model (``inherit`` resolved) and the wire style an LLM activity's input is sent with
(``LlmActivities.target``)."""


class ActivityObserver(temporalio.worker.Interceptor):
    """The worker interceptor that observes the tool and LLM activities (module docstring).

    Args:
        tool_known: whether this worker knows a tool name (registered here, or owned by one
            of its MCP servers; ``ToolActivities.knows``). None: every name counts.
        llm_target: the model and wire style of an LLM activity's input; None: the LLM
            activities are not traced.
    """

    def __init__(
        self,
        *,
        tool_known: Callable[[str], bool] | None = None,
        llm_target: LlmTarget | None = None,
    ) -> None:
        self.tool_known = tool_known
        self.llm_target = llm_target

    def intercept_activity(
        self, next: temporalio.worker.ActivityInboundInterceptor
    ) -> temporalio.worker.ActivityInboundInterceptor:
        """Wrap the activity inbound chain (``temporalio.worker.Interceptor``)."""
        return _ObservedActivity(next, self)

    async def run(self, fn: Callable[..., Any], *args: Any) -> Any:
        """Run activity function ``fn`` on ``args`` through this interceptor, in the current
        activity context (``temporalio.testing.ActivityEnvironment``, which installs no
        interceptor: ``await env.run(observer.run, acts.tool_call, inp)``)."""
        chain = self.intercept_activity(_Call())
        return await chain.execute_activity(
            temporalio.worker.ExecuteActivityInput(fn=fn, args=args, executor=None, headers={})
        )


class _Call(temporalio.worker.ActivityInboundInterceptor):
    """The end of :meth:`ActivityObserver.run`'s chain: call the function."""

    def __init__(self) -> None:
        pass  # no next interceptor

    async def execute_activity(self, input: temporalio.worker.ExecuteActivityInput) -> Any:
        return await input.fn(*input.args)


class _ObservedActivity(temporalio.worker.ActivityInboundInterceptor):
    def __init__(
        self, next: temporalio.worker.ActivityInboundInterceptor, root: ActivityObserver
    ) -> None:
        super().__init__(next)
        self._root = root

    async def execute_activity(self, input: temporalio.worker.ExecuteActivityInput) -> Any:
        kind = activity.info().activity_type
        if kind == TOOL_CALL_ACTIVITY and input.args and isinstance(input.args[0], ToolCallInput):
            return await self._tool_call(input, input.args[0])
        if kind in (LLM_CALL_ACTIVITY, LLM_SUMMARIZE_ACTIVITY) and self._root.llm_target:
            model, provider = self._root.llm_target(input.args[0])
            with spans.llm_span(model=model, provider=provider):
                return await super().execute_activity(input)
        return await super().execute_activity(input)

    async def _tool_call(
        self, input: temporalio.worker.ExecuteActivityInput, inp: ToolCallInput
    ) -> Any:
        known = self._root.tool_known
        if known is not None and not known(inp.tool):
            return await super().execute_activity(input)  # fails UnknownTool: not counted
        with metrics.tool_call(inp.tool) as outcome:
            with spans.tool_span(
                tool=inp.tool, call_id=inp.call_id, handle_id=inp.handle_id, arguments=inp.arguments
            ) as traced:
                try:
                    result: ToolResult = await super().execute_activity(input)
                except ApplicationError as err:
                    if err.type == "UnknownTool":  # an MCP server's tool name made up
                        outcome.label = metrics.unknown_mcp_tool(inp.tool)
                        traced.rename(outcome.label)
                    raise
                traced(result)
            outcome.value = metrics.tool_outcome(result)
            return result
