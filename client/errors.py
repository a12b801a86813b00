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


class UpdateLimitError(TnxError):
    """An update was refused for a limit, not for its content: Temporal's 10 updates in flight
    per workflow or 2,000 per run, or the handle's cap on held waits. Every public verb with
    a signal form falls back to it instead (README "Errors"); this reaches the caller only
    from verbs without one (``spawn``) once its retries are spent.

    Attributes:
        handle_id: the handle.
        verb: the update refused.
        reason: the server's or the workflow's text.
    """

    def __init__(self, handle_id: str, verb: str, reason: str) -> None:
        super().__init__(f"{verb} on {handle_id!r} refused for a limit: {reason}")
        self.handle_id = handle_id
        self.verb = verb
        self.reason = reason


class OrphanedHandlesError(TnxError):
    """A new runtime would start a new root run while handles of the old root's tree are
    still running (the old root was terminated, or cancelled before protocol 3): they would
    be orphaned, out of every ``ls`` and budget. Nothing was started.

    Attributes:
        scope: the runtime's scope (None for bare ids).
        running: workflow ids of the running handles found (at most 20).
    """

    def __init__(self, scope: str | None, running: list[str]) -> None:
        shown = ", ".join(running[:5]) + (" ..." if len(running) > 5 else "")
        where = f"scope {scope!r}" if scope else "this namespace"
        query = f'WorkflowId STARTS_WITH "{scope + "/" if scope else ""}root/"'
        super().__init__(
            f"the root of {where} has ended but {len(running)} of its handles still run "
            f"({shown}); close them first (`temporal workflow cancel --query "
            f"'{query} AND ExecutionStatus=\"Running\"'` closes each gracefully), "
            "or use another scope"
        )
        self.scope = scope
        self.running = running


class SearchAttributesMissingError(TnxError):
    """The namespace lacks custom search attributes the agent workflows upsert (a namespace
    set up before protocol 4 has no ``AgentRequest*``): a parked agent's upsert would fail
    its workflow task over and over, so the runtime does not start. Nothing was started.

    Attributes:
        namespace: the namespace.
        missing: the missing attribute names, sorted.
    """

    def __init__(self, namespace: str, missing: list[str], types: dict[str, str]) -> None:
        lines = " && ".join(
            f"temporal operator search-attribute create --namespace {namespace}"
            f" --name {name} --type {types[name]}"
            for name in missing
        )
        super().__init__(
            f"namespace {namespace!r} lacks the search attributes {', '.join(missing)}; "
            f"register them (`tnx server start` does it for its dev server; elsewhere: "
            f"{lines})"
        )
        self.namespace = namespace
        self.missing = missing
