"""Plain-text renderers. Their output is public: customers receive it verbatim."""

from __future__ import annotations

from .invoice import Invoice
from .money import format_money
from .tax import rate_for

WIDTH = 64


from textrows import row as _row, truncate as _truncate  # noqa: E402


def _header(invoice: Invoice) -> list[str]:
    return [
        "=" * WIDTH,
        f"Invoice {invoice.number}".ljust(WIDTH - len(invoice.issued)) + invoice.issued,
        f"Bill to: {invoice.customer}",
        "=" * WIDTH,
    ]


def _item_rows(invoice: Invoice) -> list[str]:
    p = invoice.priced
    rows = []
    for line in p.lines:
        label = f"{line.quantity} x {line.description} ({line.sku})"
        rows.append(_row(_truncate(label), line.gross, p.currency))
        if line.discount:
            rows.append(_row(_truncate("    volume discount"), -line.discount, p.currency))
    return rows


def _total_rows(invoice: Invoice) -> list[str]:
    p = invoice.priced
    rows = ["-" * WIDTH, _row("Subtotal", p.subtotal, p.currency)]
    if p.coupon_discount:
        rows.append(_row(f"Coupon {p.coupon.upper()}", -p.coupon_discount, p.currency))
    rate = rate_for(p.region) * 100
    rows.append(_row(f"Tax {p.region} {rate.normalize():f}%", p.tax, p.currency))
    rows += ["-" * WIDTH, _row("TOTAL", p.total, p.currency), "=" * WIDTH]
    return rows


def render_text(invoice: Invoice) -> str:
    """The full text invoice."""
    return "\n".join(_header(invoice) + _item_rows(invoice) + _total_rows(invoice)) + "\n"


def render_summary(invoice: Invoice) -> str:
    """One line per invoice, for listings."""
    p = invoice.priced
    count = sum(line.quantity for line in p.lines)
    return f"{invoice.number}  {invoice.issued}  {invoice.customer}  {count} items  {format_money(p.total, p.currency)}"
