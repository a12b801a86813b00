"""Which MCP server a called tool name belongs to (issue 27 item 3; docs/guide/mcp.md).

An MCP tool is offered to the model as ``<server>__<tool>`` (the worker makes the tool part
valid: ``activities/mcp.py`` ``offered_name``). Server names never contain ``__``
(:data:`~toolnexus_temporal.workflows.contract.models.MCP_SERVER_NAME`), so the text before
the first ``__`` is always the server's name: the workflow routes a call by it without the
listing, which stays on the worker.

Deterministic and I/O free (the workflow sandbox imports it).
"""

from __future__ import annotations

from typing import Final

from toolnexus_temporal.workflows.contract.models import AgentDef, McpServer, ToolOptions

MCP_SEP: Final = "__"
"""Between the server's name and the tool's in an offered name."""


def server_of(defn: AgentDef | None, name: str) -> McpServer | None:
    """The MCP server of ``defn`` that the called tool ``name`` belongs to, or None."""
    if defn is None or not defn.mcp:
        return None
    prefix, sep, rest = name.partition(MCP_SEP)
    if not sep or not rest:
        return None
    return next((server for server in defn.mcp if server.name == prefix), None)


def call_options(defn: AgentDef | None, name: str) -> ToolOptions | None:
    """The activity options of a call of the offered MCP tool ``name`` (its server's), or
    None when ``name`` is not one of ``defn``'s MCP tools."""
    server = server_of(defn, name)
    return server.options if server is not None else None
