"""OpenTelemetry tracing (issue 27, item 1): the spans of the activities.

When tracing is on is one rule, :func:`~toolnexus_temporal.observability.tracing.tracing_wanted`;
off (the default), no tracing interceptor is installed and nothing here imports OpenTelemetry.

**The spans** (names and attributes of the OpenTelemetry GenAI semantic conventions,
https://opentelemetry.io/docs/specs/semconv/gen-ai/): ``chat {model}`` around one LLM call
(:func:`llm_span`) and ``execute_tool {tool}`` around one tool call (:func:`tool_span`), each
a child of the contrib interceptor's ``RunActivity`` span and opened by the activity
interceptor (``observability/activity.py``); the turn's ``invoke_agent {agent}`` span is made
in workflow code (``workflows/turn/observe.py``) and ended by ``observability/otel.py``. Our
own attributes: ``tnx.handle.id``, ``tnx.parent.id``.

**Content** (prompts, completions, tool arguments and results) is recorded only when
``OTEL_INSTRUMENTATION_GENAI_CAPTURE_MESSAGE_CONTENT=true`` (the GenAI instrumentations'
standard switch), each value cut to :data:`CONTENT_MAX_CHARS` characters.

An activity makes its spans only under the tracing interceptor (``observability/otel.py`` sets
:data:`ACTIVE_TRACER` for the activity's duration); elsewhere the helpers return at once.
"""

from __future__ import annotations

import contextlib
import contextvars
import json
import os
from collections.abc import Iterator, Mapping
from typing import Any

from toolnexus_temporal.observability.tracing import truthy
from toolnexus_temporal.workflows.contract.models import Message, ToolResult, Usage

ENV_CAPTURE_CONTENT = "OTEL_INSTRUMENTATION_GENAI_CAPTURE_MESSAGE_CONTENT"
"""``true``: spans carry prompts, completions, tool arguments and results (bounded)."""

CONTENT_MAX_CHARS = 8_000
"""Most characters of one captured content attribute (a span attribute is sent as is)."""

ACTIVE_TRACER: contextvars.ContextVar[Any] = contextvars.ContextVar("tnx_tracer", default=None)
"""The OpenTelemetry tracer of the tracing interceptor running the current activity (None:
tracing is off for it)."""

CURRENT_LLM: contextvars.ContextVar[LlmSpan | None] = contextvars.ContextVar(
    "tnx_llm_span", default=None
)
"""The ``chat`` span of the LLM activity running (:func:`llm_span` sets it)."""


def capture_content(env: Mapping[str, str] | None = None) -> bool:
    """Whether spans carry message content (:data:`ENV_CAPTURE_CONTENT` is ``true``)."""
    return truthy((os.environ if env is None else env).get(ENV_CAPTURE_CONTENT))


def _bounded(value: Any) -> str:
    text = value if isinstance(value, str) else json.dumps(value, ensure_ascii=False)
    return text if len(text) <= CONTENT_MAX_CHARS else text[:CONTENT_MAX_CHARS] + "…"


def handle_attributes(handle_id: str) -> dict[str, str]:
    """``tnx.handle.id``, ``tnx.parent.id`` and ``gen_ai.agent.name`` of a handle id
    (``{parent_id}/{agent_name}.{n}``, CONTRACT §2)."""
    parent, _, last = handle_id.rpartition("/")
    return {
        "tnx.handle.id": handle_id,
        "tnx.parent.id": parent,
        "gen_ai.agent.name": last.rpartition(".")[0] or last,
    }


def current_llm() -> LlmSpan:
    """The :class:`LlmSpan` the activity interceptor opened for the LLM activity running (a
    no-op one outside it, or with tracing off): record the request and answer on it."""
    return CURRENT_LLM.get() or LlmSpan(None)


class LlmSpan:
    """What :func:`llm_span` yields: record the response on the span (no-op when off)."""

    def __init__(self, span: Any) -> None:
        self.span = span

    def request(self, messages: list[Message]) -> None:
        """The messages sent (only with content capture on): ``gen_ai.input.messages``."""
        if self.span is not None and capture_content():
            self.span.set_attribute(
                "gen_ai.input.messages",
                _bounded([m.model_dump(exclude_none=True) for m in messages]),
            )

    def response(
        self, message: Message, usage: Usage, model: str | None, finish_reasons: list[str]
    ) -> None:
        """The model's answer: ``gen_ai.response.model``, ``gen_ai.usage.input_tokens`` /
        ``output_tokens`` (tokens), ``gen_ai.response.finish_reasons``, and
        ``gen_ai.output.messages`` with content capture on."""
        if self.span is None:
            return
        attrs: dict[str, Any] = {
            "gen_ai.usage.input_tokens": usage.prompt_tokens,
            "gen_ai.usage.output_tokens": usage.completion_tokens,
        }
        if model:
            attrs["gen_ai.response.model"] = model
        if finish_reasons:
            attrs["gen_ai.response.finish_reasons"] = finish_reasons
        if capture_content():
            attrs["gen_ai.output.messages"] = _bounded(message.model_dump(exclude_none=True))
        self.span.set_attributes(attrs)

    def recorded(self) -> None:
        """A retry returned the completion an earlier attempt recorded: the model was not
        asked (no usage here: it was counted on the earlier attempt's span)."""
        if self.span is not None:
            self.span.set_attribute("tnx.llm.recorded", True)


@contextlib.contextmanager
def llm_span(*, model: str, provider: str) -> Iterator[LlmSpan]:
    """The ``chat {model}`` span (kind CLIENT) of one LLM call in the current activity, with
    ``gen_ai.operation.name`` ``chat``, ``gen_ai.request.model``, ``gen_ai.provider.name``
    (the wire style) and the handle's attributes (from the activity's workflow id). Yields a
    no-op :class:`LlmSpan` when tracing is off; :func:`current_llm` returns it meanwhile."""
    tracer = ACTIVE_TRACER.get()
    if tracer is None:
        yield LlmSpan(None)
        return
    from opentelemetry.trace import SpanKind

    attrs = {
        "gen_ai.operation.name": "chat",
        "gen_ai.request.model": model,
        "gen_ai.provider.name": provider,
        **_activity_handle(),
    }
    with tracer.start_as_current_span(f"chat {model}", kind=SpanKind.CLIENT, attributes=attrs) as s:
        span = LlmSpan(s)
        token = CURRENT_LLM.set(span)
        try:
            yield span
        except BaseException as err:
            s.set_attribute("error.type", _error_type(err))
            raise
        finally:
            CURRENT_LLM.reset(token)


class ToolSpan:
    """What :func:`tool_span` yields (no-op when tracing is off): call it with the
    ToolResult; :meth:`rename` it when the tool's name is not one of the registry's."""

    def __init__(self, span: Any) -> None:
        self.span = span

    def __call__(self, result: ToolResult) -> None:
        """Record ``result``: ``error.type`` ``tool_error`` for an ``is_error`` result and,
        with content capture on, ``gen_ai.tool.call.result``."""
        if self.span is None:
            return
        if result.is_error:
            self.span.set_attribute("error.type", "tool_error")
        if capture_content():
            self.span.set_attribute("gen_ai.tool.call.result", _bounded(result.output))

    def rename(self, tool: str) -> None:
        """Name the span ``execute_tool {tool}``: a name the model made up becomes the
        metrics' ``<server>__(unknown)`` (span names stay low-cardinality, as the
        OpenTelemetry span-name guidance asks); ``gen_ai.tool.name`` keeps what was called."""
        if self.span is not None:
            self.span.update_name(f"execute_tool {tool}")


@contextlib.contextmanager
def tool_span(*, tool: str, call_id: str, handle_id: str, arguments: str) -> Iterator[ToolSpan]:
    """The ``execute_tool {tool}`` span (kind INTERNAL) of one tool call: ``gen_ai.operation.name``
    ``execute_tool``, ``gen_ai.tool.name``, ``gen_ai.tool.call.id``, the handle's attributes;
    with content capture on, ``gen_ai.tool.call.arguments``. Yields a :class:`ToolSpan` that
    records the ToolResult. A no-op when tracing is off."""
    tracer = ACTIVE_TRACER.get()
    if tracer is None:
        yield ToolSpan(None)
        return
    attrs: dict[str, Any] = {
        "gen_ai.operation.name": "execute_tool",
        "gen_ai.tool.name": tool,
        "gen_ai.tool.call.id": call_id,
        **handle_attributes(handle_id),
    }
    if capture_content():
        attrs["gen_ai.tool.call.arguments"] = _bounded(arguments)

    with tracer.start_as_current_span(f"execute_tool {tool}", attributes=attrs) as s:
        try:
            yield ToolSpan(s)
        except BaseException as err:
            s.set_attribute("error.type", _error_type(err))
            raise


def _error_type(err: BaseException) -> str:
    kind = getattr(err, "type", None)  # ApplicationError's type
    return kind if isinstance(kind, str) and kind else type(err).__name__


def _activity_handle() -> dict[str, str]:
    """The handle attributes of the activity's workflow: its id is ``{scope}/{handle_id}`` or
    the handle id (``names.workflow_id_for``), and every handle id starts at ``root``."""
    from temporalio import activity

    parts = (activity.info().workflow_id or "").split("/")
    start = parts.index("root") if "root" in parts else 0
    return handle_attributes("/".join(parts[start:]))
