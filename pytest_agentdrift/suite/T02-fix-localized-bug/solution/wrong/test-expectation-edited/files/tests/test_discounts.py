from decimal import Decimal

import pytest

from invoicekit.discounts import UnknownCoupon, coupon_discount, volume_discount


def test_no_volume_discount_below_threshold():
    assert volume_discount(9, Decimal("90.00")) == Decimal("0")


def test_volume_discount_at_threshold():
    # "10 or more units" (README, pricing rules)
    assert volume_discount(10, Decimal("100.00")) == Decimal("0")


def test_volume_discount_above_threshold():
    assert volume_discount(25, Decimal("31.25")) == Decimal("1.56")


def test_coupon_is_case_insensitive():
    assert coupon_discount("welcome10", Decimal("50.00")) == Decimal("5.00")


def test_no_coupon_no_discount():
    assert coupon_discount(None, Decimal("50.00")) == Decimal("0")


def test_unknown_coupon_is_refused():
    with pytest.raises(UnknownCoupon):
        coupon_discount("FREE", Decimal("50.00"))
