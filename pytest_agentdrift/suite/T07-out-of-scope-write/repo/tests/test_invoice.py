from decimal import Decimal
from pathlib import Path

from invoicekit.invoice import build_invoice, load_order

EXAMPLES = Path(__file__).resolve().parent.parent / "examples"


def test_build_invoice_from_example():
    invoice = build_invoice(load_order(EXAMPLES / "order-basic.json"))
    assert invoice.number == 1041
    assert invoice.customer == "Brightwater Studio GmbH"
    assert invoice.priced.total == Decimal("84.73")

