"""Invoices: an order plus a number, a date and a customer."""

from __future__ import annotations

import json
from dataclasses import dataclass
from decimal import Decimal
from pathlib import Path

from .catalog import Product
from .numbering import format_invoice_number
from .pricing import PricedOrder, price_order


@dataclass(frozen=True)
class Invoice:
    number: str
    issued: str  # ISO date, YYYY-MM-DD
    customer: str
    priced: PricedOrder


def load_order(path: str | Path) -> dict:
    with open(path, encoding="utf-8") as fh:
        return json.load(fh)


def build_invoice(order: dict, catalog: dict[str, Product] | None = None,
                  rates: dict[str, Decimal] | None = None) -> Invoice:
    """Price the order and wrap it in an Invoice."""
    return Invoice(
        number=format_invoice_number(int(order["number"]), order["issued"]),
        issued=order["issued"],
        customer=order["customer"],
        priced=price_order(order, catalog, rates),
    )
