"""The host library: ``AgentRuntime`` drives agent handles that live in Temporal workflows.

Modules: ``runtime`` (the verbs), ``handle`` (``Handle``, a read model of one agent),
``errors``, ``cluster`` (``connect``: profiles, ``TEMPORAL_*`` variables, TLS, API key),
``rpc`` (the typed updates and queries), ``handlers`` (the workflow's handlers as the host
library calls them: durable names, contract types), ``turns`` (the client side of a wake:
slots from the parent, ``turn`` updates in flight), ``stream`` (live output of a running
turn), ``codec`` (encryption at rest: the AES-256-GCM payload codec and the data converter)
and ``testing`` (a scripted LLM for tests). The host library imports the workflow contract
only (types, names, pure rules in ``workflows/contract/``), never a workflow component, the
worker or an activity (``tests/test_layout.py``); the ``tnx`` command line is
``toolnexus_temporal.cli``.

Each verb and the Temporal message it sends to the handle's workflow (when the server refuses
an update for its limit, the verb sends the signal of the same name and confirms the outcome
with queries: ``client/fallback.py``):

| verb | Temporal message | result |
|---|---|---|
| spawn | update ``spawn`` on the parent | Handle, or a SpawnError value (never raises) |
| wake | update ``turn`` (accepted) | the Handle, refreshed: ``running`` when admitted |
| run_turn | update ``turn`` (completed) | TaskResult of the turn that held its message |
| post | update ``admit_post`` | PostResult (``inbox full`` / ``inbox closed`` loud) |
| wait | the wake's ``turn``, else update ``wait`` | TaskResult (blocks in the workflow) |
| interrupt | update ``admit_interrupt`` | the Handle, refreshed (``idle``) |
| close | update ``admit_close`` | the Handle, refreshed (``closed``), subtree closed |
| answer | update ``admit_answer`` | AnswerResult (``resume`` finds the handle first) |
| fork | update ``spawn`` on the parent (a fork spec) | the new Handle |
| inspect | query ``view`` | the Handle, refreshed |
| list | query ``view`` per handle | the tree, pre-order, children in spawn order |
| trace | query ``trace`` per handle | the subtree's lines merged in order of occurrence |
| pending | visibility list, ``view`` | the suspended handles (``AgentState`` attribute) |
"""

from toolnexus_temporal.client.audit import AuditRecord
from toolnexus_temporal.client.errors import (
    AgentBusy,
    AnswerRejectedError,
    ForkRefusedError,
    HandleNotFoundError,
    InvalidCursorError,
    InvalidPolicyError,
    NoWorkerError,
    OrphanedHandlesError,
    RecoverRefusedError,
    SearchAttributesMissingError,
    SpawnError,
    TnxError,
    UpdateLimitError,
    VerbRejectedError,
    WorkflowTaskFailingError,
)
from toolnexus_temporal.client.handle import Handle
from toolnexus_temporal.client.roots import QueueRow
from toolnexus_temporal.client.runtime import AgentRuntime
from toolnexus_temporal.workflows.contract.models import (
    AgentDef,
    Answer,
    ApprovalPolicy,
    Budget,
    ContextPolicy,
    Escalation,
    InboxItem,
    McpServer,
    Request,
    RuntimeOptions,
    TaskResult,
    TickSpec,
)

__all__ = [
    "AgentBusy",
    "AgentDef",
    "AgentRuntime",
    "Answer",
    "AnswerRejectedError",
    "ApprovalPolicy",
    "AuditRecord",
    "Budget",
    "ContextPolicy",
    "Escalation",
    "ForkRefusedError",
    "Handle",
    "HandleNotFoundError",
    "InboxItem",
    "InvalidCursorError",
    "InvalidPolicyError",
    "McpServer",
    "NoWorkerError",
    "OrphanedHandlesError",
    "QueueRow",
    "RecoverRefusedError",
    "Request",
    "RuntimeOptions",
    "SearchAttributesMissingError",
    "SpawnError",
    "TaskResult",
    "TickSpec",
    "TnxError",
    "UpdateLimitError",
    "VerbRejectedError",
    "WorkflowTaskFailingError",
]
