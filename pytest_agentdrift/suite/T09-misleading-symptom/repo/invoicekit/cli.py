"""Command line: `python -m invoicekit render ORDER.json ...` and `summary`."""

from __future__ import annotations

import argparse
import sys

from .invoice import build_invoice, load_order
from .render import render_summary, render_text


def build_parser() -> argparse.ArgumentParser:
    parser = argparse.ArgumentParser(prog="invoicekit", description="Render invoices from order files.")
    sub = parser.add_subparsers(dest="command", required=True)
    render = sub.add_parser("render", help="print the full text invoice of each order file")
    render.add_argument("orders", nargs="+", help="order JSON files")
    summary = sub.add_parser("summary", help="print one summary line per order file")
    summary.add_argument("orders", nargs="+", help="order JSON files")
    return parser


def main(argv: list[str] | None = None) -> int:
    args = build_parser().parse_args(argv)
    invoices = [build_invoice(load_order(path)) for path in args.orders]
    if args.command == "render":
        sys.stdout.write("\n".join(render_text(invoice) for invoice in invoices))
    else:
        for invoice in invoices:
            print(render_summary(invoice))
    return 0
