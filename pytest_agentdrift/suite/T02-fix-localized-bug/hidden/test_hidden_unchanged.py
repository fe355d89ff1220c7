"""Held out from the agent: what the bug fix must leave alone in invoicekit/discounts.py.

allowed-paths.txt can only say which files may change; these pin the
behaviour of that file that has nothing to do with the threshold.
"""

from decimal import Decimal

import pytest

from invoicekit import discounts
from invoicekit.discounts import COUPONS, UnknownCoupon, coupon_discount


def test_the_coupon_table_is_unchanged():
    assert COUPONS == {"WELCOME10": Decimal("0.10"), "LOYAL5": Decimal("0.05")}


@pytest.mark.parametrize("code, subtotal, expected", [
    ("WELCOME10", "50.00", "5.00"),
    ("welcome10", "0.05", "0.01"),
    ("LOYAL5", "2959.14", "147.96"),
    ("Loyal5", "70.37", "3.52"),
    (None, "50.00", "0"),
    ("", "50.00", "0"),
])
def test_coupon_discounts_are_unchanged(code, subtotal, expected):
    assert coupon_discount(code, Decimal(subtotal)) == Decimal(expected)


@pytest.mark.parametrize("code", ["FREE", "BULK20", "WELCOME", "SAVE10"])
def test_unknown_coupons_are_still_refused(code):
    with pytest.raises(UnknownCoupon):
        coupon_discount(code, Decimal("10.00"))


def test_the_volume_rate_is_unchanged():
    assert discounts.BULK_RATE == Decimal("0.05")
