"""Row formatting for the text renderer."""

from decimal import Decimal

from invoicekit.money import format_money

WIDTH = 64
AMOUNT_WIDTH = 18
LABEL_WIDTH = WIDTH - AMOUNT_WIDTH


def truncate(label: str) -> str:
    if len(label) > LABEL_WIDTH:
        return label[: LABEL_WIDTH - 3] + "..."
    return label


def row(label: str, amount: Decimal, currency: str) -> str:
    return label.ljust(LABEL_WIDTH) + format_money(amount, currency).rjust(AMOUNT_WIDTH)
