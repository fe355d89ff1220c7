from invoicekit.exporters.csv_export import export_csv
from invoicekit.invoice import build_invoice, load_order


def test_totals_in_cents():
    text = export_csv(build_invoice(load_order("examples/order-export.json")))
    assert text.splitlines()[-1].endswith(",32799")
