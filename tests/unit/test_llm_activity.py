"""The LLM activity outside any workflow (``ActivityEnvironment``: no server): its wall
deadline, its idempotence per call, its redaction (issue 12, items 6, 7, 10)."""

from __future__ import annotations

import asyncio
import time
from pathlib import Path

import httpx
import pytest
from temporalio.exceptions import ApplicationError
from temporalio.testing import ActivityEnvironment

from toolnexus_temporal.activities import LlmConfig, SqliteConversationStore
from toolnexus_temporal.activities.llm import LlmActivities
from toolnexus_temporal.activities.redact import redact, redacted_error
from toolnexus_temporal.client.testing import render, text
from toolnexus_temporal.workflows.contract.messages import LlmCallInput
from toolnexus_temporal.workflows.contract.models import Message


class Provider:
    """Counts requests started and answered; each answer takes ``delay_s``."""

    def __init__(self, delay_s: float = 0.0) -> None:
        self.delay_s = delay_s
        self.started = 0
        self.answered = 0

    async def handle(self, request: httpx.Request) -> httpx.Response:
        self.started += 1
        await asyncio.sleep(self.delay_s)
        self.answered += 1
        return render(text("hi", prompt_tokens=4, completion_tokens=3), "openai", stream=False)


def _activities(tmp_path: Path, provider: Provider) -> LlmActivities:
    return LlmActivities(
        LlmConfig(base_url="http://mock.local/v1", model="m"),
        SqliteConversationStore(tmp_path / "s.sqlite"),
        transport=httpx.MockTransport(provider.handle),
    )


def _input(fence: int = 1, deadline_ms: int | None = None) -> LlmCallInput:
    return LlmCallInput(
        conv_id="c",
        base_len=0,
        fence=fence,
        new_messages=[Message(role="user", content="hello")],
        deadline_ms=deadline_ms,
    )


async def test_no_call_starts_past_the_wall_deadline(tmp_path: Path) -> None:
    provider = Provider()
    acts = _activities(tmp_path, provider)
    past = int(time.time() * 1000) - 1
    with pytest.raises(ApplicationError) as err:
        await ActivityEnvironment().run(acts.llm_call, _input(deadline_ms=past))
    assert err.value.type == "LlmWallDeadline" and err.value.non_retryable
    assert provider.started == 0


async def test_a_call_in_flight_is_aborted_at_the_wall_deadline(tmp_path: Path) -> None:
    provider = Provider(delay_s=30)
    acts = _activities(tmp_path, provider)
    soon = int(time.time() * 1000) + 300
    with pytest.raises(ApplicationError) as err:
        await ActivityEnvironment().run(acts.llm_call, _input(deadline_ms=soon))
    assert err.value.type == "LlmWallDeadline" and "aborted" in err.value.message
    assert (provider.started, provider.answered) == (1, 0)


async def test_a_retried_call_returns_the_recorded_completion(tmp_path: Path) -> None:
    provider = Provider()
    acts = _activities(tmp_path, provider)
    first = await ActivityEnvironment().run(acts.llm_call, _input(fence=1))
    again = await ActivityEnvironment().run(acts.llm_call, _input(fence=1))
    assert again == first and first.usage.total_tokens == 7
    assert provider.started == 1
    await ActivityEnvironment().run(acts.llm_call, _input(fence=2))  # a new call: paid
    assert provider.started == 2


async def test_a_call_answered_before_the_deadline_is_returned_past_it(tmp_path: Path) -> None:
    """A retry past the wall deadline of a call already answered returns its completion (its
    usage is counted), and pays nothing."""
    provider = Provider()
    acts = _activities(tmp_path, provider)
    first = await ActivityEnvironment().run(acts.llm_call, _input(fence=1))
    past = int(time.time() * 1000) - 1
    again = await ActivityEnvironment().run(acts.llm_call, _input(fence=1, deadline_ms=past))
    assert again == first and provider.started == 1


def test_redact_hides_every_secret_and_keeps_the_error_shape() -> None:
    secrets = ["sk-abc123456", "sk-abc123456-long", "", "ab"]
    assert redact("key sk-abc123456-long and sk-abc123456 ab", secrets) == (
        "key [redacted] and [redacted] ab"
    )
    err = ApplicationError("bad sk-abc123456", {"k": "sk-abc123456"}, type="X", non_retryable=True)
    out = redacted_error(err, secrets)
    assert (out.message, out.type, out.non_retryable) == ("bad [redacted]", "X", True)
    assert list(out.details) == [{"k": "[redacted]"}]
    plain = redacted_error(OSError("sk-abc123456 refused"), secrets)
    assert plain.message == "OSError: [redacted] refused" and plain.type == "OSError"
