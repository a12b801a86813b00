"""Where each setting of a :class:`~toolnexus_temporal.client.cluster.ClusterConfig` comes
from: the flags (or arguments), the ``TEMPORAL_*`` environment variables and a profile of the
TOML config file, each read into a *layer* (setting name → :class:`Setting`, the value with its
source), and the checks of single values (address, PEM files). The file and the variables are
parsed by the SDK (:mod:`temporalio.envconfig`); this module only keeps track of the source and
turns the SDK's errors into :class:`ClusterConfigError`.
"""

from __future__ import annotations

import sys
import tomllib
from collections.abc import Mapping
from dataclasses import dataclass, field
from pathlib import Path
from typing import Any, Final, Generic, TypeVar

from temporalio.envconfig import ClientConfig, ClientConfigProfile, ClientConfigTLS, DataSource

from toolnexus_temporal.client.errors import ClusterConfigError

V = TypeVar("V")

DEFAULT_ADDRESS: Final = "127.0.0.1:7233"
"""The frontend used when no flag, variable or profile gives an address."""

DEFAULT_NAMESPACE: Final = "default"
"""The namespace used when no flag, variable or profile gives one."""

DEFAULT_PROFILE: Final = "default"
"""The profile read when neither ``--profile`` nor ``TEMPORAL_PROFILE`` names one."""

DEFAULT_SOURCE: Final = "default"
"""The source of a setting nobody gave."""

FLAGS: Final = {
    "address": "--address",
    "namespace": "--namespace",
    "api_key": "--api-key",
    "tls": "--tls/--no-tls",
    "tls_ca": "--tls-ca-path",
    "tls_cert": "--tls-cert-path",
    "tls_key": "--tls-key-path",
    "tls_server_name": "--tls-server-name",
    "profile": "--profile",
    "config_file": "--config-file",
    "grpc_meta": "--grpc-meta",
}
"""The CLI flag of each setting (the ``temporal`` CLI's names)."""

ENV: Final = {
    "address": "TEMPORAL_ADDRESS",
    "namespace": "TEMPORAL_NAMESPACE",
    "api_key": "TEMPORAL_API_KEY",
    "tls": "TEMPORAL_TLS",
    "tls_ca": "TEMPORAL_TLS_SERVER_CA_CERT",
    "tls_cert": "TEMPORAL_TLS_CLIENT_CERT",
    "tls_key": "TEMPORAL_TLS_CLIENT_KEY",
    "tls_server_name": "TEMPORAL_TLS_SERVER_NAME",
    "grpc_meta": "TEMPORAL_GRPC_META_",
}
"""The environment variable of each setting (the file settings add ``_PATH`` or ``_DATA``)."""

TOML: Final = {
    "address": "address",
    "namespace": "namespace",
    "api_key": "api_key",
    "tls": "tls.disabled",
    "tls_ca": "tls.server_ca_cert",
    "tls_cert": "tls.client_cert",
    "tls_key": "tls.client_key",
    "tls_server_name": "tls.server_name",
    "grpc_meta": "grpc_meta.",
}
"""The key of each setting in a profile of the TOML file (files add ``_path`` or ``_data``)."""

ARGUMENTS: Final = {"tls_ca": "tls_ca_path", "tls_cert": "tls_cert_path", "tls_key": "tls_key_path"}
"""The argument of ``ClusterConfig.load`` of each file setting."""

SECRETS: Final = frozenset({"api_key", "tls_key"})
"""Settings whose value a repr never shows."""

FILES: Final = ("tls_ca", "tls_cert", "tls_key")
DESCRIBE: Final = {"tls_ca": "TLS CA", "tls_cert": "TLS client certificate", "tls_key": "TLS key"}


@dataclass(frozen=True)
class Setting(Generic[V]):
    """One resolved setting: its value and where it came from (``--address``,
    ``env TEMPORAL_ADDRESS``, ``profile 'prod' in /path/temporal.toml (address)``,
    ``default``). A ``secret`` one (the API key, a private key, gRPC headers) shows its
    value as ``***`` in its repr."""

    value: V
    source: str
    secret: bool = field(default=False, compare=False)

    def __repr__(self) -> str:
        shown = "'***'" if self.secret else repr(self.value)
        return f"Setting(value={shown}, source={self.source!r})"


def default_config_file(env: Mapping[str, str]) -> Path:
    """Where the SDK and the ``temporal`` CLI look for the TOML file by default:
    ``$CONFIG/temporalio/temporal.toml`` with ``$CONFIG`` = ``$XDG_CONFIG_HOME`` or
    ``~/.config`` (macOS: ``~/Library/Application Support``; Windows: ``%APPDATA%``)."""
    home = Path(env.get("HOME") or Path.home())
    if sys.platform == "darwin":
        base = home / "Library" / "Application Support"
    elif sys.platform == "win32":
        base = Path(env.get("APPDATA") or home / "AppData" / "Roaming")
    else:
        base = Path(env.get("XDG_CONFIG_HOME") or home / ".config")
    return base / "temporalio" / "temporal.toml"


# ---------------------------------------------------------------------------- the layers


def flag_layer(via: str, *, grpc_meta: Mapping[str, str], **values: Any) -> dict[str, Any]:
    """The layer of the flags (``via="flag"``: sources ``--tls-ca-path``, ...) or of the
    arguments of ``ClusterConfig.load`` (sources ``argument tls_ca_path``, ...): setting name
    → :class:`Setting` for each value that is not None, ``grpc_meta`` → header → Setting."""

    def label(key: str) -> str:
        return FLAGS[key] if via == "flag" else f"argument {ARGUMENTS.get(key, key)}"

    layer: dict[str, Any] = {
        k: Setting(v, label(k), secret=k in SECRETS) for k, v in values.items() if v is not None
    }
    if grpc_meta:
        layer["grpc_meta"] = {
            k.lower(): Setting(v, label("grpc_meta"), secret=True) for k, v in grpc_meta.items()
        }
    return layer


def env_layer(environ: Mapping[str, str]) -> dict[str, Any]:
    """The layer of the ``TEMPORAL_*`` variables in ``environ`` (parsed by the SDK; sources
    ``env TEMPORAL_ADDRESS``, ...).

    Raises:
        ClusterConfigError: ``TEMPORAL_TLS`` is not a boolean, both ``_PATH`` and ``_DATA``
            of one file are set, host verification is turned off (unsupported).
    """
    flag = environ.get("TEMPORAL_TLS_DISABLE_HOST_VERIFICATION", "").lower()
    if flag in ("1", "true"):
        raise ClusterConfigError(
            "TLS host verification", "env TEMPORAL_TLS_DISABLE_HOST_VERIFICATION", _NO_HOST_CHECK
        )
    try:
        prof = ClientConfigProfile.load(disable_file=True, override_env_vars=dict(environ))
    except Exception as err:  # the SDK's ConfigError (a Rust type)
        raise ClusterConfigError("environment", "TEMPORAL_* variables", _one_line(err)) from err
    if "TEMPORAL_TLS" in environ and (prof.tls is None or prof.tls.disabled is None):
        raise ClusterConfigError("TLS", "env TEMPORAL_TLS", "must be true or false (or 1 or 0)")

    def label(key: str, value: object = None) -> str:
        if key in FILES:
            return f"env {ENV[key]}_{'PATH' if isinstance(value, Path) else 'DATA'}"
        return f"env {ENV[key]}"

    return _profile_layer(prof, label, meta_label=lambda k: f"env {ENV['grpc_meta']}{k.upper()}")


def file_layer(
    environ: Mapping[str, str], profile: str | None, config_file: str | Path | None, via: str
) -> tuple[str | None, dict[str, Any]]:
    """The layer of the profile (``profile``, else ``TEMPORAL_PROFILE``, else ``default``) of
    the TOML file (``config_file``, else ``TEMPORAL_CONFIG_FILE``, else
    :func:`default_config_file`), parsed strictly by the SDK (an unknown key is an error), and
    the profile's name (None when no file or no default profile exists: an empty layer).

    Raises:
        ClusterConfigError: a file or profile named explicitly does not exist, the file does
            not parse, or the profile turns host verification off (unsupported).
    """

    def named(key: str) -> str:
        return FLAGS[key] if via == "flag" else f"argument {ARGUMENTS.get(key, key)}"

    if config_file is not None:
        path, path_from = Path(config_file), named("config_file")
    elif "TEMPORAL_CONFIG_FILE" in environ:
        path, path_from = Path(environ["TEMPORAL_CONFIG_FILE"]), "env TEMPORAL_CONFIG_FILE"
    else:
        path, path_from = default_config_file(environ), DEFAULT_SOURCE
    if profile is not None:
        name, name_from = profile, named("profile")
    elif "TEMPORAL_PROFILE" in environ:
        name, name_from = environ["TEMPORAL_PROFILE"], "env TEMPORAL_PROFILE"
    else:
        name, name_from = DEFAULT_PROFILE, DEFAULT_SOURCE
    path = path.expanduser()
    if not path.is_file():
        if path_from != DEFAULT_SOURCE:
            raise ClusterConfigError("config file", path_from, f"{path} does not exist")
        if name_from != DEFAULT_SOURCE:
            raise ClusterConfigError(
                f"profile {name!r}", name_from, f"cannot be read: there is no config file {path}"
            )
        return None, {}
    try:
        profiles = ClientConfig.load(config_source=path, config_file_strict=True).profiles
        raw = tomllib.loads(path.read_text(encoding="utf-8"))
    except Exception as err:  # OSError, tomllib's or the SDK's ConfigError
        where = path_from if path_from != DEFAULT_SOURCE else "default location"
        raise ClusterConfigError(f"config file {path}", where, _one_line(err)) from err
    if name not in profiles:
        if name_from == DEFAULT_SOURCE:
            return None, {}
        known = ", ".join(sorted(profiles)) or "none"
        raise ClusterConfigError(
            f"profile {name!r}", name_from, f"is not in {path} (profiles there: {known})"
        )
    origin = f"profile {name!r} in {path}"
    tls_raw = raw.get("profile", {}).get(name, {}).get("tls", {})
    if tls_raw.get("disable_host_verification") is True:
        raise ClusterConfigError(
            "TLS host verification", f"{origin} (tls.disable_host_verification)", _NO_HOST_CHECK
        )

    def label(key: str, value: object = None) -> str:
        suffix = ("_path" if isinstance(value, Path) else "_data") if key in FILES else ""
        return f"{origin} ({TOML[key]}{suffix})"

    return name, _profile_layer(
        profiles[name], label, meta_label=lambda k: f"{origin} (grpc_meta.{k})"
    )


def _profile_layer(prof: ClientConfigProfile, label: Any, meta_label: Any) -> dict[str, Any]:
    """A layer from an SDK profile: each set value with its ``label(key, value)``."""
    tls = prof.tls or ClientConfigTLS()
    values: dict[str, Any] = {
        "address": prof.address,
        "namespace": prof.namespace,
        "api_key": prof.api_key,
        "tls": None if tls.disabled is None else not tls.disabled,
        "tls_ca": tls.server_root_ca_cert,
        "tls_cert": tls.client_cert,
        "tls_key": tls.client_private_key,
        "tls_server_name": tls.server_name,
    }
    layer: dict[str, Any] = {
        k: Setting(v, label(k, v), secret=k in SECRETS) for k, v in values.items() if v is not None
    }
    if prof.grpc_meta:
        layer["grpc_meta"] = {
            k.lower(): Setting(v, meta_label(k), secret=True) for k, v in prof.grpc_meta.items()
        }
    return layer


# ---------------------------------------------------------------------------- checks

_NO_HOST_CHECK: Final = (
    "is turned off, which the Temporal Python SDK does not support; give the server's CA "
    "(--tls-ca-path) and the name on its certificate (--tls-server-name) instead"
)


def check_address(address: Setting[str]) -> None:
    """Check that ``address`` is ``host:port`` (IPv6 in brackets), with no scheme.

    Raises:
        ClusterConfigError: it is not.
    """
    value = address.value.strip()
    if "://" in value:
        raise ClusterConfigError(
            "address", address.source, f"{value!r} must be host:port, without a scheme"
        )
    host, sep, port = value.rpartition(":")
    if host.startswith("[") and host.endswith("]"):
        host = host[1:-1]
    if not sep or not host or not port.isdigit():
        raise ClusterConfigError(
            "address", address.source, f"{value!r} must be host:port (e.g. localhost:7233)"
        )
    if not 0 < int(port) < 65536:  # walk 7: "must be host:port" for a port out of range
        raise ClusterConfigError(
            "address", address.source, f"{value!r}: the port must be from 1 to 65535"
        )


def read_pem(key: str, setting: Setting[DataSource] | None) -> bytes | None:
    """The PEM bytes of a TLS file setting (a ``Path`` or the PEM text itself); None for none.

    Raises:
        ClusterConfigError: the file does not exist, cannot be read, or holds no PEM block.
    """
    if setting is None:
        return None
    what = DESCRIBE[key]
    if isinstance(setting.value, Path):
        try:
            data = setting.value.expanduser().read_bytes()
        except FileNotFoundError:
            raise ClusterConfigError(
                what, setting.source, f"file {setting.value} does not exist"
            ) from None
        except OSError as err:
            raise ClusterConfigError(
                what, setting.source, f"file {setting.value} cannot be read: {err.strerror}"
            ) from None
        shown = f"file {setting.value}"
    else:
        data = setting.value.encode() if isinstance(setting.value, str) else setting.value
        shown = "the data"
    if b"-----BEGIN " not in data:
        raise ClusterConfigError(what, setting.source, f"{shown} holds no PEM block")
    return data


def _one_line(err: BaseException) -> str:
    text = " ".join(str(err).split())
    return text if len(text) <= 300 else text[:299] + "…"
