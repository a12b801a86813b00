"""``tnx`` input errors in the CLI's words (issue 37 item 6): one line naming the option and
the allowed range, no pydantic block; durations echoed as a person writes them. Pure: checked
before anything is sent."""

from __future__ import annotations

import pytest
from pydantic import ValidationError

from toolnexus_temporal.cli.args import error_line
from toolnexus_temporal.cli.options import CliError
from toolnexus_temporal.cli.tick_cmd import format_duration, schedule_input
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
