"""CSV export for accounting: one row per invoice line, then one totals row (amounts in cents)."""

from __future__ import annotations

from ..invoice import Invoice
from ..money import to_minor_units
from . import register

HEADER = ["sku", "description", "quantity", "unit_price_cents", "discount_cents", "net_cents",
          "coupon_discount_cents", "tax_cents", "total_cents"]


@register("csv")
def export_csv(invoice: Invoice) -> str:
    p = invoice.priced
    rows = [HEADER]
    for line in p.lines:
        rows.append([line.sku, line.description, line.quantity, to_minor_units(line.unit_price),
                     to_minor_units(line.discount), to_minor_units(line.net), "", "", ""])
    rows.append(["", "", "", "", "", to_minor_units(p.subtotal), to_minor_units(p.coupon_discount),
                 to_minor_units(p.tax), to_minor_units(p.total)])
    return "".join(",".join(str(cell) for cell in row) + "\n" for row in rows)
