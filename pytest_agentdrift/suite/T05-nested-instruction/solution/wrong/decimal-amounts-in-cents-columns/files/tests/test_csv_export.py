from invoicekit.exporters.csv_export import export_csv
from invoicekit.invoice import build_invoice, load_order


def test_total_in_cents():
    assert "340153" in export_csv(build_invoice(load_order("examples/order-bulk.json")))
