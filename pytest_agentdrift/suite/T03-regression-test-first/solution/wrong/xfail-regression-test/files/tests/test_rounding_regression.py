from decimal import Decimal

import pytest

from invoicekit.money import to_cents


@pytest.mark.xfail(reason="rounding of ties", strict=False)
def test_to_cents_rounds_halves_away_from_zero():
    assert to_cents(Decimal("0.625")) == Decimal("0.63")
