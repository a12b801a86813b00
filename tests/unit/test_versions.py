"""The version gates of ``workflows/contract/versions.py``: one protocol generation until 1.0,
gates that refuse a generation or patch id this build does not list, and the clear error a
handle of a retired or unknown generation fails with."""

from __future__ import annotations

import pytest
from temporalio.exceptions import ApplicationError

from toolnexus_temporal.workflows.contract import names, versions
from toolnexus_temporal.workflows.contract.state import HandleState


def test_one_generation_and_no_patch_before_1_0() -> None:
    assert names.PROTOCOLS == frozenset({names.PROTOCOL})
    assert dict(names.PATCHES) == {}
    assert set(names.RETIRED_PROTOCOLS) == {1, 2, 3}
    assert not set(names.RETIRED_PROTOCOLS) & names.PROTOCOLS
    assert not set(names.RETIRED_PATCHES) & set(names.PATCHES)


def test_new_handles_start_on_the_baseline() -> None:
    assert HandleState(id="root", task_queue="q").protocol == names.PROTOCOL
    wire = HandleState(id="root", task_queue="q").model_dump(mode="json")
    assert wire["protocol"] == names.PROTOCOL  # kept on the wire: a history says which


def test_the_baseline_runs() -> None:
    assert versions.protocol_error(names.PROTOCOL) is None
    versions.check_protocol(names.PROTOCOL)


@pytest.mark.parametrize("protocol", sorted(names.RETIRED_PROTOCOLS))
def test_a_retired_generation_is_refused_with_what_to_do(protocol: int) -> None:
    with pytest.raises(ApplicationError) as err:
        versions.check_protocol(protocol)
    assert err.value.type == names.UNSUPPORTED_PROTOCOL and err.value.non_retryable
    assert f"protocol {protocol} (pre-release" in str(err.value)
    assert "drain or terminate" in str(err.value)


def test_an_unknown_generation_is_refused() -> None:
    error = versions.protocol_error(names.PROTOCOL + 1)
    assert error == (
        f"protocol {names.PROTOCOL + 1} is unknown to this build (it runs protocol "
        f"{names.PROTOCOL})"
    )


def test_at_least_gates_only_on_a_generation_of_this_build() -> None:
    assert versions.at_least(names.PROTOCOL, names.PROTOCOL)
    assert not versions.at_least(names.PROTOCOL - 1, names.PROTOCOL)
    with pytest.raises(ValueError, match="not one of this build's"):
        versions.at_least(names.PROTOCOL, 2)  # a gate on a retired generation is a bug


def test_patched_takes_only_listed_ids() -> None:
    with pytest.raises(ValueError, match="retired"):
        versions.patched("lease-returned")
    with pytest.raises(ValueError, match="not listed"):
        versions.patched("some-new-change")
