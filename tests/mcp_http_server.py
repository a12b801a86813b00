"""A streamable-HTTP MCP server on loopback for tests/test_mcp.py, built with the mcp SDK's
own FastMCP (neither reference server on PyPI, ``mcp-server-time`` nor ``mcp-server-git``,
speaks anything but stdio).

Run as ``python tests/mcp_http_server.py``: it binds 127.0.0.1 on a free port, prints
``PORT <n>`` on stdout once it listens, and serves ``/mcp`` until it is terminated. Its
tools: ``word_count`` (counts the words of a text), ``whoami`` (echoes the ``x-tnx-team``
header the client sent), ``add_tool`` (registers a tool named by the caller and sends
``notifications/tools/list_changed``), ``nap`` (answers after the seconds it is given) and
``record`` (a write: appends its text as one line to the file named by the environment
variable ``TNX_MCP_WRITES``, so a test counts how often it ran) and ``crash`` (ends the
server's process mid-call, as a crashing server would).

``python tests/mcp_http_server.py --stdio`` serves the same tools over stdio instead.

``python tests/mcp_http_server.py --drop-idle S`` behaves like a server (or a proxy in front
of one) that forgets a session idle for S seconds without telling the client: it offers no
standalone GET stream (405, which the specification allows), and a POST with a session id
whose last request is S seconds old or more gets 404 "Session not found", before the SDK sees
it (the tool does not run).
"""

from __future__ import annotations

import asyncio
import json
import os
import socket
import sys
import time
from typing import Any

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


@server.tool()
def record(text: str) -> str:
    """Append this text as one line to the writes file (TNX_MCP_WRITES)."""
    with open(os.environ["TNX_MCP_WRITES"], "a", encoding="utf-8") as out:
        out.write(text + "\n")
    return f"recorded {text}"


@server.tool()
def crash(code: int = 3) -> str:
    """End this server's process at once, mid-call (an MCP server that crashes)."""
    os._exit(code)


class DropIdle:
    """ASGI middleware: 405 for GET, 404 for a POST of a session idle ``idle_s`` or more."""

    def __init__(self, app: Any, idle_s: float) -> None:
        self.app, self.idle_s = app, idle_s
        self.last: dict[str, float] = {}
        self.dropped: set[str] = set()

    async def __call__(self, scope: Any, receive: Any, send: Any) -> None:
        if scope["type"] != "http":
            return await self.app(scope, receive, send)
        if scope["method"] == "GET":
            return await self._answer(send, 405, {"error": "no standalone stream"})
        headers = dict(scope["headers"])
        sid = headers.get(b"mcp-session-id", b"").decode()
        now = time.monotonic()
        if sid and (sid in self.dropped or now - self.last.get(sid, now) >= self.idle_s):
            self.dropped.add(sid)
            error = {"code": -32001, "message": "Session not found"}
            return await self._answer(send, 404, {"jsonrpc": "2.0", "id": None, "error": error})
        if sid:
            self.last[sid] = now
        await self.app(scope, receive, send)

    @staticmethod
    async def _answer(send: Any, status: int, body: dict[str, Any]) -> None:
        data = json.dumps(body).encode()
        headers = [(b"content-type", b"application/json")]
        await send({"type": "http.response.start", "status": status, "headers": headers})
        await send({"type": "http.response.body", "body": data})


async def main() -> None:
    app: Any = server.streamable_http_app()
    if "--drop-idle" in sys.argv:
        app = DropIdle(app, float(sys.argv[sys.argv.index("--drop-idle") + 1]))
    sock = socket.socket(socket.AF_INET, socket.SOCK_STREAM)
    sock.setsockopt(socket.SOL_SOCKET, socket.SO_REUSEADDR, 1)
    sock.bind(("127.0.0.1", 0))
    config = uvicorn.Config(app, log_level="warning")
    uv = uvicorn.Server(config)
    print(f"PORT {sock.getsockname()[1]}", flush=True)
    await uv.serve(sockets=[sock])


if __name__ == "__main__":
    if "--stdio" in sys.argv:  # the same tools over stdio (the worker starts the process)
        server.run("stdio")
        sys.exit(0)
    asyncio.run(main())
    sys.exit(0)
