"""The host library: ``AgentRuntime`` drives agent handles that live in Temporal workflows.

Modules: ``runtime`` (the verbs), ``handle`` (``Handle``, a read model of one agent),
``errors``, ``cluster`` (``connect``: profiles, ``TEMPORAL_*`` variables, TLS, API key),
``rpc`` (the typed updates and queries), ``turns`` (the client side of a wake: slots from the
parent, ``turn`` updates in flight), ``stream`` (live output of a running turn), ``codec``
(encryption at rest: the AES-256-GCM payload codec and the data converter) and ``testing``
(a scripted LLM for tests). The host library imports the workflow definitions and models,
never the worker or an activity; the ``tnx`` command line is :mod:`toolnexus_temporal.cli`.

Each verb and the Temporal message it sends to the handle's workflow:

=========  ==========================  =====================================================
verb       Temporal message             result
=========  ==========================  =====================================================
spawn      update ``spawn`` on parent   Handle, or a SpawnError value (never raises)
wake       update ``turn`` (accepted)   the Handle, refreshed: ``running`` when admitted
run_turn   update ``turn`` (completed)  TaskResult of that turn (wake + wait in one update)
post       update ``admit_post``        PostResult (``inbox full`` / ``inbox closed`` loud)
wait       the wake's ``turn``, else    TaskResult (blocks in the workflow, not by polling)
           update ``wait``
interrupt  update ``admit_interrupt``   the Handle, refreshed (``idle``)
close      update ``admit_close``       the Handle, refreshed (``closed``), subtree closed
answer     update ``admit_answer``      AnswerResult (``resume`` finds the handle first)
inspect    query ``view``               the Handle, refreshed
list       query ``view`` per handle    the tree, pre-order, children in spawn order
trace      query ``trace`` per handle   the subtree's lines merged in order of occurrence
pending    visibility list, ``view``    the suspended handles (``names.APPROVAL_QUEUE``)
queue      visibility list              the same, from search attributes alone (no worker)
stream     ``view``, describe, history  live events of the running turn (``stream.py``):
                                        text deltas, tool calls, then the result; each
                                        event's ``seq`` resumes it (``after=``)
=========  ==========================  =====================================================
"""

from toolnexus_temporal.client.errors import (
    AnswerRejectedError,
    HandleNotFoundError,
    InvalidCursorError,
    NoWorkerError,
    OrphanedHandlesError,
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
    "InvalidCursorError",
    "NoWorkerError",
    "OrphanedHandlesError",
    "QueueRow",
    "Request",
    "RuntimeOptions",
    "SearchAttributesMissingError",
    "SpawnError",
    "TaskResult",
    "TnxError",
    "UpdateLimitError",
    "VerbRejectedError",
    "WorkflowTaskFailingError",
]
