"""Invoices for the hidden CSV tests, built with catalogs of their own."""

import importlib
from decimal import Decimal

from invoicekit.catalog import Product
from invoicekit.invoice import build_invoice

PLAIN = {
    "AA-1": Product("AA-1", "Plain widget", Decimal("1.25")),
    "BB-2": Product("BB-2", "Office chair", Decimal("249.99")),
    "CC-3": Product("CC-3", "Mug", Decimal("6.50")),
}
# a description a hand-built CSV cannot carry: a comma and double quotes
AWKWARD = {
    "Q-1": Product("Q-1", 'Lamp "Nova", brass', Decimal("12.34")),
    "Q-2": Product("Q-2", "Cable; 2 m", Decimal("0.99")),
}
RATES = {"NL": Decimal("0.21"), "DE": Decimal("0.19")}


def invoice(catalog, lines, region="NL", coupon=None):
    order = {"number": 3001, "issued": "2026-12-01", "customer": "Hidden Test B.V.", "region": region,
             "lines": [{"sku": sku, "quantity": qty} for sku, qty in lines]}
    if coupon:
        order["coupon"] = coupon
    return build_invoice(order, catalog, RATES)


def exporter():
    """export_csv, or None when the agent wrote no such module."""
    try:
        module = importlib.import_module("invoicekit.exporters.csv_export")
    except ImportError:
        return None
    return getattr(module, "export_csv", None)
