"""Long-lived handles continue as new when idle, carrying the whole state model: ids, counters,
the transcript, the trace, children and the root's slots survive the run boundary."""

from __future__ import annotations

from tests.helpers import eventually
from toolnexus_temporal.client import AgentDef, Handle, RuntimeOptions
from toolnexus_temporal.client.testing import ScriptedLLM, text


async def test_handles_continue_as_new_with_nothing_lost(make_runtime, client) -> None:
    llm = ScriptedLLM({"stub-model": [text(f"answer {i}") for i in range(8)]})
    options = RuntimeOptions(continue_as_new_updates=3)
    async with make_runtime(
        {"chat": AgentDef(name="chat")}, llm.transport(), options=options
    ) as rt:
        root_wf = client.get_workflow_handle(rt.workflow_id("root"))
        root_first_run = (await root_wf.describe()).run_id
        h = await rt.spawn(rt.root, "chat")
        assert isinstance(h, Handle)
        # Turns cost the root no update (protocol 2): three more spawns take it past
        # continue_as_new_updates.
        extra = [await rt.spawn(rt.root, "chat") for _ in range(3)]
        wf = client.get_workflow_handle(rt.workflow_id(h.id))
        first_run = (await wf.describe()).run_id
        for i in range(8):
            r = await rt.run_turn(h, f"question {i}")
            assert (r.status, r.text) == ("done", f"answer {i}")
        h = await rt.inspect(h)
        assert h.turns_total == 8 and h.usage_total == 40 and h.transcript_len == 16
        # A run continues as new once it is idle with nothing in flight (a report to the
        # parent can hold it a moment after the update returned): wait for it, never assume.

        # (protocol 3: a run continues as new 1.2 s old at the earliest)
        async def continued() -> bool:
            return (await wf.describe()).run_id != first_run and (
                await root_wf.describe()
            ).run_id != root_first_run

        await eventually(continued, tries=300)
        # the transcript continued across runs: the last call saw every earlier message
        assert len(llm.requests[-1]["messages"]) == 15
        lines = await rt.trace_lines(h)
        assert any(line.endswith(": continue-as-new") for line in lines)
        assert lines[0] == f"{h.id}: idle→running (wake)"  # the trace kept its beginning
        root = await rt.inspect(rt.root)
        assert root.children == [h.id, *(e.id for e in extra if isinstance(e, Handle))]

        async def rolled_up() -> bool:  # usage reports coalesce within live_usage_ms
            return (await rt.inspect(rt.root)).usage_total == 40

        await eventually(rolled_up)
        # a new spawn after the root's continue-as-new keeps counting
        second = await rt.spawn(rt.root, "chat")
        assert isinstance(second, Handle) and second.id == "root/chat.5"
