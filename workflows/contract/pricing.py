"""What an LLM call costs in money (issue 34 item 4): the price table a worker is given
(``LlmConfig(prices=...)`` or ``tnx-worker --prices FILE``, read by
``activities/pricing.py``) and the arithmetic that turns one call's reported usage into a
:class:`~toolnexus_temporal.workflows.contract.models.Cost` (the LLM activity prices each
call with it; the workflow only adds costs up).

Prices are USD per million tokens, exact decimals of at most 6 places, so a call's cost is
an exact decimal of at most 12 places (``Decimal``, no float anywhere): a year of turns adds
up to the cent the provider bills. Cached input is counted once: ``Usage.prompt_tokens``
holds every input token and ``cached_tokens`` / ``cache_write_tokens`` the parts read from
or written to the provider's cache (``wire.py`` maps both wire styles onto that shape), so
the fresh input is ``prompt - cached - written``, each part at its own rate. A model
missing from the table is unpriced: its call's cost is unknown (``Cost(unpriced=1)``), never
0.

Pure functions and models, deterministic and I/O free.
"""

from __future__ import annotations

from collections.abc import Mapping
from decimal import Context, Decimal
from typing import Annotated

from pydantic import BaseModel, ConfigDict, Field, TypeAdapter, ValidationError

from toolnexus_temporal.workflows.contract.models import Cost, Usage

PerMillion = Annotated[Decimal, Field(ge=0, decimal_places=6)]
"""A price: USD per million tokens, at least 0, at most 6 decimal places."""

_EXACT = Context(prec=60)
"""Products and sums of prices and token counts, well within 60 digits: exact."""


class ModelPrice(BaseModel):
    """The price of one model, in USD per million tokens (exact decimals, at most 6 places;
    a float such as ``0.15`` is read as the decimal it prints as).

    Attributes:
        input: fresh (uncached) input tokens.
        output: output (completion) tokens.
        cached_input: input tokens read from the provider's cache (None: the ``input``
            rate, so an omitted discount never undercounts).
        cache_write: input tokens written to the cache (Anthropic's
            ``cache_creation_input_tokens``; None: the ``input`` rate).

    Raises:
        pydantic.ValidationError: a negative price, more than 6 decimal places, an unknown
            field.
    """

    model_config = ConfigDict(extra="forbid", frozen=True)

    input: PerMillion
    output: PerMillion
    cached_input: PerMillion | None = None
    cache_write: PerMillion | None = None


PriceTable = Mapping[str, ModelPrice]
"""Model name (as sent to the provider) → its price."""

_TABLE: TypeAdapter[dict[str, ModelPrice]] = TypeAdapter(dict[str, ModelPrice])


def price_of(usage: Usage, price: ModelPrice | None) -> Cost:
    """The cost of one call's ``usage`` (tokens) at ``price``.

    Input tokens are split once: ``cached_tokens`` at ``cached_input``, ``cache_write_tokens``
    at ``cache_write``, the rest of ``prompt_tokens`` at ``input``; ``completion_tokens`` at
    ``output``. Parts larger than the prompt are capped by it (a provider's inconsistent
    report never counts a token twice).

    Returns:
        ``Cost(priced_usd=...)``, exact; ``Cost(unpriced=1)`` when ``price`` is None.
    """
    if price is None:
        return Cost(unpriced=1)
    prompt = max(usage.prompt_tokens, 0)
    cached = min(max(usage.cached_tokens, 0), prompt)
    written = min(max(usage.cache_write_tokens, 0), prompt - cached)
    fresh = prompt - cached - written
    parts = (
        (fresh, price.input),
        (cached, price.input if price.cached_input is None else price.cached_input),
        (written, price.input if price.cache_write is None else price.cache_write),
        (max(usage.completion_tokens, 0), price.output),
    )
    total = Decimal(0)
    for tokens, rate in parts:
        total = _EXACT.add(total, _EXACT.multiply(Decimal(tokens), rate))
    return Cost(priced_usd=total.scaleb(-6, _EXACT))


def priced(usage: Usage, model: str, prices: PriceTable) -> Usage:
    """``usage`` with its cost at ``model``'s price in ``prices`` (unpriced when absent)."""
    return usage.model_copy(update={"cost": price_of(usage, prices.get(model))})


def parse_prices(data: object, source: str = "prices") -> dict[str, ModelPrice]:
    """A price table from decoded JSON or TOML: ``{"model": {"input": ..., "output": ...,
    "cached_input": ..., "cache_write": ...}}`` (a TOML file: one table per model).

    Raises:
        ValueError: one line naming ``source``, the model and the field at fault.
    """
    try:
        return _TABLE.validate_python(data)
    except ValidationError as err:
        first = err.errors()[0]
        where = ".".join(str(p) for p in first["loc"])
        raise ValueError(f"{source}: {where}: {first['msg']}") from None
