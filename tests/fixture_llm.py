"""Turn the toolnexus conformance fixtures (tests/fixtures/toolnexus, MIT) into scripted LLMs,
registries and tools (``FixtureLLM``, ``fixture_registry``), so each fixture runs as a
data-driven test against a real dev server."""

from __future__ import annotations

import asyncio
import json
import re
from pathlib import Path
from typing import Any

import httpx

from toolnexus_temporal.activities import Registry, ToolContext, define_tool, pending
from toolnexus_temporal.client import AgentDef, Answer, Request
from toolnexus_temporal.client.testing import openai_view, render, style_of, text, tool_calls

FIXTURES = Path(__file__).parent / "fixtures" / "toolnexus"


def load_fixture(name: str) -> dict[str, Any]:
    """Load ``{name}.json`` with its ``$ref``s resolved (``../subagent-x/fixture.json#/a/b``
    points at ``subagent-x.json``)."""
    return _resolve(json.loads((FIXTURES / f"{name}.json").read_text()))


def _resolve(node: Any) -> Any:
    if isinstance(node, dict):
        if set(node) == {"$ref"}:
            ref: str = node["$ref"]
            file_part, _, pointer = ref.partition("#")
            target = Path(file_part).parent.name or Path(file_part).stem
            doc = json.loads((FIXTURES / f"{target}.json").read_text())
            for key in pointer.strip("/").split("/"):
                doc = doc[key]
            return _resolve(doc)
        return {k: _resolve(v) for k, v in node.items()}
    if isinstance(node, list):
        return [_resolve(v) for v in node]
    return node


def _tool_contents(body: dict[str, Any]) -> list[str]:
    return [str(m.get("content") or "") for m in body["messages"] if m["role"] == "tool"]


def _matches(entry: dict[str, Any], body: dict[str, Any]) -> bool:
    tools = _tool_contents(body)
    if entry.get("always"):
        return True
    if "whenToolMsgs" in entry:
        cond = entry["whenToolMsgs"]
        if cond == 0 and tools:
            return False
        if cond == ">=1" and not tools:
            return False
    if "whenNoToolMsgContains" in entry and any(entry["whenNoToolMsgContains"] in t for t in tools):
        return False
    return not (
        "whenToolMsgContains" in entry and not any(entry["whenToolMsgContains"] in t for t in tools)
    )


def _render(template: str, body: dict[str, Any]) -> str:
    tools = _tool_contents(body)
    users = [str(m.get("content") or "") for m in body["messages"] if m["role"] == "user"]

    def fill(match: re.Match[str]) -> str:
        what = match.group(1)
        if what == "first tool msg content":
            return tools[0]
        if what == "last tool msg content":
            return tools[-1]
        if what.startswith("join all tool msg contents with"):
            sep = what.split("with", 1)[1].strip().strip("'")
            return sep.join(tools)
        if what == "count of numbered inbox items in last user msg":
            return str(len(re.findall(r"^\d+\. \[from=", users[-1], flags=re.M)))
        raise ValueError(f"unknown template {what!r}")

    return re.sub(r"<([^<>]+)>", fill, template)


class FixtureLLM:
    """An OpenAI-style scripted LLM driven by a fixture's ``mockLLM`` section.

    Attributes:
        requests: every request body, in order.
        in_flight / max_in_flight: concurrent calls now / at most (for the turn gate).
        release: set it to let ``blocksUntil`` entries finish.
        aborted: calls cancelled while blocked.
    """

    def __init__(self, mock: dict[str, Any]) -> None:
        self.scripts: dict[str, list[dict[str, Any]]] = mock["scripts"]
        self.usage = mock.get("usagePerCall", {"prompt_tokens": 3, "completion_tokens": 2})
        self.requests: list[dict[str, Any]] = []
        self.in_flight = 0
        self.max_in_flight = 0
        self.release = asyncio.Event()
        self.entered = asyncio.Event()
        self.aborted = 0

    def transport(self) -> httpx.MockTransport:
        return httpx.MockTransport(self.handle)

    def calls(self, model: str | None = None) -> int:
        return sum(1 for r in self.requests if model is None or r["model"] == model)

    async def handle(self, request: httpx.Request) -> httpx.Response:
        raw = json.loads(request.content)
        style = style_of(request.url.path)
        body = openai_view(style, raw)
        self.requests.append(body)
        self.in_flight += 1
        self.max_in_flight = max(self.max_in_flight, self.in_flight)
        try:
            await asyncio.sleep(0.05)  # long enough for concurrent calls to overlap
            entries = self.scripts[body["model"]]
            entry = next((e for e in entries if _matches(e, body)), None)
            if entry is None:
                return httpx.Response(500, json={"error": f"no script entry for {body}"})
            if entry.get("blocksUntil"):
                self.entered.set()
                try:
                    await self.release.wait()
                except asyncio.CancelledError:
                    self.aborted += 1
                    raise
            prompt = int(self.usage.get("prompt_tokens", 0))
            completion = int(self.usage.get("completion_tokens", 0))
            if "toolCalls" in entry:
                reply = tool_calls(
                    *[(c["name"], c["args"]) for c in entry["toolCalls"]],
                    prompt_tokens=prompt,
                    completion_tokens=completion,
                )
            else:
                reply = text(
                    _render(entry["text"], body),
                    prompt_tokens=prompt,
                    completion_tokens=completion,
                )
            return render(reply, style, stream=bool(raw.get("stream")))
        finally:
            self.in_flight -= 1


def lookup(q: str = "") -> str:
    """returns data(<q>)"""
    return f"data({q})"


async def check_secret(ctx: ToolContext) -> Any:
    """needs an approval, then returns secret-token"""
    if ctx.answer is None:
        return pending(kind="approval", prompt="approve secret access?")
    return "secret-token" if ctx.answer.ok else "no token"


async def auto_approve(req: Request) -> Answer:
    return Answer(id=req.id, ok=True)


def fixture_registry(fixture: dict[str, Any]) -> Registry:
    """The fixture's agents (its ``registry``: ``does``, ``model``, ``tools``, ``team``; a
    ``waitFor`` agent escalates to the ``auto-approve`` interpreter) with the tools they use
    (``lookup``, ``check_secret``)."""
    tools = {
        "lookup": define_tool(lookup),
        "check_secret": define_tool(check_secret, input_schema={"type": "object"}),
    }
    agents = [
        AgentDef(
            name=name,
            description=spec["does"],
            model=spec["model"],
            tools=spec.get("tools", []),
            team=spec.get("team", []),
            wait_for="auto-approve" if "waitFor" in spec else None,
        )
        for name, spec in fixture["registry"].items()
    ]
    used = {t for spec in fixture["registry"].values() for t in spec.get("tools", [])}
    return Registry(
        agents,
        tools=[tools[name] for name in sorted(used)],
        interpreters={"auto-approve": auto_approve},
    )
