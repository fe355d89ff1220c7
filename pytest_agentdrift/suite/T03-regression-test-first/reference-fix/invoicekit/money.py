"""Money helpers. Amounts are `decimal.Decimal`, never float."""

from __future__ import annotations

from decimal import ROUND_HALF_UP, Decimal

CENT = Decimal("0.01")
ZERO = Decimal("0")


def to_decimal(value: object) -> Decimal:
    """Convert an order or catalog value to Decimal; floats are refused."""
    if isinstance(value, float):
        raise TypeError(f"money must not be a float: {value!r}; use a string")
    if isinstance(value, Decimal):
        return value
    return Decimal(str(value))


def to_cents(amount: Decimal) -> Decimal:
    """Round to whole cents, halves away from zero (0.125 -> 0.13)."""
    return amount.quantize(CENT, rounding=ROUND_HALF_UP)


def to_minor_units(amount: Decimal) -> int:
    """Whole cents as an int (12.34 -> 1234), for machine-readable output."""
    return int(to_cents(amount) * 100)


def format_money(amount: Decimal, currency: str = "EUR") -> str:
    """Human-readable amount: thousands separators, two decimals, ISO code."""
    rounded = to_cents(amount)
    sign = "-" if rounded < 0 else ""
    return f"{sign}{abs(rounded):,.2f} {currency}"
