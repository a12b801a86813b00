import asyncio

from toolnexus_temporal import (
    AgentDef,
    AgentRuntime,
    Budget,
    InboxItem,
    LlmConfig,
    Registry,
    connect,
    create_worker,
    define_tool,
)
from toolnexus_temporal.client.stream import TextDelta, TurnEnd
from toolnexus_temporal.client.testing import ScriptedLLM, text, tool_calls


def lookup(q: str) -> str:
    """Look a word up."""
    return f"{q}: a word"


REGISTRY = Registry(
    [
        AgentDef(name="lead", description="delegates", team=["explore"], model="lead"),
        AgentDef(name="explore", description="looks things up", tools=["lookup"], model="explore"),
    ],
    tools=[define_tool(lookup)],
)
SCRIPT = ScriptedLLM(
    {
        # the lead delegates one job through its `task` tool, then sums up
        "lead": [
            tool_calls(("task", {"agent": "explore", "prompt": "look up 'durable'"})),
            text("durable: a word"),
            text("noted"),
        ],
        # the child calls its tool, then answers
        "explore": [tool_calls(("lookup", {"q": "durable"})), text("durable: a word")],
    }
)


async def main() -> None:
    client = await connect()
    llm = LlmConfig(base_url="http://scripted.invalid/v1", model="inherit")
    async with (
        create_worker(
            client, registry=REGISTRY, llm=llm, task_queue="verbs", transport=SCRIPT.transport()
        ) as worker,
        worker,
    ):
        rt = await AgentRuntime(client, task_queue="verbs", scope="verbs").start()
        lead = await rt.spawn(rt.root, "lead", Budget(max_tokens=10_000))
        result = await rt.run_turn(lead, "what does 'durable' mean?")  # wake + wait
        print(result.status, result.text)  # done durable: a word
        item = InboxItem(text="new data", channel="webhook")  # from "external"
        posted = await rt.post(lead, item)
        print("posted:", posted.ok)  # posted: True (the next turn reads it)
        await rt.wake(lead, "go on")
        async for event in rt.stream(lead):  # live: text deltas, tool calls, then the end
            if isinstance(event, TextDelta):
                print("delta:", event.text)  # only what streams after the stream starts
            elif isinstance(event, TurnEnd) and event.result is not None:
                print("end:", event.result.text)  # end: noted
        tree = await rt.list()  # the root, the lead, its closed task child
        print([(h.id, h.state) for h in tree])
        print("trace lines:", len(await rt.trace(lead)) > 0)
        closed = await rt.close(lead)  # the lead and its subtree: close what you start
        print(closed.state)  # closed


asyncio.run(main())
