"""When OpenTelemetry tracing is on (issue 27, item 1; docs/guide/tracing.md): one rule for
the host's client (:func:`~toolnexus_temporal.client.cluster.connect`), the worker
(:func:`~toolnexus_temporal.worker.create_worker`) and ``tnx-worker --otel``.

Tracing is on when asked for explicitly (``tracing=True``, ``--otel``), else when the standard
OpenTelemetry environment names an exporter: ``OTEL_TRACES_EXPORTER`` set to anything but
``none``, or ``OTEL_EXPORTER_OTLP_ENDPOINT`` / ``OTEL_EXPORTER_OTLP_TRACES_ENDPOINT`` set
(OpenTelemetry SDK environment variables). ``OTEL_SDK_DISABLED=true`` or
``OTEL_TRACES_EXPORTER=none`` turn it off whatever else says. Off (the default): no
interceptor is installed and OpenTelemetry is not imported. On: the interceptor and the SDK
set-up are ``observability/otel.py``.
"""

from __future__ import annotations

import importlib.util
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
"""The ``OTEL_TRACES_EXPORTER`` names the SDK set-up (``observability/otel.py``) knows, besides
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


OTEL_EXTRA_HINT = (
    "pip install 'toolnexus-temporal[otel]', or turn tracing off (--no-otel, tracing=False, "
    "OTEL_SDK_DISABLED=true)"
)


def installed(module: str) -> bool:
    """Whether ``module`` can be imported here (without importing it)."""
    try:
        return importlib.util.find_spec(module) is not None
    except (ModuleNotFoundError, ValueError):  # its parent package is missing
        return False


def check_tracing_setup(env: Mapping[str, str] | None = None) -> None:
    """Check, before anything connects, that tracing once on can be set up: the exporter
    name (:func:`traces_exporter`) and the ``otel`` extra (the OpenTelemetry SDK and, for
    ``otlp``, its OTLP/HTTP exporter) installed.

    Raises:
        TracingConfigError: a name not known, or the extra missing (the message says how
            to install it or turn tracing off).
    """
    kind = traces_exporter(env)
    needed = ["opentelemetry.sdk"]
    if kind == "otlp":
        needed.append("opentelemetry.exporter.otlp.proto.http")
    missing = [module for module in needed if not installed(module)]
    if missing:
        raise TracingConfigError(
            f"tracing is on but {missing[0]} is not installed: {OTEL_EXTRA_HINT}"
        )
