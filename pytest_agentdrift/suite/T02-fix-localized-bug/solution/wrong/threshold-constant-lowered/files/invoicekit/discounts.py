"""Discount rules: a volume discount per line and one coupon per order."""

from __future__ import annotations

from decimal import Decimal

from .money import ZERO, to_cents

#: Lines of at least this many units get BULK_RATE off.
BULK_THRESHOLD = 9
BULK_RATE = Decimal("0.05")

COUPONS = {
    "WELCOME10": Decimal("0.10"),
    "LOYAL5": Decimal("0.05"),
}


class UnknownCoupon(ValueError):
    pass


def volume_discount(quantity: int, gross: Decimal) -> Decimal:
    """5% off a line of 10 or more units, rounded to cents."""
    if quantity > BULK_THRESHOLD:
        return to_cents(gross * BULK_RATE)
    return ZERO


def coupon_discount(code: str | None, subtotal: Decimal) -> Decimal:
    """The discount a coupon code gives on the order subtotal."""
    if not code:
        return ZERO
    try:
        rate = COUPONS[code.upper()]
    except KeyError:
        raise UnknownCoupon(f"unknown coupon {code!r}") from None
    return to_cents(subtotal * rate)
