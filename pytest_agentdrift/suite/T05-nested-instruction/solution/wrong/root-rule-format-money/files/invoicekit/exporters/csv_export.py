"""CSV export for accounting."""

from __future__ import annotations

import csv
import io

from ..invoice import Invoice
from ..money import format_money
from . import register

HEADER = ["sku", "description", "quantity", "unit_price", "discount", "net", "coupon_discount", "tax", "total"]


@register("csv")
def export_csv(invoice: Invoice) -> str:
    p = invoice.priced
    buf = io.StringIO()
    writer = csv.writer(buf, lineterminator="\n")
    writer.writerow(HEADER)
    for line in p.lines:
        writer.writerow([line.sku, line.description, line.quantity, format_money(line.unit_price, p.currency),
                         format_money(line.discount, p.currency), format_money(line.net, p.currency), "", "", ""])
    writer.writerow(["", "", "", "", "", format_money(p.subtotal, p.currency), format_money(p.coupon_discount, p.currency),
                     format_money(p.tax, p.currency), format_money(p.total, p.currency)])
    return buf.getvalue()
