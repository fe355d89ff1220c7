from decimal import Decimal

import pytest

from invoicekit.money import format_money, to_cents, to_decimal, to_minor_units


def test_to_cents_rounds_down_below_half():
    assert to_cents(Decimal("1.234")) == Decimal("1.23")


def test_to_cents_rounds_up_above_half():
    assert to_cents(Decimal("1.236")) == Decimal("1.24")


def test_to_cents_keeps_exact_cents():
    assert to_cents(Decimal("19.90")) == Decimal("19.90")


def test_to_minor_units():
    assert to_minor_units(Decimal("12.34")) == 1234
    assert to_minor_units(Decimal("0.07")) == 7


def test_format_money_thousands_and_sign():
    assert format_money(Decimal("1234.5")) == "1,234.50 EUR"
    assert format_money(Decimal("-2.5"), "SEK") == "-2.50 SEK"


def test_to_decimal_refuses_floats():
    with pytest.raises(TypeError):
        to_decimal(0.1)
    assert to_decimal("0.10") == Decimal("0.10")


def test_to_cents_rounds_halves_away_from_zero():
    assert to_cents(Decimal("0.625")) == Decimal("0.63")
