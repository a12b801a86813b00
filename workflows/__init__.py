"""Deterministic workflow code: the Handle state machine and its data model.

Nothing here performs I/O; the Temporal sandbox re-imports these modules.
"""

from workflows.agent import RESOLVE_AGENT_ACTIVITY, AgentWorkflow, view_of
from workflows.turn import LLM_CALL_ACTIVITY

__all__ = ["LLM_CALL_ACTIVITY", "RESOLVE_AGENT_ACTIVITY", "AgentWorkflow", "view_of"]
