"""What the Temporal server refuses, and the one function that bounds a value before it is sent
(issue 23 item 3: a 3,000-character Request ``kind`` made the server terminate the parked
workflow, "BadSearchAttributes ... exceeds size limit 2048"; a 1,000-byte child workflow id
failed the parent's workflow task for good).

The numbers are the server's defaults (Temporal docs: "Temporal Platform limits"; the SDK docs
"Enriching the user interface"): an operator who lowers them must keep them at least this high.
Every string we send in one of these places goes through :func:`fit` or is refused, with a
clear error, at the verb that caused it (a spawn whose child id is too long is a SpawnError).

Deterministic and I/O free (the workflow sandbox imports it).
"""

from __future__ import annotations

import json
from typing import Final

SEARCH_ATTRIBUTE_VALUE_BYTES: Final = 2_048
"""The largest value of one search attribute, UTF-8 bytes
(``limit.searchAttributesSizeOfValue``)."""

WORKFLOW_ID_BYTES: Final = 1_000
"""The longest workflow id, UTF-8 bytes (``limit.maxIDLength``)."""

SUMMARY_BYTES: Final = 200
"""The longest static summary of a workflow, activity or timer, UTF-8 bytes."""

DETAILS_BYTES: Final = 20_000
"""The longest static or current details, UTF-8 bytes."""

HEARTBEAT_DETAILS_BYTES: Final = 256 * 1024
"""What we put in one activity heartbeat's details at most, JSON bytes (an LLM call's reply
held across a store outage, ``LiveOutput.reply``): the server refuses a payload over 2 MiB
(``limit.blobSize.error``) and warns over 512 KiB, and copies the last details of an attempt
that timed out into its failure, in history."""

SEARCH_ATTRIBUTE_TEXT_BYTES: Final = 1_900
"""What we put in one search attribute value at most: its JSON encoding (as the server
measures it, with quotes and escapes) below :data:`SEARCH_ATTRIBUTE_VALUE_BYTES` with
room for the payload's metadata (a 2,048-byte string measured 2,053 on the dev server)."""

BLOB_BYTES: Final = 2 * 1024 * 1024
"""The largest payload the server takes, bytes (``limit.blobSize.error``): one signal's input,
one activity result, and the whole carried state of a continue-as-new (one payload). A
continue-as-new whose input is larger fails its workflow task for good, so what a handle
carries is bounded below it (:data:`INBOX_BYTES`)."""

INBOX_BYTES: Final = 512 * 1024
"""The most text one inbox holds, bytes of its JSON encoding: the inbox and the items a turn
drained travel in the carried state, so together they stay within half of
:data:`BLOB_BYTES` whatever ``inbox_cap`` is (eight items of 64,000 characters are 512 KB
of ASCII, up to four times that in other scripts). A post past it is refused like one past
``inbox_cap``: ``inbox full (524,288 bytes)``."""

ELLIPSIS: Final = "…"


def text_bytes(text: str) -> int:
    """The size of ``text`` as a JSON string in a payload, bytes (UTF-8, with its escapes and
    quotes)."""
    return len(json.dumps(text, ensure_ascii=False).encode())


def fit(text: str, max_bytes: int) -> str:
    """``text`` cut to at most ``max_bytes`` UTF-8 bytes at a character boundary, ending in
    ``…`` when cut (unchanged when it fits).

    Raises:
        ValueError: ``max_bytes`` leaves no room for the ellipsis.
    """
    data = text.encode()
    if len(data) <= max_bytes:
        return text
    room = max_bytes - len(ELLIPSIS.encode())
    if room < 0:
        raise ValueError(f"max_bytes {max_bytes} is below the ellipsis")
    return data[:room].decode(errors="ignore") + ELLIPSIS


def fit_search_attribute(text: str) -> str:
    """``text`` cut so that its JSON encoding (ASCII-escaped, as Temporal's JSON payload
    converter writes it) fits :data:`SEARCH_ATTRIBUTE_TEXT_BYTES`."""
    budget = SEARCH_ATTRIBUTE_TEXT_BYTES
    value = fit(text, budget)
    while len(json.dumps(value)) > SEARCH_ATTRIBUTE_TEXT_BYTES:
        budget -= len(json.dumps(value)) - SEARCH_ATTRIBUTE_TEXT_BYTES
        value = fit(text, max(budget, len(ELLIPSIS.encode())))
    return value


def search_attribute_error(attribute: str, value: str) -> str | None:
    """Why the server would refuse ``value`` as search attribute ``attribute``, or None: for
    a value that must stay whole (an operator queries for it exactly, so :func:`fit_search_
    attribute` may not cut it), its JSON encoding (ASCII-escaped, as Temporal's JSON payload
    converter writes it) must fit :data:`SEARCH_ATTRIBUTE_TEXT_BYTES`."""
    size = len(json.dumps(value))
    if size > SEARCH_ATTRIBUTE_TEXT_BYTES:
        return (
            f"it is the search attribute {attribute}, whose value the server takes up to"
            f" {SEARCH_ATTRIBUTE_VALUE_BYTES} bytes; this one is {size} bytes as JSON"
            f" (at most {SEARCH_ATTRIBUTE_TEXT_BYTES}: a shorter or ASCII name)"
        )
    return None


def workflow_id_error(workflow_id: str) -> str | None:
    """Why the server would refuse ``workflow_id``, or None."""
    size = len(workflow_id.encode())
    if size > WORKFLOW_ID_BYTES:
        return (
            f"its workflow id would be {size} bytes, over Temporal's {WORKFLOW_ID_BYTES}"
            " (shorter agent names or a shallower tree)"
        )
    return None
