from decimal import Decimal
from pathlib import Path

from invoicekit.invoice import build_invoice, load_order

EXAMPLES = Path(__file__).resolve().parent.parent / "examples"


def test_build_invoice_from_example():
    invoice = build_invoice(load_order(EXAMPLES / "order-basic.json"))
    assert invoice.number == 1041
    assert invoice.customer == "Brightwater Studio GmbH"
    assert invoice.priced.total == Decimal("84.73")



def test_nl_small_order_total():
    # 2 pens to NL: 2.50 net; 21% tax is 0.525, which rounds half up to 0.53
    invoice = build_invoice({
        "number": 9, "issued": "2026-02-01", "customer": "Small Shop",
        "region": "NL", "lines": [{"sku": "PEN-BLK", "quantity": 2}],
    })
    assert invoice.priced.total == Decimal("3.02")
