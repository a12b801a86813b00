"""``tnx`` and ``tnx-worker`` input errors in the CLI's words (issue 37 item 6): one line naming
the option and the allowed range, no pydantic block and no click usage block; durations echoed
as a person writes them. Pure: checked before anything is sent."""

from __future__ import annotations

import subprocess
import sys
from pathlib import Path

import pytest
from pydantic import ValidationError
from typer.testing import CliRunner, Result

from toolnexus_temporal.cli.args import error_line, parse_budget
from toolnexus_temporal.cli.options import CliError
from toolnexus_temporal.cli.tick_cmd import schedule_input
from toolnexus_temporal.workflows.contract.clock import format_duration
from toolnexus_temporal.workflows.contract.models import InboxItem, TickSpec


@pytest.mark.parametrize(
    ("ms", "text"),
    [(3_600_000, "1h"), (5_400_000, "90m"), (90_000, "90s"), (86_400_000, "1d"), (1_500, "1500ms")],
)
def test_durations_read_as_written(ms: int, text: str) -> None:
    assert format_duration(ms) == text


@pytest.mark.parametrize(
    ("every", "cron", "message"),
    [
        ("0s", None, "--every 0s: must be 1s to 366d"),
        ("999ms", None, "--every 999ms: must be 1s to 366d"),
        ("367d", None, "--every 367d: must be 1s to 366d"),
        ("soon", None, "--every 'soon' is not a duration"),
        (None, "61 * * * *", '--cron: cron expression "61 * * * *" is invalid'),
        (None, "* * *", '--cron: cron expression "* * *" is invalid (it has 3 fields'),
        ("1h", "* * * * *", "give exactly one of --every and --cron"),
        (None, None, "give exactly one of --every and --cron"),
    ],
)
def test_schedule_refusals_are_one_line(every: str | None, cron: str | None, message: str) -> None:
    with pytest.raises(CliError) as caught:
        schedule_input(every, cron, None)
    text = str(caught.value)
    assert text.startswith(message), text
    assert "\n" not in text and "validation error" not in text and "pydantic" not in text


def test_schedule_accepts_the_bounds() -> None:
    assert schedule_input("1s", None, None) == 1.0
    assert schedule_input("366d", None, None) == 366 * 86_400.0
    assert schedule_input(None, "0 9 * * 1", "look") is None
    with pytest.raises(CliError, match="--prompt: at most 64,000 characters"):
        schedule_input("1h", None, "x" * 64_001)


def test_a_validation_error_is_one_line_without_the_model_or_url() -> None:
    with pytest.raises(ValidationError) as caught:
        TickSpec(every_ms=10)
    line = error_line(caught.value)
    assert line.startswith("every_ms: Input should be greater than or equal to 1000"), line
    assert "\n" not in line and "TickSpec" not in line and "errors.pydantic.dev" not in line
    with pytest.raises(ValidationError) as item:
        InboxItem(from_="", channel="c", text="t")
    assert "\n" not in error_line(item.value)


# ---------------------------------------------------------------------------- click's usage errors


def _one_error_line(result: Result) -> str:
    """The one line a refused command printed on stderr (exit 2, nothing on stdout)."""
    lines = result.stderr.splitlines()
    assert result.exit_code == 2 and len(lines) == 1 and result.stdout == "", result.output
    assert lines[0].startswith("error: "), lines
    assert "Usage:" not in lines[0] and "Try '" not in lines[0] and "╭" not in lines[0], lines
    return lines[0].removeprefix("error: ")


@pytest.mark.parametrize(
    ("argv", "line"),
    [
        (["ls", "--interval", "0"], "--interval: must be a number of at least 0.1, got 0"),
        (["ls", "--interval", "soon"], "--interval: must be a number of at least 0.1, got soon"),
        (["wait", "X", "--timeout-ms", "-1"], "--timeout-ms: must be an integer of at least 0"),
        (["replay-check", "--limit", "0"], "--limit: must be an integer of at least 1, got 0"),
        (["server", "start", "--port", "99999"], "--port: must be an integer from 1 to 65535"),
        (["server", "status", "--ui-port", "0"], "--ui-port: must be an integer from 1 to 65535"),
        (["server", "start", "--timeout", "-1"], "--timeout: must be a number of at least 0.1"),
        (["demo", "--port", "65536"], "--port: must be an integer from 1 to 65535, got 65536"),
        (["codec-server", "--port", "-1"], "--port: must be an integer from 0 to 65535, got -1"),
        (["ls", "--bogus"], "--bogus: no such option of tnx ls (see tnx ls --help)"),
        (
            ["ls", "--interva", "3"],
            "--interva: no such option of tnx ls (did you mean --interval?)",
        ),
        (["wait"], "ID: required (see tnx wait --help)"),
        (["fork", "X"], "--turn: required, an integer (see tnx fork --help)"),
        (["fork", "X", "--turn"], "--turn: needs a value"),
        (["ls", "--watch=1"], "--watch: takes no value (a flag)"),
        (["ls", "a", "b"], "b: unexpected argument (usage: tnx ls [OPTIONS] [ID])"),
        (["lss"], "lss: no such command of tnx (commands: demo, codec-server, ls, "),
        (
            ["server", "begin"],
            "begin: no such command of tnx server (commands: start, stop, status)",
        ),
    ],
)
def test_a_usage_error_of_tnx_is_one_line(argv: list[str], line: str) -> None:
    """Issue 37 item 6: a value out of its range, an unknown option or command, a missing
    argument: one line naming the option and what it takes, exit 2, before anything runs
    (it was click's usage block: ``Usage: ...``, ``Try 'tnx ls --help'``, ``Error: Invalid
    value for '--interval': Input should be greater than or equal to 0.1``)."""
    from toolnexus_temporal.cli.app import app

    said = _one_error_line(CliRunner().invoke(app, argv, prog_name="tnx"))
    assert said.startswith(line), said


def test_tnx_prints_the_line_as_a_process() -> None:
    """The console script: the same one line on stderr, exit 2."""
    tnx = Path(sys.executable).parent / "tnx"
    done = subprocess.run(
        [str(tnx), "server", "start", "--port", "99999"],
        capture_output=True,
        text=True,
        timeout=60,
        check=False,
    )
    assert done.returncode == 2 and done.stdout == "", done
    assert done.stderr == "error: --port: must be an integer from 1 to 65535, got 99999\n", done


WORKER = ["--registry", "toolnexus_temporal.cli.demo:REGISTRY"]
"""``tnx-worker`` options that check out, but the LLM's."""

LLM = ["--llm-base-url", "http://127.0.0.1:9/v1", "--model", "m"]


@pytest.mark.parametrize(
    ("argv", "env", "line"),
    [
        (["--model", "m"], {}, "--llm-base-url: required: an OpenAI-compatible base URL"),
        (["--llm-base-url", "http://x/v1"], {}, "--model: required: the model's name (or set"),
        ([*LLM, "--style", "soap"], {}, "--style: must be openai or anthropic, got 'soap'"),
        (LLM, {"TNX_LLM_STYLE": "soap"}, "TNX_LLM_STYLE: must be openai or anthropic, got 'soap'"),
        ([*LLM, "--metrics-port", "0"], {}, "--metrics-port: must be an integer from 1 to 65535"),
        (LLM, {"TNX_METRICS_PORT": "70000"}, "TNX_METRICS_PORT: must be an integer from 1 to"),
        ([*LLM, "--graceful-shutdown-s", "-1"], {}, "--graceful-shutdown-s: must be a number of"),
        ([*LLM, "--bogus"], {}, "--bogus: no such option of tnx-worker (see tnx-worker --help)"),
        ([*LLM, "--processes", "0"], {}, "--processes: must be at least 1, got 0"),  # walk 6
        (["--model", "m", "--llm-base-url", "not a url"], {}, "--llm-base-url: must be an http"),
        # walk 7: a 115-line traceback of worker.py's ValueError
        ([*LLM, "--max-concurrent-turns", "0"], {}, "--max-concurrent-turns: must be an integer"),
        (LLM, {"TNX_MAX_CONCURRENT_TURNS": "-1"}, "TNX_MAX_CONCURRENT_TURNS: must be an integer"),
    ],
)
def test_a_usage_error_of_tnx_worker_names_the_option(
    argv: list[str], env: dict[str, str], line: str, monkeypatch: pytest.MonkeyPatch
) -> None:
    """Issue 37 item 6: ``tnx-worker`` names the option as typed, or the environment variable
    its value came from, and what it takes (it named fields: ``Invalid value for style``)."""
    from toolnexus_temporal.cli import worker_cmd

    for var in ("OPENAI_BASE_URL", "OPENAI_MODEL", "TNX_MODEL", "TNX_LLM_STYLE"):
        monkeypatch.delenv(var, raising=False)
    runner = CliRunner()
    result = runner.invoke(worker_cmd.app, [*WORKER, *argv], env=env, prog_name="tnx-worker")
    said = _one_error_line(result)
    assert said.startswith(line), said


@pytest.mark.parametrize(
    ("raw", "message"),
    [
        ("{bad", "--budget: not valid JSON: Expecting property name enclosed in double quotes"),
        ("[1]", '--budget: must be a JSON object such as {"max_turns": 2} (keys: max_turns,'),
        (
            '{"max_tokenz": 5}',
            '--budget: unknown key "max_tokenz" (allowed: max_turns, max_tokens, '
            "max_tool_calls, max_wall_ms, max_children, max_concurrent, max_depth, "
            "max_cost_usd)",
        ),
        ('{"max_turns": 0}', "--budget: max_turns must be at least 1, got 0"),
        ('{"max_tokens": "many"}', "--budget: max_tokens must be a whole number or null"),
        ('{"max_cost_usd": "cheap"}', "--budget: max_cost_usd must be a decimal number such as"),
    ],
)
def test_budget_refusals_are_in_the_cli_words(raw: str, message: str) -> None:
    """``--budget`` says what is wrong and what it takes (it was pydantic's ``value: Invalid
    JSON: ...``, ``max_tokenz: Extra inputs are not permitted`` with no key listed)."""
    with pytest.raises(CliError) as caught:
        parse_budget(raw)
    assert caught.value.code == 2 and caught.value.message.startswith(message), caught.value
    assert "\n" not in caught.value.message and "Input should" not in caught.value.message
    assert parse_budget('{"max_turns": 2, "max_cost_usd": "0.50"}') is not None


def test_server_start_refuses_one_port_for_both(tmp_path: Path) -> None:
    """Walk 7: ``--port 7741 --ui-port 7741`` printed the server's own JSON bind error, two
    lines naming no option; it is refused before the server starts."""
    from toolnexus_temporal.cli.app import app

    argv = ["server", "start", "--port", "7741", "--ui-port", "7741", "--data-dir", str(tmp_path)]
    result = CliRunner().invoke(app, argv, prog_name="tnx")
    lines = result.output.splitlines()
    assert result.exit_code != 0 and len(lines) == 1, result.output
    assert lines[0] == "error: --ui-port 7741: the same port as --port; the web UI needs its own"
    assert not (tmp_path / "server.log").exists()  # nothing was started
