"""``tnx-worker``'s options in one settings model (issue 33, item 3): :class:`WorkerSettings`.

Each field is one option: its flag, environment variable and help are the field's
``typer.Option`` (:func:`settings_options` turns the fields into the command's parameters),
and its check is the field's validator. A check that fails raises :class:`SettingError`
naming the option; :func:`bad_parameter` makes the first failure of a ``ValidationError`` the
usage error ``tnx-worker`` prints (``error: --store: ...``, exit 2; the option's environment
variable when the value came from there: :mod:`~toolnexus_temporal.cli.usage`). The fields are
checked in their order here (the order of ``tnx-worker --help``), then the ports of
``--metrics-port`` under ``--processes``.

Values derived from the options (the LLM config, the codec, the deployment version, the
number of processes) are properties, computed again from the checked options.
"""

from __future__ import annotations

import inspect
import os
from pathlib import Path
from typing import Annotated, Any, get_type_hints

import typer
from pydantic import (
    BaseModel,
    ConfigDict,
    ValidationError,
    ValidationInfo,
    field_validator,
    model_validator,
)
from temporalio.common import WorkerDeploymentVersion

from toolnexus_temporal.activities.llm import LlmConfig
from toolnexus_temporal.activities.pricing import load_prices
from toolnexus_temporal.activities.registry import Registry, RegistryError
from toolnexus_temporal.activities.store import StoreConfigError
from toolnexus_temporal.activities.stores import open_store
from toolnexus_temporal.cli.supervisor import PROCESSES_ENV, ProcessesError, parse_processes
from toolnexus_temporal.client.codec import (
    ENV_KEY_FILE,
    ENV_KEYS,
    AesGcmCodec,
    CodecError,
    codec_from_keys,
)
from toolnexus_temporal.client.queries import check_task_queue
from toolnexus_temporal.observability.prometheus import DEFAULT_FLEET_INTERVAL_S
from toolnexus_temporal.observability.tracing import (
    TracingConfigError,
    check_tracing_setup,
    tracing_wanted,
)
from toolnexus_temporal.worker import (
    DEFAULT_GRACEFUL_SHUTDOWN_S,
    DEFAULT_STORE_PATH,
    DEFAULT_TASK_QUEUE,
    parse_deployment,
)


class SettingError(ValueError):
    """A ``tnx-worker`` option that does not check out.

    Args:
        option: the option as the usage error names it (``--store``).
        message: why, in one line.
    """

    def __init__(self, option: str, message: str) -> None:
        super().__init__(message)
        self.option = option


class WorkerSettings(BaseModel):
    """The options of ``tnx-worker run`` besides the Temporal connection (which is
    ``cli/connection_opts.py``'s), checked (module docstring).

    Raises:
        ValidationError: an option does not check out; its errors hold :class:`SettingError`
            (:func:`bad_parameter`).
    """

    model_config = ConfigDict(frozen=True, validate_default=True)

    registry: Annotated[
        str,
        typer.Option(
            envvar="TNX_REGISTRY",
            help="Agent registry as package.module:NAME, e.g. toolnexus_temporal.cli.demo:REGISTRY",
        ),
    ]
    task_queue: Annotated[str, typer.Option(envvar="TNX_TASK_QUEUE")] = DEFAULT_TASK_QUEUE
    llm_base_url: Annotated[
        str | None, typer.Option(envvar="OPENAI_BASE_URL", help="OpenAI-compatible base URL")
    ] = None
    model: Annotated[
        str | None, typer.Option(envvar="TNX_MODEL", help="Model used for model='inherit'")
    ] = None
    style: Annotated[
        str, typer.Option(envvar="TNX_LLM_STYLE", help="Wire style: openai or anthropic")
    ] = "openai"
    prices: Annotated[
        Path | None,
        typer.Option(
            envvar="TNX_PRICES",
            help="Price table, JSON or TOML (.toml): model -> input, output, cached_input, "
            "cache_write in USD per million tokens (docs/guide/python.md#money)",
        ),
    ] = None
    max_concurrent_turns: Annotated[
        int | None,
        typer.Option(
            envvar="TNX_MAX_CONCURRENT_TURNS",
            min=1,  # one line, not worker.py's ValueError with a traceback (walk 7)
            help="LLM calls in flight at once (at least 1; default: no cap)",
        ),
    ] = None
    store: Annotated[
        str,
        typer.Option(
            envvar=["TNX_STORE_URL", "TNX_STORE"],
            help="Conversation store: postgresql://user:pw@host:5432/db (many hosts), "
            "sqlite:///abs/path or a SQLite file path (one host)",
        ),
    ] = str(DEFAULT_STORE_PATH)
    sandbox: Annotated[
        bool,
        typer.Option(
            "--sandbox",
            envvar="TNX_SANDBOX",
            help="Run workflows in Temporal's sandbox (slower; see worker.workflow_runner)",
        ),
    ] = False
    codec_keys: Annotated[
        str | None,
        typer.Option(
            envvar=ENV_KEYS,
            help="Encrypt payloads: key entries id:base64key,... (first encodes, all decode)",
        ),
    ] = None
    codec_key_file: Annotated[
        Path | None, typer.Option(envvar=ENV_KEY_FILE, help="File of codec key entries")
    ] = None
    deployment_name: Annotated[
        str | None,
        typer.Option(
            envvar="TNX_DEPLOYMENT_NAME",
            help="Worker Versioning: the worker deployment's name (with --build-id)",
        ),
    ] = None
    build_id: Annotated[
        str | None,
        typer.Option(
            envvar="TNX_BUILD_ID",
            help="Worker Versioning: this code's build id, e.g. a git sha (with --deployment-name)",
        ),
    ] = None
    graceful_shutdown_s: Annotated[
        float,
        typer.Option(
            envvar="TNX_GRACEFUL_SHUTDOWN_S",
            min=0,
            help="Seconds activities in flight (LLM calls, tools) get to finish after "
            "SIGTERM/SIGINT before they are cancelled",
        ),
    ] = DEFAULT_GRACEFUL_SHUTDOWN_S
    metrics_port: Annotated[
        int | None,
        typer.Option(
            envvar="TNX_METRICS_PORT",
            min=1,
            max=65535,
            help="Serve Prometheus metrics (the SDK's and the runtime's) on this port at "
            "/metrics (docs/guide/metrics.md)",
        ),
    ] = None
    metrics_host: Annotated[
        str, typer.Option(envvar="TNX_METRICS_HOST", help="The address --metrics-port binds")
    ] = "0.0.0.0"
    fleet_metrics_interval_s: Annotated[
        float,
        typer.Option(
            envvar="TNX_FLEET_METRICS_INTERVAL_S",
            min=0,
            help="Seconds between the fleet gauges' visibility reads (approvals waiting, "
            "handles by state), at least 1; 0: this worker reports none",
        ),
    ] = DEFAULT_FLEET_INTERVAL_S
    otel: Annotated[
        bool | None,
        typer.Option(
            "--otel/--no-otel",
            help="OpenTelemetry traces, exported as the OTEL_* variables say (default: on "
            "when OTEL_TRACES_EXPORTER or OTEL_EXPORTER_OTLP_ENDPOINT is set)",
        ),
    ] = None
    processes: Annotated[
        str,
        typer.Option(
            envvar=PROCESSES_ENV,
            help="Worker processes on this host, all on the task queue, under one supervisor "
            "(auto: one per core; the LLM cap is per process; see docs/guide/scale.md)",
        ),
    ] = "1"
    workspace_root: Annotated[
        Path | None,
        typer.Option(
            envvar="TNX_WORKSPACE_ROOT",
            help="Where workspace tools' directories live (kept); default: a temporary "
            "directory removed when the worker stops",
        ),
    ] = None

    @field_validator("registry")
    @classmethod
    def _registry_loads(cls, spec: str) -> str:
        try:
            Registry.load(spec)
        except RegistryError as err:
            raise SettingError("--registry", str(err)) from None
        return spec

    @field_validator("task_queue")
    @classmethod
    def _task_queue_quotes(cls, task_queue: str) -> str:
        try:
            check_task_queue(task_queue)  # it goes into TaskQueue="..." (fleet gauges)
        except ValueError as err:
            raise SettingError("--task-queue", str(err)) from None
        return task_queue

    @field_validator("llm_base_url")
    @classmethod
    def _llm_given(cls, url: str | None) -> str:
        if not url:
            raise SettingError(
                "--llm-base-url",
                "required: an OpenAI-compatible base URL such as http://127.0.0.1:8080/v1 "
                "(or set OPENAI_BASE_URL)",
            )
        if not url.startswith(("http://", "https://")):  # walk 8: 'not a url' started
            raise SettingError(
                "--llm-base-url", f"must be an http:// or https:// URL, got {url[:80]!r}"
            )
        return url

    @field_validator("model")
    @classmethod
    def _model_given(cls, model: str | None) -> str:
        model = model or os.environ.get("OPENAI_MODEL")
        if not model:
            raise SettingError("--model", "required: the model's name (or set TNX_MODEL)")
        return model

    @field_validator("style")
    @classmethod
    def _style_known(cls, style: str) -> str:
        if style not in ("openai", "anthropic"):
            raise SettingError("--style", f"must be openai or anthropic, got {style!r}")
        return style

    @field_validator("prices")
    @classmethod
    def _prices_read(cls, path: Path | None) -> Path | None:
        try:
            if path is not None:
                load_prices(path)
        except ValueError as err:
            raise SettingError("--prices", str(err)) from None
        return path

    @field_validator("build_id")
    @classmethod
    def _versioning(cls, build_id: str | None, info: ValidationInfo) -> str | None:
        try:
            parse_deployment(info.data.get("deployment_name"), build_id)
        except ValueError as err:
            raise SettingError("--deployment-name/--build-id", str(err)) from None
        return build_id

    @field_validator("store")
    @classmethod
    def _store_url(cls, store: str) -> str:
        try:
            open_store(store)  # only checks the URL: nothing connects yet
        except StoreConfigError as err:
            raise SettingError("--store", str(err)) from None
        return store

    @field_validator("codec_key_file")
    @classmethod
    def _codec_keys_read(cls, key_file: Path | None, info: ValidationInfo) -> Path | None:
        keys = info.data.get("codec_keys")
        try:
            if keys or key_file:
                codec_from_keys(keys, key_file)
        except CodecError as err:
            raise SettingError("--codec-keys", str(err)) from None
        return key_file

    @field_validator("otel")
    @classmethod
    def _tracing_set_up(cls, otel: bool | None) -> bool | None:
        try:
            if tracing_wanted(otel):
                check_tracing_setup()  # an unknown exporter or no otel extra: here
        except TracingConfigError as err:
            raise SettingError("--otel", str(err)) from None
        return otel

    @field_validator("processes")
    @classmethod
    def _processes_count(cls, processes: str) -> str:
        try:
            parse_processes(processes)
        except ProcessesError as err:
            # the line names the option once ("--processes: must be at least 1, got 0")
            raise SettingError("--processes", str(err).removeprefix("--processes ")) from None
        return processes

    @field_validator("fleet_metrics_interval_s")
    @classmethod
    def _fleet_interval(cls, interval_s: float) -> float:
        if 0 < interval_s < 1:  # back-to-back visibility reads load the server
            raise SettingError(
                "--fleet-metrics-interval-s",
                f"must be 0 (no fleet gauges) or at least 1 s, got {interval_s:g}",
            )
        return interval_s

    @model_validator(mode="after")
    def _ports_fit(self) -> WorkerSettings:
        count = self.process_count
        port = self.metrics_port
        if port is not None and port + count - 1 > 65535:  # P .. P+N-1 (scale.md)
            raise SettingError(
                "--metrics-port",
                f"{count} processes serve ports {port} to {port + count - 1}: "
                f"{port + count - 1} is past 65535",
            )
        return self

    @property
    def llm(self) -> LlmConfig:
        """The LLM endpoint, model, wire style and price table (read again from
        ``--prices``)."""
        return LlmConfig(
            base_url=self.llm_base_url or "",
            model=self.model or "",
            style=self.style,
            prices=load_prices(self.prices) if self.prices is not None else {},
        )

    @property
    def deployment(self) -> WorkerDeploymentVersion | None:
        """Worker Versioning's deployment version, None for an unversioned worker."""
        return parse_deployment(self.deployment_name, self.build_id)

    @property
    def codec(self) -> AesGcmCodec | None:
        """The payload codec (the key file read again), None for plain payloads."""
        if not self.codec_keys and not self.codec_key_file:
            return None
        return codec_from_keys(self.codec_keys, self.codec_key_file)

    @property
    def process_count(self) -> int:
        """Worker processes on this host (``--processes``; ``auto``: one per core)."""
        return parse_processes(self.processes)


def bad_parameter(err: ValidationError) -> typer.BadParameter:
    """The usage error for the first failed option of ``err`` (from :class:`WorkerSettings`):
    its :class:`SettingError`'s message under its option's name."""
    first = err.errors()[0]
    cause = (first.get("ctx") or {}).get("error")
    if isinstance(cause, SettingError):
        return typer.BadParameter(str(cause), param_hint=cause.option)
    field = str(first["loc"][0]) if first["loc"] else ""
    return typer.BadParameter(first["msg"], param_hint=f"--{field.replace('_', '-')}")


def settings_options() -> list[inspect.Parameter]:
    """The command parameters of :class:`WorkerSettings`' fields (their ``typer.Option``s and
    defaults), keyword-only, in field order."""
    hints = get_type_hints(WorkerSettings, include_extras=True)
    return [
        inspect.Parameter(
            name,
            inspect.Parameter.KEYWORD_ONLY,
            annotation=hints[name],
            default=inspect.Parameter.empty if field.is_required() else field.default,
        )
        for name, field in WorkerSettings.model_fields.items()
    ]


def settings_from(kwargs: dict[str, Any]) -> WorkerSettings:
    """Pop the settings' options from a command's ``kwargs`` and check them.

    Raises:
        typer.BadParameter: an option does not check out (:func:`bad_parameter`).
    """
    given = {name: kwargs.pop(name) for name in WorkerSettings.model_fields if name in kwargs}
    try:
        return WorkerSettings(**given)
    except ValidationError as err:
        raise bad_parameter(err) from None
