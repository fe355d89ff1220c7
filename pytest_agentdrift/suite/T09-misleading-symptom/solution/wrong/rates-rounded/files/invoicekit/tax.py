"""Sales tax by region, from data/tax_rates.json."""

from __future__ import annotations

import json
from decimal import Decimal
from pathlib import Path

from .money import to_cents

RATES_FILE = Path(__file__).resolve().parent / "data" / "tax_rates.json"


class UnknownRegion(KeyError):
    pass


def load_rates(path: Path | None = None) -> dict[str, Decimal]:
    """Region code -> tax rate as a Decimal fraction (0.19 for 19%)."""
    with open(path or RATES_FILE, encoding="utf-8") as fh:
        raw = json.load(fh)
    return {region: Decimal(str(round(rate, 4))) for region, rate in raw.items()}


def rate_for(region: str, rates: dict[str, Decimal] | None = None) -> Decimal:
    table = rates if rates is not None else load_rates()
    try:
        return table[region]
    except KeyError:
        raise UnknownRegion(f"no tax rate for region {region!r}") from None


def tax_for(region: str, taxable: Decimal, rates: dict[str, Decimal] | None = None) -> Decimal:
    """Tax on a taxable amount, rounded to cents."""
    return to_cents(taxable * rate_for(region, rates))
