"""The double-texting policy: what a wake that finds its handle busy does (issue 34 item 2).

A handle is busy while a turn runs or is parked on a Request, while an admitted wake waits
for its turn or for a slot, while an interrupt is stopping its turn, while it is paused, and
while messages already wait. A wake from a host (the ``turn`` update behind ``rt.run_turn``,
``rt.wake`` and ``tnx wake``; the ``wake`` signal) then follows one policy, the wake's own
(``TurnRequest.policy``, ``WakeRequest.policy``) or else its agent's
(``AgentDef.double_texting``):

* ``enqueue`` (the default): the message waits; one turn after the current one answers every
  waiting message, in arrival order.
* ``interrupt``: the turn in flight is stopped as ``interrupt`` stops it, and one turn holds
  the stopped turn's messages, then the new one.
* ``reject``: the sender gets ``AgentBusy`` (:data:`~.names.AGENT_BUSY`); nothing changes.
* ``debounce:MS``: no turn starts until ``MS`` ms after the first waiting message; every
  message arriving meanwhile joins that turn (also on an idle handle).

Pure and I/O free: the workflow sandbox, the client and the CLI import it.
"""

from __future__ import annotations

from typing import Final, Literal

PolicyKind = Literal["enqueue", "interrupt", "reject", "debounce"]
"""The four policies."""

DEFAULT_POLICY: Final = "enqueue"
"""The policy of an agent that names none."""

DEBOUNCE_MAX_MS: Final = 3_600_000
"""The longest debounce window, ms (one hour)."""

POLICY_HELP: Final = "enqueue, interrupt, reject or debounce:MS (MS from 1 to 3600000)"
"""What a policy may be, as the error messages say it."""


def policy_error(text: object) -> str | None:
    """Why ``text`` is not a double-texting policy, in one line; None when it is one."""
    if not isinstance(text, str):
        return f"policy must be a string: {POLICY_HELP}"
    if text in ("enqueue", "interrupt", "reject"):
        return None
    kind, _, ms = text.partition(":")
    # ASCII digits only: str.isdigit() takes "²" (which int() refuses) and int() takes "३००"
    if kind == "debounce" and ms.isascii() and ms.isdecimal():
        if 1 <= int(ms) <= DEBOUNCE_MAX_MS:
            return None
        # a window out of range is not an unknown policy (walk 7)
        return f"debounce window {ms} ms is out of range: use {POLICY_HELP}"
    return f"unknown double-texting policy {text[:60]!r}: use {POLICY_HELP}"


def check_policy(text: str | None) -> str | None:
    """``text`` when it is a policy (or None); the pydantic validator of the policy fields.

    Raises:
        ValueError: the one-line reason (:func:`policy_error`).
    """
    if text is None:
        return None
    error = policy_error(text)
    if error is not None:
        raise ValueError(error)
    return text


def parse_policy(text: str) -> tuple[PolicyKind, int]:
    """The kind of a valid policy and its window in ms (0 but for ``debounce``).

    Raises:
        ValueError: not a policy (:func:`policy_error`).
    """
    check_policy(text)
    if text.startswith("debounce:"):
        return "debounce", int(text.partition(":")[2])
    kind: PolicyKind = text  # type: ignore[assignment]  # checked above
    return kind, 0
