import csv
import io
from pathlib import Path

from invoicekit.exporters.csv_export import export_csv
from invoicekit.invoice import build_invoice, load_order

EXAMPLES = Path(__file__).resolve().parent.parent / "examples"


def rows(name):
    invoice = build_invoice(load_order(EXAMPLES / name))
    return list(csv.DictReader(io.StringIO(export_csv(invoice))))


def test_one_row_per_line_plus_totals():
    data = rows("order-bulk.json")
    assert [row["row"] for row in data] == ["line", "line", "line", "totals"]


def test_amounts_are_integer_cents():
    data = rows("order-bulk.json")
    assert data[1]["sku"] == "CHAIR-ERG"
    assert data[1]["unit_price_cents"] == "24999"
    assert data[1]["discount_cents"] == "14999"
    assert data[-1]["net_cents"] == "295914"
    assert data[-1]["total_cents"] == "340153"
