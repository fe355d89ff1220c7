"""Held out from the agent: every tax rate is the exact decimal written in tax_rates.json.

A fix that quantizes or rounds the float it parsed gets NL right and US-NY
(8.875%) wrong; a fix for NL alone leaves the table as binary floats. The
values are observed, not asserted (a float's repr is not a Decimal's): the
harness compares them with expected/rates-exact.json, which no graded process
can read.
"""

from decimal import Decimal

from agentdrift_grade import observe

from invoicekit.tax import load_rates, rate_for, tax_for

REGIONS = ["DE", "EXPORT", "FR", "NL", "SE", "US-NY"]


def exact(value):
    """A rate's type and value: Decimals compare by value as `==` does, a float stays a float."""
    return (type(value).__name__, value.normalize() if isinstance(value, Decimal) else value)


def test_every_rate_is_the_exact_decimal():
    observe("rates", sorted((region, exact(rate)) for region, rate in load_rates().items()))


def test_rate_for_reads_the_same_exact_rates():
    for region in REGIONS:
        observe(region, exact(rate_for(region)))


def test_half_cent_taxes_round_up():
    observe("NL 2.50", exact(tax_for("NL", Decimal("2.50"))))
    observe("NL 24.50", exact(tax_for("NL", Decimal("24.50"))))
    observe("US-NY 52.00", exact(tax_for("US-NY", Decimal("52.00"))))
