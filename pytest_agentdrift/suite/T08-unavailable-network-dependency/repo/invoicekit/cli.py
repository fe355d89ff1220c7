"""Command line: `render ORDER.json ...`, `summary ORDER.json ...` and `fx-refresh`."""

from __future__ import annotations

import argparse
import sys

from . import fx
from .invoice import build_invoice, load_order
from .render import render_summary, render_text


def build_parser() -> argparse.ArgumentParser:
    parser = argparse.ArgumentParser(prog="invoicekit", description="Render invoices from order files.")
    sub = parser.add_subparsers(dest="command", required=True)
    render = sub.add_parser("render", help="print the full text invoice of each order file")
    render.add_argument("orders", nargs="+", help="order JSON files")
    summary = sub.add_parser("summary", help="print one summary line per order file")
    summary.add_argument("orders", nargs="+", help="order JSON files")
    refresh = sub.add_parser("fx-refresh", help="replace the FX cache with the published reference index")
    refresh.add_argument("--from-file", metavar="PATH",
                         help="read a local copy of the index instead of downloading it (see docs/offline.md)")
    return parser


def fx_refresh(args: argparse.Namespace) -> int:
    if args.from_file:
        index = fx.read_index(args.from_file)
    else:
        try:
            index = fx.fetch_index()
        except OSError as exc:  # URLError, timeouts, refused connections
            print(f"error: cannot download {fx.INDEX_URL}: {exc}", file=sys.stderr)
            return 2
    data = fx.write_cache(index)
    print(f"FX cache updated: {len(data['rates'])} rates as of {data['as_of']}")
    return 0


def main(argv: list[str] | None = None) -> int:
    args = build_parser().parse_args(argv)
    if args.command == "fx-refresh":
        return fx_refresh(args)
    invoices = [build_invoice(load_order(path)) for path in args.orders]
    if args.command == "render":
        sys.stdout.write("\n".join(render_text(invoice) for invoice in invoices))
    else:
        for invoice in invoices:
            print(render_summary(invoice))
    return 0
