"""ClusterConfig (client/cluster.py): which setting wins (flag > env > profile > default), how
the TOML profile and the ``TEMPORAL_*`` variables are parsed, and what reaches
``Client.connect``; every bad setting is a one-line ClusterConfigError naming its source.
No server: ``Client.connect`` is replaced by a recorder where a call is made."""

from __future__ import annotations

import os
from pathlib import Path
from typing import Any

import pytest
from temporalio.client import Client
from temporalio.contrib.pydantic import pydantic_data_converter
from temporalio.service import TLSConfig

from toolnexus_temporal.client import cluster
from toolnexus_temporal.client.cluster import ClusterConfig
from toolnexus_temporal.client.errors import ClusterConfigError, ClusterConnectError

PEM_CA = b"-----BEGIN CERTIFICATE-----\nca\n-----END CERTIFICATE-----\n"
PEM_CERT = b"-----BEGIN CERTIFICATE-----\nclient\n-----END CERTIFICATE-----\n"
PEM_KEY = b"-----BEGIN PRIVATE KEY-----\nkey\n-----END PRIVATE KEY-----\n"


@pytest.fixture
def files(tmp_path: Path) -> dict[str, Path]:
    """PEM files (content is only checked for a PEM block here) and a TOML config file."""
    out = {"ca": tmp_path / "ca.pem", "cert": tmp_path / "client.pem", "key": tmp_path / "k.pem"}
    out["ca"].write_bytes(PEM_CA)
    out["cert"].write_bytes(PEM_CERT)
    out["key"].write_bytes(PEM_KEY)
    out["toml"] = tmp_path / "temporal.toml"
    out["toml"].write_text(
        f"""
[profile.default]
address = "file-default:7233"
namespace = "ns-default"

[profile.prod]
address = "prod.tmprl.example:7233"
namespace = "prod-ns"
api_key = "file-key"
[profile.prod.tls]
server_name = "prod.sni"
server_ca_cert_path = "{out["ca"]}"
[profile.prod.grpc_meta]
x-team = "file"
x-only-file = "1"

[profile.mtls]
address = "mtls:7233"
[profile.mtls.tls]
server_ca_cert_path = "{out["ca"]}"
client_cert_path = "{out["cert"]}"
client_key_path = "{out["key"]}"
"""
    )
    return out


def env_of(files: dict[str, Path], **extra: str) -> dict[str, str]:
    """An environment with only the config file (no HOME config leaks in)."""
    return {"TEMPORAL_CONFIG_FILE": str(files["toml"]), "HOME": "/nonexistent", **extra}


def error_of(**kwargs: Any) -> ClusterConfigError:
    with pytest.raises(ClusterConfigError) as info:
        ClusterConfig.load(**kwargs)
    assert "\n" not in str(info.value)
    return info.value


# ---------------------------------------------------------------------------- precedence


def test_nothing_configured_is_the_plain_local_default(tmp_path: Path) -> None:
    config = ClusterConfig.load(env={"HOME": str(tmp_path)})
    assert config.connect_kwargs() == {
        "target_host": "127.0.0.1:7233",
        "namespace": "default",
        "tls": False,
        "rpc_metadata": {},
    }
    assert not config.address_given
    assert config.profile is None


def test_the_default_profile_comes_from_the_default_config_path(tmp_path: Path) -> None:
    path = tmp_path / "xdg" / "temporalio" / "temporal.toml"
    path.parent.mkdir(parents=True)
    path.write_text('[profile.default]\naddress = "from-xdg:7233"\n')
    config = ClusterConfig.load(
        env={"HOME": str(tmp_path), "XDG_CONFIG_HOME": str(tmp_path / "xdg")}
    )
    assert config.address.value == "from-xdg:7233"
    assert config.address.source == f"profile 'default' in {path} (address)"
    assert config.address_given


def test_flag_beats_env_beats_profile_beats_default(files: dict[str, Path]) -> None:
    both = env_of(files, TEMPORAL_ADDRESS="env:1", TEMPORAL_NAMESPACE="env-ns")
    flag = ClusterConfig.load(address="flag:2", env=both, via="flag")
    assert (flag.address.value, flag.address.source) == ("flag:2", "--address")
    assert (flag.namespace.value, flag.namespace.source) == ("env-ns", "env TEMPORAL_NAMESPACE")
    env = ClusterConfig.load(env=both)
    assert (env.address.value, env.address.source) == ("env:1", "env TEMPORAL_ADDRESS")
    profile = ClusterConfig.load(env=env_of(files))
    assert profile.address.value == "file-default:7233"
    assert profile.namespace.source == f"profile 'default' in {files['toml']} (namespace)"
    bare = ClusterConfig.load(env={"HOME": "/nonexistent"}, namespace="arg-ns")
    assert (bare.address.value, bare.address.source) == ("127.0.0.1:7233", "default")
    assert bare.namespace.source == "argument namespace"


def test_a_named_profile_gives_tls_api_key_and_metadata(files: dict[str, Path]) -> None:
    config = ClusterConfig.load(env=env_of(files, TEMPORAL_PROFILE="prod"))
    kwargs = config.connect_kwargs()
    assert kwargs["target_host"] == "prod.tmprl.example:7233"
    assert kwargs["namespace"] == "prod-ns"
    assert kwargs["api_key"] == "file-key"
    assert kwargs["rpc_metadata"] == {"x-team": "file", "x-only-file": "1"}
    tls = kwargs["tls"]
    assert isinstance(tls, TLSConfig)
    assert (tls.server_root_ca_cert, tls.domain) == (PEM_CA, "prod.sni")
    assert (tls.client_cert, tls.client_private_key) == (None, None)
    assert config.profile == "prod"
    assert "file-key" not in repr(config) and "'***'" in repr(config.api_key)
    assert "value='file'" not in repr(config.grpc_meta)
    assert "API key from profile 'prod'" in config.describe()


def test_the_profile_flag_beats_temporal_profile(files: dict[str, Path]) -> None:
    config = ClusterConfig.load(profile="mtls", env=env_of(files, TEMPORAL_PROFILE="prod"))
    tls = config.connect_kwargs()["tls"]
    assert isinstance(tls, TLSConfig)
    assert (tls.client_cert, tls.client_private_key) == (PEM_CERT, PEM_KEY)
    assert "api_key" not in config.connect_kwargs()


def test_env_overrides_single_settings_of_the_profile(
    files: dict[str, Path], tmp_path: Path
) -> None:
    other_ca = tmp_path / "other-ca.pem"
    other_ca.write_bytes(PEM_CA.replace(b"ca", b"other"))
    environ = env_of(
        files,
        TEMPORAL_PROFILE="prod",
        TEMPORAL_API_KEY="env-key",
        TEMPORAL_TLS_SERVER_CA_CERT_PATH=str(other_ca),
        TEMPORAL_GRPC_META_X_TEAM="env",
    )
    config = ClusterConfig.load(env=environ, grpc_meta={"x-flag": "f"})
    kwargs = config.connect_kwargs()
    assert kwargs["api_key"] == "env-key"
    assert kwargs["tls"].server_root_ca_cert == other_ca.read_bytes()
    assert kwargs["tls"].domain == "prod.sni"  # still the profile's
    assert kwargs["rpc_metadata"] == {"x-team": "env", "x-only-file": "1", "x-flag": "f"}
    flag = ClusterConfig.load(env=environ, api_key="flag-key", tls_ca_path=files["ca"], via="flag")
    assert flag.connect_kwargs()["api_key"] == "flag-key"
    assert flag.connect_kwargs()["tls"].server_root_ca_cert == PEM_CA
    assert flag.tls_ca is not None and flag.tls_ca.source == "--tls-ca-path"


def test_tls_from_env_data_and_switches(files: dict[str, Path]) -> None:
    environ = {"HOME": "/nonexistent", "TEMPORAL_TLS_SERVER_CA_CERT_DATA": PEM_CA.decode()}
    kwargs = ClusterConfig.load(env=environ).connect_kwargs()
    assert kwargs["tls"].server_root_ca_cert == PEM_CA
    assert (
        ClusterConfig.load(env={"HOME": "/x", "TEMPORAL_TLS": "true"}).connect_kwargs()["tls"]
        is True
    )
    # --no-tls beats TLS settings from the environment.
    off = ClusterConfig.load(env=environ, tls=False)
    assert off.connect_kwargs()["tls"] is False
    # An API key alone turns TLS on with the system's roots (as the SDK does).
    keyed = ClusterConfig.load(env={"HOME": "/x", "TEMPORAL_API_KEY": "k"}).connect_kwargs()
    assert (keyed["tls"], keyed["api_key"]) == (True, "k")


def test_empty_variables_count_as_unset(files: dict[str, Path]) -> None:
    config = ClusterConfig.load(env=env_of(files, TEMPORAL_ADDRESS="", TEMPORAL_TLS=""))
    assert config.address.value == "file-default:7233"
    assert config.connect_kwargs()["tls"] is False


# ---------------------------------------------------------------------------- errors


def test_a_profile_that_does_not_exist(files: dict[str, Path]) -> None:
    err = error_of(env=env_of(files, TEMPORAL_PROFILE="nope"))
    assert str(err) == (
        f"profile 'nope' (from env TEMPORAL_PROFILE) is not in {files['toml']} "
        "(profiles there: default, mtls, prod)"
    )
    err = error_of(profile="nope", env={"HOME": "/nonexistent"}, via="flag")
    assert err.source == "--profile"
    assert "no config file" in str(err)


def test_a_config_file_that_does_not_exist(tmp_path: Path) -> None:
    err = error_of(env={"TEMPORAL_CONFIG_FILE": str(tmp_path / "missing.toml")})
    assert err.source == "env TEMPORAL_CONFIG_FILE"
    assert "missing.toml does not exist" in str(err)


def test_a_config_file_with_an_unknown_key(tmp_path: Path) -> None:
    path = tmp_path / "t.toml"
    path.write_text('[profile.default]\nadress = "typo:7233"\n')
    err = error_of(config_file=path, via="flag")
    assert err.source == "--config-file"
    assert "adress" in str(err)


@pytest.mark.parametrize(
    ("kwargs", "env", "source"),
    [
        ({"tls_ca_path": "/missing/ca.pem", "via": "flag"}, {}, "--tls-ca-path"),
        (
            {},
            {"TEMPORAL_TLS_SERVER_CA_CERT_PATH": "/missing/ca.pem"},
            "env TEMPORAL_TLS_SERVER_CA_CERT_PATH",
        ),
    ],
)
def test_a_tls_file_that_does_not_exist(
    kwargs: dict[str, Any], env: dict[str, str], source: str
) -> None:
    err = error_of(env={"HOME": "/nonexistent", **env}, **kwargs)
    assert str(err) == f"TLS CA (from {source}) file /missing/ca.pem does not exist"


def test_a_tls_file_from_the_profile_that_does_not_exist(files: dict[str, Path]) -> None:
    files["ca"].unlink()
    err = error_of(env=env_of(files), profile="prod")
    assert err.source == f"profile 'prod' in {files['toml']} (tls.server_ca_cert_path)"
    assert "does not exist" in str(err)


def test_a_tls_file_without_pem(tmp_path: Path) -> None:
    der = tmp_path / "ca.der"
    der.write_bytes(b"\x30\x82binary")
    err = error_of(env={"HOME": "/x"}, tls_ca_path=der)
    assert "holds no PEM block" in str(err)


def test_a_client_certificate_without_its_key(files: dict[str, Path]) -> None:
    err = error_of(env={"HOME": "/x"}, tls_cert_path=files["cert"], via="flag")
    assert str(err).startswith("TLS client certificate (from --tls-cert-path) is given without")
    assert "--tls-key-path" in str(err)


def test_an_api_key_with_tls_turned_off() -> None:
    err = error_of(env={"HOME": "/x", "TEMPORAL_API_KEY": "k", "TEMPORAL_TLS": "false"})
    assert err.source == "env TEMPORAL_API_KEY"
    assert "TLS is turned off (by env TEMPORAL_TLS)" in str(err)
    err = error_of(env={"HOME": "/x"}, api_key="k", tls=False, via="flag")
    assert "(by --tls/--no-tls)" in str(err)


@pytest.mark.parametrize(
    "bad", ["http://host:7233", "localhost", "host:port", "host:70000", ":7233"]
)
def test_a_bad_address(bad: str) -> None:
    err = error_of(env={"HOME": "/x", "TEMPORAL_ADDRESS": bad})
    assert err.setting == "address"
    assert err.source == "env TEMPORAL_ADDRESS"
    assert bad.strip() in str(err)


def test_a_port_out_of_range_is_said_so() -> None:
    """Walk 7: ``nohost:99999`` was told it "must be host:port"."""
    err = error_of(env={"HOME": "/x", "TEMPORAL_ADDRESS": "nohost:99999"})
    assert "'nohost:99999': the port must be from 1 to 65535" in str(err)


def test_ipv6_addresses_are_fine() -> None:
    assert (
        ClusterConfig.load(env={"HOME": "/x"}, address="[::1]:7233").address.value == "[::1]:7233"
    )


def test_tls_switch_that_is_not_a_boolean() -> None:
    err = error_of(env={"HOME": "/x", "TEMPORAL_TLS": "yes please"})
    assert str(err) == "TLS (from env TEMPORAL_TLS) must be true or false (or 1 or 0)"


def test_host_verification_cannot_be_turned_off(files: dict[str, Path], tmp_path: Path) -> None:
    err = error_of(env={"HOME": "/x", "TEMPORAL_TLS_DISABLE_HOST_VERIFICATION": "true"})
    assert err.source == "env TEMPORAL_TLS_DISABLE_HOST_VERIFICATION"
    path = tmp_path / "t.toml"
    path.write_text(
        '[profile.default]\naddress = "a:1"\n'
        "[profile.default.tls]\ndisable_host_verification = true\n"
    )
    err = error_of(env={"HOME": "/x"}, config_file=path)
    assert "tls.disable_host_verification" in err.source


# ---------------------------------------------------------------------------- Client.connect


class Recorder:
    """Stands in for ``Client.connect``: records the keyword arguments, then refuses."""

    def __init__(self) -> None:
        self.calls: list[dict[str, Any]] = []

    async def __call__(self, **kwargs: Any) -> Client:
        self.calls.append(kwargs)
        raise RuntimeError("Failed client connect: invalid peer certificate: UnknownIssuer")


async def test_connect_passes_the_settings_and_the_pydantic_converter(
    files: dict[str, Path], monkeypatch: pytest.MonkeyPatch
) -> None:
    recorder = Recorder()
    monkeypatch.setattr(Client, "connect", recorder)
    for key in [k for k in os.environ if k.startswith("TEMPORAL_")]:
        monkeypatch.delenv(key)
    for key, value in env_of(files, TEMPORAL_PROFILE="prod").items():
        monkeypatch.setenv(key, value)
    with pytest.raises(ClusterConnectError) as info:
        await cluster.connect(namespace="override-ns")
    (call,) = recorder.calls
    assert call["target_host"] == "prod.tmprl.example:7233"
    assert call["namespace"] == "override-ns"
    assert call["api_key"] == "file-key"
    assert call["tls"].server_root_ca_cert == PEM_CA
    assert call["data_converter"] is pydantic_data_converter
    message = str(info.value)
    assert "\n" not in message
    assert message.startswith("cannot connect to Temporal at prod.tmprl.example:7233 (")
    assert "the server's certificate is not signed by the CA given" in message
    assert isinstance(info.value, RuntimeError)  # what callers of Client.connect catch


def test_a_profile_with_an_api_key_and_tls_disabled(tmp_path: Path) -> None:
    path = tmp_path / "t.toml"
    path.write_text(
        '[profile.default]\naddress = "a:1"\napi_key = "k"\n'
        "[profile.default.tls]\ndisabled = true\n"
    )
    err = error_of(env={"HOME": "/x", "TEMPORAL_CONFIG_FILE": str(path)})
    assert err.source == f"profile 'default' in {path} (api_key)"
    assert f"(by profile 'default' in {path} (tls.disabled))" in str(err)
    # TEMPORAL_TLS=true from the environment beats the profile's switch.
    on = ClusterConfig.load(
        env={"HOME": "/x", "TEMPORAL_CONFIG_FILE": str(path), "TEMPORAL_TLS": "1"}
    )
    assert on.connect_kwargs()["tls"] is True


def test_the_cli_flags_reach_the_config(
    files: dict[str, Path], tmp_path: Path, monkeypatch: pytest.MonkeyPatch
) -> None:
    from toolnexus_temporal.cli.connection_opts import NAMES, load_cluster

    for key in [k for k in os.environ if k.startswith("TEMPORAL_")]:
        monkeypatch.delenv(key)
    monkeypatch.setenv("HOME", str(tmp_path))
    monkeypatch.delenv("XDG_CONFIG_HOME", raising=False)
    kwargs: dict[str, Any] = dict.fromkeys(NAMES)
    kwargs |= {"address": "h:1", "tls_ca_path": str(files["ca"]), "grpc_meta": ["x-a=1", "x-b=2=3"]}
    kwargs["own_option"] = "kept"
    config = load_cluster(kwargs)
    assert kwargs == {"own_option": "kept"}
    assert config.address.source == "--address"
    assert config.connect_kwargs()["rpc_metadata"] == {"x-a": "1", "x-b": "2=3"}
    with pytest.raises(ClusterConfigError, match=r"gRPC metadata \(from --grpc-meta\) 'x' is not"):
        load_cluster({"grpc_meta": ["x"]})


def test_a_hang_up_is_explained_only_over_tls() -> None:
    from toolnexus_temporal.client.errors import connect_reason

    raw = 'transport error: Custom { kind: BrokenPipe, error: "stream closed" }'
    assert connect_reason(raw) == " ".join(raw.split())
    assert connect_reason(raw, tls=True).startswith("the server closed the TLS connection")
    assert "does it accept this client certificate" in connect_reason(
        raw, tls=True, client_cert=True
    )
    refused = "Connection refused (os error 111)"
    assert connect_reason(refused, tls=True) == refused
