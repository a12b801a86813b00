"""A streamable-HTTP MCP server on loopback for tests/test_mcp.py, built with the mcp SDK's
own FastMCP (neither reference server on PyPI, ``mcp-server-time`` nor ``mcp-server-git``,
speaks anything but stdio).

Run as ``python tests/mcp_http_server.py``: it binds 127.0.0.1 on a free port, prints
``PORT <n>`` on stdout once it listens, and serves ``/mcp`` until it is terminated. Its
tools: ``word_count`` (counts the words of a text), ``whoami`` (echoes the ``x-tnx-team``
header the client sent), ``add_tool`` (registers a tool named by the caller and sends
``notifications/tools/list_changed``) and ``nap`` (answers after the seconds it is given).
"""

from __future__ import annotations

import asyncio
import socket
import sys

import uvicorn
from mcp.server.fastmcp import Context, FastMCP

server = FastMCP("loopback", host="127.0.0.1")


@server.tool()
def word_count(text: str) -> str:
    """Count the words of a text."""
    return f"{len(text.split())} words"


@server.tool()
def whoami(ctx: Context) -> str:  # type: ignore[type-arg]
    """Say which team the calling client is (the x-tnx-team header)."""
    request = ctx.request_context.request
    headers = getattr(request, "headers", {})
    return f"team={headers.get('x-tnx-team', 'none')}"


@server.tool()
async def add_tool(name: str, ctx: Context) -> str:  # type: ignore[type-arg]
    """Add a tool that answers its own name, and tell the clients the list changed."""

    def added() -> str:
        return f"{name} answers"

    server.add_tool(added, name=name, description=f"the added tool {name}")
    await ctx.session.send_tool_list_changed()
    return f"added {name}"


@server.tool()
async def nap(seconds: float) -> str:
    """Answer after this many seconds."""
    await asyncio.sleep(seconds)
    return f"slept {seconds} s"


async def main() -> None:
    sock = socket.socket(socket.AF_INET, socket.SOCK_STREAM)
    sock.setsockopt(socket.SOL_SOCKET, socket.SO_REUSEADDR, 1)
    sock.bind(("127.0.0.1", 0))
    config = uvicorn.Config(server.streamable_http_app(), log_level="warning")
    uv = uvicorn.Server(config)
    print(f"PORT {sock.getsockname()[1]}", flush=True)
    await uv.serve(sockets=[sock])


if __name__ == "__main__":
    asyncio.run(main())
    sys.exit(0)
