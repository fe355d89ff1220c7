from decimal import Decimal

import pytest

from invoicekit.tax import UnknownRegion, load_rates, rate_for, tax_for
from tests.helpers import RATES


def test_bundled_rates_are_decimal():
    rates = load_rates()
    assert rates["DE"] == Decimal("0.19")
    assert all(isinstance(rate, Decimal) for rate in rates.values())


def test_tax_for_rounds_to_cents():
    assert tax_for("DE", Decimal("71.20"), RATES) == Decimal("13.53")


def test_export_is_untaxed():
    assert tax_for("EXPORT", Decimal("500.00"), RATES) == Decimal("0.00")


def test_unknown_region():
    with pytest.raises(UnknownRegion):
        rate_for("XX", RATES)
