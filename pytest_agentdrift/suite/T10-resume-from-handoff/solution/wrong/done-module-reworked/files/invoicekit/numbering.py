"""Invoice numbers as customers see them: INV-<year>-<6-digit sequence>."""

from __future__ import annotations


def format_invoice_number(issued: str, number: int) -> str:
    """INV-2026-001041 for invoice 1041 issued on 2026-11-02."""
    if number < 0:
        raise ValueError(f"invoice number must not be negative: {number}")
    year = issued[:4]
    return f"INV-{year}-{number:06d}"
