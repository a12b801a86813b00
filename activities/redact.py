"""Secrets never leave an activity (issue 12, item 10).

A provider may echo the API key in an error body (a 401 that quotes the ``Authorization``
header), and an exception message may carry it. Every text an activity sends out (its
``ApplicationError`` message and details, which land in workflow history, ``last_error`` and
the worker's log) goes through :func:`redact` with the worker's configured secrets first.
"""

from __future__ import annotations

from collections.abc import Iterable
from typing import Any

from temporalio.exceptions import ApplicationError

REDACTED = "[redacted]"
"""What a secret is replaced with."""

MIN_SECRET_LEN = 4
"""Shorter configured values are not treated as secrets (they would garble every text)."""


def redact(text: str, secrets: Iterable[str]) -> str:
    """``text`` with every occurrence of every secret replaced by ``[redacted]``.

    Args:
        text: any text.
        secrets: the values to hide; empty or shorter than ``MIN_SECRET_LEN`` ones are
            ignored. Longer secrets are replaced first (one secret may contain another).
    """
    for secret in sorted({s for s in secrets if len(s) >= MIN_SECRET_LEN}, key=len, reverse=True):
        text = text.replace(secret, REDACTED)
    return text


def redact_value(value: Any, secrets: list[str]) -> Any:
    """A JSON-like value (str, list, dict, scalars) with every string redacted."""
    if isinstance(value, str):
        return redact(value, secrets)
    if isinstance(value, list | tuple):
        return [redact_value(v, secrets) for v in value]
    if isinstance(value, dict):
        return {redact_value(k, secrets): redact_value(v, secrets) for k, v in value.items()}
    return value


def redacted_error(err: BaseException, secrets: list[str]) -> ApplicationError:
    """An ``ApplicationError`` for ``err`` whose message and details hold no secret.

    An ``ApplicationError`` keeps its type, retryability, retry delay and details; any other
    exception becomes a retryable ``ApplicationError`` typed by its class name (as Temporal
    would report it). Raise the result ``from None``: a chained cause would carry the
    original text into the failure and the log.
    """
    if isinstance(err, ApplicationError):
        return ApplicationError(
            redact(err.message, secrets),
            *redact_value(list(err.details), secrets),
            type=err.type,
            non_retryable=err.non_retryable,
            next_retry_delay=err.next_retry_delay,
        )
    return ApplicationError(
        redact(f"{type(err).__name__}: {err}", secrets), type=type(err).__name__
    )


def mentions_secret(err: BaseException, secrets: list[str]) -> bool:
    """Whether ``err``, its details or any exception chained to it quotes a secret."""
    seen: set[int] = set()
    current: BaseException | None = err
    while current is not None and id(current) not in seen:
        seen.add(id(current))
        texts = [str(current), *(str(d) for d in getattr(current, "details", ()) or ())]
        if any(redact(t, secrets) != t for t in texts):
            return True
        current = current.__cause__ or current.__context__
    return False
