"""cli/supervisor.py without a server: ``--processes`` parsing, and the supervisor's
outcomes with stand-in children (a child that ends on its own is restarted after a backoff,
and past the crash-loop limit the others drain, exit 1; SIGTERM forwarded once, exit 0), and
the pure restart rule. The real worker under it: tests/test_worker_processes.py."""

from __future__ import annotations

import asyncio
import os
import signal
import sys
import time
from collections.abc import Sequence
from pathlib import Path

import pytest

from toolnexus_temporal.cli.supervisor import (
    ProcessesError,
    RestartPolicy,
    describe_exit,
    parse_processes,
    supervise,
    usable_cores,
)
from toolnexus_temporal.worker import worker_identity

# A stand-in worker: once its SIGTERM handler is in place it leaves a file named by its pid in
# the folder argv[1]; it exits 0 on its first SIGTERM (9 if it got more than one), or, as
# process 1 when argv[2] gives a code, exits with that code on its own once every stand-in
# is ready.
CHILD = """
import signal, sys, time, os
got = []
signal.signal(signal.SIGTERM, lambda *_: got.append(1))
open(os.path.join(sys.argv[1], str(os.getpid())), "w").close()
code = sys.argv[2] if len(sys.argv) > 2 else ""
deadline = time.monotonic() + 30
while not got and time.monotonic() < deadline:
    # process 1 of N ends on its own once all N stand-ins are ready
    index, count = os.environ["TNX_WORKER_PROCESS"].split("/")
    if code and index == "1" and len(os.listdir(sys.argv[1])) >= int(count):
        sys.exit(int(code))
    time.sleep(0.01)
sys.exit(0 if len(got) == 1 else 9)
"""


def stand_in(argv: Sequence[str]) -> list[str]:
    return [sys.executable, "-c", CHILD, *argv]


def test_parse_processes() -> None:
    assert parse_processes("auto") == usable_cores() >= 1
    assert parse_processes("AUTO") == usable_cores()
    assert parse_processes("3") == 3
    for bad in ("0", "-1", "two", "1.5", ""):
        with pytest.raises(ProcessesError):
            parse_processes(bad)


def test_describe_exit() -> None:
    assert describe_exit(1) == "exited 1"
    assert describe_exit(-9) == "killed by SIGKILL"


def test_worker_identity_names_the_process() -> None:
    pid = os.getpid()
    assert worker_identity("me@host (tnx)") == f"me@host (tnx) pid {pid}"
    assert worker_identity(f"{pid}@host") == f"{pid}@host"  # the SDK's default already does


def test_the_restart_rule_backs_off_and_gives_up_past_five_in_sixty_seconds() -> None:
    """Issue 36 item 7: 0.5 s, doubling to at most 10 s, for deaths within 60 s; the 6th
    death within 60 s gives up (5 restarts already); deaths older than 60 s are forgotten."""
    rule = RestartPolicy()
    assert (rule.limit, rule.window_s) == (5, 60.0)
    deaths: list[float] = []
    delays = []
    for at in (0.0, 1.0, 2.0, 3.0, 4.0):
        deaths.append(at)
        delays.append(rule.delay(deaths, at))
    assert delays == [0.5, 1.0, 2.0, 4.0, 8.0]
    assert rule.delay([*deaths, 5.0], 5.0) is None  # the 6th within 60 s: a crash loop
    assert rule.delay([*deaths, 59.9], 59.9) is None
    # the first death is 60 s old: 5 in the window, restarted after the 5th step's backoff
    assert rule.delay([*deaths, 60.0], 60.0) == 8.0
    assert rule.delay([*deaths, 200.0], 200.0) == 0.5  # all forgotten
    assert RestartPolicy(first_s=4).delay([0, 1, 2], 2) == 10.0  # capped at max_s


async def test_a_child_crash_looping_is_restarted_then_given_up_exit_1(tmp_path: Path) -> None:
    """Process 1 of 3 ends on its own every time it starts: restarted ``limit`` times (a new
    pid each), then the supervisor gives up and drains the others, exit 1."""
    lines: list[str] = []
    policy = RestartPolicy(limit=2, first_s=0.01)
    run = supervise([str(tmp_path), "3"], 3, echo=lines.append, command=stand_in, policy=policy)
    code = await asyncio.wait_for(run, 60)
    assert code == 1, lines
    one = [line for line in lines if "worker process 1/3" in line]
    assert sum("exited 3 on its own; restarting it in" in line for line in one) == 2, lines
    assert sum(" restarted: pid " in line for line in one) == 2, lines
    assert "not restarted: more than 2 restarts within 60 s" in one[-1], lines
    assert not any("worker process 2/3" in line or "3/3" in line for line in lines), lines
    assert len(os.listdir(tmp_path)) == 5  # 3 processes, and process 1 twice more


ROOT = Path(__file__).resolve().parents[2]

SUPERVISOR = """
import asyncio, sys
from toolnexus_temporal.cli.supervisor import supervise

def stand_in(argv):
    return [sys.executable, "-c", sys.argv[2], *argv]

code = asyncio.run(supervise([sys.argv[1]], 2, echo=lambda line: print(line, flush=True),
                             command=stand_in))
sys.exit(code)
"""


async def test_sigterm_is_forwarded_once_and_every_child_drains_exit_0(tmp_path: Path) -> None:
    """The supervisor runs in a process of its own (a SIGTERM sent to the test process
    itself would end pytest if it came before the handler was in place)."""
    proc = await asyncio.create_subprocess_exec(
        sys.executable,
        *("-c", SUPERVISOR, str(tmp_path), CHILD),
        stdout=asyncio.subprocess.PIPE,
        cwd=ROOT,
    )
    try:
        deadline = time.monotonic() + 60
        while len(os.listdir(tmp_path)) < 2:  # both stand-ins have their handler
            assert time.monotonic() < deadline and proc.returncode is None
            await asyncio.sleep(0.01)
        proc.send_signal(signal.SIGTERM)  # what a process manager sends the supervisor
        out, _ = await asyncio.wait_for(proc.communicate(), 60)
    finally:
        if proc.returncode is None:
            proc.kill()
    lines = out.decode().splitlines()
    assert proc.returncode == 0, lines
    assert "2 worker processes" in lines[0]
    assert any("SIGTERM: 2 worker processes draining" in line for line in lines), lines


def test_each_process_of_n_serves_metrics_on_its_own_port(monkeypatch) -> None:
    """--metrics-port P under --processes N: process i binds P + i - 1; only process 1 reads
    the fleet gauges (docs/guide/scale.md "Metrics of N processes")."""
    from toolnexus_temporal.cli.supervisor import CHILD_ENV
    from toolnexus_temporal.cli.worker_cmd import _process_metrics

    monkeypatch.delenv(CHILD_ENV, raising=False)
    one = _process_metrics(9464, "127.0.0.1", 15)
    assert one is not None and (one.port, one.fleet_interval_s) == (9464, 15)
    monkeypatch.setenv(CHILD_ENV, "1/3")
    first = _process_metrics(9464, "127.0.0.1", 15)
    assert first is not None and (first.port, first.fleet_interval_s) == (9464, 15)
    monkeypatch.setenv(CHILD_ENV, "3/3")
    third = _process_metrics(9464, "127.0.0.1", 15)
    assert third is not None and (third.port, third.fleet_interval_s) == (9466, 0)
    assert _process_metrics(None, "127.0.0.1", 15) is None


def test_metrics_ports_past_65535_are_a_usage_error_before_any_process_starts(
    monkeypatch,
) -> None:
    """--processes 2 --metrics-port 65535 would give process 2 port 65536: the supervisor
    refuses it at once (exit 2, docs/guide/scale.md "What runs"), not after starting process
    1 and seeing process 2 fail."""
    from typer.testing import CliRunner

    from toolnexus_temporal.cli import supervisor, worker_cmd

    def no_supervisor(argv, count):  # pragma: no cover - reached only by the bug
        raise AssertionError("the supervisor started")

    monkeypatch.setattr(worker_cmd, "run_supervisor", no_supervisor)
    monkeypatch.delenv(supervisor.CHILD_ENV, raising=False)
    base = ["--registry", "tests.registries:APPROVALS", "--llm-base-url", "http://x/v1"]
    result = CliRunner().invoke(
        worker_cmd.app, [*base, "--model", "m", "--processes", "2", "--metrics-port", "65535"]
    )
    assert result.exit_code == 2, result.output
    assert "65536" in result.output and "--metrics-port" in result.output, result.output


def test_the_metrics_address_of_an_ipv6_host_is_bracketed() -> None:
    """``--metrics-host ::`` binds ``[::]:P`` and the start line's URL is
    ``http://[::]:P/metrics`` (RFC 3986 brackets), not ``http://:::P/metrics``."""
    from toolnexus_temporal.observability.prometheus import metrics_address

    assert metrics_address("::", 9464) == "[::]:9464"
    assert metrics_address("0.0.0.0", 9464) == "0.0.0.0:9464"
    assert metrics_address("[::1]", 9464) == "[::1]:9464"


def test_processes_over_four_per_core_are_refused() -> None:
    from toolnexus_temporal.cli.supervisor import (
        MAX_PER_CORE,
        ProcessesError,
        parse_processes,
        usable_cores,
    )

    most = MAX_PER_CORE * usable_cores()
    assert parse_processes(str(most)) == most
    with pytest.raises(ProcessesError, match="per core"):
        parse_processes(str(most + 1))
