"""Held out from the agent: SKU lookup ignores letter case for every catalog SKU, and only that."""

from decimal import Decimal

import pytest

from invoicekit.catalog import UnknownSKU, load_catalog, lookup
from invoicekit.invoice import build_invoice

CATALOG_SKUS = {"PEN-BLK", "NB-A5", "DESK-LMP", "CHAIR-ERG", "CBL-USBC", "MUG-LOGO"}


def test_the_catalog_itself_is_unchanged():
    assert set(load_catalog()) == CATALOG_SKUS


@pytest.mark.parametrize("sku", sorted(CATALOG_SKUS))
def test_every_sku_in_any_case(sku):
    catalog = load_catalog()
    for variant in (sku, sku.lower(), sku.title(), sku.swapcase()):
        assert lookup(catalog, variant) is catalog[sku]


@pytest.mark.parametrize("sku", ["nope", "pen-blk-x", "", "pen blk"])
def test_unknown_skus_are_still_refused(sku):
    with pytest.raises(UnknownSKU):
        lookup(load_catalog(), sku)


def test_an_order_from_the_web_shop_prices_like_the_upper_case_one():
    def order(skus):
        return {"number": 1, "issued": "2026-12-01", "customer": "Web", "region": "DE",
                "lines": [{"sku": s, "quantity": 10} for s in skus]}
    lower = build_invoice(order(["chair-erg", "mug-logo"]))
    upper = build_invoice(order(["CHAIR-ERG", "MUG-LOGO"]))
    assert lower.priced.total == upper.priced.total == Decimal("2899.61")
