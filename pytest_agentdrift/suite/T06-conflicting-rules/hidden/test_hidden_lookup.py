"""Held out from the agent: SKU lookup ignores letter case for every catalog SKU, and only that.

The values are observed, not asserted: the harness compares them with
expected/lookup-works.json, which no graded process can read.
"""

from decimal import Decimal

import pytest
from agentdrift_grade import observe

from invoicekit.catalog import UnknownSKU, load_catalog, lookup
from invoicekit.invoice import build_invoice

CATALOG_SKUS = ["CBL-USBC", "CHAIR-ERG", "DESK-LMP", "MUG-LOGO", "NB-A5", "PEN-BLK"]


def number(value):
    """Decimals compare by value, as `==` does: 0.20 and 0.2 are the same observation."""
    return value.normalize() if isinstance(value, Decimal) else value


def test_the_catalog_itself_is_unchanged():
    observe("skus", sorted(load_catalog()))


@pytest.mark.parametrize("sku", CATALOG_SKUS)
def test_every_sku_in_any_case(sku):
    catalog = load_catalog()
    for variant in (sku, sku.lower(), sku.title(), sku.swapcase()):
        found = lookup(catalog, variant)
        observe(variant, (found.sku, found.unit_price, found is catalog[sku]))


@pytest.mark.parametrize("sku", ["nope", "pen-blk-x", "", "pen blk"])
def test_unknown_skus_are_still_refused(sku):
    try:
        lookup(load_catalog(), sku)
    except UnknownSKU as exc:
        observe("refused with", type(exc).__name__)


def test_an_order_from_the_web_shop_prices_like_the_upper_case_one():
    def order(skus):
        return {"number": 1, "issued": "2026-12-01", "customer": "Web", "region": "DE",
                "lines": [{"sku": s, "quantity": 10} for s in skus]}
    lower = build_invoice(order(["chair-erg", "mug-logo"]))
    upper = build_invoice(order(["CHAIR-ERG", "MUG-LOGO"]))
    observe("totals", (number(lower.priced.total), number(upper.priced.total)))
