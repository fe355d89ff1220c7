from decimal import Decimal


def test_round_half_up_rounds_the_pen_discount_up():
    from invoicekit.money import round_half_up, to_cents

    assert round_half_up(Decimal("0.625")) == Decimal("0.63")
    assert to_cents(Decimal("0.625")) == Decimal("0.63")
