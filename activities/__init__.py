"""Activities: every piece of I/O the agent workflows need (LLM calls, the conversation store,
registry look-ups)."""

from toolnexus_temporal.activities.llm import LlmActivities, LlmConfig
from toolnexus_temporal.activities.registry import Registry, RegistryActivities, RegistryError
from toolnexus_temporal.activities.store import (
    ConversationStore,
    SqliteConversationStore,
    StoreError,
)
from toolnexus_temporal.activities.tools import Tool, ToolContext, define_tool, pending

__all__ = [
    "ConversationStore",
    "LlmActivities",
    "LlmConfig",
    "Registry",
    "RegistryActivities",
    "RegistryError",
    "SqliteConversationStore",
    "StoreError",
    "Tool",
    "ToolContext",
    "define_tool",
    "pending",
]
