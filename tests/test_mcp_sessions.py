"""An MCP session the server ended (issue 36 item 11): a streamable-HTTP server that answers
404 "Session not found" for a session idle too long (the SDK's FastMCP with
``session_idle_timeout``, tests/mcp_http_server.py). The MCP specification: a client that
gets 404 for its session MUST start a new one; the call never reached a session, so the pool
opens a new session and sends it once more. A write tool counts its runs in a file."""

from __future__ import annotations

import asyncio
import os
import sys
from collections.abc import AsyncIterator
from pathlib import Path
from types import SimpleNamespace

import pytest
from temporalio.exceptions import ApplicationError

from tests.mcp_serving import mcp_http_server
from toolnexus_temporal.activities.mcp import McpPool
from toolnexus_temporal.workflows.contract.messages import ToolCallInput
from toolnexus_temporal.workflows.contract.models import McpServer

pytestmark = pytest.mark.mcp

IDLE_S = 1.0
"""The server's session idle timeout, seconds."""


@pytest.fixture
def writes(tmp_path: Path) -> Path:
    """The file the server's ``record`` tool appends one line to per run."""
    return tmp_path / "writes.txt"


@pytest.fixture
async def expiring_url(writes: Path) -> AsyncIterator[str]:
    """tests/mcp_http_server.py with sessions that end after :data:`IDLE_S` idle."""
    env = {**os.environ, "TNX_MCP_WRITES": str(writes)}
    async with mcp_http_server("--drop-idle", str(IDLE_S), env=env) as url:
        yield url


def record(text: str, call_id: str) -> ToolCallInput:
    return ToolCallInput(
        tool="loop__record", arguments=f'{{"text": "{text}"}}', handle_id="h", call_id=call_id
    )


def lines(path: Path) -> list[str]:
    return path.read_text().splitlines() if path.exists() else []


async def test_a_call_after_the_session_expired_runs_once_on_a_new_session(
    expiring_url: str, writes: Path
) -> None:
    """The second call, sent after the server ended the idle session, gets 404 for it; the
    pool opens a new session and sends it once more: it succeeds and the write ran exactly
    once per call (before the fix it failed with ``Session terminated``)."""
    pool = McpPool({"loop": McpServer(name="loop", url=expiring_url)})
    try:
        first = await pool.call(record("one", "c1"))
        assert (first.output, first.is_error) == ("recorded one", False)
        await asyncio.sleep(IDLE_S * 3)  # the scenario itself: the session goes idle and ends
        second = await pool.call(record("two", "c2"))
        assert (second.output, second.is_error) == ("recorded two", False)
        assert lines(writes) == ["one", "two"]
        # and again: the new session expires too, and is replaced again
        await asyncio.sleep(IDLE_S * 3)
        third = await pool.call(record("three", "c3"))
        assert (third.output, third.is_error) == ("recorded three", False)
        assert lines(writes) == ["one", "two", "three"]
    finally:
        await pool.aclose()


def test_only_a_404_for_the_session_proves_the_call_was_not_delivered() -> None:
    """The resend rule: the SDK's ``Session terminated`` error counts only when the session's
    HTTP client saw the 404 itself; any other error (a timeout, a closed connection, a
    server's own JSON-RPC error) may have reached the server and is not resent."""
    from mcp import McpError
    from mcp.types import ErrorData

    from toolnexus_temporal.activities.mcp import _not_delivered

    gone = SimpleNamespace(session_gone=True)
    alive = SimpleNamespace(session_gone=False)
    terminated = McpError(ErrorData(code=32600, message="Session terminated"))
    closed = McpError(ErrorData(code=-32000, message="Connection closed"))
    assert _not_delivered(gone, terminated)  # type: ignore[arg-type]
    assert not _not_delivered(alive, terminated)  # type: ignore[arg-type]
    assert not _not_delivered(gone, closed)  # type: ignore[arg-type]
    assert not _not_delivered(gone, TimeoutError())  # type: ignore[arg-type]


async def test_a_server_that_crashes_mid_call_is_named_as_closed_and_restarted() -> None:
    """A stdio server whose process exits during a call: the error names the server and says
    it closed the connection (before: ``MCP tool loop/crash failed: Connection closed
    (JSON-RPC -32000)``, a JSON-RPC code that reads as the tool's own error), it is an
    ``McpServerUnavailable`` (retried per the server's ``options``), and the next call starts
    the server again."""
    server = Path(__file__).with_name("mcp_http_server.py")
    spec = McpServer(name="loop", command=sys.executable, args=[str(server), "--stdio"])
    pool = McpPool({"loop": spec})
    try:
        crash = ToolCallInput(tool="loop__crash", arguments="{}", handle_id="h", call_id="c1")
        with pytest.raises(ApplicationError) as caught:
            await pool.call(crash)
        assert caught.value.type == "McpServerUnavailable"
        message = str(caught.value)
        assert "MCP server 'loop' closed the connection during crash" in message
        assert "JSON-RPC" not in message
        count = ToolCallInput(
            tool="loop__word_count", arguments='{"text": "a b c"}', handle_id="h", call_id="c2"
        )
        assert (await pool.call(count)).output == "3 words"
    finally:
        await pool.aclose()
