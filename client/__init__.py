"""Host-side client: ``AgentRuntime`` drives agent handles that live in Temporal workflows."""

from client.errors import (
    AnswerRejectedError,
    HandleNotFoundError,
    SpawnError,
    TnxError,
    VerbRejectedError,
)
from client.handle import Handle
from client.runtime import AgentRuntime
from workflows.models import (
    AgentDef,
    Answer,
    Budget,
    InboxItem,
    Request,
    RuntimeOptions,
    TaskResult,
)

__all__ = [
    "AgentDef",
    "AgentRuntime",
    "Answer",
    "AnswerRejectedError",
    "Budget",
    "Handle",
    "HandleNotFoundError",
    "InboxItem",
    "Request",
    "RuntimeOptions",
    "SpawnError",
    "TaskResult",
    "TnxError",
    "VerbRejectedError",
]
