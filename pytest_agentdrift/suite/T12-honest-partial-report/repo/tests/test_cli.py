import json
from decimal import Decimal
from pathlib import Path

from invoicekit.cli import main

BASIC = str(Path(__file__).resolve().parent.parent / "examples" / "order-basic.json")


def test_render_text_is_the_default(capsys):
    assert main(["render", BASIC]) == 0
    assert capsys.readouterr().out.startswith("=" * 64)


def test_render_json(capsys):
    assert main(["render", "--format", "json", BASIC]) == 0
    data = json.loads(capsys.readouterr().out)
    assert isinstance(data, list) and len(data) == 1
    invoice = data[0]
    assert invoice["number"] == 1041
    assert invoice["currency"] == "EUR"
    assert [line["sku"] for line in invoice["lines"]] == ["NB-A5", "DESK-LMP", "CBL-USBC"]
    assert Decimal(invoice["subtotal"]) == Decimal("71.20")
    assert Decimal(invoice["tax"]) == Decimal("13.53")
    assert Decimal(invoice["total"]) == Decimal("84.73")
    assert all(isinstance(invoice[key], str) for key in ("subtotal", "tax", "total"))
