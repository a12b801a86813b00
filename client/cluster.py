"""Where the Temporal cluster is and how to reach it: :class:`ClusterConfig`, read from
Temporal's standard client configuration, the same one the ``temporal`` CLI reads.

Every setting comes from the first of these that gives it (README "Connecting to a cluster"):

1. a flag of ``tnx``/``tnx-worker`` (``--address``, ``--namespace``, ``--api-key``, ``--tls``,
   ``--tls-ca-path``, ``--tls-cert-path``, ``--tls-key-path``, ``--tls-server-name``,
   ``--grpc-meta``), or an argument of :meth:`ClusterConfig.load` / :func:`connect`;
2. an environment variable (``TEMPORAL_ADDRESS``, ``TEMPORAL_NAMESPACE``, ``TEMPORAL_API_KEY``,
   ``TEMPORAL_TLS``, ``TEMPORAL_TLS_SERVER_CA_CERT_PATH``/``_DATA``,
   ``TEMPORAL_TLS_CLIENT_CERT_PATH``/``_DATA``, ``TEMPORAL_TLS_CLIENT_KEY_PATH``/``_DATA``,
   ``TEMPORAL_TLS_SERVER_NAME``, ``TEMPORAL_GRPC_META_<NAME>``);
3. the profile (``--profile``, else ``TEMPORAL_PROFILE``, else ``default``) of the TOML config
   file (``--config-file``, else ``TEMPORAL_CONFIG_FILE``, else
   ``~/.config/temporalio/temporal.toml``);
4. the default: ``127.0.0.1:7233``, namespace ``default``, no TLS.

The file and the variables are parsed by the SDK (:mod:`temporalio.envconfig`), one layer at a
time, so each setting keeps where it came from: every :class:`ClusterConfigError` names the
setting and its source. TLS is on when asked for (``--tls``, ``TEMPORAL_TLS=true``,
``tls.disabled = false``) or when any TLS setting or an API key is given; ``--no-tls`` /
``TEMPORAL_TLS=false`` turns it off, and then an API key is refused (it would cross the
network in clear text). Loading checks everything it can without the network: the address's
form, that each TLS file exists and holds PEM, that a client certificate comes with its key.
"""

from __future__ import annotations

import dataclasses
import getpass
import os
import socket
from collections.abc import Mapping
from dataclasses import dataclass, field
from pathlib import Path
from typing import Any, Final, Literal

from temporalio.client import Client
from temporalio.converter import DataConverter, PayloadCodec
from temporalio.envconfig import DataSource
from temporalio.service import TLSConfig

from toolnexus_temporal.client.cluster_sources import (
    DEFAULT_ADDRESS,
    DEFAULT_NAMESPACE,
    DEFAULT_SOURCE,
    DESCRIBE,
    ENV,
    FILES,
    FLAGS,
    TOML,
    Setting,
    check_address,
    env_layer,
    file_layer,
    flag_layer,
    read_pem,
)
from toolnexus_temporal.client.codec import data_converter as codec_data_converter
from toolnexus_temporal.client.errors import ClusterConfigError, ClusterConnectError
from toolnexus_temporal.observability.tracing import check_tracing_setup, tracing_wanted

DEFAULT_ADDRESS_SETTING: Final = Setting(DEFAULT_ADDRESS, DEFAULT_SOURCE)
"""The address when nothing gives one."""

DEFAULT_NAMESPACE_SETTING: Final = Setting(DEFAULT_NAMESPACE, DEFAULT_SOURCE)
"""The namespace when nothing gives one."""


@dataclass(frozen=True)
class ClusterConfig:
    """How to reach the Temporal cluster: what :func:`Client.connect` gets, each setting with
    its source. Build it with :meth:`load` (flags > environment > profile > default) or
    :meth:`local` (a plain local server); :meth:`connect` makes the client.

    Attributes:
        address: the frontend's ``host:port``.
        namespace: the Temporal namespace.
        api_key: sent as ``authorization: Bearer <key>`` on every call; None for none.
        tls: TLS turned on or off explicitly; None: on when any TLS setting or an API key
            is given (see :attr:`tls_enabled`).
        tls_ca: the CA the server's certificate must chain to: a ``Path`` to a PEM file or
            the PEM text; None: the system's roots.
        tls_cert: the client certificate for mutual TLS (``Path`` or PEM text).
        tls_key: the client certificate's private key (``Path`` or PEM text).
        tls_server_name: the name the server's certificate is checked against, and the SNI
            (default: the address's host).
        grpc_meta: extra gRPC headers sent on every call.
        profile: the profile the file settings came from, None when no file was read.
    """

    address: Setting[str] = DEFAULT_ADDRESS_SETTING
    namespace: Setting[str] = DEFAULT_NAMESPACE_SETTING
    api_key: Setting[str] | None = None
    tls: Setting[bool] | None = None
    tls_ca: Setting[DataSource] | None = None
    tls_cert: Setting[DataSource] | None = None
    tls_key: Setting[DataSource] | None = None
    tls_server_name: Setting[str] | None = None
    grpc_meta: Mapping[str, Setting[str]] = field(default_factory=dict)
    profile: str | None = None

    @classmethod
    def local(cls, address: str, namespace: str = DEFAULT_NAMESPACE) -> ClusterConfig:
        """A plain (no TLS, no key) connection to ``address``: the embedded dev server."""
        config = cls(
            address=Setting(address, "local server"), namespace=Setting(namespace, "local")
        )
        config.validate()
        return config

    @classmethod
    def load(
        cls,
        *,
        address: str | None = None,
        namespace: str | None = None,
        profile: str | None = None,
        config_file: str | Path | None = None,
        api_key: str | None = None,
        tls: bool | None = None,
        tls_ca_path: str | Path | None = None,
        tls_cert_path: str | Path | None = None,
        tls_key_path: str | Path | None = None,
        tls_server_name: str | None = None,
        grpc_meta: Mapping[str, str] | None = None,
        env: Mapping[str, str] | None = None,
        via: Literal["flag", "argument"] = "argument",
        default_address: str = DEFAULT_ADDRESS,
    ) -> ClusterConfig:
        """Resolve every setting: the arguments (None: not given) over the environment over
        the profile over the defaults, then :meth:`validate`.

        Args:
            address: the ``host:port`` override (``--address``).
            namespace: the namespace override (``--namespace``).
            api_key: the API key override (``--api-key``).
            tls: turn TLS on or off (``--tls`` / ``--no-tls``).
            tls_ca_path: the server CA file (``--tls-ca-path``).
            tls_cert_path: the client certificate file (``--tls-cert-path``).
            tls_key_path: the client key file (``--tls-key-path``).
            tls_server_name: the TLS server name (``--tls-server-name``).
            grpc_meta: extra gRPC headers (``--grpc-meta KEY=VALUE``).
            profile: the profile to read (else ``TEMPORAL_PROFILE``, else ``default``).
            config_file: the TOML file (else ``TEMPORAL_CONFIG_FILE``, else
                :func:`default_config_file`).
            env: the environment to read (default ``os.environ``); ``TEMPORAL_*`` variables
                set to the empty string count as unset.
            via: how the overrides are named in messages: ``--tls-ca-path`` (``flag``) or
                ``argument tls_ca_path`` (``argument``).
            default_address: the address when nothing gives one.

        Raises:
            ClusterConfigError: a setting is invalid, a file is missing or unreadable, the
                profile or the config file named does not exist.
        """
        environ = {k: v for k, v in (os.environ if env is None else env).items() if v != ""}
        layers = [
            flag_layer(
                via,
                address=address,
                namespace=namespace,
                api_key=api_key,
                tls=tls,
                tls_ca=None if tls_ca_path is None else Path(tls_ca_path),
                tls_cert=None if tls_cert_path is None else Path(tls_cert_path),
                tls_key=None if tls_key_path is None else Path(tls_key_path),
                tls_server_name=tls_server_name,
                grpc_meta=grpc_meta or {},
            ),
            env_layer(environ),
        ]
        profile_name, from_file = file_layer(environ, profile, config_file, via)
        layers.append(from_file)
        merged: dict[str, Any] = {}
        for key in ("address", "namespace", "api_key", "tls", "tls_server_name", *FILES):
            merged[key] = next((layer[key] for layer in layers if key in layer), None)
        meta: dict[str, Setting[str]] = {}
        for layer in reversed(layers):
            meta.update(layer.get("grpc_meta", {}))
        config = cls(
            address=merged["address"] or Setting(default_address, DEFAULT_SOURCE),
            namespace=merged["namespace"] or Setting(DEFAULT_NAMESPACE, DEFAULT_SOURCE),
            api_key=merged["api_key"],
            tls=merged["tls"],
            tls_ca=merged["tls_ca"],
            tls_cert=merged["tls_cert"],
            tls_key=merged["tls_key"],
            tls_server_name=merged["tls_server_name"],
            grpc_meta=meta,
            profile=profile_name,
        )
        config.validate()
        return config

    @property
    def address_given(self) -> bool:
        """True when a flag, variable or profile gave the address (not the default)."""
        return self.address.source != DEFAULT_SOURCE

    @property
    def tls_enabled(self) -> bool:
        """TLS is used: asked for explicitly, or implied by a TLS setting or an API key."""
        if self.tls is not None:
            return self.tls.value
        implied = (self.tls_ca, self.tls_cert, self.tls_key, self.tls_server_name, self.api_key)
        return any(s is not None for s in implied)

    def validate(self) -> None:
        """Check what can be checked without the network.

        Raises:
            ClusterConfigError: a bad address (``host:port``, no scheme), an empty
                namespace, an API key with TLS turned off, a client certificate without its
                key (or the reverse), a TLS file that does not exist or holds no PEM.
        """
        check_address(self.address)
        if not self.namespace.value.strip():
            raise ClusterConfigError("namespace", self.namespace.source, "is empty")
        if self.api_key is not None and not self.tls_enabled:
            assert self.tls is not None
            raise ClusterConfigError(
                "api key",
                self.api_key.source,
                f"is set but TLS is turned off (by {self.tls.source}): the key would cross the "
                "network in clear text; turn TLS on or drop the key",
            )
        if (self.tls_cert is None) != (self.tls_key is None):
            given, missing = (
                ("tls_cert", "tls_key") if self.tls_key is None else ("tls_key", "tls_cert")
            )
            setting = getattr(self, given)
            raise ClusterConfigError(
                DESCRIBE[given],
                setting.source,
                f"is given without the {DESCRIBE[missing]} ({FLAGS[missing]}, "
                f"{ENV[missing]}_PATH or {TOML[missing]}_path)",
            )
        for key in FILES:
            read_pem(key, getattr(self, key))

    def tls_config(self) -> TLSConfig | bool:
        """What ``Client.connect(tls=...)`` gets: False (no TLS), True (the system's roots,
        no client certificate) or a ``TLSConfig`` with the files' bytes.

        Raises:
            ClusterConfigError: a TLS file became unreadable since :meth:`validate`.
        """
        if not self.tls_enabled:
            return False
        ca, cert, key = (read_pem(k, getattr(self, k)) for k in FILES)
        name = self.tls_server_name.value if self.tls_server_name else None
        if ca is None and cert is None and name is None:
            return True
        return TLSConfig(
            server_root_ca_cert=ca, domain=name, client_cert=cert, client_private_key=key
        )

    def connect_kwargs(self) -> dict[str, Any]:
        """The keyword arguments of ``Client.connect`` this configuration gives:
        ``target_host``, ``namespace``, ``tls``, ``api_key`` (when set) and ``rpc_metadata``.

        Raises:
            ClusterConfigError: see :meth:`tls_config`.
        """
        kwargs: dict[str, Any] = {
            "target_host": self.address.value,
            "namespace": self.namespace.value,
            "tls": self.tls_config(),
            "rpc_metadata": {k: s.value for k, s in self.grpc_meta.items()},
        }
        if self.api_key is not None:
            kwargs["api_key"] = self.api_key.value
        return kwargs

    def data_converter(self, codec: PayloadCodec | None = None) -> DataConverter:
        """The data converter of every client of the runtime: pydantic's (models on the wire),
        then ``codec`` when given (:func:`.codec.data_converter`)."""
        return codec_data_converter(codec)

    async def connect(
        self,
        codec: PayloadCodec | None = None,
        *,
        tracing: bool | None = None,
        **client_options: Any,
    ) -> Client:
        """Connect a client with :meth:`connect_kwargs` and :meth:`data_converter`.

        Args:
            codec: a payload codec (encryption at rest: :mod:`.codec`), None for plain JSON.
            tracing: OpenTelemetry traces (docs/guide/tracing.md): True on, False off, None
                from the ``OTEL_*`` environment (:func:`.tracing.tracing_wanted`).
                On, the client gets the tracing interceptor (so does every worker built on
                it); off, none.
            **client_options: more ``Client.connect`` arguments (``identity``, ``lazy``, ...).

        Raises:
            ClusterConfigError: see :meth:`tls_config`.
            TracingConfigError: tracing is on but cannot be set up: an unknown
                ``OTEL_TRACES_EXPORTER``, or the ``otel`` extra is not installed
                (:func:`.tracing.check_tracing_setup`).
            ClusterConnectError: the server cannot be reached or refused the connection (a
                ``RuntimeError``, as ``Client.connect`` raises): one line, with the TLS
                settings in use.
        """
        kwargs = {**self.connect_kwargs(), "data_converter": self.data_converter(codec)}
        client_options.setdefault("identity", default_identity())
        if tracing_wanted(tracing):
            check_tracing_setup()
            from toolnexus_temporal.observability.otel import tracing_interceptor

            client_options["interceptors"] = [
                *client_options.get("interceptors", ()),
                tracing_interceptor(),
            ]
        try:
            return await Client.connect(**kwargs, **client_options)
        except RuntimeError as err:
            raise ClusterConnectError(
                self.describe(),
                str(err),
                tls=self.tls_enabled,
                client_cert=self.tls_cert is not None,
            ) from err

    def describe(self) -> str:
        """``host:port (namespace 'x', TLS with CA from ..., client certificate, API key)``:
        the connection in one line, for banners and messages (never the key itself)."""
        parts = [f"namespace {self.namespace.value!r}"]
        if self.tls_enabled:
            tls = "TLS"
            if self.tls_ca is not None:
                tls += f" with the CA from {self.tls_ca.source}"
            if self.tls_server_name is not None:
                tls += f", server name {self.tls_server_name.value!r}"
            parts.append(tls)
            if self.tls_cert is not None:
                parts.append(f"client certificate from {self.tls_cert.source}")
        else:
            parts.append("no TLS")
        if self.api_key is not None:
            parts.append(f"API key from {self.api_key.source}")
        return f"{self.address.value} ({', '.join(parts)})"

    def replace(self, **changes: Any) -> ClusterConfig:
        """A copy with ``changes`` (fields of this class, as :class:`Setting` values)."""
        return dataclasses.replace(self, **changes)


def default_answerer() -> str:
    """Who answers by default (``Answer.by`` from ``tnx answer`` and ``AgentRuntime.answer``,
    what an approvers list names): ``{user}@{host}``."""
    try:
        user = getpass.getuser()
    except (KeyError, OSError):  # no user name in the environment or the password database
        user = f"uid{os.getuid()}" if hasattr(os, "getuid") else "unknown"
    return f"{user}@{socket.gethostname()}"


def default_identity(program: str = "tnx") -> str:
    """The identity a client sends by default, recorded by Temporal on every signal and
    update event (the audit's ``identity``): ``{user}@{host} ({program})``."""
    return f"{default_answerer()} ({program})"


async def connect(
    address: str | None = None,
    namespace: str | None = None,
    *,
    config: ClusterConfig | None = None,
    profile: str | None = None,
    codec: PayloadCodec | None = None,
    tracing: bool | None = None,
) -> Client:
    """Connect a client with the pydantic data converter every part of the runtime uses, to
    the cluster of Temporal's standard client configuration (:mod:`.cluster`: the arguments
    over the ``TEMPORAL_*`` variables over the TOML profile over ``127.0.0.1:7233``).

    Args:
        address: the frontend's ``host:port``, e.g. ``localhost:7233`` (None: from the
            environment or the profile).
        namespace: the Temporal namespace (None: likewise, else ``default``).
        config: a resolved :class:`ClusterConfig` (TLS, API key, ...); the other arguments
            are then ignored.
        profile: the profile of the config file to read (None: ``TEMPORAL_PROFILE`` or
            ``default``).
        codec: a payload codec (encryption at rest: :mod:`.codec`), None for plain JSON.
        tracing: OpenTelemetry traces: True on, False off, None (default) from the
            ``OTEL_*`` environment (:meth:`ClusterConfig.connect`; docs/guide/tracing.md).

    Raises:
        ClusterConfigError: a setting is invalid (names the setting and its source).
        ClusterConnectError: the server cannot be reached (a ``RuntimeError``).
    """
    if config is None:
        config = ClusterConfig.load(address=address, namespace=namespace, profile=profile)
    return await config.connect(codec=codec, tracing=tracing)
