"""Test support: run tests/mcp_http_server.py (a streamable-HTTP MCP server) on a free
loopback port for the length of a test."""

from __future__ import annotations

import asyncio
import sys
from collections.abc import AsyncIterator, Mapping
from contextlib import asynccontextmanager
from pathlib import Path

HTTP_SERVER = Path(__file__).with_name("mcp_http_server.py")
"""The server script; it prints ``PORT <n>`` once it listens."""


@asynccontextmanager
async def mcp_http_server(*args: str, env: Mapping[str, str] | None = None) -> AsyncIterator[str]:
    """Start the server with ``args`` (e.g. ``--drop-idle 1``) and ``env`` (None: inherit);
    yield its URL (``http://127.0.0.1:<port>/mcp``); terminate it on exit (30 s each way)."""
    proc = await asyncio.create_subprocess_exec(
        sys.executable,
        str(HTTP_SERVER),
        *args,
        stdout=asyncio.subprocess.PIPE,
        env=None if env is None else dict(env),
    )
    try:
        assert proc.stdout is not None
        line = await asyncio.wait_for(proc.stdout.readline(), 30)
        assert line.startswith(b"PORT "), line
        yield f"http://127.0.0.1:{int(line.split()[1])}/mcp"
    finally:
        proc.terminate()
        await asyncio.wait_for(proc.wait(), 30)
