"""Values that go into visibility queries (issue 23 item 7): a scope is checked when a
runtime is made, and a value that could end its quotes never reaches a query."""

from __future__ import annotations

import pytest

from toolnexus_temporal.client.queries import SCOPE_MAX, check_scope, prefix_clause, quoted

INJECTIONS = [
    'x" OR WorkflowId STARTS_WITH "oe',
    'a"b',
    "a\\b",
    "it's",
    "a b",
    "a\nb",
]


@pytest.mark.parametrize("scope", ["t-0a1b", "prod", "team.a/env:eu-1", "A_b", "x" * SCOPE_MAX])
def test_valid_scopes(scope: str) -> None:
    check_scope(scope)
    assert prefix_clause(f"{scope}/") == f'WorkflowId STARTS_WITH "{scope}/"'


@pytest.mark.parametrize(
    "scope", ["", "/a", "a/", "a//b", "-a", "x" * (SCOPE_MAX + 1), *INJECTIONS]
)
def test_invalid_scopes_are_refused_with_the_reason(scope: str) -> None:
    with pytest.raises(ValueError, match="scope"):
        check_scope(scope)


@pytest.mark.parametrize("value", [*INJECTIONS[:4], "a\tb"])
def test_a_value_that_could_leave_its_quotes_never_reaches_a_query(value: str) -> None:
    with pytest.raises(ValueError, match="cannot go into a visibility query"):
        quoted(value)


def test_check_scope_takes_no_scope() -> None:
    check_scope(None)
