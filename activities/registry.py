"""The worker-side agent registry and the activity that resolves names against it.

The registry belongs to the worker (loaded from ``package.module:REGISTRY``); workflows learn
a definition through the ``tnx.resolve_agent`` activity at spawn, and the child keeps
the definition in its state, so a running agent is not changed by a later registry edit.
"""

from __future__ import annotations

import importlib
import inspect
import os
import sys
from collections.abc import Awaitable, Callable, Iterable, Mapping
from typing import Any

import pydantic
from temporalio import activity
from temporalio.exceptions import ApplicationError

from toolnexus_temporal.activities.tools import Interpreter, Tool
from toolnexus_temporal.workflows.contract.mcp import MCP_SEP
from toolnexus_temporal.workflows.contract.messages import (
    HookInput,
    ResolveAgentInput,
    ResolveAgentResult,
)
from toolnexus_temporal.workflows.contract.models import AgentDef, McpServer
from toolnexus_temporal.workflows.contract.names import (
    BACKGROUND_CLOSE_TOOL,
    BACKGROUND_LIST_TOOL,
    BACKGROUND_POST_TOOL,
    BACKGROUND_TOOLS,
    BACKGROUND_WAIT_DEFAULT_S,
    BACKGROUND_WAIT_MAX_S,
    BACKGROUND_WAIT_TOOL,
    CHILD_CHANNEL,
    RESOLVE_AGENT_ACTIVITY,
    RUN_HOOK_ACTIVITY,
    TASK_TOOL,
)

Hook = Callable[[HookInput], Awaitable[None] | None]
"""An ``on_spawn`` / ``on_close`` hook: called with the event; sync or async."""


def _function(name: str, description: str, properties: dict[str, Any]) -> dict[str, Any]:
    required = [key for key in properties if key in ("id", "text")]
    parameters = {"type": "object", "properties": properties, "required": required}
    return {
        "type": "function",
        "function": {"name": name, "description": description, "parameters": parameters},
    }


def background_schemas() -> list[dict[str, Any]]:
    """The schemas of the background tools (``workflows/children/background.py``), offered
    with ``task``: list, wait for, post to and close the children started with
    ``"background": true``."""
    child = {"type": "string", "description": "the background child's id"}
    return [
        _function(
            BACKGROUND_LIST_TOOL,
            "List your background children: id, state, results, the last one",
            {},
        ),
        _function(
            BACKGROUND_WAIT_TOOL,
            "Wait for a background child's results (those not read yet, else its next); "
            f"timeout_s in seconds (default {BACKGROUND_WAIT_DEFAULT_S}, at most "
            f"{BACKGROUND_WAIT_MAX_S})",
            {"id": child, "timeout_s": {"type": "number"}},
        ),
        _function(
            BACKGROUND_POST_TOOL,
            "Post a message to an idle background child and wake it; its result arrives "
            f"in your inbox (channel {CHILD_CHANNEL})",
            {"id": child, "text": {"type": "string"}},
        ),
        _function(
            BACKGROUND_CLOSE_TOOL, "Close a background child (and its subtree)", {"id": child}
        ),
    ]


class RegistryError(ValueError):
    """A registry could not be loaded or is inconsistent."""


class Registry:
    """Agent definitions by name, and the tools, interpreters and hooks they name.

    Args:
        agents: the definitions; names must be unique.
        tools: tools built with ``define_tool``; names must be unique and not ``task`` nor
            a background tool's (``background_list``, ``_wait``, ``_post``, ``_close``).
        interpreters: ``wait_for`` interpreters by registered name.
        hooks: ``on_spawn`` / ``on_close`` hooks by registered name.

    Attributes:
        mcp_servers: the MCP servers the defs list (``AgentDef.mcp``), by name: the worker's
            ``McpPool`` starts and calls them by these (docs/guide/mcp.md).

    Raises:
        RegistryError: duplicate names, a def naming a tool, interpreter, hook or team
            member that is not registered, two defs listing different MCP servers under one
            name, or a tool named like an MCP server's (``<server>__...``).
    """

    def __init__(
        self,
        agents: Iterable[AgentDef],
        *,
        tools: Iterable[Tool] = (),
        interpreters: Mapping[str, Interpreter] | None = None,
        hooks: Mapping[str, Hook] | None = None,
    ):
        self.agents: dict[str, AgentDef] = {}
        self.tools: dict[str, Tool] = {}
        self.interpreters: dict[str, Interpreter] = dict(interpreters or {})
        self.hooks: dict[str, Hook] = dict(hooks or {})
        self.mcp_servers: dict[str, McpServer] = {}
        for tool in tools:
            if tool.name in self.tools or tool.name in (TASK_TOOL, *BACKGROUND_TOOLS):
                raise RegistryError(f"tool {tool.name!r} is defined twice or is reserved")
            self.tools[tool.name] = tool
        for defn in agents:
            if defn.name in self.agents:
                raise RegistryError(f"agent {defn.name!r} is defined twice")
            self.agents[defn.name] = defn
            for server in defn.mcp:
                known = self.mcp_servers.setdefault(server.name, server)
                if known != server:
                    raise RegistryError(
                        f"MCP server {server.name!r} is defined differently by two agents"
                        f" ({defn.name!r} and an earlier one): give one of them another name"
                    )
        for tool_name in self.tools:
            prefix, sep, _ = tool_name.partition(MCP_SEP)
            if sep and prefix in self.mcp_servers:
                raise RegistryError(
                    f"tool {tool_name!r} is named like a tool of MCP server {prefix!r}"
                )
        for defn in self.agents.values():
            for tool_name in defn.tools:
                if tool_name not in self.tools:
                    raise RegistryError(
                        f"agent {defn.name!r} names tool {tool_name!r}, which is not registered"
                    )
            if defn.wait_for is not None and defn.wait_for not in self.interpreters:
                raise RegistryError(
                    f"agent {defn.name!r} waits for interpreter {defn.wait_for!r}, which is "
                    "not registered"
                )
            esc = defn.approval.escalate
            if esc is not None and esc.interpreter is not None:
                if esc.interpreter not in self.interpreters:
                    raise RegistryError(
                        f"agent {defn.name!r} escalates to interpreter {esc.interpreter!r},"
                        " which is not registered"
                    )
            for hook in (defn.on_spawn, defn.on_close):
                if hook is not None and hook not in self.hooks:
                    raise RegistryError(
                        f"agent {defn.name!r} names hook {hook!r}, which is not registered"
                    )
            for member in defn.team:
                if member not in self.agents:
                    raise RegistryError(
                        f"agent {defn.name!r} has {member!r} in its team, which is not defined"
                    )

    @classmethod
    def coerce(cls, value: Any) -> Registry:
        """Accept a Registry, a mapping of name to AgentDef, or an iterable of AgentDefs.

        Raises:
            RegistryError: anything else, or a mapping key that differs from its def's name.
        """
        if isinstance(value, Registry):
            return value
        if isinstance(value, Mapping):
            for key, defn in value.items():
                if not isinstance(defn, AgentDef) or key != defn.name:
                    raise RegistryError(f"registry entry {key!r} is not an AgentDef named {key!r}")
            return cls(value.values())
        if isinstance(value, Iterable) and not isinstance(value, str | bytes):
            items = list(value)
            if all(isinstance(d, AgentDef) for d in items):
                return cls(items)
        raise RegistryError(
            f"expected a Registry, a dict of AgentDef or a list of AgentDef, got {type(value)!r}"
        )

    @classmethod
    def load(cls, spec: str) -> Registry:
        """Load ``package.module:NAME`` (for example ``toolnexus_temporal.cli.demo:REGISTRY``).

        Raises:
            RegistryError: bad spec, missing module or attribute, a wrong type, or a
                definition the module makes that fails validation (one line per problem
                list: model, field, message).
        """
        module_name, sep, attr = spec.partition(":")
        if not sep or not module_name or not attr:
            raise RegistryError(f"registry spec {spec!r} is not of the form package.module:NAME")
        if "" not in sys.path and os.getcwd() not in sys.path:
            sys.path.insert(0, os.getcwd())  # like `python -m`: modules next to you import
        try:
            module = importlib.import_module(module_name)
        except ImportError as err:
            raise RegistryError(
                f"cannot import {module_name!r} for registry {spec!r}: {err}"
            ) from err
        except pydantic.ValidationError as err:  # a bad AgentDef or McpServer in the module
            problems = "; ".join(
                f"{'.'.join(map(str, e['loc'])) or '(root)'}: {e['msg']} (got {e['input']!r:.80})"
                for e in err.errors()
            )
            raise RegistryError(
                f"registry {spec!r}: invalid {err.title} in {module_name!r}: {problems}"
            ) from None
        try:
            value = getattr(module, attr)
        except AttributeError:
            raise RegistryError(f"module {module_name!r} has no attribute {attr!r}") from None
        return cls.coerce(value)

    def names(self) -> list[str]:
        """Known agent names, sorted."""
        return sorted(self.agents)


class RegistryActivities:
    """Registers ``tnx.resolve_agent`` (run by ``spawn``; a local activity in histories from
    before 2026-11-30) and
    ``tnx.run_hook``."""

    def __init__(self, registry: Registry) -> None:
        self.registry = registry

    @activity.defn(name=RESOLVE_AGENT_ACTIVITY)
    async def resolve_agent(self, inp: ResolveAgentInput) -> ResolveAgentResult:
        """The def for ``inp.name`` with its team's defs (one level), or the sorted known
        names when it is unknown."""
        defn = self.registry.agents.get(inp.name)
        if defn is None:
            return ResolveAgentResult(known=self.registry.names())
        team = [self._resolved(member) for member in defn.team if member in self.registry.agents]
        return self._resolved(inp.name).model_copy(update={"team": team})

    def _resolved(self, name: str) -> ResolveAgentResult:
        defn = self.registry.agents[name]
        options = {tool: self.registry.tools[tool].options for tool in defn.tools}
        return ResolveAgentResult(defn=defn, tool_options=options)

    def tool_schemas(self, tools: list[str], team: list[str]) -> list[dict[str, Any]]:
        """OpenAI-style function schemas for ``tools``, plus the ``task`` tool and the
        background tools when ``team`` is not empty (CONTRACT §4: the team sorted by name as
        ``name: description``; :func:`background_schemas`). Names this registry lacks are left
        out, never an error."""
        known = self.registry.tools
        schemas = [known[name].schema() for name in tools if name in known]
        # A name the registry lacks (a deploy dropped it under a running agent) is left out:
        # the model cannot call it, and a call it made before gets an `UnknownTool` error
        # result (tools.py), never a failed LLM call. `tnx replay-check --registry` names
        # such agents before the deploy.
        members = sorted(name for name in team if name in self.registry.agents)
        if members:
            listing = "; ".join(
                f"{name}: {self.registry.agents[name].description}" for name in members
            )
            schemas.append(
                {
                    "type": "function",
                    "function": {
                        "name": TASK_TOOL,
                        "description": (
                            f"Delegate a task to a team member. Team: {listing}. With "
                            '"background": true the call returns at once with the '
                            "child's id and its result arrives later in your inbox"
                        ),
                        "parameters": {
                            "type": "object",
                            "properties": {
                                "agent": {"type": "string", "enum": members},
                                "prompt": {"type": "string"},
                                "background": {"type": "boolean"},
                            },
                            "required": ["agent", "prompt"],
                        },
                    },
                }
            )
            schemas.extend(background_schemas())
        return schemas

    @activity.defn(name=RUN_HOOK_ACTIVITY)
    async def run_hook(self, inp: HookInput) -> None:
        """Run the registered hook ``inp.hook``.

        Raises:
            ApplicationError: ``UnknownHook`` (non-retryable) when the worker has no such hook;
                a hook's own exception fails the attempt (retried by the activity policy).
        """
        hook = self.registry.hooks.get(inp.hook)
        if hook is None:
            raise ApplicationError(
                f"hook {inp.hook!r} is not registered on this worker "
                f"(known: {', '.join(sorted(self.registry.hooks)) or 'none'})",
                type="UnknownHook",
                non_retryable=True,
            )
        outcome = hook(inp)
        if inspect.isawaitable(outcome):
            await outcome
