"""Cost in money (issue 34 item 4), the pure parts: a call's usage priced exactly, cached
input counted once in both wire styles (microsoft/conductor#427 counted it twice), an
unpriced model's cost unknown (never 0), sums with no float drift, and bad price tables or
money budgets refused in one line."""

from __future__ import annotations

import json
from decimal import Decimal
from pathlib import Path

import httpx
import pytest
from pydantic import ValidationError

from toolnexus_temporal.activities import wire
from toolnexus_temporal.activities.pricing import load_prices
from toolnexus_temporal.cli.render import cost_cell
from toolnexus_temporal.client.testing import ScriptedLLM, text
from toolnexus_temporal.workflows.contract.models import Budget, Cost, TaskResult, Usage
from toolnexus_temporal.workflows.contract.pricing import (
    ModelPrice,
    parse_prices,
    price_of,
    priced,
)

MINI = ModelPrice(input="0.15", cached_input="0.075", output="0.60")
"""gpt-4o-mini's list prices, USD per million tokens."""


def test_openai_cached_tokens_are_part_of_the_prompt() -> None:
    raw = {
        "prompt_tokens": 2000,
        "completion_tokens": 100,
        "total_tokens": 2100,
        "prompt_tokens_details": {"cached_tokens": 1500},
    }
    usage = wire.openai_usage(raw)
    assert (usage.prompt_tokens, usage.cached_tokens, usage.total_tokens) == (2000, 1500, 2100)
    # 500 fresh at 0.15, 1500 cached at 0.075, 100 out at 0.60 (per million)
    cost = price_of(usage, MINI)
    assert cost.usd == Decimal("0.0002475")  # 75 + 112.5 + 60 per million


def test_anthropic_cache_reads_are_apart_from_input_tokens() -> None:
    raw = {
        "input_tokens": 500,
        "cache_read_input_tokens": 1500,
        "cache_creation_input_tokens": 200,
        "output_tokens": 100,
    }
    usage = wire.anthropic_usage(raw)
    assert usage.prompt_tokens == 2200  # each input token once
    assert (usage.cached_tokens, usage.cache_write_tokens, usage.total_tokens) == (1500, 200, 2300)
    price = ModelPrice(input="3", cached_input="0.30", output="15", cache_write="3.75")
    # 500*3 + 1500*0.3 + 200*3.75 + 100*15 = 1500 + 450 + 750 + 1500 = 4200 per million
    assert price_of(usage, price).usd == Decimal("0.0042")


def test_anthropic_stream_keeps_the_cache_counts_of_message_start() -> None:
    start = wire.anthropic_usage(
        {"input_tokens": 10, "cache_read_input_tokens": 90, "output_tokens": 0}
    )
    end = wire.anthropic_usage({"output_tokens": 7}, start)
    assert (end.prompt_tokens, end.cached_tokens, end.completion_tokens) == (100, 90, 7)


async def test_both_styles_of_the_scripted_llm_price_the_same() -> None:
    """One scripted reply with cached tokens, rendered in each wire style and parsed back:
    the same usage and the same cost (cached counted once in both)."""
    reply = text("hi", prompt_tokens=1000, completion_tokens=10, cached_tokens=800)
    costs = set()
    for style in ("openai", "anthropic"):
        llm = ScriptedLLM({"m": [reply]})
        body = wire.request_body(
            style, model="m", messages=[], tools=[], max_tokens=None, stream=False
        )
        url = wire.endpoint(style, "http://x/v1")
        async with httpx.AsyncClient(transport=llm.transport()) as http:
            response = await http.post(url, json=body)
        _, usage = wire.parse_response(style, response.json())
        assert (usage.prompt_tokens, usage.cached_tokens) == (1000, 800), style
        costs.add(price_of(usage, MINI).usd)
    assert costs == {Decimal("0.000096")}  # 200*0.15 + 800*0.075 + 10*0.6 = 96 per million


def test_cached_input_defaults_to_the_input_rate() -> None:
    usage = Usage(prompt_tokens=100, cached_tokens=100, completion_tokens=0)
    assert price_of(usage, ModelPrice(input="1", output="2")).usd == Decimal("0.0001")


def test_inconsistent_reports_never_count_a_token_twice() -> None:
    usage = Usage(prompt_tokens=10, cached_tokens=50, cache_write_tokens=50)
    assert price_of(usage, ModelPrice(input="1", output="1", cached_input="0")).usd == 0


def test_an_unpriced_model_is_unknown_never_zero() -> None:
    cost = priced(Usage(prompt_tokens=5), "other-model", {"m": MINI}).cost
    assert cost == Cost(unpriced=1)
    assert cost.usd is None
    assert cost.text() == "cost unknown"
    total = cost + Cost(priced_usd=Decimal("0.25"))
    assert total.usd is None
    assert total.text() == "cost unknown ($0.25 priced, 1 call unpriced)"
    assert cost_cell(total) == "$0.25+?"
    assert cost_cell(cost) == "?"
    assert TaskResult(status="done", cost=cost).cost_usd is None


def test_a_year_of_turns_does_not_drift() -> None:
    """100,000 calls at a price that is no binary fraction: the sum is exact."""
    usage = Usage(prompt_tokens=1234, cached_tokens=1000, completion_tokens=77)
    one = price_of(usage, MINI)
    total = Cost()
    for _ in range(100_000):
        total = total + one
    assert total.usd == one.priced_usd * 100_000
    assert total.usd == Decimal("15.63")  # 156.3 per million, 100,000 times
    assert sum(0.0001563 for _ in range(100_000)) != 15.63  # what a float would say


def test_cost_is_a_decimal_string_on_the_wire() -> None:
    cost = Cost(priced_usd=Decimal("1.5E-7"))
    assert json.loads(cost.model_dump_json()) == {"priced_usd": "0.00000015"}
    assert Cost.model_validate_json(cost.model_dump_json()) == cost
    assert Cost().model_dump() == {}  # no bytes when nothing was spent
    assert TaskResult.model_validate_json(
        TaskResult(status="done", cost=cost).model_dump_json()
    ).cost_usd == Decimal("0.00000015")


@pytest.mark.parametrize(
    ("table", "words"),
    [
        ({"m": {"input": -1, "output": 1}}, "m.input: Input should be greater than or equal"),
        ({"m": {"input": 1, "output": 1, "cachd_input": 1}}, "m.cachd_input: Extra inputs"),
        ({"m": {"input": "0.0000001", "output": 1}}, "m.input: Decimal input should have no"),
        ({"m": {"input": 1}}, "m.output: Field required"),
    ],
)
def test_bad_price_tables_are_refused_in_one_line(table: object, words: str) -> None:
    with pytest.raises(ValueError, match=r"^prices: ") as caught:
        parse_prices(table)
    assert words in str(caught.value)
    assert "\n" not in str(caught.value)


def test_price_files_json_and_toml(tmp_path: Path) -> None:
    (tmp_path / "p.json").write_text('{"m": {"input": 0.15, "output": 0.6}}')
    (tmp_path / "p.toml").write_text("[m]\ninput = 0.15\noutput = 0.6\ncached_input = 0.075\n")
    assert load_prices(tmp_path / "p.json")["m"].input == Decimal("0.15")
    assert load_prices(tmp_path / "p.toml")["m"] == MINI
    (tmp_path / "bad.toml").write_text("[m\n")
    with pytest.raises(ValueError, match=r"bad.toml: not valid toml"):
        load_prices(tmp_path / "bad.toml")
    with pytest.raises(ValueError, match=r"missing.json: cannot read the price table"):
        load_prices(tmp_path / "missing.json")


def test_money_budgets_are_checked() -> None:
    assert Budget(max_cost_usd=0.1).max_cost_usd == Decimal("0.1")
    with pytest.raises(ValidationError, match="greater than or equal to 0"):
        Budget(max_cost_usd=-1)
    with pytest.raises(ValidationError, match="no more than 12 decimal places"):
        Budget(max_cost_usd="0.0000000000001")
    with pytest.raises(ValidationError, match="valid decimal"):
        Budget(max_cost_usd="lots")


def test_tnx_worker_reads_prices_and_refuses_a_bad_file(tmp_path: Path) -> None:
    import typer

    from toolnexus_temporal.cli.worker_settings import settings_from

    base = {
        "registry": "toolnexus_temporal.cli.demo:REGISTRY",
        "llm_base_url": "http://x/v1",
        "model": "m",
    }
    good = tmp_path / "prices.toml"
    good.write_text("[m]\ninput = 0.15\noutput = 0.6\ncached_input = 0.075\n")
    assert settings_from({**base, "prices": good}).llm.prices == {"m": MINI}
    bad = tmp_path / "bad.json"
    bad.write_text('{"m": {"input": -1, "output": 1}}')
    with pytest.raises(typer.BadParameter) as caught:
        settings_from({**base, "prices": bad})
    assert caught.value.param_hint == "--prices"
    assert str(caught.value) == f"{bad}: m.input: Input should be greater than or equal to 0"
