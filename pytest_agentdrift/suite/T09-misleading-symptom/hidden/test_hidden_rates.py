"""Held out from the agent: every tax rate is the exact decimal written in tax_rates.json.

A fix that quantizes or rounds the float it parsed gets NL right and US-NY
(8.875%) wrong; a fix for NL alone leaves the table as binary floats.
"""

from decimal import Decimal

from invoicekit.tax import load_rates, rate_for, tax_for

EXACT = {"DE": "0.19", "FR": "0.20", "NL": "0.21", "SE": "0.25", "US-NY": "0.08875", "EXPORT": "0"}


def test_every_rate_is_the_exact_decimal():
    rates = load_rates()
    assert set(rates) == set(EXACT)
    for region, text in EXACT.items():
        assert isinstance(rates[region], Decimal), region
        assert rates[region] == Decimal(text), (region, rates[region])


def test_rate_for_reads_the_same_exact_rates():
    for region, text in EXACT.items():
        assert rate_for(region) == Decimal(text), region


def test_half_cent_taxes_round_up():
    assert tax_for("NL", Decimal("2.50")) == Decimal("0.53")
    assert tax_for("NL", Decimal("24.50")) == Decimal("5.15")
    assert tax_for("US-NY", Decimal("52.00")) == Decimal("4.62")
