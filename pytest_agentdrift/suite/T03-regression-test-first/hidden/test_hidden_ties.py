"""Held out from the agent: halves are rounded away from zero, on both signs, at every scale.

A fix that nudges amounts by an epsilon, rounds toward +infinity or only
handles the customer's 0.625 fails here. The values are observed, not
asserted (their repr carries the exponent too): the harness compares them
with expected/half-cent-ties.json, which no graded process can read.
"""

from decimal import Decimal

import pytest
from agentdrift_grade import observe

from invoicekit.discounts import volume_discount
from invoicekit.money import to_cents


@pytest.mark.parametrize("amount", [
    "0.625", "-0.625", "0.005", "-0.005", "2.675", "1.125", "0.015", "1234567.885",
    "0.004999", "1.2349", "1.2351", "-1.2351", "19.90", "3",
])
def test_to_cents_rounds_halves_away_from_zero(amount):
    observe("cents", to_cents(Decimal(amount)))


def test_the_customers_invoice_line():
    # 10 pens at 1.25: 5% of 12.50
    observe("discount", volume_discount(10, Decimal("12.50")))
