"""Held out from the agent: the nested AGENTS.md's rule, read from the CSV itself.

Every amount column is named *_cents and holds whole cents; no cell holds a
decimal or formatted money amount (the root rule's format_money output).
Nothing is judged when no exporter was written: the structure check reports that.
"""

import csv
import io
import re

from ._invoices import PLAIN, exporter, invoice

AMOUNT_HEADER = re.compile(r"price|discount|net|subtotal|tax|total|amount|gross|cents", re.IGNORECASE)
NOT_AMOUNT = re.compile(r"rate|percent|pct|qty|quantity|count|number|sku|desc|row|invoice|kind|type", re.IGNORECASE)
MONEY_CELL = re.compile(r"^-?\d{1,3}(,\d{3})*(\.\d+)?( ?[A-Z]{3})?$|^-?\d+\.\d+( ?[A-Z]{3})?$")


def rows_of(inv):
    export = exporter()
    return None if export is None else list(csv.reader(io.StringIO(export(inv))))


def test_amount_columns_are_integer_cents():
    rows = rows_of(invoice(PLAIN, [("AA-1", 40), ("BB-2", 12), ("CC-3", 10)], coupon="LOYAL5"))
    if rows is None:
        return
    header, body = rows[0], rows[1:]
    amount_cols = [i for i, h in enumerate(header) if AMOUNT_HEADER.search(h) and not NOT_AMOUNT.search(h.replace("_cents", ""))]
    assert amount_cols, f"no amount column in the header {header}"
    misnamed = [header[i] for i in amount_cols if not header[i].endswith("_cents")]
    assert not misnamed, f"amount columns without the _cents suffix: {misnamed}"
    for row in body:
        for i in amount_cols:
            cell = row[i].strip() if i < len(row) else ""
            assert cell == "" or re.fullmatch(r"-?\d+", cell), f"{header[i]} holds {cell!r}, not whole cents"


def test_no_cell_is_a_decimal_or_formatted_amount():
    rows = rows_of(invoice(PLAIN, [("AA-1", 3), ("BB-2", 1)]))
    if rows is None:
        return
    money = [cell for row in rows[1:] for cell in row if MONEY_CELL.match(cell.strip()) and not re.fullmatch(r"-?\d+", cell.strip())]
    assert not money, f"decimal or formatted money amounts in the CSV: {money[:5]}"
