"""``tnx-worker`` and the OpenTelemetry environment (docs/guide/tracing.md), no server: an
exporter name the SDK set-up does not know is a usage error at start, one line (exit 2),
not a traceback out of the connect."""

from __future__ import annotations

import pytest
from typer.testing import CliRunner

from toolnexus_temporal.cli import worker_cmd
from toolnexus_temporal.observability.tracing import TracingConfigError, traces_exporter

BASE = ["--registry", "tests.registries:APPROVALS", "--llm-base-url", "http://x/v1", "--model", "m"]


def test_traces_exporter_names() -> None:
    assert traces_exporter({}) == "otlp"
    assert traces_exporter({"OTEL_TRACES_EXPORTER": " Console "}) == "console"
    assert traces_exporter({"OTEL_TRACES_EXPORTER": "otlp,console"}) == "otlp"
    with pytest.raises(TracingConfigError, match="'jaeger': use otlp, console or none"):
        traces_exporter({"OTEL_TRACES_EXPORTER": "jaeger"})


def test_an_unknown_exporter_is_a_usage_error(monkeypatch: pytest.MonkeyPatch) -> None:
    served: list[object] = []

    async def fake_serve(**kw: object) -> None:
        served.append(kw)

    monkeypatch.setattr(worker_cmd, "serve", fake_serve)
    runner = CliRunner()
    result = runner.invoke(worker_cmd.app, BASE, env={"OTEL_TRACES_EXPORTER": "jaeger"})
    assert result.exit_code == 2, result.output
    assert "OTEL_TRACES_EXPORTER='jaeger'" in result.output and not served
    assert "Traceback" not in result.output
    # tracing off: the name is not read (--no-otel wins over the environment)
    result = runner.invoke(
        worker_cmd.app, [*BASE, "--no-otel"], env={"OTEL_TRACES_EXPORTER": "jaeger"}
    )
    assert result.exit_code == 0, result.output
    assert served


def test_tracing_on_without_the_otel_extra_names_it(monkeypatch: pytest.MonkeyPatch) -> None:
    """``--otel`` (or an ``OTEL_*`` endpoint in the environment) on a machine without the
    ``otel`` extra: one line naming the extra and how to turn tracing off, exit 2, not a
    ModuleNotFoundError traceback out of the connect."""
    from toolnexus_temporal.observability import tracing

    monkeypatch.setattr(tracing, "installed", lambda module: not module.startswith("opentel"))
    with pytest.raises(TracingConfigError, match=r"toolnexus-temporal\[otel\]"):
        tracing.check_tracing_setup({})
    served: list[object] = []

    async def fake_serve(**kw: object) -> None:
        served.append(kw)

    monkeypatch.setattr(worker_cmd, "serve", fake_serve)
    result = CliRunner().invoke(worker_cmd.app, [*BASE, "--otel"], env={"OTEL_TRACES_EXPORTER": ""})
    assert result.exit_code == 2 and not served, result.output
    assert "toolnexus-temporal[otel]" in result.output and "OTEL_SDK_DISABLED" in result.output
