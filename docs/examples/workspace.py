import asyncio
import subprocess

from toolnexus_temporal import (
    AgentDef,
    AgentRuntime,
    LlmConfig,
    Registry,
    ToolContext,
    connect,
    create_worker,
    define_tool,
)
from toolnexus_temporal.client.testing import ScriptedLLM, ScriptedLLMServer, text, tool_calls


def sh(command: str, ctx: ToolContext) -> str:
    """Run a shell command in the agent's workspace."""
    done = subprocess.run(
        command, shell=True, cwd=ctx.workspace, capture_output=True, text=True, timeout=60
    )
    return done.stdout + done.stderr


REGISTRY = Registry(
    [AgentDef(name="dev", description="works in a directory", tools=["sh"])],
    tools=[define_tool(sh, workspace=True)],  # every call of one agent: the same worker
)


def report(request: dict) -> dict:
    """The scripted model's last reply: what ``cat`` printed (the last tool result)."""
    return text(f"notes.txt says {request['messages'][-1]['content'].strip()}")


SCRIPT = ScriptedLLM(
    {
        "scripted": [
            tool_calls(("sh", {"command": "echo draft > notes.txt"})),
            tool_calls(("sh", {"command": "cat notes.txt"})),
            report,
        ]
    }
)


async def main() -> None:
    client = await connect()  # TEMPORAL_ADDRESS / a profile, else 127.0.0.1:7233
    with ScriptedLLMServer(SCRIPT) as llm_server:
        llm = LlmConfig(base_url=llm_server.base_url, model="scripted")
        async with create_worker(client, registry=REGISTRY, llm=llm, task_queue="ws-app") as w, w:
            rt = await AgentRuntime(client, task_queue="ws-app", scope="ws-app").start()
            h = await rt.spawn(rt.root, "dev")
            result = await rt.run_turn(h, "write a note, then read it back")
            await rt.close(h)
            print(result.text)  # "notes.txt says draft": the second call saw the first's file


asyncio.run(main())
