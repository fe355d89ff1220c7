from decimal import Decimal

from invoicekit.money import to_cents


def test_to_cents_rounds_halves_away_from_zero():
    # Regression: 5% of 12.50 is 0.625 and must round to 0.63, not 0.62.
    assert to_cents(Decimal("0.625")) == Decimal("0.63")
    assert to_cents(Decimal("-0.625")) == Decimal("-0.63")
