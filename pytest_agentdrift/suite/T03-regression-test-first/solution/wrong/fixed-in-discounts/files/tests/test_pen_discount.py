from decimal import Decimal

from invoicekit.discounts import volume_discount


def test_ten_pens_get_a_63_cent_discount():
    assert volume_discount(10, Decimal("12.50")) == Decimal("0.63")
