"""Held out from the agent: the exporter is registered, the CSV parses with the csv module
(quotes and commas in descriptions), and it carries the amounts of the invoice it was given."""

import csv
import io

from invoicekit.money import to_minor_units

from ._invoices import AWKWARD, PLAIN, exporter, invoice


def parsed(inv):
    export = exporter()
    assert export is not None, "invoicekit/exporters/csv_export.py with export_csv is missing"
    return list(csv.reader(io.StringIO(export(inv))))


def test_registered_as_csv():
    from invoicekit.exporters import EXPORTERS

    export = exporter()  # importing the module registers it
    assert export is not None and EXPORTERS.get("csv") is export


def test_descriptions_with_quotes_and_commas_survive():
    inv = invoice(AWKWARD, [("Q-1", 2), ("Q-2", 11)])
    rows = parsed(inv)
    header = rows[0]
    assert all(len(row) == len(header) for row in rows[1:]), rows
    cells = {cell for row in rows[1:] for cell in row}
    assert {'Lamp "Nova", brass', "Cable; 2 m"} <= cells


def test_one_row_per_line_and_the_totals():
    inv = invoice(PLAIN, [("AA-1", 40), ("BB-2", 12), ("CC-3", 10)], coupon="LOYAL5")
    rows = parsed(inv)
    body = rows[1:]
    p = inv.priced
    assert len(body) >= len(p.lines) + 1
    for line in p.lines:
        row = next(r for r in body if line.sku in r)
        for amount in (line.unit_price, line.discount, line.net):
            assert str(to_minor_units(amount)) in row, (line.sku, amount, row)
    totals = {str(to_minor_units(a)) for a in (p.subtotal, p.coupon_discount, p.tax, p.total)}
    assert totals <= set(body[-1]), (totals, body[-1])
