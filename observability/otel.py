"""The tracing interceptor and the OpenTelemetry SDK set-up (issue 27, item 1); imported only
when tracing is on (:func:`~toolnexus_temporal.observability.tracing.tracing_wanted`).

:class:`TnxTracingInterceptor` is Temporal's ``temporalio.contrib.opentelemetry
.TracingInterceptor`` (client and worker spans, context carried in the ``_tracer-data``
header of workflow starts, signals, updates, child workflows and activities; workflow spans
made only when not replaying) plus what makes one trace of a host's wake:

* the **turn span** ``invoke_agent {agent}`` (``workflows/turn/observe.py`` opens and ends it
  through the extern functions registered here). Its parent is the context of the last
  ``wake`` signal or ``turn`` update that carried one (the host's ``StartWorkflowUpdate:turn``
  span, or a parent agent's ``SignalChildWorkflow``/``SignalExternalWorkflow`` span), else
  the workflow's own context (its start), as the contrib parents every workflow span;
* a turn driven by the handle itself (a tick, a background child's report:
  ``tnx.turn.trigger`` ``tick`` / ``background``, ``workflows/inbox.py`` ``turn_trigger``) is
  instead the **root of its own trace**, with a span link to the handle's previous turn span
  (any run of the handle, when this worker made it: the last :data:`MAX_OPEN_TURNS` handles'
  are kept), so an agent that ticks for months makes one small trace per turn, not one trace
  of every turn; its LLM calls, tool calls and children are in that trace;
* while a turn span is open, the contrib's outbound spans of that workflow run
  (``StartActivity``, ``StartChildWorkflow``, ``Signal*Workflow``) are its children, so LLM
  calls, tool calls and delegated children hang under the turn;
* activity spans (``chat``, ``execute_tool``, :mod:`.spans`) under ``RunActivity``.

Open turn spans are kept per workflow run on this worker, at most :data:`MAX_OPEN_TURNS`
(the oldest is dropped unexported past that: a workflow evicted mid-turn and never back).
"""

from __future__ import annotations

import collections
import dataclasses
import os
import threading
from collections.abc import Mapping
from typing import Any

import opentelemetry.context
import opentelemetry.trace
import temporalio.worker
from opentelemetry.sdk.resources import Resource
from opentelemetry.sdk.trace import TracerProvider
from opentelemetry.sdk.trace.export import BatchSpanProcessor, ConsoleSpanExporter, SpanExporter
from opentelemetry.trace import Status, StatusCode
from temporalio.contrib.opentelemetry import (
    TracingInterceptor,
    TracingWorkflowInboundInterceptor,
)

from toolnexus_temporal.observability.spans import ACTIVE_TRACER
from toolnexus_temporal.observability.tracing import traces_exporter
from toolnexus_temporal.workflows.contract.names import (
    SIGNAL_WAKE,
    TURN_SPAN_END,
    TURN_SPAN_START,
    UPDATE_TURN,
)

MAX_OPEN_TURNS = 10_000
"""Most turn spans one worker keeps open at once."""

WAKE_PARENT = "__tnx_wake_parent"
"""Extern function: the trace context carried by a ``wake``/``turn`` message of a run."""

_WAKES = frozenset({SIGNAL_WAKE, UPDATE_TURN})

RunKey = tuple[str, str]


class TnxTracingInterceptor(TracingInterceptor):
    """``TracingInterceptor`` with the turn spans and the activity spans (module docstring).

    Install it on the client (``Client.connect(interceptors=[...])``: the worker built from
    that client uses it too) or on the worker only. ``connect(tracing=True)`` and
    ``create_worker(tracing=True)`` do that, and set up the SDK (:func:`setup_tracing`).

    Args:
        tracer: the tracer (default: the global provider's ``toolnexus_temporal``).
    """

    def __init__(self, tracer: opentelemetry.trace.Tracer | None = None) -> None:
        super().__init__(tracer or opentelemetry.trace.get_tracer("toolnexus_temporal"))
        self._turns: collections.OrderedDict[RunKey, Any] = collections.OrderedDict()
        self._wakes: collections.OrderedDict[RunKey, dict[str, Any]] = collections.OrderedDict()
        self._previous: collections.OrderedDict[str, opentelemetry.trace.SpanContext] = (
            collections.OrderedDict()
        )
        """The span context of each handle's last turn span made here, by workflow id (every
        run of the handle): what a tick's or a background report's turn links to."""

    def workflow_interceptor_class(
        self, input: temporalio.worker.WorkflowInterceptorClassInput
    ) -> type[TracingWorkflowInboundInterceptor]:
        """The contrib's workflow interceptor, which also reports wake contexts, and our
        extern functions (``workflows/turn/observe.py``)."""
        super().workflow_interceptor_class(input)
        input.unsafe_extern_functions.update(
            {
                TURN_SPAN_START: self._turn_start,
                TURN_SPAN_END: self._turn_end,
                WAKE_PARENT: self._wake_parent,
            }
        )
        return _WorkflowInbound

    def intercept_activity(
        self, next: temporalio.worker.ActivityInboundInterceptor
    ) -> temporalio.worker.ActivityInboundInterceptor:
        """The contrib's activity span (``RunActivity``), then :data:`ACTIVE_TRACER` set for
        the activity's own spans."""
        return super().intercept_activity(_ActivityInbound(next, self.tracer))

    # ---------------------------------------------------------------- worker side of workflows

    def _wake_parent(self, params: Mapping[str, Any]) -> None:
        key = (params["workflow_id"], params["run_id"])
        if params.get("start") and key in self._wakes:
            # The run's start comes after a wake in the same first activation (the SDK runs
            # signal and update handlers before the workflow function): the wake's context
            # stays the turn's parent.
            return
        self._wakes[key] = params["carrier"]
        self._wakes.move_to_end(key)
        while len(self._wakes) > MAX_OPEN_TURNS:
            self._wakes.popitem(last=False)

    def _turn_start(self, params: Mapping[str, Any]) -> None:
        key = (params["workflow_id"], params["run_id"])
        previous = self._previous.get(params["workflow_id"])
        links: list[opentelemetry.trace.Link] = []
        if params.get("own_trace"):
            # a tick's or a background report's turn: a root, linked to the previous turn
            context = opentelemetry.context.Context()
            if previous is not None:
                links.append(opentelemetry.trace.Link(previous))
        else:
            carrier = self._wakes.get(key)
            if not carrier:
                return  # no parent: like the contrib's workflow spans, none (no orphans)
            context = self.text_map_propagator.extract(carrier)
        span = self.tracer.start_span(
            params["name"],
            context,
            attributes=params["attributes"],
            links=links,
            start_time=params["time_ns"],
            kind=opentelemetry.trace.SpanKind.INTERNAL,
        )
        self._previous[params["workflow_id"]] = span.get_span_context()
        self._previous.move_to_end(params["workflow_id"])
        while len(self._previous) > MAX_OPEN_TURNS:
            self._previous.popitem(last=False)
        self._turns.pop(key, None)  # one whose end was seen elsewhere: dropped, unexported
        self._turns[key] = span
        while len(self._turns) > MAX_OPEN_TURNS:
            self._turns.popitem(last=False)

    def _turn_end(self, params: Mapping[str, Any]) -> None:
        span = self._turns.pop((params["workflow_id"], params["run_id"]), None)
        if span is None:
            return  # the turn started on replay: no span
        span.set_attributes(params["attributes"])
        if params.get("error"):
            span.set_status(Status(StatusCode.ERROR, params["error"]))
        span.end(end_time=params["time_ns"])

    def _completed_workflow_span(self, params: Any) -> Any:
        """The contrib's zero-length workflow span; an outbound one of a run with an open turn
        span is made its child."""
        attrs = params.attributes or {}
        key = (str(attrs.get("temporalWorkflowID")), str(attrs.get("temporalRunID")))
        span = self._turns.get(key)
        if span is not None and params.name.startswith(("Start", "Signal")):
            carrier: dict[str, Any] = {}
            self.text_map_propagator.inject(carrier, opentelemetry.trace.set_span_in_context(span))
            params = dataclasses.replace(params, context=carrier, parent_missing=False)
        return super()._completed_workflow_span(params)


class _WorkflowInbound(TracingWorkflowInboundInterceptor):
    """The contrib's workflow interceptor, reporting the trace context of each ``wake``
    signal and ``turn`` update (the parent of the turn it admits) and the workflow's own."""

    async def execute_workflow(self, input: temporalio.worker.ExecuteWorkflowInput) -> Any:
        self._report(self._load_workflow_context_carrier(), start=True)
        return await super().execute_workflow(input)

    async def handle_signal(self, input: temporalio.worker.HandleSignalInput) -> None:
        if input.signal in _WAKES:
            self._report_header(input.headers)
        await super().handle_signal(input)

    async def handle_update_handler(self, input: temporalio.worker.HandleUpdateInput) -> Any:
        if input.update in _WAKES:
            self._report_header(input.headers)
        return await super().handle_update_handler(input)

    def _report_header(self, headers: Mapping[str, Any]) -> None:
        """A wake without a context (an untraced host) parents its turn on the workflow's."""
        payload = headers.get(self.header_key)
        if payload:
            self._report(self.payload_converter.from_payloads([payload])[0])
        else:
            self._report(self._load_workflow_context_carrier())

    def _report(self, carrier: dict[str, Any] | None, start: bool = False) -> None:
        """Tell the worker the context a turn admitted next is parented on (``start``: the
        run's own, which never replaces a wake's already told)."""
        info = temporalio.workflow.info()
        report = temporalio.workflow.extern_functions().get(WAKE_PARENT)
        if report is not None:
            report(
                {
                    "workflow_id": info.workflow_id,
                    "run_id": info.run_id,
                    "carrier": carrier or {},
                    "start": start,
                }
            )


class _ActivityInbound(temporalio.worker.ActivityInboundInterceptor):
    def __init__(self, next: temporalio.worker.ActivityInboundInterceptor, tracer: Any) -> None:
        super().__init__(next)
        self._tracer = tracer

    async def execute_activity(self, input: temporalio.worker.ExecuteActivityInput) -> Any:
        token = ACTIVE_TRACER.set(self._tracer)
        try:
            return await super().execute_activity(input)
        finally:
            ACTIVE_TRACER.reset(token)


_PROVIDER: list[TracerProvider] = []


def setup_tracing(exporter: SpanExporter | None = None) -> TracerProvider:
    """The process's tracer provider, set up once: the global one when the application set
    an SDK ``TracerProvider`` itself, else a new one (resource from ``OTEL_SERVICE_NAME`` /
    ``OTEL_RESOURCE_ATTRIBUTES``, service name ``toolnexus-temporal`` by default) exporting
    through a ``BatchSpanProcessor`` to ``exporter``, else to what ``OTEL_TRACES_EXPORTER``
    names: ``otlp`` (the default; OTLP over HTTP/protobuf, configured by the standard
    ``OTEL_EXPORTER_OTLP_*`` variables) or ``console``.

    Raises:
        TracingConfigError: ``OTEL_TRACES_EXPORTER`` names another exporter
            (:func:`~toolnexus_temporal.observability.tracing.traces_exporter`).
        ImportError: the OTLP exporter is not installed (the ``otel`` extra).
    """
    current = opentelemetry.trace.get_tracer_provider()
    if isinstance(current, TracerProvider):
        return current
    if _PROVIDER:
        return _PROVIDER[0]
    if exporter is None:
        if traces_exporter() == "console":
            exporter = ConsoleSpanExporter()
        else:
            from opentelemetry.exporter.otlp.proto.http.trace_exporter import OTLPSpanExporter

            exporter = OTLPSpanExporter()
    resource = Resource.create(
        {"service.name": os.environ.get("OTEL_SERVICE_NAME") or "toolnexus-temporal"}
    )
    provider = TracerProvider(resource=resource)
    provider.add_span_processor(BatchSpanProcessor(exporter))
    opentelemetry.trace.set_tracer_provider(provider)
    _PROVIDER.append(provider)
    return provider


def tracing_interceptor() -> TnxTracingInterceptor:
    """Set up the SDK (:func:`setup_tracing`) and return the interceptor on its tracer."""
    setup_tracing()
    return TnxTracingInterceptor()


FLUSH_AT_EXIT_S = 1.0
"""How long :func:`flush_tracing` waits for the spans still queued to be exported, s. The
OTLP exporter's own timeout (``OTEL_EXPORTER_OTLP_TIMEOUT``, 10 s) is longer: a collector that
does not answer costs a process's exit at most this much, and those spans are lost."""


def flush_tracing(timeout_s: float = FLUSH_AT_EXIT_S) -> None:
    """Export the spans the tracer provider set up here (:func:`setup_tracing`) still holds,
    waiting at most ``timeout_s`` seconds; a provider the application set itself is its own.
    ``cli.ops.hard_exit`` calls it: a process ending with ``os._exit`` skips the SDK's own
    flush at interpreter exit. The SDK's ``force_flush`` ignores its timeout (it blocks until
    the exporter returns), so it runs on a daemon thread that is waited for ``timeout_s``."""
    for provider in _PROVIDER:
        flusher = threading.Thread(target=provider.force_flush, name="tnx-otel-flush", daemon=True)
        flusher.start()
        flusher.join(timeout_s)
