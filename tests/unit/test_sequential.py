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
    assert seq.ConfirmPlan(3, 24, 0.05, 12).looks == (3, 8, 24)
    assert seq.ConfirmPlan(3, 3, 0.05, 12).looks == (3,)
    assert seq.ConfirmPlan(1, 2, 0.05, 12).looks == (1, 2)
    plan = seq.ConfirmPlan(3, 24, alpha=0.05, tasks=12)
    for screened in (1, 4, 12):
        spent = screened * sum(plan.level(screened, n) for n in plan.looks[1:]) + plan.paired_level
        assert spent == pytest.approx(0.05)
    assert plan.level(2, 24) > plan.level(2, 8)  # most alpha where most runs are


POOL = seq.Pool({"c": 0}, 30)


def test_the_screen_reads_only_the_candidate():
    plan = seq.ConfirmPlan(3, 24, 0.05, 12)
    assert seq.sequence(plan, 1, [[], ["pass rate"], []] * 8, POOL)[-1].state == seq.SCREENED_OUT
    assert seq.sequence(plan, 1, [["c"], [], []] + [[]] * 21, POOL)[0].state == seq.CONTINUE


def test_a_check_failing_every_confirming_run_is_new_at_the_first_confirming_look():
    plan = seq.ConfirmPlan(3, 24, 0.05, 12)
    looks = seq.sequence(plan, 1, [["c", "pass rate"]] * 24, POOL)
    assert [(x.state, x.runs, x.new) for x in looks] == [(seq.CONTINUE, 3, ()), (seq.NEW, 8, ("c",))]


def test_confirming_runs_that_fail_nothing_clear_the_task():
    plan = seq.ConfirmPlan(3, 24, 0.05, 12)
    looks = seq.sequence(plan, 1, [["c"], [], []] + [[]] * 21, seq.Pool({"c": 2}, 30))
    assert looks[-1].state == seq.CLEAR and looks[-1].runs == 8


def test_a_suspicion_buys_runs_up_to_the_cap_and_no_further():
    plan = seq.ConfirmPlan(3, 24, 0.05, 12)
    runs = [["c"] if i % 4 == 0 else [] for i in range(40)]  # a quarter of the time; the pool a tenth
    looks = seq.sequence(plan, 2, runs, seq.Pool({"c": 3}, 30))
    assert looks[-1].runs <= plan.cap and looks[-1].state in (seq.FUTILE, seq.NEW, seq.CLEAR)
    assert seq.runs_wanted(plan, 2, runs[:3], seq.Pool({"c": 3}, 30)) == 8


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
    """docs/statistics.md's figures for 12 tasks, flake 5 %, a pool of 30 runs, k 3 to a cap of 24, nights
    independent (1,000 PRs each there): false alarms 0.1 %, power 82 % (a) and 66 % (b), 54 runs per unchanged
    and 64 per changed PR. At 200 PRs a binomial standard error is about 3 points: the bounds are the
    measured figures less about 2.5 of them, and the runs within 10 % of the measured means."""
    null = pool_rates(PoolDesign(tasks=12, flake=0.05, pool=30, k=3, cap=24), 200)
    new = pool_rates(PoolDesign(tasks=12, flake=0.05, pool=30, k=3, cap=24, change="new"), 200)
    flake = pool_rates(PoolDesign(tasks=12, flake=0.05, pool=30, k=3, cap=24, change="flake"), 200)
    assert null["rate"] <= 0.05
    assert new["rate"] >= 0.75 and flake["rate"] >= 0.58
    assert null["runs"] <= 1.1 * 54 and max(new["runs"], flake["runs"]) <= 1.1 * 64
    assert FLAKE_CHECK  # the flaking check is the one change (b) raises
