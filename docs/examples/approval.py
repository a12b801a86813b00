import asyncio

from toolnexus_temporal import (
    AgentDef,
    AgentRuntime,
    Answer,
    LlmConfig,
    Registry,
    ToolContext,
    connect,
    create_worker,
    define_tool,
    pending,
)
from toolnexus_temporal.client.testing import ScriptedLLM, ScriptedLLMServer, text, tool_calls


def deploy(service: str, ctx: ToolContext):
    """Deploy a service (needs an approval)."""
    if ctx.answer is None:
        return pending(kind="approval", prompt=f"deploy {service}?")
    return f"deployed {service}"


REGISTRY = Registry(
    [AgentDef(name="ops", description="runs deployments", tools=["deploy"])],
    tools=[define_tool(deploy)],
)
SCRIPT = ScriptedLLM(
    {"scripted": [tool_calls(("deploy", {"service": "billing"})), text("billing is deployed")]}
)


async def main() -> None:
    client = await connect()  # TEMPORAL_ADDRESS / a profile, else 127.0.0.1:7233
    with ScriptedLLMServer(SCRIPT) as llm_server:
        llm = LlmConfig(base_url=llm_server.base_url, model="scripted")
        async with create_worker(client, registry=REGISTRY, llm=llm, task_queue="my-app") as w, w:
            rt = await AgentRuntime(client, task_queue="my-app", scope="my-app").start()
            h = await rt.spawn(rt.root, "ops")  # Handle, or a SpawnError value
            await rt.wake(h, "deploy billing")  # h.state == "running" on return
            result = await rt.wait(h)  # status "pending": result.pending is the Request
            await rt.resume(Answer(id=result.pending.id, ok=True))  # hours later is fine
            result = await rt.wait(h)
            await rt.close(h)  # an agent lives until it is closed: close what you start
            print(result.text)  # "billing is deployed"


asyncio.run(main())
