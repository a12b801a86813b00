"""MCP servers' tools on the worker (issue 27 item 3; docs/guide/mcp.md), with the official
``mcp`` SDK (``pip install 'toolnexus-temporal[mcp]'``).

The :class:`McpPool` belongs to the worker (``create_worker`` builds it from the registry's
servers and closes it at shutdown); workflow code never holds a process or a session:

* **Sessions**: one per server and worker process, started on first use (a stdio server is
  spawned, a streamable-HTTP session is initialized), each owned by its own task from start to
  close (the SDK's transports are anyio task groups, which must be left by the task that
  entered them). A session whose transport fails (the process died, the connection closed) is
  dropped and the next use starts a new one. A streamable-HTTP server that answers 404 for the
  session has forgotten it and the request never reached a session: the call (or listing) is
  sent once more on a new session (:meth:`McpPool._resent`, issue 36 item 11); no other
  error is resent here.
* **Listing** (the refresh rule): ``tools/list`` (all pages) is cached per worker and server
  for the server's ``list_ttl_ms`` (default 5 minutes; 0: every use lists), dropped at once on
  the server's ``notifications/tools/list_changed`` and with its session. The LLM activity
  asks the pool for the schemas of the agent's servers (``LlmCallInput.mcp``), so the listing
  never enters workflow history; a server that cannot be listed is left out of that call
  (logged), not a failed LLM call.
* **Calls**: a model's call of ``<server>__<tool>`` is an ordinary ``tnx.tool_call`` activity
  (timeout and retries from the server's ``options``), dispatched here by ``ToolActivities``.
  A tool named in the server's ``approval`` returns ``pending(kind="approval")`` before it
  runs, and runs when the workflow calls it again with the Answer (CONTRACT §5).
* **Orphans**: on Linux a stdio server is started through a few lines of Python that ask the
  kernel to send it SIGTERM when the worker dies (``PR_SET_PDEATHSIG``, then ``exec`` of the
  command: same process, same pid), so a SIGKILLed or crashed worker leaves no server behind,
  even one that ignores the end of its stdin (:func:`_stdio_command`).
"""

from __future__ import annotations

import asyncio
import contextlib
import hashlib
import importlib.util
import json
import logging
import os
import re
import shutil
import signal
import sys
import time
from collections.abc import Awaitable, Callable, Mapping
from dataclasses import dataclass
from datetime import timedelta
from typing import TYPE_CHECKING, Any, Final, TypeVar

from temporalio.exceptions import ApplicationError

from toolnexus_temporal.activities.tools import call_arguments, pending, schema_error
from toolnexus_temporal.workflows.contract.limits import fit
from toolnexus_temporal.workflows.contract.mcp import MCP_SEP
from toolnexus_temporal.workflows.contract.messages import ToolCallInput
from toolnexus_temporal.workflows.contract.models import McpServer, ToolResult

if TYPE_CHECKING:
    from mcp import ClientSession
    from mcp.types import CallToolResult
    from mcp.types import Tool as McpTool

logger = logging.getLogger(__name__)

_T = TypeVar("_T")

MCP_OUTPUT_BYTES: Final = 256 * 1024
"""The most text of one MCP call's result sent back to the workflow, UTF-8 bytes (cut with an
ellipsis): an activity result is a history payload (``limits.BLOB_BYTES``)."""

DESCRIPTION_CHARS: Final = 1_024
"""The longest tool description offered to the model, characters (OpenAI's limit)."""

PROMPT_CHARS: Final = 1_000
"""The longest approval prompt an MCP call raises, characters (the arguments cut to fit)."""

LIST_PAGES_MAX: Final = 50
"""Pages of ``tools/list`` followed at most (a server that never stops paginating)."""

FAILED_LISTING_HOLD_S: Final = 30.0
"""After a server could not be started or listed, LLM calls leave it out without trying again
for this long, seconds (a hanging server would otherwise hold every model call for its
``connect_timeout_ms``); tool calls still try."""

CLOSE_TIMEOUT_S: Final = 5.0
"""How long closing one session may take at shutdown, seconds (the SDK gives a stdio server
2 s to exit before it kills the process tree)."""

TOOL_NAME_MAX: Final = 64
"""The longest model tool name, characters."""

_INVALID_NAME_CHARS: Final = re.compile(r"[^A-Za-z0-9_-]")


def offered_name(server: str, tool: str) -> str:
    """The name MCP tool ``tool`` of ``server`` is offered to the model under:
    ``<server>__<tool>``. Model tool names allow ``[a-zA-Z0-9_-]{1,64}`` (OpenAI function
    names; Anthropic's tool names take the same set), so a character outside it becomes
    ``_``, and a name that had to change or is too long is cut and ends in ``_`` plus 8 hex
    digits of the SHA-256 of the server-side name: stable across workers and restarts, and
    distinct from its neighbours (a name that still collides is left out, logged)."""
    clean = _INVALID_NAME_CHARS.sub("_", tool)
    name = f"{server}{MCP_SEP}{clean}"
    if clean == tool and len(name) <= TOOL_NAME_MAX:
        return name
    digest = hashlib.sha256(tool.encode()).hexdigest()[:8]
    return f"{name[: TOOL_NAME_MAX - 9]}_{digest}"


_NON_RETRYABLE_CODES: Final = frozenset({-32700, -32600, -32601, -32602})
"""JSON-RPC errors no retry can fix: parse error, invalid request, method not found, invalid
params."""


_PDEATHSIG_EXEC: Final = (
    "import ctypes, os, sys\n"
    "ctypes.CDLL(None, use_errno=True).prctl(1, int(sys.argv[1]))\n"  # PR_SET_PDEATHSIG
    "if os.getppid() != int(sys.argv[2]):\n"  # the worker died before prctl took effect
    "    os._exit(1)\n"
    "os.execv(sys.argv[3], sys.argv[3:])\n"
)
"""Run by ``python -I -S -c``: arm the parent-death signal, then become the server."""


def _stdio_command(spec: McpServer) -> tuple[str, list[str]]:
    """The executable and arguments that start ``spec``'s stdio server.

    On Linux: this worker's Python running :data:`_PDEATHSIG_EXEC`, which sets
    ``PR_SET_PDEATHSIG`` to SIGTERM (``prctl(2)``: kept across ``execve``) and ``exec``s the
    command, so the server ends with the worker even when the worker is SIGKILLed. Elsewhere
    the command itself.

    Raises:
        ApplicationError: ``McpServerUnavailable`` (retryable: it may be installed later)
            when ``spec.command`` is not found on this worker's ``PATH``.
    """
    command = spec.command
    assert command is not None
    if not sys.platform.startswith("linux"):
        return command, list(spec.args)
    found: str | None
    if os.sep in command:  # a path: from the server's cwd, as the exec would find it
        path = os.path.join(spec.cwd or os.getcwd(), command)
        found = path if os.path.isfile(path) and os.access(path, os.X_OK) else None
    else:
        found = shutil.which(command, path=spec.env.get("PATH", os.environ.get("PATH")))
    if found is None:
        raise ApplicationError(
            f"MCP server {spec.name!r}: command {command!r} is not found on this worker "
            "(or is not executable)",
            type="McpServerUnavailable",
        )
    return sys.executable, [
        *("-I", "-S", "-c", _PDEATHSIG_EXEC),
        *(str(int(signal.SIGTERM)), str(os.getpid()), os.path.abspath(found), *spec.args),
    ]


def _sdk_missing() -> ApplicationError:
    return ApplicationError(
        "MCP servers need the mcp package: pip install 'toolnexus-temporal[mcp]'",
        type="McpUnavailable",
        non_retryable=True,
    )


class _Session:
    """One server's session, entered and left by one owner task."""

    def __init__(self, spec: McpServer, on_list_changed: Callable[[], None]) -> None:
        self.spec = spec
        self._on_list_changed = on_list_changed
        self._ready: asyncio.Future[ClientSession] = asyncio.get_running_loop().create_future()
        self._stop = asyncio.Event()
        self.broken = False
        self.session_gone = False
        """The server answered 404 to a POST with this session's id: it has forgotten the
        session (streamable HTTP; the specification: the client MUST start a new one)."""
        self._owner = asyncio.create_task(self._run(), name=f"mcp session {spec.name}")

    async def _run(self) -> None:
        try:
            from mcp import ClientSession
        except ImportError:
            self._ready.set_exception(_sdk_missing())
            return
        try:
            async with contextlib.AsyncExitStack() as stack:
                read, write = await self._transport(stack)
                session = await stack.enter_async_context(
                    ClientSession(read, write, message_handler=self._message)
                )
                await session.initialize()
                self._ready.set_result(session)
                await self._stop.wait()
        except BaseException as err:  # the owner task's end, whatever it was
            self.broken = True
            if not self._ready.done():
                self._ready.set_exception(err)
            elif not isinstance(err, asyncio.CancelledError):
                logger.warning("MCP server %s: session ended: %r", self.spec.name, err)
            if isinstance(err, asyncio.CancelledError):
                raise

    async def _transport(self, stack: contextlib.AsyncExitStack) -> tuple[Any, Any]:
        spec = self.spec
        if spec.command is not None:
            from mcp.client.stdio import StdioServerParameters, stdio_client

            env = {**spec.env, **{k: os.environ[k] for k in spec.pass_env if k in os.environ}}
            command, args = _stdio_command(spec)
            params = StdioServerParameters(
                command=command, args=args, env=env or None, cwd=spec.cwd
            )
            read, write = await stack.enter_async_context(stdio_client(params))
            return read, write
        import httpx
        from mcp.client.streamable_http import streamable_http_client

        headers = dict(spec.headers)
        for header, var in spec.header_env.items():
            value = os.environ.get(var)
            if value is None:
                raise ApplicationError(
                    f"MCP server {spec.name!r}: header {header!r} reads the environment "
                    f"variable {var!r}, which is not set on this worker",
                    type="McpConfigError",
                    non_retryable=True,
                )
            headers[header] = value

        async def saw(response: httpx.Response) -> None:
            request = response.request
            if (
                response.status_code == 404
                and request.method == "POST"
                and "mcp-session-id" in request.headers
            ):
                self.session_gone = True

        http = await stack.enter_async_context(
            httpx.AsyncClient(
                headers=headers,
                timeout=httpx.Timeout(30.0, read=300.0),
                event_hooks={"response": [saw]},
            )
        )
        assert spec.url is not None
        read, write, _ = await stack.enter_async_context(
            streamable_http_client(spec.url, http_client=http)
        )
        return read, write

    async def _message(self, message: Any) -> None:
        from mcp import types

        if isinstance(message, types.ServerNotification) and isinstance(
            message.root, types.ToolListChangedNotification
        ):
            self._on_list_changed()

    async def session(self) -> ClientSession:
        """The initialized session.

        Raises:
            ApplicationError: ``McpServerUnavailable`` (retryable): it did not start or
                initialize within ``connect_timeout_ms``, or failed to.
        """
        try:
            async with asyncio.timeout(self.spec.connect_timeout_ms / 1000):
                return await asyncio.shield(self._ready)
        except ApplicationError:
            raise
        except TimeoutError:
            self.broken = True
            raise ApplicationError(
                f"MCP server {self.spec.name!r} did not start within "
                f"{self.spec.connect_timeout_ms} ms",
                type="McpServerUnavailable",
            ) from None
        except Exception as err:
            raise ApplicationError(
                f"MCP server {self.spec.name!r} could not be started: {_describe(err)}",
                type="McpServerUnavailable",
            ) from None

    async def aclose(self) -> None:
        """Leave the session (a stdio server's process is terminated by the SDK)."""
        self._stop.set()
        if not self._ready.done():
            self._owner.cancel()
        with contextlib.suppress(BaseException):
            async with asyncio.timeout(CLOSE_TIMEOUT_S):
                await self._owner
        if self._ready.done() and not self._ready.cancelled():
            self._ready.exception()  # retrieved: no "never retrieved" warning


@dataclass(frozen=True)
class _Listing:
    """One server's tools as offered: by offered name, the MCP tool and its schema."""

    at: float
    tools: dict[str, McpTool]
    schemas: list[dict[str, Any]]


class McpPool:
    """The worker's MCP sessions and tool listings (module docstring).

    Args:
        servers: the registry's servers by name (``Registry.mcp_servers``).
        clock: seconds, monotonic (tests may pass their own).

    Raises:
        ImportError: there are servers and the ``mcp`` package is not installed.
    """

    def __init__(
        self, servers: Mapping[str, McpServer], *, clock: Callable[[], float] = time.monotonic
    ) -> None:
        if servers and importlib.util.find_spec("mcp") is None:
            raise ImportError(
                f"agents list MCP servers ({', '.join(sorted(servers))}) and the mcp package "
                "is not installed: pip install 'toolnexus-temporal[mcp]'"
            )
        self.servers = dict(servers)
        self._clock = clock
        self._sessions: dict[str, _Session] = {}
        self._listings: dict[str, _Listing] = {}
        self._locks: dict[str, asyncio.Lock] = {}
        self._failed_at: dict[str, float] = {}
        self._closed = False

    def owns(self, name: str) -> bool:
        """Whether the called tool ``name`` is ``<server>__<tool>`` of one of its servers."""
        prefix, sep, rest = name.partition(MCP_SEP)
        return bool(sep and rest) and prefix in self.servers

    def _lock(self, server: str) -> asyncio.Lock:
        return self._locks.setdefault(server, asyncio.Lock())

    async def _session(self, spec: McpServer) -> tuple[_Session, ClientSession]:
        """The server's session (started if there is none or it broke) and its owner.

        The look-up and the replacement of a broken session happen with no ``await`` between
        them, so concurrent callers never start two sessions of one server."""
        if self._closed:
            raise ApplicationError("the worker is shutting down", type="McpServerUnavailable")
        owner = self._sessions.get(spec.name)
        if owner is None or owner.broken:
            old = owner

            def changed() -> None:
                self._listings.pop(spec.name, None)

            owner = self._sessions[spec.name] = _Session(spec, changed)
            self._listings.pop(spec.name, None)
            if old is not None:
                await old.aclose()
        try:
            return owner, await owner.session()
        except ApplicationError:
            await self._drop(spec.name, owner)
            raise

    async def _drop(self, server: str, owner: _Session) -> None:
        """Close ``owner``, and forget it (and the listing) if it is still the server's."""
        if self._sessions.get(server) is owner:
            del self._sessions[server]
            self._listings.pop(server, None)
        await owner.aclose()

    async def listing(self, server: str, *, refresh: bool = False) -> _Listing:
        """The tools ``server`` offers, cached per the refresh rule (module docstring).

        Raises:
            ApplicationError: ``McpServerUnavailable`` (it cannot be started or listed),
                ``McpUnavailable`` (no ``mcp`` package), ``McpConfigError`` (its
                ``approval`` names a tool it does not list: :func:`_offer`).
        """
        spec = self.servers[server]
        async with self._lock(server):
            cached = self._listings.get(server)
            if (
                cached is not None
                and not refresh
                and (self._clock() - cached.at) * 1000 < spec.list_ttl_ms
            ):
                return cached

            async def fail(owner: _Session, err: Exception) -> ApplicationError:
                await self._drop(server, owner)
                return ApplicationError(
                    f"MCP server {server!r} could not list its tools: {_describe(err)}",
                    type="McpServerUnavailable",
                )

            tools = await self._resent(spec, "tools/list", _list_all, fail)
            listing = _offer(spec, tools, self._clock())
            if spec.list_ttl_ms > 0:
                self._listings[server] = listing
            return listing

    async def schemas(self, servers: list[str]) -> list[dict[str, Any]]:
        """The OpenAI-style function schemas of ``servers``' tools, in server order; a server
        this worker lacks or cannot list is left out (logged), and then not tried again by
        this method for :data:`FAILED_LISTING_HOLD_S`."""
        out: list[dict[str, Any]] = []
        for server in servers:
            if server not in self.servers:
                logger.warning("MCP server %r is not in this worker's registry", server)
                continue
            failed = self._failed_at.get(server)
            if failed is not None and self._clock() - failed < FAILED_LISTING_HOLD_S:
                logger.warning("MCP server %r left out of this LLM call: it failed lately", server)
                continue
            try:
                out.extend((await self.listing(server)).schemas)
                self._failed_at.pop(server, None)
            except ApplicationError as err:
                self._failed_at[server] = self._clock()
                logger.warning("MCP server %r left out of this LLM call: %s", server, err)
        return out

    async def call(self, inp: ToolCallInput) -> ToolResult:
        """Run the model's call ``inp`` of an offered MCP tool (``owns(inp.tool)``).

        Returns:
            The result as text (``is_error`` from the server's ``isError``; at most
            :data:`MCP_OUTPUT_BYTES`), or ``pending(kind="approval")`` for a tool in the
            server's ``approval`` list that has no Answer yet.

        Raises:
            ApplicationError: ``UnknownTool`` / ``ToolArgumentsInvalid`` /
                ``McpConfigError`` (non-retryable);
                ``McpError`` (a JSON-RPC error; non-retryable for parse, request, method
                and params errors); ``McpServerUnavailable`` and transport errors (retried
                per the server's ``options``), a server that closed the connection mid-call
                included (its process exited or crashed: the call may have run).
        """
        server = inp.tool.partition(MCP_SEP)[0]
        spec = self.servers[server]
        listing = await self.listing(server)
        tool = listing.tools.get(inp.tool)
        if tool is None:  # listed before a change: look again once
            listing = await self.listing(server, refresh=True)
            tool = listing.tools.get(inp.tool)
        if tool is None:
            offered = fit(", ".join(sorted(listing.tools)) or "none", PROMPT_CHARS)
            raise ApplicationError(
                f"MCP server {server!r} offers no tool {inp.tool!r} (offered: {offered})",
                type="UnknownTool",
                non_retryable=True,
            )
        arguments = call_arguments(inp)
        if spec.needs_approval(tool.name) and inp.answer is None:
            shown = fit(json.dumps(arguments, ensure_ascii=False), PROMPT_CHARS // 2)
            return pending(
                kind="approval",
                prompt=fit(f"call MCP tool {server}/{tool.name} with {shown}?", PROMPT_CHARS),
                data={"server": server, "tool": tool.name, "arguments": shown},
            )

        async def send(session: ClientSession) -> CallToolResult:
            return await session.call_tool(
                tool.name,
                arguments,
                read_timeout_seconds=timedelta(milliseconds=spec.options.timeout_ms),
            )

        async def fail(owner: _Session, err: Exception) -> ApplicationError:
            return await self._call_error(server, owner, tool.name, err)

        result = await self._resent(spec, f"tools/call {tool.name}", send, fail)
        return ToolResult(
            output=fit(_text_of(result), MCP_OUTPUT_BYTES),
            is_error=bool(result.isError),
            metadata={"mcp": {"server": server, "tool": tool.name}},
        )

    async def _resent(
        self,
        spec: McpServer,
        what: str,
        use: Callable[[ClientSession], Awaitable[_T]],
        fail: Callable[[_Session, Exception], Awaitable[ApplicationError]],
    ) -> _T:
        """``use`` of the server's session; run once more, on a new session, when the server
        answered 404 for the session (:func:`_not_delivered`: the request never reached a
        session, so it did not run). Any other error may have reached the server and is not
        resent here: ``fail`` makes it the error raised.

        Raises:
            ApplicationError: from :meth:`_session` or ``fail``.
        """
        for attempt in (1, 2):
            owner, session = await self._session(spec)
            try:
                return await use(session)
            except Exception as err:
                if attempt == 1 and _not_delivered(owner, err):
                    logger.info(
                        "MCP server %s: the session is gone (404); %s sent again on a new one",
                        spec.name,
                        what,
                    )
                    await self._drop(spec.name, owner)
                    continue
                raise await fail(owner, err) from None
        raise AssertionError("unreachable")  # pragma: no cover

    async def arguments_error(self, name: str, arguments: dict[str, Any]) -> str | None:
        """Why offered tool ``name`` may not be called with ``arguments`` (one line), or
        None: checked against the tool's ``inputSchema`` as the server lists it
        (:func:`~toolnexus_temporal.activities.tools.schema_error`).

        Raises:
            ApplicationError: as :meth:`listing` (the server cannot be started or listed).
        """
        server = name.partition(MCP_SEP)[0]
        listing = await self.listing(server)
        tool = listing.tools.get(name)
        if tool is None:
            return f"MCP server {server!r} offers no tool {name!r}"
        return schema_error(dict(tool.inputSchema or {}), arguments)

    async def _call_error(
        self, server: str, owner: _Session, tool: str, err: Exception
    ) -> ApplicationError:
        from mcp import McpError
        from mcp.types import CONNECTION_CLOSED

        if isinstance(err, McpError) and err.error.code == CONNECTION_CLOSED:
            # the SDK's own error for a transport that ended mid-request (a stdio server's
            # process exited or crashed, a connection dropped): not the tool's answer
            await self._drop(server, owner)
            return ApplicationError(
                f"MCP server {server!r} closed the connection during {tool} (its process "
                "exited or crashed, or the connection dropped); the call may have run; the "
                "server is started again for the next call",
                type="McpServerUnavailable",
            )
        if isinstance(err, McpError):
            code = err.error.code
            if code not in _NON_RETRYABLE_CODES:
                await self._drop(server, owner)  # closed, timed out, failing: start afresh
            return ApplicationError(
                f"MCP tool {server}/{tool} failed: {err.error.message} (JSON-RPC {code})",
                code,
                type="McpError",
                non_retryable=code in _NON_RETRYABLE_CODES,
            )
        await self._drop(server, owner)
        return ApplicationError(
            f"MCP tool {server}/{tool} failed: {_describe(err)}", type="McpServerUnavailable"
        )

    async def aclose(self) -> None:
        """Close every session (stdio processes end); later uses are refused."""
        self._closed = True
        sessions, self._sessions = list(self._sessions.values()), {}
        self._listings.clear()
        await asyncio.gather(*(session.aclose() for session in sessions))


def _not_delivered(owner: _Session, err: Exception) -> bool:
    """Whether ``err`` proves the request never reached a session: the SDK turns an HTTP 404
    into a JSON-RPC error ``Session terminated`` for that request, and the session's HTTP
    client saw the 404 itself (a server's own JSON-RPC error of that text does not count)."""
    from mcp import McpError

    return (
        isinstance(err, McpError)
        and owner.session_gone
        and err.error.message == "Session terminated"
    )


async def _list_all(session: ClientSession) -> list[McpTool]:
    from mcp import types

    tools: list[McpTool] = []
    cursor: str | None = None
    for _ in range(LIST_PAGES_MAX):
        page = await session.list_tools(params=types.PaginatedRequestParams(cursor=cursor))
        tools.extend(page.tools)
        cursor = page.nextCursor
        if not cursor:
            break
    return tools


def _offer(spec: McpServer, tools: list[McpTool], at: float) -> _Listing:
    """The listing as offered: the server's ``tools`` filter applied, names made valid
    (``workflows/contract/mcp.py``); a name that still collides is left out (logged).

    Raises:
        ApplicationError: ``McpConfigError`` (non-retryable) when the server's ``approval``
            names a tool the server does not list. Such a name is most likely a typo of the
            tool it meant, which would then run with no approval, so the server's tools are
            not offered at all until the definition or the server is fixed (fail closed).
    """
    listed = {tool.name for tool in tools}
    stray = sorted(set(spec.approval) - listed - {"*"})
    if stray:
        raise ApplicationError(
            f"MCP server {spec.name!r}: its approval list names tools it does not list "
            f"({fit(', '.join(stray), PROMPT_CHARS)}); none of its tools is offered until "
            f"the definition is fixed (it lists: {fit(', '.join(sorted(listed)), PROMPT_CHARS)})",
            type="McpConfigError",
            non_retryable=True,
        )
    offered: dict[str, McpTool] = {}
    schemas: list[dict[str, Any]] = []
    for tool in tools:
        if spec.tools is not None and tool.name not in spec.tools:
            continue
        name = offered_name(spec.name, tool.name)
        if name in offered:
            logger.warning("MCP server %s: tool %r collides as %r", spec.name, tool.name, name)
            continue
        offered[name] = tool
        description = (tool.description or tool.title or tool.name)[:DESCRIPTION_CHARS]
        parameters = dict(tool.inputSchema or {})
        parameters.setdefault("type", "object")
        parameters.setdefault("properties", {})
        schemas.append(
            {
                "type": "function",
                "function": {"name": name, "description": description, "parameters": parameters},
            }
        )
    return _Listing(at=at, tools=offered, schemas=schemas)


def _text_of(result: CallToolResult) -> str:
    """A call result as one text: text blocks as they are, other blocks named, the structured
    content as JSON when there is no text."""
    from mcp import types

    parts: list[str] = []
    for block in result.content:
        if isinstance(block, types.TextContent):
            parts.append(block.text)
        elif isinstance(block, types.EmbeddedResource):
            res = block.resource
            text = getattr(res, "text", None)
            parts.append(text if isinstance(text, str) else f"[resource {res.uri}]")
        elif isinstance(block, types.ResourceLink):
            parts.append(f"[resource link {block.uri}]")
        else:
            parts.append(f"[{block.type} {getattr(block, 'mimeType', '')}]".rstrip())
    if not parts and result.structuredContent is not None:
        parts.append(json.dumps(result.structuredContent, ensure_ascii=False))
    return "\n".join(parts)


def _describe(err: BaseException) -> str:
    """An exception as one line; an exception group as its first leaf's."""
    while isinstance(err, BaseExceptionGroup) and err.exceptions:
        err = err.exceptions[0]
    return f"{type(err).__name__}: {err}" if str(err) else type(err).__name__
