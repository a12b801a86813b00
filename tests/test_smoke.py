from client import AgentDef, AgentRuntime, Handle
from client.testing import ScriptedLLM, text


async def test_smoke(make_runtime):
    llm = ScriptedLLM({"stub-model": [text("done")]})
    async with make_runtime({"worker": AgentDef(name="worker")}, llm.transport()) as rt:
        h = await rt.spawn(rt.root, "worker")
        assert isinstance(h, Handle), h
        assert h.id == "root/worker.1"
        await rt.wake(h, "go")
        assert h.state == "running"
        r = await rt.wait(h)
        assert r.status == "done", r
        assert h.state == "idle" and h.turns_total == 1 and h.usage_total == 5
