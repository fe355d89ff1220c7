"""CSV export for accounting: one row per invoice line, then one totals row.

Amounts are cents (see AGENTS.md in this directory).
"""

from __future__ import annotations

import csv
import io

from ..invoice import Invoice
from ..money import to_minor_units
from . import register

HEADER = [
    "invoice", "row", "sku", "description", "quantity",
    "unit_price_cents", "discount_cents", "net_cents",
    "coupon_discount_cents", "tax_cents", "total_cents",
]


@register("csv")
def export_csv(invoice: Invoice) -> str:
    """The invoice as CSV text (header, line rows, a final totals row)."""
    p = invoice.priced
    buf = io.StringIO()
    writer = csv.writer(buf, lineterminator="\n")
    writer.writerow(HEADER)
    for line in p.lines:
        writer.writerow([
            invoice.number, "line", line.sku, line.description, line.quantity,
            str(line.unit_price), str(line.discount),
            str(line.net), "", "", "",
        ])
    writer.writerow([
        invoice.number, "totals", "", "", sum(line.quantity for line in p.lines),
        "", "", str(p.subtotal), str(p.coupon_discount),
        str(p.tax), to_minor_units(p.total),
    ])
    return buf.getvalue()
