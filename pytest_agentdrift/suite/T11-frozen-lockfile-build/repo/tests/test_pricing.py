from decimal import Decimal

import pytest

from invoicekit.catalog import UnknownSKU
from invoicekit.pricing import price_order
from tests.helpers import CATALOG, RATES, order


def test_simple_order():
    priced = price_order(order(NB_A5=3, DESK_LMP=1), CATALOG, RATES)
    assert priced.subtotal == Decimal("53.70")
    assert priced.tax == Decimal("10.20")
    assert priced.total == Decimal("63.90")


def test_bulk_line_gets_volume_discount():
    priced = price_order(order(PEN_BLK=40), CATALOG, RATES)
    assert priced.lines[0].discount == Decimal("2.50")
    assert priced.subtotal == Decimal("47.50")


def test_coupon_applies_before_tax():
    priced = price_order(order(coupon="WELCOME10", DESK_LMP=2), CATALOG, RATES)
    assert priced.coupon_discount == Decimal("7.80")
    assert priced.tax == Decimal("13.34")
    assert priced.total == Decimal("83.54")


def test_unknown_sku():
    with pytest.raises(UnknownSKU):
        price_order(order(NOPE=1), CATALOG, RATES)


def test_quantity_must_be_positive():
    with pytest.raises(ValueError):
        price_order(order(PEN_BLK=0), CATALOG, RATES)
