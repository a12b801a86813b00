"""``tnx inspect``'s definition rows (cli/render.py): an agent's MCP servers are shown, with
what each offers and what needs an approval (it printed only ``tools —`` for an agent whose
tools all come from MCP servers)."""

from __future__ import annotations

import io

from rich.console import Console

from toolnexus_temporal.cli import render
from toolnexus_temporal.client.handle import Handle
from toolnexus_temporal.workflows.contract.models import AgentDef, McpServer


def shown(defn: AgentDef) -> str:
    h = Handle.model_validate({"id": "root/ops.1", "name": "ops", "defn": defn})
    console = Console(width=200, record=True, file=io.StringIO())
    console.print(render.handle_table(h, 0))
    return console.export_text()


def test_inspect_lists_mcp_servers_with_their_tools_and_approvals() -> None:
    git = McpServer(
        name="git", command="git-mcp", tools=["git_status", "git_commit"], approval=["git_commit"]
    )
    clock = McpServer(name="time", url="http://127.0.0.1:9/mcp")
    text = shown(AgentDef(name="ops", mcp=[git, clock]))
    line = next(row for row in text.splitlines() if row.strip().startswith("mcp"))
    assert "git (git_status, git_commit; approval: git_commit)" in line
    assert "time (all)" in line
    assert not any(row.strip().startswith("mcp") for row in shown(AgentDef(name="a")).splitlines())


def test_an_agent_whose_tools_all_come_from_mcp_servers_says_so() -> None:
    """``tools —`` read as "no tools" for an agent with MCP servers (issue 37 item 10)."""
    text = shown(AgentDef(name="ops", mcp=[McpServer(name="time", url="http://127.0.0.1:9/mcp")]))
    line = next(row for row in text.splitlines() if row.strip().startswith("tools"))
    assert "none of its own; its MCP servers' (mcp below)" in line, line
    plain = shown(AgentDef(name="a"))
    assert "see mcp" not in plain


def test_an_agent_with_a_team_lists_the_delegation_tools_it_is_offered() -> None:
    """A coordinator with a team and no tools of its own showed ``tools —`` while it called
    ``task`` (walk 5): the built-in delegation tools are listed, marked ``(team)``."""
    text = shown(AgentDef(name="boss", tools=["lookup"], team=["worker"]))
    line = next(row for row in text.splitlines() if row.strip().startswith("tools"))
    assert "lookup, task (team), background_list (team)" in line, line
    alone = shown(AgentDef(name="a", tools=["lookup"]))
    assert "(team)" not in alone
