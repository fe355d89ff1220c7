from decimal import Decimal

import pytest

from invoicekit.fx import UnknownCurrency, convert, validate_index, write_cache

RATES = {"SEK": Decimal("11.5"), "USD": Decimal("1.05")}


def test_convert():
    assert convert(Decimal("10.00"), "SEK", RATES) == Decimal("115.00")
    assert convert(Decimal("10.00"), "EUR", RATES) == Decimal("10.00")


def test_unknown_currency():
    with pytest.raises(UnknownCurrency):
        convert(Decimal("1"), "JPY", RATES)


def test_validate_index_rejects_float_rates():
    with pytest.raises(ValueError):
        validate_index({"base": "EUR", "published": "2026-01-01", "rates": {"USD": 1.05}})


def test_write_cache(tmp_path):
    cache = tmp_path / "fx.json"
    data = write_cache({"base": "EUR", "published": "2026-01-01", "rates": {"USD": "1.05"}}, cache)
    assert data["as_of"] == "2026-01-01"
    assert cache.read_text().startswith("{")
