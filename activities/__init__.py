"""Activities: every piece of I/O the agent workflows need (LLM calls, the conversation store,
registry look-ups)."""

from toolnexus_temporal.activities.llm import LlmActivities, LlmConfig
from toolnexus_temporal.activities.registry import Registry, RegistryActivities, RegistryError
from toolnexus_temporal.activities.store import (
    ConversationStore,
    SqliteConversationStore,
    StoreConfigError,
    StoreError,
    StoreUnavailableError,
)
from toolnexus_temporal.activities.stores import open_store
from toolnexus_temporal.activities.tools import Tool, ToolContext, define_tool, pending

__all__ = [
    "ConversationStore",
    "LlmActivities",
    "LlmConfig",
    "Registry",
    "RegistryActivities",
    "RegistryError",
    "SqliteConversationStore",
    "StoreConfigError",
    "StoreError",
    "StoreUnavailableError",
    "Tool",
    "ToolContext",
    "define_tool",
    "open_store",
    "pending",
]
