"""toolnexus-temporal: the toolnexus agent runtime where every agent Handle is a Temporal workflow.

The public API, importable in one line::

    from toolnexus_temporal import AgentDef, AgentRuntime, LlmConfig, connect, create_worker

Subpackages, by role (each importable on its own):

* ``toolnexus_temporal.client``: the host library (``AgentRuntime``, ``Handle``, errors);
  it never imports the worker or any activity.
* ``toolnexus_temporal.workflows``: deterministic workflow code (``AgentWorkflow``) and the
  durable names and models.
* ``toolnexus_temporal.activities``: every piece of I/O (LLM calls, tools, the store).
* ``toolnexus_temporal.worker``: wiring (``create_worker``, ``tnx-worker``).
* ``toolnexus_temporal.observability``: tracing and metrics of the host and the worker (the
  workflow side of both is one observer of the turn, in ``workflows/turn/observe.py``).
* ``toolnexus_temporal.cli``: the ``tnx`` command, the demo, the dev-server and local-model
  process managers.

Names are loaded on first use (PEP 562), so ``import toolnexus_temporal.client`` costs no
activity, httpx client or worker import, and the workflow sandbox's re-import of this package
is cheap.
"""

from __future__ import annotations

import importlib
from typing import TYPE_CHECKING, Any

if TYPE_CHECKING:
    from toolnexus_temporal.activities.llm import LlmConfig
    from toolnexus_temporal.activities.pgstore import PostgresConversationStore
    from toolnexus_temporal.activities.pricing import load_prices
    from toolnexus_temporal.activities.registry import Registry, RegistryError
    from toolnexus_temporal.activities.store import (
        ConversationStore,
        SqliteConversationStore,
        StoreConfigError,
        StoreError,
        StoreUnavailableError,
    )
    from toolnexus_temporal.activities.stores import open_store
    from toolnexus_temporal.activities.tools import Tool, ToolContext, define_tool, pending
    from toolnexus_temporal.client.audit import AuditRecord
    from toolnexus_temporal.client.cluster import ClusterConfig, connect
    from toolnexus_temporal.client.errors import (
        AgentBusy,
        AnswerRejectedError,
        ClusterConfigError,
        ClusterConnectError,
        HandleNotFoundError,
        InvalidPolicyError,
        NoWorkerError,
        RecoverRefusedError,
        SpawnError,
        TnxError,
        VerbRejectedError,
    )
    from toolnexus_temporal.client.handle import Handle
    from toolnexus_temporal.client.runtime import AgentRuntime
    from toolnexus_temporal.worker import create_worker
    from toolnexus_temporal.workflows.contract.messages import AnswerResult, PostResult
    from toolnexus_temporal.workflows.contract.models import (
        AgentDef,
        Answer,
        ApprovalPolicy,
        Budget,
        ContextPolicy,
        Cost,
        Escalation,
        InboxItem,
        McpServer,
        Request,
        RuntimeOptions,
        TaskResult,
        TickSpec,
    )
    from toolnexus_temporal.workflows.contract.pricing import ModelPrice

_WHERE = {
    "AgentDef": "workflows.contract.models",
    "AgentRuntime": "client.runtime",
    "Answer": "workflows.contract.models",
    "AnswerRejectedError": "client.errors",
    "AnswerResult": "workflows.contract.messages",
    "ApprovalPolicy": "workflows.contract.models",
    "AuditRecord": "client.audit",
    "Budget": "workflows.contract.models",
    "ContextPolicy": "workflows.contract.models",
    "Cost": "workflows.contract.models",
    "ClusterConfig": "client.cluster",
    "ClusterConfigError": "client.errors",
    "ClusterConnectError": "client.errors",
    "ConversationStore": "activities.store",
    "Escalation": "workflows.contract.models",
    "Handle": "client.handle",
    "HandleNotFoundError": "client.errors",
    "InboxItem": "workflows.contract.models",
    "LlmConfig": "activities.llm",
    "McpServer": "workflows.contract.models",
    "ModelPrice": "workflows.contract.pricing",
    "NoWorkerError": "client.errors",
    "PostResult": "workflows.contract.messages",
    "PostgresConversationStore": "activities.pgstore",
    "RecoverRefusedError": "client.errors",
    "AgentBusy": "client.errors",
    "InvalidPolicyError": "client.errors",
    "Registry": "activities.registry",
    "RegistryError": "activities.registry",
    "Request": "workflows.contract.models",
    "RuntimeOptions": "workflows.contract.models",
    "SpawnError": "client.errors",
    "SqliteConversationStore": "activities.store",
    "StoreConfigError": "activities.store",
    "StoreError": "activities.store",
    "StoreUnavailableError": "activities.store",
    "TaskResult": "workflows.contract.models",
    "TickSpec": "workflows.contract.models",
    "TnxError": "client.errors",
    "Tool": "activities.tools",
    "ToolContext": "activities.tools",
    "VerbRejectedError": "client.errors",
    "connect": "client.cluster",
    "create_worker": "worker",
    "define_tool": "activities.tools",
    "load_prices": "activities.pricing",
    "open_store": "activities.stores",
    "pending": "activities.tools",
}
"""Public name -> the module (under this package) that defines it."""

__all__ = [
    "AgentBusy",
    "AgentDef",
    "AgentRuntime",
    "Answer",
    "AnswerRejectedError",
    "AnswerResult",
    "ApprovalPolicy",
    "AuditRecord",
    "Budget",
    "ClusterConfig",
    "ClusterConfigError",
    "ClusterConnectError",
    "ContextPolicy",
    "ConversationStore",
    "Cost",
    "Escalation",
    "Handle",
    "HandleNotFoundError",
    "InboxItem",
    "InvalidPolicyError",
    "LlmConfig",
    "McpServer",
    "ModelPrice",
    "NoWorkerError",
    "PostResult",
    "PostgresConversationStore",
    "RecoverRefusedError",
    "Registry",
    "RegistryError",
    "Request",
    "RuntimeOptions",
    "SpawnError",
    "SqliteConversationStore",
    "StoreConfigError",
    "StoreError",
    "StoreUnavailableError",
    "TaskResult",
    "TickSpec",
    "TnxError",
    "Tool",
    "ToolContext",
    "VerbRejectedError",
    "connect",
    "create_worker",
    "define_tool",
    "load_prices",
    "open_store",
    "pending",
]


def __getattr__(name: str) -> Any:
    """Load a public name from its module on first use (PEP 562).

    Raises:
        AttributeError: ``name`` is not part of the public API.
    """
    module = _WHERE.get(name)
    if module is None:
        raise AttributeError(f"module {__name__!r} has no attribute {name!r}")
    value = getattr(importlib.import_module(f"{__name__}.{module}"), name)
    globals()[name] = value
    return value


def __dir__() -> list[str]:
    return sorted([*globals(), *__all__])
