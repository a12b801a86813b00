"""Tracing and metrics of the host and the worker, in one place (issue 33, item 3).

Imported downward by ``client/``, ``activities/``, ``worker.py`` and ``cli/``; it imports none
of them (only ``workflows/contract/`` for names, the turn span's extern functions among them,
and temporalio). The workflow side (the turn span opened in
workflow code, the counters a workflow records) stays in ``workflows/``: it must be
deterministic.

* :mod:`.tracing`: when OpenTelemetry tracing is on (the option, the ``OTEL_*`` environment),
  without importing OpenTelemetry.
* :mod:`.otel`: the tracing interceptor (Temporal's contrib plus the turn spans and their
  parents) and the SDK and exporter set-up; imported only when tracing is on.
* :mod:`.spans`: the activities' ``chat`` and ``execute_tool`` spans, their GenAI attributes,
  content capture (opt-in, bounded).
* :mod:`.metrics`: LLM calls and tool attempts counted by outcome and timed, in ms.
* :mod:`.activity`: the activity interceptor that puts those spans and metrics around the
  activities (installed by ``create_worker``).
* :mod:`.prometheus`: the worker's Prometheus endpoint (its SDK runtime) and the fleet gauges
  read from visibility.

This ``__init__`` imports nothing: the host's client loads :mod:`.tracing` alone.
"""
