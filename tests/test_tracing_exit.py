"""Spans are not lost when a process ends (docs/guide/tracing.md "Turning it on"): ``tnx``
commands and ``tnx-worker`` end with ``os._exit`` (``cli.ops.hard_exit``), which skipped the
batch span processor's export, so a CLI command's client spans (the root of a host's trace)
never left the process, and a worker stopped by SIGTERM lost the spans of its last seconds.
Both run here as processes against a real dev server, with the console exporter and a batch
delay far longer than the test, so only the flush at exit can print a span."""

from __future__ import annotations

import asyncio
import os
import signal
import sys
import uuid
from pathlib import Path

from tests.workers import start_worker_process
from toolnexus_temporal.client.testing import ScriptedLLM, ScriptedLLMServer, text

ROOT = Path(__file__).resolve().parent.parent
BIN = Path(sys.executable).parent


async def test_cli_and_worker_export_their_spans_when_they_exit(env, tmp_path: Path) -> None:
    address = env.client.service_client.config.target_host
    scope = f"t-{uuid.uuid4().hex[:10]}"
    traced = {
        **os.environ,
        "PYTHONPATH": str(ROOT),
        "OTEL_TRACES_EXPORTER": "console",
        "OTEL_BSP_SCHEDULE_DELAY": "600000",  # no timed export during the test
        "TEMPORAL_ADDRESS": address,
        "TNX_TASK_QUEUE": f"tq-{scope}",
        "TNX_SCOPE": scope,
    }
    llm = ScriptedLLM({"m-parent": [text("ok")]}, repeat_last=True)
    with ScriptedLLMServer(llm) as server:
        worker = await start_worker_process(
            str(BIN / "tnx-worker"),
            *("--registry", "tests.registries:APPROVALS", "--llm-base-url", server.base_url),
            *("--model", "stub-model", "--store", str(tmp_path / "s.sqlite")),
            env=traced,
            ready=lambda line: b"worker on " in line and b" tracing=console" in line,
        )
        try:
            assert worker.stdout is not None
            cli = await asyncio.create_subprocess_exec(
                str(BIN / "tnx"),
                *("spawn", "root", "parent", "--prompt", "hi"),
                cwd=ROOT,
                env=traced,
                stdout=asyncio.subprocess.PIPE,
                stderr=asyncio.subprocess.STDOUT,
            )
            out, _ = await asyncio.wait_for(cli.communicate(), 60)
            assert cli.returncode == 0, out
            assert b'"trace_id"' in out, out  # the command's client spans were exported
            done = await asyncio.wait_for(
                asyncio.create_subprocess_exec(
                    str(BIN / "tnx"), "wait", "root/parent.1", cwd=ROOT, env=traced,
                    stdout=asyncio.subprocess.PIPE, stderr=asyncio.subprocess.STDOUT,
                ),
                60,
            )  # fmt: skip
            waited, _ = await asyncio.wait_for(done.communicate(), 60)
            assert b"done" in waited, waited
        except BaseException:
            worker.kill()
            raise
        worker.send_signal(signal.SIGTERM)
        rest = await asyncio.wait_for(worker.stdout.read(), 60)
        assert await asyncio.wait_for(worker.wait(), 60) == 0, rest
        assert b'"name": "invoke_agent parent"' in rest, rest  # the turn's span, at SIGTERM
