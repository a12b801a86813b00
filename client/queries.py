"""Visibility queries: the one place a value from outside (a runtime scope) goes into a list
filter, so none can change what a query means (issue 23 item 7: a scope holding ``"`` made
``tnx pending`` fail with "malformed SQL query", and ``x" OR WorkflowId STARTS_WITH "oe``
listed another runtime's workflows).

Two rules, both here: a scope is validated when a runtime is made (:func:`check_scope`: the
characters of a workflow id path, nothing that quotes or escapes), and every value is put in
a query through :func:`quoted`, which refuses a value it cannot quote safely instead of
guessing at the server's escaping rules.
"""

from __future__ import annotations

import re
from typing import Final

SCOPE_MAX: Final = 200
"""The longest scope, in characters (a workflow id, scope and handle path together, must stay
under Temporal's 1,000-byte limit)."""

_SCOPE = re.compile(r"[A-Za-z0-9][A-Za-z0-9._:-]*(?:/[A-Za-z0-9][A-Za-z0-9._:-]*)*")
"""Segments of letters, digits, ``.``, ``_``, ``:`` and ``-``, joined by single ``/``."""

_UNSAFE: Final = ('"', "'", "\\", "`", "\n", "\r", "\t", "\0")


def scope_error(scope: str) -> str | None:
    """Why ``scope`` cannot be a runtime scope, or None when it can."""
    if not scope:
        return "a scope must not be empty"
    if len(scope) > SCOPE_MAX:
        return f"a scope has at most {SCOPE_MAX} characters, this one {len(scope)}"
    if _SCOPE.fullmatch(scope) is None:
        return (
            "a scope is letters, digits, '.', '_', ':' and '-' in segments joined by '/' "
            "(no leading, trailing or double '/', no quotes, spaces or backslashes)"
        )
    return None


def check_scope(scope: str | None) -> None:
    """Refuse a scope that :func:`scope_error` names a reason for (None: no scope).

    Raises:
        ValueError: the scope, and why it is refused.
    """
    if scope is None:
        return
    error = scope_error(scope)
    if error is not None:
        raise ValueError(f"scope {scope[:80]!r}: {error}")


def check_task_queue(task_queue: str) -> None:
    """Refuse a task queue that :func:`quoted` cannot put in a query (``TaskQueue="..."``:
    the worker check, the fleet gauges).

    Raises:
        ValueError: the task queue, and the character that cannot be quoted.
    """
    quoted(task_queue)


def quoted(value: str) -> str:
    """``value`` as a double-quoted string of a visibility query.

    Raises:
        ValueError: the value holds a quote, a backslash or a control character (a runtime's
            own values never do: scopes are checked by :func:`check_scope`).
    """
    bad = [c for c in _UNSAFE if c in value]
    if bad:
        raise ValueError(f"{value[:80]!r} cannot go into a visibility query (it holds {bad[0]!r})")
    return f'"{value}"'


def prefix_clause(prefix: str) -> str:
    """``WorkflowId STARTS_WITH "{prefix}"``, quoted by :func:`quoted`."""
    return f"WorkflowId STARTS_WITH {quoted(prefix)}"
