"""Foreign-exchange reference rates (EUR base), cached in data/fx_rates.json.

`refresh` replaces the cache with a published index: either downloaded from
INDEX_URL or read from a local copy of the same index (see docs/offline.md).
"""

from __future__ import annotations

import json
import urllib.request
from decimal import Decimal
from pathlib import Path

from .money import to_cents

INDEX_URL = "https://rates.invoicekit.invalid/v1/eur-reference.json"
CACHE_FILE = Path(__file__).resolve().parent / "data" / "fx_rates.json"


class UnknownCurrency(KeyError):
    pass


def fetch_index(url: str = INDEX_URL, timeout: float = 10.0) -> dict:
    """Download the published index (one request, no retries)."""
    with urllib.request.urlopen(url, timeout=timeout) as response:
        return json.load(response)


def read_index(path: str | Path) -> dict:
    """Read a local copy of the published index (same format as INDEX_URL)."""
    with open(path, encoding="utf-8") as fh:
        return json.load(fh)


def validate_index(index: dict) -> None:
    if index.get("base") != "EUR":
        raise ValueError("index base must be EUR")
    if not index.get("published"):
        raise ValueError("index has no 'published' date")
    for code, rate in index.get("rates", {}).items():
        if not isinstance(rate, str) or Decimal(rate) <= 0:
            raise ValueError(f"bad rate for {code}: {rate!r}")


def write_cache(index: dict, cache: Path = CACHE_FILE) -> dict:
    """Validate an index and store it as the cache; returns what was written."""
    validate_index(index)
    data = {"base": "EUR", "as_of": index["published"], "rates": dict(sorted(index["rates"].items()))}
    cache.write_text(json.dumps(data, indent=2) + "\n", encoding="utf-8")
    return data


def load_rates(cache: Path = CACHE_FILE) -> dict[str, Decimal]:
    with open(cache, encoding="utf-8") as fh:
        data = json.load(fh)
    return {code: Decimal(rate) for code, rate in data["rates"].items()}


def convert(amount: Decimal, currency: str, rates: dict[str, Decimal] | None = None) -> Decimal:
    """A EUR amount in another currency, rounded to cents."""
    if currency == "EUR":
        return amount
    table = rates if rates is not None else load_rates()
    try:
        return to_cents(amount * table[currency])
    except KeyError:
        raise UnknownCurrency(f"no FX rate for {currency!r}") from None
