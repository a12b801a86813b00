"""Tools and interpreters (CONTRACT §1, §5): defined in the worker's registry, each call run
as its own activity.

A tool is ``define_tool(fn, ...)``. ``fn`` may be sync or async and takes either

* keyword parameters with type hints (the JSON schema is derived from them), or
* one pydantic model parameter (the schema is the model's),

plus, optionally, a ``ctx: ToolContext`` parameter (``ctx.answer`` carries the Answer when the
tool re-runs after its suspension was answered). It returns a string, a ``ToolResult``,
``pending(...)`` (a suspension) or any JSON-serialisable value.
"""

from __future__ import annotations

import asyncio
import inspect
import json
from collections.abc import Awaitable, Callable
from dataclasses import dataclass, field
from datetime import UTC, datetime
from pathlib import Path
from typing import TYPE_CHECKING, Any, NoReturn, get_type_hints

from pydantic import BaseModel, ConfigDict, ValidationError, create_model
from temporalio import activity
from temporalio.exceptions import ApplicationError

from toolnexus_temporal.activities.heartbeat import heartbeating
from toolnexus_temporal.activities.redact import mentions_secret, redacted_error
from toolnexus_temporal.activities.threads import run_stoppable
from toolnexus_temporal.workflows.contract.messages import (
    EditCheck,
    EditChecked,
    InterpretInput,
    ToolCallInput,
)
from toolnexus_temporal.workflows.contract.models import (
    APPROVAL_WAIT_MAX_MS,
    Answer,
    Request,
    ToolOptions,
    ToolResult,
)
from toolnexus_temporal.workflows.contract.names import (
    CHECK_EDIT_ACTIVITY,
    INTERPRET_ACTIVITY,
    TOOL_CALL_ACTIVITY,
)

if TYPE_CHECKING:
    from toolnexus_temporal.activities.mcp import McpPool


@dataclass(frozen=True)
class ToolContext:
    """What a tool may know about its call.

    Attributes:
        handle_id: the calling handle.
        call_id: the model's tool call id.
        answer: the Answer to this call's earlier suspension, when re-run after it.
        workspace: a workspace tool's working directory: the handle's, on the worker that
            holds it (``docs/guide/workspaces.md``); None for other tools.
    """

    handle_id: str
    call_id: str
    answer: Answer | None = None
    workspace: Path | None = None


def pending(
    kind: str,
    prompt: str,
    url: str | None = None,
    data: dict[str, Any] | None = None,
    expires_at: str | None = None,
    timeout_ms: int | None = None,
) -> ToolResult:
    """A suspension (CONTRACT §1): the tool needs an Answer before it can finish.

    The Request's ``id`` is assigned by the workflow (deterministic). Never an error.

    Args:
        kind: ``approval``, ``authorization``, ``input``, ``question``, ... (open).
        prompt: what the answerer is asked.
        url: where to act (for example an authorization page).
        data: extra data for the answerer.
        expires_at: ISO-8601 time (no zone: UTC) at which the Request, unanswered, is
            answered ``ok=false, reason="expired"`` by a durable timer.
        timeout_ms: instead of ``expires_at``: expire this long after it is raised (ms, a
            whole number from 1 to ``APPROVAL_WAIT_MAX_MS``, 10 years).

    Raises:
        ValueError: ``expires_at`` is not an ISO-8601 time, or ``timeout_ms`` is not a
            positive whole number of ms or is over ``APPROVAL_WAIT_MAX_MS``.
    """
    if expires_at is not None:
        try:
            when = datetime.fromisoformat(expires_at)
        except ValueError:
            raise ValueError(f"expires_at {expires_at!r} is not an ISO-8601 time") from None
        if when.tzinfo is None:
            expires_at = when.replace(tzinfo=UTC).isoformat()
    if timeout_ms is not None:
        if isinstance(timeout_ms, bool) or not isinstance(timeout_ms, int) or timeout_ms < 1:
            raise ValueError(f"timeout_ms must be a positive number of ms, not {timeout_ms!r}")
        if timeout_ms > APPROVAL_WAIT_MAX_MS:
            raise ValueError(
                f"timeout_ms must be at most {APPROVAL_WAIT_MAX_MS} ms (10 years), not {timeout_ms}"
            )
    request: dict[str, Any] = {"kind": kind, "prompt": prompt}
    if url is not None:
        request["url"] = url
    if data is not None:
        request["data"] = data
    if expires_at is not None:
        request["expiresAt"] = expires_at
    if timeout_ms is not None:
        request["timeoutMs"] = timeout_ms
    return ToolResult(metadata={"pending": request})


def pending_request(result: ToolResult) -> dict[str, Any] | None:
    """The Request fields of a suspension result, or None."""
    raw = result.metadata.get("pending")
    return raw if isinstance(raw, dict) else None


ToolFn = Callable[..., Any]


@dataclass
class Tool:
    """A registered tool. Build with :func:`define_tool`.

    Attributes:
        name: the name the model calls.
        description: shown to the model.
        input_schema: JSON Schema of the arguments.
        fn: the implementation.
        options: activity timeout and retries (see ToolOptions).
    """

    name: str
    description: str
    input_schema: dict[str, Any]
    fn: ToolFn
    options: ToolOptions = field(default_factory=ToolOptions)
    _args_model: type[BaseModel] | None = None
    _model_param: str | None = None
    _ctx_param: str | None = None

    def schema(self) -> dict[str, Any]:
        """The OpenAI-style function schema."""
        return {
            "type": "function",
            "function": {
                "name": self.name,
                "description": self.description,
                "parameters": self.input_schema,
            },
        }

    def arguments_error(self, arguments: dict[str, Any]) -> str | None:
        """Why the tool may not run with ``arguments`` (one line), or None: checked as
        :meth:`invoke` will check them (the pydantic model of its parameters), or against
        ``input_schema`` for a tool that takes the raw ``args`` (:func:`schema_error`)."""
        if self._args_model is None:
            return schema_error(self.input_schema, arguments)
        try:
            self._args_model.model_validate(arguments)
        except ValidationError as err:
            return "; ".join(
                f"{'.'.join(str(p) for p in e['loc']) or '(arguments)'}: {e['msg']}"
                for e in err.errors()
            )
        return None

    async def invoke(self, arguments: dict[str, Any], ctx: ToolContext) -> ToolResult:
        """Validate the arguments and call the function.

        Raises:
            ValueError: the arguments do not fit the schema (pydantic message).
        """
        kwargs: dict[str, Any] = {}
        if self._args_model is not None:
            try:
                parsed = self._args_model.model_validate(arguments)
            except ValidationError as err:
                raise ValueError(f"invalid arguments for {self.name}: {err}") from err
            if self._model_param is not None:
                kwargs[self._model_param] = parsed
            else:
                kwargs.update({k: getattr(parsed, k) for k in type(parsed).model_fields})
        else:
            kwargs["args"] = arguments
        if self._ctx_param is not None:
            kwargs[self._ctx_param] = ctx
        if inspect.iscoroutinefunction(self.fn):
            out = await self.fn(**kwargs)
        else:
            out = await run_stoppable(self.fn, **kwargs)
        return to_tool_result(out)


def call_arguments(inp: ToolCallInput) -> dict[str, Any]:
    """The model's arguments of one tool call, a JSON object.

    Raises:
        ApplicationError: ``ToolArgumentsInvalid`` (non-retryable): not JSON, or not an object.
    """
    try:
        arguments = json.loads(inp.arguments or "{}")
        if not isinstance(arguments, dict):
            raise ValueError("arguments are not a JSON object")
    except ValueError as err:
        raise ApplicationError(
            f"invalid arguments for {inp.tool}: {err}",
            type="ToolArgumentsInvalid",
            non_retryable=True,
        ) from err
    return arguments


def schema_error(schema: dict[str, Any], arguments: dict[str, Any]) -> str | None:
    """Why ``arguments`` do not fit JSON Schema ``schema`` (one line: where and what), or
    None. With the ``jsonschema`` package (installed with the ``mcp`` extra) the whole schema
    is checked (its own draft, else 2020-12); without it, the object's ``required`` keys and
    ``additionalProperties: false`` only."""
    try:
        import jsonschema  # type: ignore[import-untyped]
    except ImportError:
        missing = [k for k in schema.get("required", []) if k not in arguments]
        if missing:
            return f"missing required {', '.join(map(repr, missing))}"
        if schema.get("additionalProperties") is False:
            extra = sorted(set(arguments) - set(schema.get("properties", {})))
            if extra:
                return f"unexpected {', '.join(map(repr, extra))}"
        return None
    cls = jsonschema.validators.validator_for(schema, default=jsonschema.Draft202012Validator)
    try:
        cls.check_schema(schema)
    except jsonschema.SchemaError as err:
        return f"the tool's schema is not valid JSON Schema ({err.message}); no edit is checked"
    error = jsonschema.exceptions.best_match(cls(schema).iter_errors(arguments))
    if error is None:
        return None
    where = "/".join(str(p) for p in error.absolute_path) or "(arguments)"
    return f"{where}: {error.message}"


def to_tool_result(out: Any) -> ToolResult:
    """Normalise a tool's return value into a ToolResult."""
    if isinstance(out, ToolResult):
        return out
    if isinstance(out, str):
        return ToolResult(output=out)
    if isinstance(out, BaseModel):
        return ToolResult(output=out.model_dump_json())
    return ToolResult(output=json.dumps(out))


def define_tool(
    fn: ToolFn,
    *,
    name: str | None = None,
    description: str | None = None,
    input_schema: dict[str, Any] | None = None,
    timeout_ms: int = 60_000,
    max_attempts: int = 1,
    initial_retry_ms: int = 1_000,
    workspace: bool = False,
) -> Tool:
    """Define a tool from a function (CONTRACT §1).

    Args:
        fn: sync or async; see the module docstring for its parameters.
        name: the tool name (default: the function's name).
        description: for the model (default: the docstring's first paragraph).
        input_schema: JSON Schema of the arguments (default: derived from the type hints or
            the pydantic model parameter). When given, ``fn`` receives the raw arguments
            dict as ``args`` unless it declares typed parameters.
        timeout_ms: start-to-close timeout of one attempt, in ms.
        max_attempts: activity attempts (1: no retries, tools may have side effects).
        initial_retry_ms: first retry delay, in ms.
        workspace: the tool needs a place (a working directory, a shell, a checkout): every
            call of one handle runs on the worker holding its workspace, with
            ``ctx.workspace`` its directory (``docs/guide/workspaces.md``).

    Raises:
        ValueError: a parameter has no type hint and no schema was given.
    """
    tool_name = name or fn.__name__
    doc = inspect.getdoc(fn) or ""
    desc = description if description is not None else doc.split("\n\n")[0].strip()
    hints = get_type_hints(fn)
    params = [p for p in inspect.signature(fn).parameters.values()]
    ctx_param = next(
        (p.name for p in params if hints.get(p.name) is ToolContext or p.name == "ctx"), None
    )
    data_params = [p for p in params if p.name != ctx_param]
    args_model: type[BaseModel] | None = None
    model_param: str | None = None
    if (
        len(data_params) == 1
        and isinstance(hints.get(data_params[0].name), type)
        and issubclass(hints[data_params[0].name], BaseModel)
    ):
        model_param = data_params[0].name
        args_model = hints[model_param]
    elif len(data_params) == 1 and data_params[0].name == "args" and input_schema is not None:
        args_model = None  # raw dict, schema given
    else:
        fields: dict[str, Any] = {}
        for p in data_params:
            if p.name not in hints:
                raise ValueError(
                    f"tool {tool_name!r}: parameter {p.name!r} has no type hint; add one or "
                    "pass input_schema"
                )
            default = ... if p.default is inspect.Parameter.empty else p.default
            fields[p.name] = (hints[p.name], default)
        args_model = create_model(
            f"{tool_name}_args", __config__=ConfigDict(extra="forbid"), **fields
        )
    assert args_model is not None or input_schema is not None
    schema = input_schema or _schema_of(args_model)
    return Tool(
        name=tool_name,
        description=desc,
        input_schema=schema,
        fn=fn,
        options=ToolOptions(
            timeout_ms=timeout_ms,
            max_attempts=max_attempts,
            initial_retry_ms=initial_retry_ms,
            workspace=workspace,
        ),
        _args_model=args_model,
        _model_param=model_param,
        _ctx_param=ctx_param,
    )


def _schema_of(model: type[BaseModel] | None) -> dict[str, Any]:
    assert model is not None
    schema = model.model_json_schema()
    schema.pop("title", None)
    for prop in schema.get("properties", {}).values():
        if isinstance(prop, dict):
            prop.pop("title", None)
    schema.setdefault("properties", {})
    return schema


Interpreter = Callable[[Request], Awaitable[Answer] | Answer]
"""A ``wait_for`` interpreter: answers a Request (sync or async; may run long)."""


class ToolActivities:
    """Registers ``tnx.tool_call`` and ``tnx.interpret`` for a registry's tools and
    interpreters; a call of an MCP server's tool (``<server>__<tool>``) goes to ``mcp``
    (``activities/mcp.py``).

    Args:
        tools: the tools by name.
        interpreters: the interpreters by name.
        secrets: the secrets a tool's error must not quote.
        workspace: on a worker's own queue (``activities/workspace.py``): the workspace
            directory of a handle, by its workflow id; None on the shared queue, where a
            workspace tool is refused.
        mcp: the worker's MCP sessions (``activities/mcp.py``), None without MCP servers.
    """

    def __init__(
        self,
        tools: dict[str, Tool],
        interpreters: dict[str, Interpreter],
        secrets: Callable[[], list[str]] | None = None,
        mcp: McpPool | None = None,
        workspace: Callable[[str], Path] | None = None,
    ) -> None:
        self.tools = tools
        self.interpreters = interpreters
        self.secrets = secrets or (lambda: [])
        self.mcp = mcp
        self.workspace = workspace

    @activity.defn(name=TOOL_CALL_ACTIVITY)
    async def tool_call(self, inp: ToolCallInput) -> ToolResult:
        """Run one tool call, heartbeating (an interrupt reaches it). Its span and metrics are
        the worker's activity interceptor's (``observability/activity.py``).

        Raises:
            ApplicationError: ``UnknownTool`` / ``ToolArgumentsInvalid`` (non-retryable);
                the tool's own exception fails the attempt (retried per the tool's options;
                the workflow turns the final failure into an ``is_error`` result).
        """
        tool = self.tools.get(inp.tool)
        try:
            async with heartbeating():
                if tool is None and self.mcp is not None and self.mcp.owns(inp.tool):
                    return await self.mcp.call(inp)
                if tool is None:
                    raise ApplicationError(
                        f"tool {inp.tool!r} is not registered on this worker",
                        type="UnknownTool",
                        non_retryable=True,
                    )
                return await tool.invoke(call_arguments(inp), await self._context(inp, tool))
        except ValueError as err:
            if tool is not None and str(err).startswith(f"invalid arguments for {tool.name}"):
                raise ApplicationError(
                    str(err), type="ToolArgumentsInvalid", non_retryable=True
                ) from err
            self._raise_clean(err)
        except Exception as err:
            self._raise_clean(err)

    def knows(self, name: str) -> bool:
        """Whether ``name`` is a tool of this worker: registered here, or of one of its MCP
        servers (``<server>__<tool>``; the server may still not offer it). The activity
        interceptor neither counts nor traces a call of a name it does not know
        (``observability/activity.py``)."""
        return name in self.tools or (self.mcp is not None and self.mcp.owns(name))

    async def _context(self, inp: ToolCallInput, tool: Tool) -> ToolContext:
        """The ToolContext of a call of ``tool``, with the handle's workspace for a workspace
        tool (resolved off the event loop).

        Raises:
            ApplicationError: ``NoWorkspace`` (non-retryable): a workspace tool on a queue
                without workspaces.
        """
        workspace: Path | None = None
        if tool.options.workspace:
            if self.workspace is None:
                raise ApplicationError(
                    f"tool {inp.tool!r} needs a workspace, but this handle resolved its tool "
                    "options before the tool did: spawn the agent again",
                    type="NoWorkspace",
                    non_retryable=True,
                )
            workspace = await asyncio.to_thread(
                self.workspace, activity.info().workflow_id or inp.handle_id
            )
        return ToolContext(
            handle_id=inp.handle_id, call_id=inp.call_id, answer=inp.answer, workspace=workspace
        )

    def _raise_clean(self, err: Exception) -> NoReturn:
        """Re-raise a tool's error; one that quotes a configured secret (the LLM key,
        ``LlmConfig.secret_envs``) is replaced by its redacted copy (issue 12, item 10)."""
        secrets = self.secrets()
        if secrets and mentions_secret(err, secrets):
            raise redacted_error(err, secrets) from None
        raise err

    @activity.defn(name=CHECK_EDIT_ACTIVITY)
    async def check_edit(self, inp: EditCheck) -> EditChecked:
        """Check a reviewer's edited arguments against the parameters schema of
        ``inp.tool`` (issue 34 item 3): a registered tool's (:meth:`Tool.arguments_error`),
        or an MCP server's ``inputSchema`` (:meth:`McpPool.arguments_error`). A tool this
        worker does not know is an error result (nothing can vouch for the edit).

        Raises:
            ApplicationError: the MCP server cannot be listed (retried; the workflow refuses
                the edit when every attempt failed).
        """
        tool = self.tools.get(inp.tool)
        if tool is not None:
            return EditChecked(error=tool.arguments_error(inp.arguments))
        if self.mcp is not None and self.mcp.owns(inp.tool):
            return EditChecked(error=await self.mcp.arguments_error(inp.tool, inp.arguments))
        return EditChecked(error=f"tool {inp.tool!r} is not registered on this worker")

    @activity.defn(name=INTERPRET_ACTIVITY)
    async def interpret(self, inp: InterpretInput) -> Answer:
        """Ask interpreter ``inp.interpreter`` for the Answer to ``inp.request``.

        Raises:
            ApplicationError: ``UnknownInterpreter`` (non-retryable), or an Answer whose id
                does not echo the request (``WrongAnswerId``, non-retryable).
        """
        fn = self.interpreters.get(inp.interpreter)
        if fn is None:
            raise ApplicationError(
                f"interpreter {inp.interpreter!r} is not registered on this worker",
                type="UnknownInterpreter",
                non_retryable=True,
            )
        async with heartbeating():
            out = fn(inp.request)
            answer = await out if inspect.isawaitable(out) else out
        if not isinstance(answer, Answer):
            answer = Answer.model_validate(answer)
        if answer.id != inp.request.id:
            raise ApplicationError(
                f"interpreter {inp.interpreter!r} answered id {answer.id!r} for request "
                f"{inp.request.id!r}",
                type="WrongAnswerId",
                non_retryable=True,
            )
        return answer
