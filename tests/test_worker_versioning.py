"""Worker Versioning: a worker started with a deployment name and build id polls as that
deployment version, and the agent workflows it runs are AUTO_UPGRADE (README "Worker
Versioning"). Runs against the session dev server (Temporal 1.32 serves worker deployments)."""

from __future__ import annotations

import asyncio
import uuid

import pytest
from temporalio.api.enums.v1 import VersioningBehavior
from temporalio.api.workflowservice.v1 import (
    DescribeWorkerDeploymentRequest,
    SetWorkerDeploymentCurrentVersionRequest,
)
from temporalio.client import Client
from temporalio.common import WorkerDeploymentVersion
from temporalio.service import RPCError
from typer.testing import CliRunner

from tests.helpers import eventually
from toolnexus_temporal import worker
from toolnexus_temporal.activities import LlmConfig
from toolnexus_temporal.cli.replaycheck import replay_check
from toolnexus_temporal.client import AgentDef, AgentRuntime, Handle
from toolnexus_temporal.client.testing import ScriptedLLM, text
from toolnexus_temporal.worker import create_worker, parse_deployment
from toolnexus_temporal.workflows.agent import AgentWorkflow


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


def test_versioned_workers_default_to_auto_upgrade_and_the_definition_stays_unset() -> None:
    """AUTO_UPGRADE comes from the versioned worker's default: a behaviour on the workflow
    definition would be sent by unversioned workers too, and the server rejects their
    workflow task completions (seen: every agent on an unversioned worker stuck)."""
    from temporalio.common import VersioningBehavior
    from temporalio.workflow import _Definition

    config = worker.deployment_config(WorkerDeploymentVersion("tnx", "b1"))
    assert config.use_worker_versioning
    assert config.default_versioning_behavior == VersioningBehavior.AUTO_UPGRADE
    defn = _Definition.must_from_class(AgentWorkflow)
    assert defn.versioning_behavior in (None, VersioningBehavior.UNSPECIFIED)


def test_parse_deployment() -> None:
    assert parse_deployment(None, None) is None
    assert parse_deployment(" ", "") is None
    assert parse_deployment("tnx", "abc123") == WorkerDeploymentVersion("tnx", "abc123")
    with pytest.raises(ValueError, match="--build-id is missing"):
        parse_deployment("tnx", None)
    with pytest.raises(ValueError, match="deployment-name"):
        parse_deployment(None, "abc123")
    with pytest.raises(ValueError, match="must not contain"):
        parse_deployment("tnx.prod", "abc123")


def test_tnx_worker_flags_and_env_reach_serve(monkeypatch: pytest.MonkeyPatch) -> None:
    """``tnx-worker --deployment-name/--build-id`` (or TNX_DEPLOYMENT_NAME/TNX_BUILD_ID)
    hands the version to ``serve``; one without the other is a usage error."""
    seen: dict[str, object] = {}

    async def fake_serve(**kw: object) -> None:
        seen.update(kw)

    monkeypatch.setattr(worker, "serve", fake_serve)
    base = [
        "--registry",
        "tests.registries:APPROVALS",
        "--llm-base-url",
        "http://x/v1",
        "--model",
        "m",
    ]
    runner = CliRunner()
    result = runner.invoke(worker.app, [*base, "--deployment-name", "tnx", "--build-id", "b7"])
    assert result.exit_code == 0, result.output
    assert seen["deployment"] == WorkerDeploymentVersion("tnx", "b7")

    seen.clear()
    env = {"TNX_DEPLOYMENT_NAME": "tnx", "TNX_BUILD_ID": "b8"}
    assert runner.invoke(worker.app, base, env=env).exit_code == 0
    assert seen["deployment"] == WorkerDeploymentVersion("tnx", "b8")

    seen.clear()
    assert (
        runner.invoke(
            worker.app, base, env={"TNX_DEPLOYMENT_NAME": "", "TNX_BUILD_ID": ""}
        ).exit_code
        == 0
    )
    assert seen["deployment"] is None

    result = runner.invoke(worker.app, [*base, "--build-id", "b9"], env={"TNX_DEPLOYMENT_NAME": ""})
    assert result.exit_code == 2 and not seen.get("deployment")
    assert "--build-id" in result.output or "deployment name" in result.output, result.output
