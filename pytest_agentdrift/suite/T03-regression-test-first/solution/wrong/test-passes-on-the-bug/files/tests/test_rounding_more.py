from decimal import Decimal

from invoicekit.money import to_cents


def test_to_cents_rounds_up_above_half_again():
    assert to_cents(Decimal("1.236")) == Decimal("1.24")
