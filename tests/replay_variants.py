"""Deliberately changed versions of the agent workflow, registered under its name, for the
tests of ``tnx replay-check``: a deploy of one of them would break the running agents.

``python -c "import tests.replay_variants as v; v.install(); v.tnx()" replay-check ...`` runs
the real ``tnx`` with the variant installed as the worker's workflow."""

from __future__ import annotations

from datetime import timedelta
from typing import Any

from temporalio import workflow

from toolnexus_temporal import worker
from toolnexus_temporal.workflows.agent import AgentWorkflow
from toolnexus_temporal.workflows.contract import names
from toolnexus_temporal.workflows.contract.models import HandleView
from toolnexus_temporal.workflows.contract.state import AgentInput


@workflow.defn(name=names.WORKFLOW_TYPE)
class TimerFirstAgentWorkflow(AgentWorkflow):
    """The agent workflow with an ungated timer before its run loop: every recorded history
    expects another first command."""

    @workflow.run
    async def run(self, inp: Any = None) -> HandleView:
        await workflow.sleep(timedelta(milliseconds=1))
        return await super().run(inp)


@workflow.defn(name=names.WORKFLOW_TYPE)
class RaisingAgentWorkflow(AgentWorkflow):
    """The agent workflow with a bug that raises in its first workflow task: a replay that
    fails without a command mismatch."""

    @workflow.run
    async def run(self, inp: Any = None) -> HandleView:
        state = AgentInput.model_validate(inp).state
        raise RuntimeError(f"bug in the new code\n(second line for {state.id})")


def install() -> None:
    """Make :class:`TimerFirstAgentWorkflow` the workflow the worker (and replay-check) uses."""
    worker.WORKFLOWS = (TimerFirstAgentWorkflow,)


def tnx() -> None:
    """The ``tnx`` entry point (after :func:`install`)."""
    from toolnexus_temporal.cli.app import main

    main()
