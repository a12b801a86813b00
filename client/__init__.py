"""Host-side client: ``AgentRuntime`` drives agent handles that live in Temporal workflows."""

from toolnexus_temporal.client.errors import (
    AnswerRejectedError,
    HandleNotFoundError,
    SpawnError,
    TnxError,
    VerbRejectedError,
)
from toolnexus_temporal.client.handle import Handle
from toolnexus_temporal.client.runtime import AgentRuntime
from toolnexus_temporal.workflows.models import (
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
