"""When OpenTelemetry tracing is on (issue 27, item 1; docs/guide/tracing.md): one rule for
the host's client (:func:`~toolnexus_temporal.client.cluster.connect`), the worker
(:func:`~toolnexus_temporal.worker.create_worker`) and ``tnx-worker --otel``.

Tracing is on when asked for explicitly (``tracing=True``, ``--otel``), else when the standard
OpenTelemetry environment names an exporter: ``OTEL_TRACES_EXPORTER`` set to anything but
``none``, or ``OTEL_EXPORTER_OTLP_ENDPOINT`` / ``OTEL_EXPORTER_OTLP_TRACES_ENDPOINT`` set
(OpenTelemetry SDK environment variables). ``OTEL_SDK_DISABLED=true`` or
``OTEL_TRACES_EXPORTER=none`` turn it off whatever else says. Off (the default): no
interceptor is installed and OpenTelemetry is not imported. On: the interceptor and the SDK
set-up are ``activities/otel.py``.
"""

from __future__ import annotations

import os
from collections.abc import Mapping


def truthy(value: str | None) -> bool:
    """An environment flag's value as a boolean (``1``, ``true``, ``yes``, ``on``)."""
    return (value or "").strip().lower() in ("1", "true", "yes", "on")


def tracing_wanted(explicit: bool | None = None, env: Mapping[str, str] | None = None) -> bool:
    """Whether to trace (the rule in the module docstring).

    Args:
        explicit: True/False from the caller's option; None: decide from ``env``.
        env: the environment (default ``os.environ``).
    """
    env = os.environ if env is None else env
    exporter = (env.get("OTEL_TRACES_EXPORTER") or "").strip().lower()
    if truthy(env.get("OTEL_SDK_DISABLED")) or exporter == "none":
        return False
    if explicit is not None:
        return explicit
    return bool(
        exporter
        or env.get("OTEL_EXPORTER_OTLP_ENDPOINT")
        or env.get("OTEL_EXPORTER_OTLP_TRACES_ENDPOINT")
    )


TRACES_EXPORTERS = ("otlp", "console")
"""The ``OTEL_TRACES_EXPORTER`` names the SDK set-up (``activities/otel.py``) knows, besides
``none`` (tracing off)."""


class TracingConfigError(ValueError):
    """``OTEL_TRACES_EXPORTER`` names an exporter this runtime does not set up."""


def traces_exporter(env: Mapping[str, str] | None = None) -> str:
    """The exporter that ``OTEL_TRACES_EXPORTER`` names (its first entry, lower case;
    ``otlp`` when unset), one of :data:`TRACES_EXPORTERS`.

    Raises:
        TracingConfigError: another name (``tnx-worker`` makes it a usage error, exit 2).
    """
    env = os.environ if env is None else env
    kind = (env.get("OTEL_TRACES_EXPORTER") or "otlp").split(",")[0].strip().lower()
    if kind not in TRACES_EXPORTERS:
        raise TracingConfigError(f"OTEL_TRACES_EXPORTER={kind!r}: use otlp, console or none")
    return kind
