"""Custom search attributes every handle workflow keeps current (CONTRACT §8).

They must be registered on the namespace before a worker runs (``tnx server start`` and the
test fixture do it; ``client.devserver.ensure_search_attributes`` does it for any server).
Example: ``temporal workflow list --query 'AgentState="suspended"'``.
"""

from __future__ import annotations

from temporalio.common import SearchAttributeKey

AGENT_STATE = SearchAttributeKey.for_keyword("AgentState")
"""The Handle state: idle, running, suspended or closed."""

AGENT_NAME = SearchAttributeKey.for_keyword("AgentName")
"""The agent definition's name (``root`` for the root)."""

AGENT_PARENT = SearchAttributeKey.for_keyword("AgentParent")
"""The parent's handle id (absent on the root)."""

AGENT_DEPTH = SearchAttributeKey.for_int("AgentDepth")
"""0 for the root, +1 per spawn level."""

ALL_KEYS = (AGENT_STATE, AGENT_NAME, AGENT_PARENT, AGENT_DEPTH)
"""Every custom search attribute, for registration."""
