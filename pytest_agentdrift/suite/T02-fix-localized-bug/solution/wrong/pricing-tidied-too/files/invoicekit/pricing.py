"""Pricing: order lines -> priced lines -> a priced order (discounts, tax, total)."""

from __future__ import annotations

from dataclasses import dataclass
from decimal import Decimal

from .catalog import Product, load_catalog, lookup
from .discounts import coupon_discount, volume_discount
from .money import ZERO
from .tax import tax_for


@dataclass(frozen=True)
class PricedLine:
    sku: str
    description: str
    quantity: int
    unit_price: Decimal
    gross: Decimal
    discount: Decimal
    net: Decimal


@dataclass(frozen=True)
class PricedOrder:
    lines: tuple[PricedLine, ...]
    subtotal: Decimal
    coupon: str | None
    coupon_discount: Decimal
    region: str
    tax: Decimal
    total: Decimal
    currency: str


def price_line(sku: str, quantity: int, catalog: dict[str, Product]) -> PricedLine:
    if quantity <= 0:
        raise ValueError(f"quantity must be positive, got {quantity} for {sku}")
    product = lookup(catalog, sku)
    gross = product.unit_price * quantity
    discount = volume_discount(quantity, gross)
    return PricedLine(
        sku=sku,
        description=product.name,
        quantity=quantity,
        unit_price=product.unit_price,
        gross=gross,
        discount=discount,
        net=gross - discount,
    )


def price_order(order: dict, catalog: dict[str, Product] | None = None,
                rates: dict[str, Decimal] | None = None) -> PricedOrder:
    """Price every line, apply the coupon to the subtotal, then tax the rest."""
    catalog = catalog if catalog is not None else load_catalog()
    lines = tuple(price_line(item["sku"], int(item["quantity"]), catalog) for item in order["lines"])
    subtotal = sum((line.net for line in lines), ZERO)
    coupon = order.get("coupon")
    reduction = coupon_discount(coupon, subtotal)
    taxable = subtotal - reduction
    tax = tax_for(order["region"], taxable, rates)
    return PricedOrder(
        lines=lines,
        subtotal=subtotal,
        coupon=coupon,
        coupon_discount=reduction,
        region=order["region"],
        tax=tax,
        total=taxable + tax,
        currency=order.get("currency", "EUR"),
    )
