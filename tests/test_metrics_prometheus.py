"""Metrics, read back through a real Prometheus (issue 27, item 2; docs/guide/metrics.md).

One ``tnx-worker --metrics-port`` process; Debian's ``prometheus`` (``/usr/bin/prometheus``,
installed by scripts/test.sh) scrapes it every 500 ms. Four scripted turns run: a plain turn,
a tool turn, an approval that waits (then is answered), a budget stop. Every expected series
is read through Prometheus' HTTP API (``/api/v1/query``) and its value asserted: turns by
status, budget stops by limit, LLM calls and their latency counts by model, tool calls by
tool and outcome, tokens by agent equal to each handle's usage, the fleet gauges (approvals
waiting and the oldest wait, handles by state) while the approval waits and after, and the
SDK's own ``temporal_*`` series on the same port. No label value names a handle. Then the
worker is restarted and a new process replays a handle's history for its next turn: it counts
that turn only (the workflow meter skips replay).
"""

from __future__ import annotations

import asyncio
import uuid
from collections.abc import AsyncIterator
from decimal import Decimal
from pathlib import Path
from typing import Any

import httpx
import pytest
from temporalio.client import Client

from tests.helpers import eventually, spawn
from tests.multihost import WorkerProcess
from tests.workers import free_port
from toolnexus_temporal.client import AgentRuntime, Answer
from toolnexus_temporal.client.testing import ScriptedLLM, ScriptedLLMServer, text, tool_calls
from toolnexus_temporal.workflows.contract.models import Budget

pytestmark = pytest.mark.prometheus

PROMETHEUS = Path("/usr/bin/prometheus")
WITHIN_S = 60.0


class Prom:
    """A Prometheus server scraping ``target`` every 500 ms, queried over its HTTP API."""

    def __init__(self, home: Path, target: str) -> None:
        self.home = home
        self.port = free_port()
        self.url = f"http://127.0.0.1:{self.port}"
        self.config = home / "prometheus.yml"
        self.config.write_text(
            "global:\n  scrape_interval: 500ms\n  evaluation_interval: 1s\n"
            "scrape_configs:\n  - job_name: tnx-worker\n    scrape_interval: 500ms\n"
            f"    static_configs:\n      - targets: ['{target}']\n"
        )
        self.proc: asyncio.subprocess.Process | None = None
        self.http = httpx.AsyncClient(base_url=self.url, timeout=10)

    async def start(self) -> None:
        with (self.home / "prometheus.log").open("wb") as log:
            self.proc = await asyncio.create_subprocess_exec(
                str(PROMETHEUS),
                f"--config.file={self.config}",
                f"--storage.tsdb.path={self.home / 'data'}",
                f"--web.listen-address=127.0.0.1:{self.port}",
                "--log.level=warn",
                stdout=log,
                stderr=asyncio.subprocess.STDOUT,
                start_new_session=True,
            )

        async def ready() -> bool:
            assert self.proc is not None and self.proc.returncode is None, self.log()
            return (await self.http.get("/-/ready")).status_code == 200

        await eventually(ready, every=0.2, within_s=WITHIN_S, what="prometheus ready",
                         ignoring=(httpx.TransportError,))  # fmt: skip

    def log(self) -> str:
        path = self.home / "prometheus.log"
        return path.read_text(errors="replace")[-3000:] if path.exists() else ""

    async def query(self, promql: str) -> dict[tuple[tuple[str, str], ...], float]:
        """An instant query: {sorted labels (without ``__name__``): value}."""
        response = await self.http.get("/api/v1/query", params={"query": promql})
        body = response.json()
        assert body["status"] == "success", body
        out: dict[tuple[tuple[str, str], ...], float] = {}
        for row in body["data"]["result"]:
            labels = tuple(sorted((k, v) for k, v in row["metric"].items() if k != "__name__"))
            out[labels] = float(row["value"][1])
        return out

    async def by(self, promql: str, label: str) -> dict[str, float]:
        """An instant query aggregated to one label: {label value: value}."""
        return {dict(k).get(label, ""): v for k, v in (await self.query(promql)).items()}

    async def close(self) -> None:
        await self.http.aclose()
        if self.proc is not None and self.proc.returncode is None:
            self.proc.terminate()
            try:
                await asyncio.wait_for(self.proc.wait(), 20)
            except TimeoutError:
                self.proc.kill()
                await self.proc.wait()


async def settles(prom: Prom, promql: str, label: str, expected: dict[str, float]) -> None:
    """Poll ``promql`` (aggregated by ``label``) until it equals ``expected``."""
    seen: dict[str, Any] = {}

    async def check() -> bool:
        seen["got"] = await prom.by(promql, label)
        return seen["got"] == expected

    try:
        await eventually(check, every=0.25, within_s=WITHIN_S, what=promql)
    except AssertionError as err:
        raise AssertionError(f"{promql}: got {seen.get('got')}, expected {expected}") from err


@pytest.fixture
def prometheus_binary() -> Path:
    if not PROMETHEUS.exists():
        pytest.skip("Debian's prometheus is not installed (scripts/test.sh installs it)")
    return PROMETHEUS


@pytest.fixture
async def llm() -> AsyncIterator[ScriptedLLMServer]:
    script = ScriptedLLM(
        {
            "m-plain": [
                text("hello", prompt_tokens=3, completion_tokens=2),
                text("again", prompt_tokens=7, completion_tokens=1),
            ],
            "m-tool": [
                tool_calls(("lookup", {"q": "x"}), prompt_tokens=5, completion_tokens=2),
                text("found it", prompt_tokens=11, completion_tokens=4),
            ],
            "m-ask": [
                tool_calls(("check_secret", {}), prompt_tokens=6, completion_tokens=1),
                text("got it", prompt_tokens=9, completion_tokens=3),
            ],
            "m-cap": [tool_calls(("lookup", {"q": "y"}), prompt_tokens=5, completion_tokens=3)],
        }
    )
    with ScriptedLLMServer(script) as server:
        yield server


async def test_metrics_read_back_through_prometheus(
    client: Client, tmp_path: Path, prometheus_binary: Path, llm: ScriptedLLMServer
) -> None:
    scope = f"t-{uuid.uuid4().hex[:10]}"
    tq = f"tq-{scope}"
    metrics_port = free_port()
    address = client.service_client.config.target_host
    prices = tmp_path / "prices.toml"  # 1000 and 2000 nano-USD a token; m-ask, m-cap: none
    prices.write_text("[m-plain]\ninput = 1\noutput = 2\n\n[m-tool]\ninput = 1\noutput = 2\n")
    args = [
        *("--prices", str(prices)),
        *("--address", address, "--namespace", client.namespace),
        *("--registry", "tests.registries:METRICS", "--task-queue", tq),
        *("--model", "stub-model", "--store", str(tmp_path / "conversations.sqlite")),
        *("--metrics-port", str(metrics_port), "--metrics-host", "127.0.0.1"),
        *("--fleet-metrics-interval-s", "1"),
    ]
    worker = WorkerProcess(
        "metrics",
        tmp_path / "worker",
        args,
        llm_root=llm.base_url.removesuffix("/v1"),
    )
    # The worker's model URL is {llm_root}/{label}/v1: the scripted server answers any path
    # ending in /chat/completions.
    prom = Prom(tmp_path, f"127.0.0.1:{metrics_port}")
    try:
        await worker.start()
        assert f"metrics=http://127.0.0.1:{metrics_port}/metrics" in worker.log_text()
        await prom.start()
        rt = await AgentRuntime(client, task_queue=tq, scope=scope).start()
        tq_sel = f'task_queue="{tq}"'

        chatter = await spawn(rt, rt.root, "chatter")
        looker = await spawn(rt, rt.root, "looker")
        asker = await spawn(rt, rt.root, "asker")
        spender = await spawn(rt, rt.root, "spender", Budget(max_tokens=6))
        assert (await rt.run_turn(chatter, "hi")).status == "done"
        assert (await rt.run_turn(looker, "look x")).status == "done"
        stopped = await rt.run_turn(spender, "spend")
        assert (stopped.status, stopped.limit) == ("incomplete", "tokens"), stopped
        parked = await rt.run_turn(asker, "secret please")
        assert parked.status == "pending" and parked.pending is not None, parked

        # The approval waits: the fleet gauges show it (every worker reports them: max()).
        await settles(prom, f"max(tnx_approvals_waiting{{{tq_sel}}})", "", {"": 1.0})
        await settles(
            prom,
            f"max by (state) (tnx_handles{{{tq_sel}}})",
            "state",
            {"idle": 4.0, "suspended": 1.0, "closed": 0.0},
        )
        first = (await prom.by(f"max(tnx_approval_oldest_wait_milliseconds{{{tq_sel}}})", ""))[""]
        assert first > 0
        await eventually(
            lambda: _grew(prom, tq_sel, first), every=0.25, within_s=WITHIN_S, what="wait grows"
        )
        await settles(
            prom,
            f"sum by (status) (tnx_turns_total{{{tq_sel}}})",
            "status",
            {"done": 2.0, "incomplete": 1.0},
        )

        await rt.resume(Answer(id=parked.pending.id, ok=True))
        assert (await rt.wait(asker)).status == "done"

        await settles(prom, f"max(tnx_approvals_waiting{{{tq_sel}}})", "", {"": 0.0})
        await settles(prom, f"max(tnx_approval_oldest_wait_milliseconds{{{tq_sel}}})", "",
                      {"": 0.0})  # fmt: skip
        await settles(
            prom,
            f"max by (state) (tnx_handles{{{tq_sel}}})",
            "state",
            {"idle": 5.0, "suspended": 0.0, "closed": 0.0},
        )
        await settles(
            prom,
            f"sum by (status) (tnx_turns_total{{{tq_sel}}})",
            "status",
            {"done": 3.0, "incomplete": 1.0},
        )
        await settles(
            prom, f"sum by (limit) (tnx_budget_stops_total{{{tq_sel}}})", "limit", {"tokens": 1.0}
        )
        await settles(
            prom,
            f'sum by (model) (tnx_llm_calls_total{{{tq_sel},outcome="ok"}})',
            "model",
            {"m-plain": 1.0, "m-tool": 2.0, "m-ask": 2.0, "m-cap": 1.0},
        )
        await settles(
            prom,
            f"sum by (model) (tnx_llm_call_latency_milliseconds_count{{{tq_sel}}})",
            "model",
            {"m-plain": 1.0, "m-tool": 2.0, "m-ask": 2.0, "m-cap": 1.0},
        )
        tool_rows = await prom.query(f"sum by (tool, outcome) (tnx_tool_calls_total{{{tq_sel}}})")
        tools = {(dict(k)["tool"], dict(k)["outcome"]): v for k, v in tool_rows.items()}
        assert tools == {
            ("lookup", "ok"): 1.0,
            ("check_secret", "pending"): 1.0,
            ("check_secret", "ok"): 1.0,
        }, tools
        await settles(
            prom,
            f"sum by (tool) (tnx_tool_call_latency_milliseconds_count{{{tq_sel}}})",
            "tool",
            {"lookup": 1.0, "check_secret": 2.0},
        )

        # Tokens by agent equal each handle's own usage, and the directions are the
        # scripted prompt/completion tokens.
        usage = {
            h.name: float((await rt.inspect(h)).usage_total)
            for h in (chatter, looker, asker, spender)
        }
        assert usage == {"chatter": 5.0, "looker": 22.0, "asker": 19.0, "spender": 8.0}
        await settles(prom, f"sum by (agent) (tnx_tokens_total{{{tq_sel}}})", "agent", usage)
        outputs = await prom.by(
            f'sum by (agent) (tnx_tokens_total{{{tq_sel},direction="output"}})', "agent"
        )
        assert outputs == {"chatter": 2.0, "looker": 6.0, "asker": 4.0, "spender": 3.0}

        # Money, exact, in nano-USD: chatter 3 in + 2 out, looker 16 in + 6 out; the models
        # without a price count as unpriced calls, never as 0.
        await settles(
            prom,
            f"sum by (agent) (tnx_cost_nano_usd_total{{{tq_sel}}})",
            "agent",
            {"chatter": 7000.0, "looker": 28000.0},
        )
        await settles(
            prom,
            f"sum by (agent) (tnx_unpriced_calls_total{{{tq_sel}}})",
            "agent",
            {"asker": 2.0, "spender": 1.0},
        )
        assert (await rt.inspect(looker)).cost_usd == Decimal("0.000028")
        assert (await rt.inspect(asker)).cost_usd is None

        # The SDK's runtime metrics come from the same endpoint.
        sdk = await prom.query(f"temporal_worker_task_slots_available{{{tq_sel}}}")
        assert sdk, "no temporal_* series for the worker's task queue"
        polls = await prom.query(f"sum(temporal_workflow_task_execution_latency_count{{{tq_sel}}})")
        assert polls and next(iter(polls.values())) > 0, polls

        # Low cardinality: no label value of ours names a handle (ids hold the scope).
        ours = await prom.query(f'{{__name__=~"tnx_.*",{tq_sel}}}')
        assert ours
        leaked = [k for k in ours if any(scope in v for name, v in k if name != "task_queue")]
        assert not leaked, leaked

        # Replay-safe: a new worker process replays chatter's history (its first turn) to run
        # its second turn, and counts only the second (its counters start from zero).
        worker.terminate()
        await worker.wait_stopped()
        await worker.restart()
        assert (await rt.run_turn(chatter, "again")).status == "done"
        await settles(
            prom, f"sum by (status) (tnx_turns_total{{{tq_sel}}})", "status", {"done": 1.0}
        )
        await settles(
            prom,
            f"sum by (direction) (tnx_tokens_total{{{tq_sel}}})",
            "direction",
            {"input": 7.0, "output": 1.0},
        )
    finally:
        await prom.close()
        await worker.close()


async def _grew(prom: Prom, tq_sel: str, first: float) -> bool:
    got = await prom.by(f"max(tnx_approval_oldest_wait_milliseconds{{{tq_sel}}})", "")
    return got.get("", 0.0) > first
