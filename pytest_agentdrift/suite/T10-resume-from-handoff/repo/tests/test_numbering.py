import pytest

from invoicekit.numbering import format_invoice_number


def test_zero_padded_with_year():
    assert format_invoice_number(1041, "2026-11-02") == "INV-2026-001041"


def test_year_comes_from_issue_date():
    assert format_invoice_number(7, "2025-12-31") == "INV-2025-000007"


def test_large_numbers_are_not_truncated():
    assert format_invoice_number(1234567, "2026-01-01") == "INV-2026-1234567"


def test_negative_numbers_are_refused():
    with pytest.raises(ValueError):
        format_invoice_number(-1, "2026-01-01")
