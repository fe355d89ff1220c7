"""The product catalog: SKU -> Product, loaded from data/catalog.json."""

from __future__ import annotations

import json
from dataclasses import dataclass
from decimal import Decimal
from pathlib import Path

from .money import to_decimal

CATALOG_FILE = Path(__file__).resolve().parent / "data" / "catalog.json"


class UnknownSKU(KeyError):
    """Raised when an order names a SKU the catalog does not have."""


@dataclass(frozen=True)
class Product:
    sku: str
    name: str
    unit_price: Decimal


def load_catalog(path: Path | None = None) -> dict[str, Product]:
    with open(path or CATALOG_FILE, encoding="utf-8") as fh:
        raw = json.load(fh)
    return {
        sku: Product(sku=sku, name=entry["name"], unit_price=to_decimal(entry["unit_price"]))
        for sku, entry in raw.items()
    }


def lookup(catalog: dict[str, Product], sku: str) -> Product:
    """The product for a SKU, in any letter case (catalog SKUs are upper case)."""
    try:
        return catalog[sku.upper()]
    except KeyError:
        raise UnknownSKU(f"unknown SKU {sku!r}") from None
