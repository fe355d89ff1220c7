from pathlib import Path

import pytest

from invoicekit.invoice import build_invoice, load_order
from invoicekit.render import WIDTH, render_summary, render_text

EXAMPLES = Path(__file__).resolve().parent.parent / "examples"


def invoice(name):
    return build_invoice(load_order(EXAMPLES / name))


def test_amount_lines_and_rules_have_the_same_width():
    lines = render_text(invoice("order-bulk.json")).splitlines()
    for line in lines[:2] + lines[3:]:
        assert len(line) == WIDTH, line


@pytest.mark.skip(reason="header format pending")
def test_header_and_total():
    text = render_text(invoice("order-basic.json"))
    assert "Invoice INV-2026-001041" in text.splitlines()[1]
    assert text.splitlines()[-2].endswith("84.73 EUR")


def test_long_descriptions_are_truncated():
    text = render_text(invoice("order-export.json"))
    assert "Ergonomic office chair with lumbar supp..." in text


def test_summary_line():
    assert render_summary(invoice("order-basic.json")) == (
        "INV-2026-001041  2026-11-02  Brightwater Studio GmbH  6 items  84.73 EUR"
    )
