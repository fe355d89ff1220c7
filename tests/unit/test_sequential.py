"""Confirm on suspicion (compare/sequential.py): the exact test, the levels fixed in advance, the
stopping rules, night-to-night variation, and the design's false alarms and power on seeded agents."""

from __future__ import annotations

import pytest
from scipy.stats import hypergeom

from pytest_agentdrift.compare import sequential as seq
from pytest_agentdrift.compare.nullsim import FLAKE_CHECK, PoolDesign, pool_rates


@pytest.mark.parametrize("xb,nb,xc,nc", [(0, 30, 3, 3), (1, 30, 4, 8), (6, 30, 12, 24), (2, 60, 1, 3), (5, 5, 3, 3)])
def test_fisher_tail_is_the_hypergeometric_tail(xb, nb, xc, nc):
    expected = hypergeom.sf(xc - 1, nb + nc, xb + xc, nc)
    assert seq.fisher_sf(xb, nb, xc, nc) == pytest.approx(min(1.0, expected), rel=1e-12)


def test_looks_and_levels_spend_at_most_alpha():
    assert seq.plan_looks(3, 24) == (3, 8, 24)
    assert seq.plan_looks(3, 3) == (3,)
    assert seq.plan_looks(1, 2) == (1, 2)
    plan = seq.ConfirmPlan((3, 8, 24), alpha=0.05, tasks=12)
    spent = plan.tasks * sum(plan.level(n) for n in plan.looks) + plan.paired_level
    assert spent == pytest.approx(0.05)
    assert plan.level(24) > plan.level(8) > plan.level(3)  # most alpha where most runs are


def test_a_check_failing_every_run_is_new_at_the_first_look():
    plan = seq.ConfirmPlan((3, 8, 24), alpha=0.05, tasks=12)
    looks = seq.sequence(plan, [["c", "pass rate"]] * 24, {}, 30)
    assert [(x.state, x.runs, x.new) for x in looks] == [(seq.NEW, 3, ("c",))]


def test_nothing_failed_is_clear_and_one_flake_in_a_flaky_pool_stops():
    plan = seq.ConfirmPlan((3, 8, 24), alpha=0.05, tasks=12)
    assert seq.sequence(plan, [[]] * 24, {"c": 2}, 30)[-1].state == seq.CLEAR
    # one failure in three against a pool that fails it a third of the time: not suspicious at all
    assert seq.sequence(plan, [["c"], [], []] + [[]] * 21, {"c": 10}, 30)[-1].state == seq.CLEAR


def test_a_suspicion_buys_runs_up_to_the_cap_and_no_further():
    plan = seq.ConfirmPlan((3, 8, 24), alpha=0.05, tasks=12)
    runs = [["c"] if i % 4 == 0 else [] for i in range(40)]  # fails a quarter of the time, pool a tenth
    looks = seq.sequence(plan, runs, {"c": 3}, 30)
    assert looks[0].state == seq.CONTINUE and looks[-1].runs <= plan.cap
    assert looks[-1].state in (seq.FUTILE, seq.NEW, seq.CLEAR)


def test_night_to_night_variation_is_found_and_makes_runs_count_less():
    steady = [[(1, 3), (0, 3), (1, 3), (0, 3), (0, 3), (1, 3), (0, 3), (1, 3), (0, 3), (0, 3)]] * 6
    bursty = [[(3, 3), (0, 3), (0, 3), (0, 3), (3, 3), (0, 3), (0, 3), (0, 3), (0, 3), (3, 3)]] * 6
    assert seq.dispersion(steady).rho == 0.0
    d = seq.dispersion(bursty)
    assert d.rho > 0.5 and d.p_value < 0.001 and d.base_effect > 2
    plain = seq.Counts("c", 3, 30, 8, 24)
    assert seq.effective(plain, 1.0, 1.0) == plain
    counted = seq.effective(plain, d.base_effect, seq.design_effect(d.rho, 24))
    assert counted.base_runs < 30 and counted.cand_runs < 24


def test_the_design_holds_alpha_and_sees_the_change_at_200_prs():
    """The figures docs/statistics.md reports for 12 tasks, flake 5 %, a pool of 30 runs, k 3 to a cap of 24
    (1,000 PRs each there); at 200 PRs a binomial standard error is about 3 points, so the bounds are the
    measured figures less about two of them."""
    null = pool_rates(PoolDesign(tasks=12, flake=0.05, pool=30, k=3, cap=24), 200)
    new = pool_rates(PoolDesign(tasks=12, flake=0.05, pool=30, k=3, cap=24, change="new"), 200)
    assert null["rate"] <= 0.05
    assert new["rate"] >= 0.75
    assert null["runs"] <= 1.6 * 36 and new["runs"] <= 2.0 * 36
    assert FLAKE_CHECK  # the flaking check is the one change (b) raises
