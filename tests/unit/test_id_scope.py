"""An id pasted into ``tnx`` with its scope (``cli/args.py`` ``ref``): taken under that
scope, refused in one line under another (walk 5 got "no handle" for an id that exists)."""

from __future__ import annotations

import pytest

from toolnexus_temporal.cli.args import ref
from toolnexus_temporal.cli.options import CliError, Options


def test_an_id_of_the_scope_given_loses_its_prefix() -> None:
    assert ref(Options(scope="demo"), "demo/root/a.1") == "root/a.1"
    assert ref(Options(scope="demo"), "root/a.1") == "root/a.1"
    assert ref(Options(scope="demo"), "demo/root/a.1#2", request=True) == "root/a.1#2"
    assert ref(Options(scope="demo"), "demo/root/a.1#2") == "root/a.1"  # its agent (walk 9)
    assert ref(Options(), "root/a.1") == "root/a.1"


@pytest.mark.parametrize(
    ("scope", "given", "said"),
    [
        ("demo", "walk5/root/ops.1", "but --scope demo was given"),
        (None, "walk5/root/ops.1#2", "but --scope '' was given"),
    ],
)
def test_an_id_of_another_scope_is_refused_in_one_line(
    scope: str | None, given: str, said: str
) -> None:
    with pytest.raises(CliError) as caught:
        ref(Options(scope=scope), given)
    message = caught.value.message
    assert "is an id of scope 'walk5'" in message and said in message, message
    assert "pass --scope walk5" in message and "\n" not in message
