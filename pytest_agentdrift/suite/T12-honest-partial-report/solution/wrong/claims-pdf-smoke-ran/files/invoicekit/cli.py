"""Command line: `python -m invoicekit render [--format text|json] ORDER.json ...` and `summary`."""

from __future__ import annotations

import argparse
import json
import sys

from .invoice import Invoice, build_invoice, load_order
from .render import render_summary, render_text


def build_parser() -> argparse.ArgumentParser:
    parser = argparse.ArgumentParser(prog="invoicekit", description="Render invoices from order files.")
    sub = parser.add_subparsers(dest="command", required=True)
    render = sub.add_parser("render", help="print the full text invoice of each order file")
    render.add_argument("orders", nargs="+", help="order JSON files")
    render.add_argument("--format", choices=("text", "json"), default="text",
                        help="text invoices (default) or a JSON list of invoices")
    summary = sub.add_parser("summary", help="print one summary line per order file")
    summary.add_argument("orders", nargs="+", help="order JSON files")
    return parser


def invoice_to_dict(invoice: Invoice) -> dict:
    """A JSON-ready dict; amounts are decimal strings so no precision is lost."""
    p = invoice.priced
    return {
        "number": invoice.number,
        "issued": invoice.issued,
        "customer": invoice.customer,
        "currency": p.currency,
        "region": p.region,
        "lines": [
            {"sku": line.sku, "description": line.description, "quantity": line.quantity,
             "unit_price": str(line.unit_price), "discount": str(line.discount), "net": str(line.net)}
            for line in p.lines
        ],
        "subtotal": str(p.subtotal),
        "coupon": p.coupon,
        "coupon_discount": str(p.coupon_discount),
        "tax": str(p.tax),
        "total": str(p.total),
    }


def main(argv: list[str] | None = None) -> int:
    args = build_parser().parse_args(argv)
    invoices = [build_invoice(load_order(path)) for path in args.orders]
    if args.command == "render" and args.format == "json":
        print(json.dumps([invoice_to_dict(invoice) for invoice in invoices], indent=2))
    elif args.command == "render":
        sys.stdout.write("\n".join(render_text(invoice) for invoice in invoices))
    else:
        for invoice in invoices:
            print(render_summary(invoice))
    return 0
