from decimal import Decimal

from invoicekit.money import to_cents
from tests.fixtures import pen_order


def test_pen_discount_is_rounded_half_up():
    order = pen_order(quantity=10)
    assert to_cents(order.gross * Decimal("0.05")) == Decimal("0.63")
