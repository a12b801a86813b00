"""Worker Versioning settings of ``tnx-worker`` and ``create_worker`` (no server): the flags
and their environment variables, both-or-neither, and the AUTO_UPGRADE default of versioned
workers (README "Worker Versioning"). The server side is tests/test_worker_versioning.py."""

from __future__ import annotations

import pytest
from temporalio.common import WorkerDeploymentVersion
from typer.testing import CliRunner

from toolnexus_temporal.cli import worker_cmd as worker
from toolnexus_temporal.worker import deployment_config, parse_deployment
from toolnexus_temporal.workflows.agent import AgentWorkflow


def test_versioned_workers_default_to_auto_upgrade_and_the_definition_stays_unset() -> None:
    """AUTO_UPGRADE comes from the versioned worker's default: a behaviour on the workflow
    definition would be sent by unversioned workers too, and the server rejects their
    workflow task completions (seen: every agent on an unversioned worker stuck)."""
    from temporalio.common import VersioningBehavior
    from temporalio.workflow import _Definition

    config = deployment_config(WorkerDeploymentVersion("tnx", "b1"))
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
