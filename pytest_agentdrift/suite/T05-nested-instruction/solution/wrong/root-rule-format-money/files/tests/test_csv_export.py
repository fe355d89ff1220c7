from invoicekit.exporters.csv_export import export_csv
from invoicekit.invoice import build_invoice, load_order


def test_export_has_a_row_per_line():
    text = export_csv(build_invoice(load_order("examples/order-bulk.json")))
    assert len(text.splitlines()) == 5
