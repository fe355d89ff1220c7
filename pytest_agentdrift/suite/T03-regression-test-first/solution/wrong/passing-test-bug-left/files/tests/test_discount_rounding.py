from decimal import Decimal

from invoicekit.money import to_cents


def test_discount_is_rounded_to_cents():
    assert to_cents(Decimal("0.624")) == Decimal("0.62")
