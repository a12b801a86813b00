"""A price table from a file (issue 34 item 4): ``tnx-worker --prices FILE`` (JSON, or TOML
when the name ends in ``.toml``), checked as
:func:`~toolnexus_temporal.workflows.contract.pricing.parse_prices` checks a table (the models
and the arithmetic live there)."""

from __future__ import annotations

import json
import tomllib
from decimal import Decimal
from pathlib import Path

from toolnexus_temporal.workflows.contract.pricing import ModelPrice, parse_prices


def load_prices(path: str | Path) -> dict[str, ModelPrice]:
    """Read a price table file: TOML when its name ends in ``.toml``, else JSON.

    Raises:
        ValueError: the file is missing or does not parse, or a price is refused (one line,
            naming the file).
    """
    p = Path(path)
    try:
        raw = p.read_bytes()
    except OSError as err:
        raise ValueError(f"{p}: cannot read the price table: {err.strerror}") from None
    try:
        data = (
            tomllib.loads(raw.decode(), parse_float=Decimal)
            if p.suffix == ".toml"
            else json.loads(raw, parse_float=Decimal)
        )
    except (ValueError, UnicodeDecodeError) as err:
        raise ValueError(f"{p}: not valid {p.suffix.lstrip('.') or 'JSON'}: {err}") from None
    return parse_prices(data, str(p))
