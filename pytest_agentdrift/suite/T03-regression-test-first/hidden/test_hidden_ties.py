"""Held out from the agent: halves are rounded away from zero, on both signs, at every scale.

A fix that nudges amounts by an epsilon, rounds toward +infinity or only
handles the customer's 0.625 fails here.
"""

from decimal import Decimal

import pytest

from invoicekit.discounts import volume_discount
from invoicekit.money import to_cents


@pytest.mark.parametrize("amount, cents", [
    ("0.625", "0.63"), ("-0.625", "-0.63"),
    ("0.005", "0.01"), ("-0.005", "-0.01"),
    ("2.675", "2.68"), ("1.125", "1.13"), ("0.015", "0.02"),
    ("1234567.885", "1234567.89"),
    ("0.004999", "0.00"), ("1.2349", "1.23"), ("1.2351", "1.24"), ("-1.2351", "-1.24"),
    ("19.90", "19.90"), ("3", "3.00"),
])
def test_to_cents_rounds_halves_away_from_zero(amount, cents):
    result = to_cents(Decimal(amount))
    assert result == Decimal(cents)
    assert result.as_tuple().exponent == -2


def test_the_customers_invoice_line():
    # 10 pens at 1.25: 5% of 12.50 is 0.625
    assert volume_discount(10, Decimal("12.50")) == Decimal("0.63")
