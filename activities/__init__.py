"""Activities: every piece of I/O the agent workflows need (LLM calls, the conversation store,
registry look-ups)."""

from activities.llm import LlmActivities, LlmConfig
from activities.registry import Registry, RegistryActivities, RegistryError
from activities.store import ConversationStore, SqliteConversationStore, StoreError
from activities.tools import Tool, ToolContext, define_tool, pending

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
