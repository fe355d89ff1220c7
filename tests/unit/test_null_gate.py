"""The regression gate's false-alarm rate is held at alpha on a flaky agent, and measured.

Seeded random agents (compare/nullsim.py) run through the real comparison. The
bound is asserted as a test a violation would fail: the observed false alarms
must not be significantly above alpha (one-sided exact binomial test at 1 %),
and the same measurement does flag a design that breaks the bound.
"""

from __future__ import annotations

import pytest

from pytest_agentdrift.compare.nullsim import Design, gate_rates

pytestmark = pytest.mark.slow

PAIRS = 200
ALPHA = 0.05


def above_alpha(count: int) -> float:
    """p-value of 'the false-alarm rate is above alpha' given count alarms in PAIRS pairs."""
    from scipy.stats import binomtest  # here: scipy costs every xdist worker seconds at collection

    return binomtest(count, PAIRS, ALPHA, alternative="greater").pvalue


def test_default_design_holds_the_false_alarm_bound_on_a_20_percent_flaky_agent():
    # the documented default: baseline k = 5, pull request k = 3, flakes policy strict
    rates = gate_rates(Design(tasks=12, flake=0.2, base_k=5, cand_k=3), PAIRS, seed=1)
    assert above_alpha(rates["false_alarms"]) > 0.01, rates
    assert rates["false_alarms"] / PAIRS <= ALPHA, rates


def test_the_measurement_flags_a_design_that_cannot_tell_flakes_from_changes():
    # k = 1 on the pull request cannot tell a 20 % flake from a change: strict blocks them all
    strict = gate_rates(Design(tasks=12, flake=0.2, base_k=5, cand_k=1), PAIRS, seed=2)
    assert above_alpha(strict["false_alarms"]) < 1e-6, strict
    # the report policy lists them instead, and the bound holds again
    report = gate_rates(Design(tasks=12, flake=0.2, base_k=5, cand_k=1, flakes="report"), PAIRS, seed=2)
    assert report["false_alarms"] / PAIRS <= ALPHA, report
