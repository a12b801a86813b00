"""Worker Versioning: a worker started with a deployment name and build id polls as that
deployment version, and the agent workflows it runs are AUTO_UPGRADE (README "Worker
Versioning"). Runs against the session dev server (Temporal 1.32 serves worker deployments)."""

from __future__ import annotations

import asyncio
import uuid

from temporalio.api.enums.v1 import VersioningBehavior
from temporalio.api.workflowservice.v1 import (
    DescribeWorkerDeploymentRequest,
    SetWorkerDeploymentCurrentVersionRequest,
)
from temporalio.client import Client
from temporalio.common import WorkerDeploymentVersion
from temporalio.service import RPCError

from tests.helpers import eventually
from toolnexus_temporal.activities import LlmConfig
from toolnexus_temporal.cli.replaycheck import replay_check
from toolnexus_temporal.client import AgentDef, AgentRuntime, Handle
from toolnexus_temporal.client.testing import ScriptedLLM, text
from toolnexus_temporal.worker import create_worker


async def test_a_versioned_worker_polls_as_its_version_and_runs_a_turn(
    client: Client, store
) -> None:
    scope = f"t-{uuid.uuid4().hex[:10]}"
    version = WorkerDeploymentVersion(deployment_name=f"tnx-{scope}", build_id="build-1")
    llm = ScriptedLLM({"stub-model": [text("versioned")]})
    async with (
        create_worker(
            client,
            registry={"worker": AgentDef(name="worker")},
            llm=LlmConfig(base_url="http://mock.local/v1", model="stub-model"),
            task_queue=f"tq-{scope}",
            store=store,
            transport=llm.transport(),
            deployment=version,
        ) as w,
        w,
    ):
        ns = client.namespace
        described: list[object] = []

        async def registered() -> bool:
            try:
                resp = await client.workflow_service.describe_worker_deployment(
                    DescribeWorkerDeploymentRequest(
                        namespace=ns, deployment_name=version.deployment_name
                    )
                )
            except RPCError:
                return False  # not created until the first poll reaches the server
            described[:] = [
                s.deployment_version.build_id for s in resp.worker_deployment_info.version_summaries
            ]
            return "build-1" in described

        await eventually(registered, tries=300)

        async def made_current() -> bool:
            try:  # refused until every task queue type of the version has been polled
                await client.workflow_service.set_worker_deployment_current_version(
                    SetWorkerDeploymentCurrentVersionRequest(
                        namespace=ns, deployment_name=version.deployment_name, build_id="build-1"
                    )
                )
            except RPCError:
                return False
            return True

        await eventually(made_current, tries=300)
        rt = await AgentRuntime(client, task_queue=f"tq-{scope}", scope=scope).start()
        h = await rt.spawn(rt.root, "worker")
        assert isinstance(h, Handle)
        assert (await asyncio.wait_for(rt.run_turn(h, "hi"), 60)).text == "versioned"
        for hid in ("root", h.id):
            desc = await client.get_workflow_handle(rt.workflow_id(hid)).describe()
            info = desc.raw_description.workflow_execution_info.versioning_info
            assert info.behavior == VersioningBehavior.VERSIONING_BEHAVIOR_AUTO_UPGRADE, info
            assert info.deployment_version.deployment_name == version.deployment_name
            assert info.deployment_version.build_id == "build-1"
        # The versioning behaviour is no command: the versioned histories replay as any other.
        report = await replay_check(client, scope=scope)
        assert [o.status for o in report.outcomes] == ["ok", "ok"], report.outcomes
        await rt.close(rt.root)
