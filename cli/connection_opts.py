"""The Temporal connection flags of ``tnx`` host verbs and ``tnx-worker``: the ``temporal``
CLI's names (``--address``, ``--namespace``, ``--profile``, ``--config-file``, ``--api-key``,
``--tls/--no-tls``, ``--tls-ca-path``, ``--tls-cert-path``, ``--tls-key-path``,
``--tls-server-name``, ``--grpc-meta``), each a typer option with no default and no
environment variable of its own: :func:`load_cluster` hands what was given to
:meth:`~toolnexus_temporal.client.cluster.ClusterConfig.load`, which adds the ``TEMPORAL_*``
variables, the TOML profile and the defaults (flag > env > profile > default) and remembers
where each setting came from.

Light: the flags are part of ``tnx --help``, so this module imports typer only; the cluster
configuration loads when a command runs (:func:`load_cluster`).
"""

from __future__ import annotations

import inspect
from typing import TYPE_CHECKING, Annotated, Any, Final

import typer

if TYPE_CHECKING:
    from toolnexus_temporal.client.cluster import ClusterConfig

PANEL: Final = "Temporal connection (flag > TEMPORAL_* env > profile > default)"
"""Help panel of the connection flags."""


def _param(name: str, kind: Any, *flags: str, help_text: str) -> inspect.Parameter:
    option = typer.Option(*flags, help=help_text, rich_help_panel=PANEL, show_default=False)
    return inspect.Parameter(
        name, inspect.Parameter.KEYWORD_ONLY, default=None, annotation=Annotated[kind, option]
    )


CONNECTION_OPTIONS: Final[list[inspect.Parameter]] = [
    _param(
        "address",
        str | None,
        "--address",
        help_text="Temporal frontend host:port (env TEMPORAL_ADDRESS; default: the server "
        "`tnx server start` runs in this directory, else 127.0.0.1:7233).",
    ),
    _param(
        "namespace",
        str | None,
        "--namespace",
        help_text="Temporal namespace (env TEMPORAL_NAMESPACE; default: default).",
    ),
    _param(
        "profile",
        str | None,
        "--profile",
        help_text="Profile of the config file (env TEMPORAL_PROFILE; default: default).",
    ),
    _param(
        "config_file",
        str | None,
        "--config-file",
        help_text="TOML config file (env TEMPORAL_CONFIG_FILE; "
        "default ~/.config/temporalio/temporal.toml).",
    ),
    _param(
        "api_key",
        str | None,
        "--api-key",
        help_text="API key, sent as 'authorization: Bearer KEY'; turns TLS on "
        "(env TEMPORAL_API_KEY; prefer it or a profile: a flag shows in the process list).",
    ),
    _param(
        "tls",
        bool | None,
        "--tls/--no-tls",
        help_text="Turn TLS on or off (env TEMPORAL_TLS; default: on when any TLS setting "
        "or an API key is given).",
    ),
    _param(
        "tls_ca_path",
        str | None,
        "--tls-ca-path",
        help_text="PEM file of the CA the server's certificate must chain to "
        "(env TEMPORAL_TLS_SERVER_CA_CERT_PATH; default: the system's roots).",
    ),
    _param(
        "tls_cert_path",
        str | None,
        "--tls-cert-path",
        help_text="PEM client certificate for mutual TLS (env TEMPORAL_TLS_CLIENT_CERT_PATH).",
    ),
    _param(
        "tls_key_path",
        str | None,
        "--tls-key-path",
        help_text="PEM private key of the client certificate (env TEMPORAL_TLS_CLIENT_KEY_PATH).",
    ),
    _param(
        "tls_server_name",
        str | None,
        "--tls-server-name",
        help_text="Name the server's certificate is checked against, and the SNI "
        "(env TEMPORAL_TLS_SERVER_NAME; default: the address's host).",
    ),
    _param(
        "grpc_meta",
        list[str] | None,
        "--grpc-meta",
        help_text="Extra gRPC header KEY=VALUE, repeatable (env TEMPORAL_GRPC_META_KEY).",
    ),
]
"""The connection flags, as keyword-only parameters to add to a typer command's signature."""

NAMES: Final = frozenset(p.name for p in CONNECTION_OPTIONS)
"""The parameter names of :data:`CONNECTION_OPTIONS`."""


def load_cluster(kwargs: dict[str, Any]) -> ClusterConfig:
    """Pop the connection flags (:data:`NAMES`) from a command's ``kwargs`` and resolve the
    cluster configuration (flag > env > profile > the dev server ``tnx server start`` runs
    in this directory > 127.0.0.1:7233).

    Raises:
        ClusterConfigError: a bad setting, or a ``--grpc-meta`` without ``=``.
    """
    from toolnexus_temporal.cli.devserver import local_address
    from toolnexus_temporal.client.cluster import ClusterConfig
    from toolnexus_temporal.client.errors import ClusterConfigError

    given = {name: kwargs.pop(name, None) for name in NAMES}
    meta: dict[str, str] = {}
    for item in given.pop("grpc_meta") or []:
        key, sep, value = item.partition("=")
        if not sep or not key:
            raise ClusterConfigError("gRPC metadata", "--grpc-meta", f"{item!r} is not KEY=VALUE")
        meta[key] = value
    local = local_address()  # a server `tnx server start` runs in this directory
    if local is None:
        return ClusterConfig.load(**given, grpc_meta=meta, via="flag")
    return ClusterConfig.load(**given, grpc_meta=meta, via="flag", default_address=local)
