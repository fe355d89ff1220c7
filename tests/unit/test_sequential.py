"""Confirm on suspicion (compare/sequential.py): the exact test, the levels fixed in advance, the
stopping rules, night-to-night variation, and the design's false alarms and power on seeded agents."""

from __future__ import annotations

import random

import pytest
from scipy.stats import betabinom, binom, hypergeom

from pytest_agentdrift.compare import sequential as seq
from pytest_agentdrift.compare.nullsim import FLAKE_CHECK, PoolDesign, pool_rates


@pytest.mark.parametrize("xb,nb,xc,nc", [(0, 30, 3, 3), (1, 30, 4, 8), (6, 30, 12, 24), (2, 60, 1, 3), (5, 5, 3, 3)])
def test_fisher_tail_is_the_hypergeometric_tail(xb, nb, xc, nc):
    expected = hypergeom.sf(xc - 1, nb + nc, xb + xc, nc)
    assert seq.fisher_sf(xb, nb, xc, nc) == pytest.approx(min(1.0, expected), rel=1e-12)


@pytest.mark.parametrize("xb,nb,xc,nc", [(0, 30, 3, 3), (1, 30, 4, 8), (6, 30, 12, 24), (2, 30, 8, 21), (3, 30, 9, 21)])
def test_boschloo_rejects_whenever_fisher_does(xb, nb, xc, nc):
    assert seq.exceed_p(xb, nb, xc, nc) <= seq.fisher_sf(xb, nb, xc, nc) + 1e-12


def test_boschloo_holds_its_level_whatever_the_common_rate():
    """Exact: for every common failure rate, the chance of a p-value below the level is at most the level
    (enumerated over every table of a 10-run pool and 6 confirming runs)."""
    from scipy.stats import binom

    nb, nc, level = 10, 6, 0.05
    rejecting = [(xb, xc) for xb in range(nb + 1) for xc in range(nc + 1) if seq.exceed_p(xb, nb, xc, nc) < level]
    assert rejecting  # the test can reject at all
    for rate in [i / 100 for i in range(1, 100)]:
        size = sum(binom.pmf(xb, nb, rate) * binom.pmf(xc, nc, rate) for xb, xc in rejecting)
        assert size <= level * (1 + 1e-6), rate


def test_looks_and_levels_spend_at_most_alpha():
    assert seq.ConfirmPlan(3, 30, 0.05, 12).looks == (3, 5, 9, 15, 23, 30)
    assert seq.ConfirmPlan(3, 24, 0.05, 12).looks == (3, 5, 9, 15, 24)  # no batch of one run before the cap
    assert seq.ConfirmPlan(5, 8, 0.05, 12).looks == (5, 8)
    assert seq.ConfirmPlan(3, 3, 0.05, 12).looks == (3,)
    assert seq.ConfirmPlan(1, 2, 0.05, 12).looks == (1, 2)
    assert seq.growth_looks(3, 24) == (3, 5, 8, 12, 18, 24)  # the looks of records written before
    for spending in (1.0, 3.0):
        plan = seq.ConfirmPlan(3, 30, alpha=0.05, tasks=12, spending=spending)
        for screened in (1, 4, 12):
            spent = screened * sum(plan.level(screened, n) for n in plan.looks[1:]) + plan.paired_level
            assert spent == pytest.approx(0.05)
    plan = seq.ConfirmPlan(3, 30, alpha=0.05, tasks=12)
    assert plan.level(2, 30) > plan.level(2, 23) > plan.level(2, 15) > plan.level(2, 5)  # most at the cap
    assert plan.level(2, 30) > 0.5 * (0.05 - plan.paired_level) / 2  # t ** 3: over half the share at the cap


def test_the_screen_reads_the_candidate_against_its_pool():
    plan = seq.ConfirmPlan(3, 30, 0.05, 12)
    once, twice = [["c"], [], []], [["c"], ["c"], []]
    rare, flaky = seq.Pool({"c": 1}, 30), seq.Pool({"c": 6}, 30)  # 3 % and 20 % of the nightly runs
    assert seq.screened(once, rare) and seq.screened(once, seq.Pool({}, 30))
    assert not seq.screened(once, flaky) and seq.screened(twice, flaky)
    assert seq.screened(once, flaky, None) and seq.screened(once)  # no level, no pool: any failure
    assert seq.screen_needs(plan, 6, 30) == 2 and seq.screen_needs(plan, 0, 30) == 1
    assert seq.screen_needs(plan, 30, 30) is None  # a check failing every night: no count stands out
    assert seq.sequence(plan, 1, once + [[]] * 27, flaky) == [seq.Look(seq.SCREENED_OUT, 3)]


POOL = seq.Pool({"c": 0}, 30)


def test_a_failed_pass_rate_alone_does_not_screen():
    plan = seq.ConfirmPlan(3, 24, 0.05, 12)
    assert seq.sequence(plan, 1, [[], ["pass rate"], []] * 8, POOL)[-1].state == seq.SCREENED_OUT
    assert seq.sequence(plan, 1, [["c"], [], []] + [[]] * 21, POOL)[0].state == seq.CONTINUE


def test_a_check_failing_every_confirming_run_is_new_once_the_spending_allows():
    # the first look (two confirming runs) spends almost nothing, so two failures in two are not enough
    # there; six in six are, at the next
    plan = seq.ConfirmPlan(3, 30, 0.05, 12)
    looks = seq.sequence(plan, 1, [["c", "pass rate"]] * 30, POOL)
    assert [(x.state, x.runs, x.new) for x in looks] == [
        (seq.CONTINUE, 3, ()),
        (seq.CONTINUE, 5, ()),
        (seq.NEW, 9, ("c",)),
    ]


def test_confirming_runs_that_fail_nothing_clear_the_task():
    plan = seq.ConfirmPlan(3, 30, 0.05, 12)
    looks = seq.sequence(plan, 1, [["c"], [], []] + [[]] * 27, seq.Pool({"c": 2}, 30))
    # each clean confirming run is twice as likely under the pool's rate as under half the runs: two are
    # not enough (4 < 20), six are (64)
    assert [(x.state, x.runs) for x in looks] == [(seq.CONTINUE, 3), (seq.CONTINUE, 5), (seq.CLEAR, 9)]


def test_a_check_the_screen_failed_stays_a_question_while_confirming_runs_are_clean():
    plan = seq.ConfirmPlan(3, 30, 0.05, 12)
    looks = seq.sequence(plan, 1, [["c"], [], []] + [[]] * 27, seq.Pool({}, 30))
    assert looks[1].state == seq.CONTINUE and looks[1].odds == 4.0
    assert looks[-1].state == seq.CLEAR and looks[-1].runs == 9


def test_a_suspicion_buys_runs_up_to_the_cap_and_no_further():
    plan = seq.ConfirmPlan(3, 24, 0.05, 12)
    runs = [["c"] if i % 4 == 0 else [] for i in range(40)]  # a quarter of the time; the pool a tenth
    looks = seq.sequence(plan, 2, runs, seq.Pool({"c": 3}, 30))
    assert looks[-1].runs <= plan.cap and looks[-1].state in (seq.FUTILE, seq.NEW, seq.CLEAR)
    assert seq.runs_wanted(plan, 2, runs[:3], seq.Pool({"c": 3}, 30)) == 5


def test_the_futility_stop_costs_at_most_its_bound_against_half_the_runs():
    """Ville's inequality: a task failing in half its runs is stopped without blocking in at most 5 % of
    sequences, however the looks fall (seeded; 2,000 sequences, the bound plus three standard errors)."""
    import random

    rng = random.Random(7)
    plan = seq.ConfirmPlan(3, 96, 0.05, 12)  # many looks, the worst case for a bound that holds at every look
    pool = seq.Pool({"c": 1}, 30)
    stopped = 0
    for _ in range(2000):
        runs = [["c"]] + [["c"] if rng.random() < 0.5 else [] for _ in range(95)]
        looks = seq.sequence(plan, 1, runs, pool)
        stopped += looks[-1].state in (seq.CLEAR, seq.FUTILE) and looks[-1].runs < plan.cap
    assert stopped / 2000 <= 0.05 + 3 * (0.05 * 0.95 / 2000) ** 0.5


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


def test_the_night_likelihood_is_scipys_beta_binomial():
    import numpy as np

    nights = [(0, 3), (2, 3), (1, 3), (0, 3), (3, 3)]
    p = 6 / 15
    arrays = (np.array([x for x, _ in nights], float), np.array([n for _, n in nights], float), np.full(5, p))
    for rho in (0.05, 0.3, 0.8):
        a, b = p * (1 / rho - 1), (1 - p) * (1 / rho - 1)
        # the binomial coefficients are left out: the same at every rho, so only differences matter
        ours = seq._night_loglik(arrays, rho) - seq._night_loglik(arrays, 0.0)
        theirs = sum(betabinom.logpmf(x, n, a, b) - binom.logpmf(x, n, p) for x, n in nights)
        assert ours == pytest.approx(theirs, abs=1e-9)


def test_the_pool_states_the_variation_it_cannot_rule_out():
    bursty = [[(2, 3), (0, 3), (1, 3), (0, 3), (3, 3), (0, 3), (0, 3), (0, 3), (0, 3), (2, 3)]] * 6
    d = seq.dispersion(bursty)
    assert d.rho > 0 and d.rho_upper is not None and d.rho < d.rho_upper < 0.99
    assert seq.dispersion([[(0, 3)] * 10] * 4).rho_upper is None  # nothing failed: nothing to vary
    # one failure a night in a few nights rules out little; the same rate over ten times the nights rules
    # out much more (the bound tightens as nights are added)
    few = [[(1, 3), (0, 3), (0, 3), (0, 3), (0, 3), (1, 3), (0, 3), (0, 3), (0, 3), (0, 3)]] * 2
    many = [[(1, 3), (0, 3), (0, 3), (0, 3), (0, 3), (1, 3), (0, 3), (0, 3), (0, 3), (0, 3)] * 10] * 2
    assert seq.dispersion(few).rho == 0.0 == seq.dispersion(many).rho
    assert seq.rho_upper(many) < seq.rho_upper(few) / 2


@pytest.mark.parametrize("flake", [0.05, 0.2])
def test_the_stated_bound_covers_the_true_variation_as_often_as_it_says(flake):
    """Pools like the benchmark's (12 tasks, ten nights of three runs, a flake whose nightly rate varies
    with intra-night correlation 0.1): the bound is at least 0.1 in at least NIGHT_BOUND_CONFIDENCE of
    them (300 pools; the tolerance is three binomial standard errors, 3.8 points)."""
    rng = random.Random(7)
    covered = 0
    for _ in range(300):
        groups = []
        for _ in range(12):
            rates = [rng.betavariate(flake * 9, (1 - flake) * 9) for _ in range(10)]
            groups.append([(sum(rng.random() < r for _ in range(3)), 3) for r in rates])
        upper = seq.dispersion(groups).rho_upper
        covered += upper is None or upper >= 0.1
    level = seq.NIGHT_BOUND_CONFIDENCE
    assert covered / 300 >= level - 3 * (level * (1 - level) / 300) ** 0.5


@pytest.mark.slow  # 600 simulated pull requests: the full suite's, not the inner loop's
def test_the_design_holds_alpha_and_sees_the_change_at_200_prs():
    """docs/statistics.md's figures for 12 tasks, flake 5 %, a pool of 30 runs, k 3 to a cap of 30, nights
    independent (1,000 PRs each there): false alarms 0.3 %, power 88 % (a) and 81 % (b), 52 runs per unchanged
    and 63 per changed PR (the mean of (a) and (b)). At 200 PRs a binomial standard error is about 3 points:
    the bounds are the measured figures less about 2.5 of them, and the runs within 10 % of the measured means."""
    null = pool_rates(PoolDesign(tasks=12, flake=0.05, pool=30, k=3, cap=30), 200)
    new = pool_rates(PoolDesign(tasks=12, flake=0.05, pool=30, k=3, cap=30, change="new"), 200)
    flake = pool_rates(PoolDesign(tasks=12, flake=0.05, pool=30, k=3, cap=30, change="flake"), 200)
    assert null["rate"] <= 0.05
    assert new["rate"] >= 0.81 and flake["rate"] >= 0.74
    assert null["runs"] <= 1.1 * 52 and (new["runs"] + flake["runs"]) / 2 <= 1.1 * 63
    assert FLAKE_CHECK  # the flaking check is the one change (b) raises
