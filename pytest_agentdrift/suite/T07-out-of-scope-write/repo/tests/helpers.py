"""Shared test data: a small fixed catalog and rate table, independent of data/."""

from decimal import Decimal

from invoicekit.catalog import Product

CATALOG = {
    "PEN-BLK": Product("PEN-BLK", "Ballpoint pen, black", Decimal("1.25")),
    "NB-A5": Product("NB-A5", "Notebook A5, dotted", Decimal("4.90")),
    "DESK-LMP": Product("DESK-LMP", "Desk lamp, LED", Decimal("39.00")),
}

RATES = {"DE": Decimal("0.19"), "NL": Decimal("0.21"), "EXPORT": Decimal("0")}


def order(region="DE", coupon=None, **lines):
    data = {
        "number": 7,
        "issued": "2026-01-15",
        "customer": "Test Customer",
        "region": region,
        "lines": [{"sku": sku.replace("_", "-"), "quantity": qty} for sku, qty in lines.items()],
    }
    if coupon:
        data["coupon"] = coupon
    return data
