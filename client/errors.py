"""Typed errors and error values of the client (CONTRACT §3)."""

from __future__ import annotations

from pydantic import BaseModel, ConfigDict


class TnxError(Exception):
    """Base class of every error the client raises."""


class HandleNotFoundError(TnxError):
    """No workflow exists for this handle id (in this runtime's scope and namespace).

    Attributes:
        handle_id: the id that was looked up.
    """

    def __init__(self, handle_id: str) -> None:
        super().__init__(f"no handle {handle_id!r}: no agent workflow with that id exists")
        self.handle_id = handle_id


class VerbRejectedError(TnxError):
    """The handle's workflow refused a verb (``inbox full``, ``handle closed``, ...); nothing
    changed.

    Attributes:
        handle_id: the handle.
        verb: the update the workflow refused (``turn``, ``admit_post``, ``wait``, ...), or
            ``wake`` when the parent refused the slot or the handle is the root.
        reason: the workflow's reason, as the contract words it.
    """

    def __init__(self, handle_id: str, verb: str, reason: str) -> None:
        super().__init__(f"{verb} on {handle_id!r} rejected: {reason}")
        self.handle_id = handle_id
        self.verb = verb
        self.reason = reason


class AnswerRejectedError(TnxError):
    """An Answer whose id matches no pending Request (CONTRACT §9.2); nothing changed.

    Attributes:
        answer_id: the Answer's id.
        reason: why it was rejected.
    """

    def __init__(self, answer_id: str, reason: str) -> None:
        super().__init__(f"answer {answer_id!r} rejected: {reason}")
        self.answer_id = answer_id
        self.reason = reason


class SpawnError(BaseModel):
    """A refused spawn: returned by ``AgentRuntime.spawn``, never raised (CONTRACT §3).

    Attributes:
        parent: the parent handle id.
        name: the agent name asked for.
        error: the contract's text, e.g. ``unknown agent "x" (known: a, b)``.
    """

    model_config = ConfigDict(frozen=True)

    parent: str
    name: str
    error: str

    def __str__(self) -> str:
        return f"spawn {self.name!r} under {self.parent!r} refused: {self.error}"
