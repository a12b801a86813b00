"""Whether a post may enter a handle's inbox (CONTRACT §3 post): a pure rule over
``HandleState``, in the contract so that the workflow (``inbox.Inbox.post``, the
``admit_post`` validator) and the host library (the client's ``post`` signal, which checks it
on the ``state`` query before sending) apply the same one. Deterministic; no I/O."""

from __future__ import annotations

from toolnexus_temporal.workflows.contract.limits import INBOX_BYTES, text_bytes
from toolnexus_temporal.workflows.contract.models import InboxItem
from toolnexus_temporal.workflows.contract.state import HandleState


def post_error(s: HandleState, item: InboxItem) -> str | None:
    """Why ``item`` may not be posted (CONTRACT §3 post), or None.

    Returns:
        ``the root has no inbox: ...``, ``inbox closed`` (closed or closing),
        ``inbox full (N)`` at ``options.inbox_cap`` items, or ``inbox full (524,288
        bytes)`` when the item would take the inbox's text past
        :data:`~toolnexus_temporal.workflows.contract.limits.INBOX_BYTES` (the inbox travels
        in the carried state, one payload of at most 2 MB).
    """
    if s.defn is None:
        return "the root has no inbox: post to a spawned handle"
    if s.state == "closed" or s.closing:
        return "inbox closed"
    # The one coalesced tick item takes no place: ticks never fill the inbox (``ticks.py``).
    ticks = any(i.from_ == "clock" and i.channel == "timer" for i in s.intake.items)
    if len(s.intake.items) - ticks >= s.options.inbox_cap:
        return f"inbox full ({s.options.inbox_cap})"
    held = sum(text_bytes(i.text) for i in s.intake.items)
    if held + text_bytes(item.text) > INBOX_BYTES:
        return f"inbox full ({INBOX_BYTES:,} bytes)"
    return None
