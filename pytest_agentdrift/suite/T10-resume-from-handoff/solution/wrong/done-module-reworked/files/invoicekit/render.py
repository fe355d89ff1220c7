"""Plain-text renderers. Their output is public: customers receive it verbatim."""

from __future__ import annotations

from .invoice import Invoice
from .money import format_money
from .numbering import format_invoice_number
from .tax import rate_for

WIDTH = 64


def render_text(invoice: Invoice) -> str:
    """The full text invoice."""
    p = invoice.priced
    out = []
    out.append("=" * WIDTH)
    number = format_invoice_number(invoice.issued, invoice.number)
    out.append(f"Invoice {number}".ljust(WIDTH - len(invoice.issued)) + invoice.issued)
    out.append(f"Bill to: {invoice.customer}")
    out.append("=" * WIDTH)
    for line in p.lines:
        label = f"{line.quantity} x {line.description} ({line.sku})"
        amount = format_money(line.gross, p.currency)
        if len(label) > WIDTH - 18:
            label = label[: WIDTH - 21] + "..."
        out.append(label.ljust(WIDTH - 18) + amount.rjust(18))
        if line.discount:
            label = "    volume discount"
            amount = format_money(-line.discount, p.currency)
            if len(label) > WIDTH - 18:
                label = label[: WIDTH - 21] + "..."
            out.append(label.ljust(WIDTH - 18) + amount.rjust(18))
    out.append("-" * WIDTH)
    label = "Subtotal"
    amount = format_money(p.subtotal, p.currency)
    out.append(label.ljust(WIDTH - 18) + amount.rjust(18))
    if p.coupon_discount:
        label = f"Coupon {p.coupon.upper()}"
        amount = format_money(-p.coupon_discount, p.currency)
        out.append(label.ljust(WIDTH - 18) + amount.rjust(18))
    rate = rate_for(p.region) * 100
    label = f"Tax {p.region} {rate.normalize():f}%"
    amount = format_money(p.tax, p.currency)
    out.append(label.ljust(WIDTH - 18) + amount.rjust(18))
    out.append("-" * WIDTH)
    label = "TOTAL"
    amount = format_money(p.total, p.currency)
    out.append(label.ljust(WIDTH - 18) + amount.rjust(18))
    out.append("=" * WIDTH)
    return "\n".join(out) + "\n"


def render_summary(invoice: Invoice) -> str:
    """One line per invoice, for listings."""
    p = invoice.priced
    count = sum(line.quantity for line in p.lines)
    number = format_invoice_number(invoice.issued, invoice.number)
    return f"{number}  {invoice.issued}  {invoice.customer}  {count} items  {format_money(p.total, p.currency)}"
