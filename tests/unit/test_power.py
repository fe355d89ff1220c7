"""The minimum detectable regression, checked against an independent formula and a simulation."""

from __future__ import annotations

import numpy as np
import pytest

from pytest_agentdrift.compare.power import minimum_detectable_regression, regression_power

ALPHA = 0.05


def test_deterministic_baseline_k1_matches_the_binomial_formula():
    # Every task solved, k = 1: lost ~ Bin(n, delta), won = 0, and the one-sided exact test at
    # alpha rejects from L* lost tasks on, where 0.5 ** L* < alpha. Power = P(Bin(n, delta) >= L*).
    from scipy.stats import binom  # scipy and statsmodels imported where used: seconds at each worker's collection

    for n in (8, 12, 30, 100):
        l_star = next(L for L in range(1, n + 1) if 0.5**L < ALPHA)
        for delta in (0.1, 0.3, 0.55):
            assert regression_power([1.0] * n, 1, delta, ALPHA) == pytest.approx(
                binom.sf(l_star - 1, n, delta), abs=1e-12
            )
        mde = minimum_detectable_regression([1.0] * n, 1, ALPHA)["mde_pp"]
        expected = next(d for d in range(1, 101) if binom.sf(l_star - 1, n, d / 100) >= 0.8)
        assert mde == expected


def test_too_few_solved_tasks_detect_nothing():
    out = minimum_detectable_regression([1.0, 1.0, 1.0, 0.0], 1, ALPHA)
    assert out["mde_pp"] is None  # 3 losses can never reach p < 0.05


def _simulated_power(rates, k, delta, alpha, trials, rng):
    from statsmodels.stats.proportion import binom_test

    rates = np.asarray(rates)
    base = rng.random((trials, len(rates), k)) < rates[:, None]
    cand = rng.random((trials, len(rates), k)) < np.clip(rates - delta, 0, 1)[:, None]
    b_solved = base.sum(axis=2) * 2 > k
    c_solved = cand.sum(axis=2) * 2 > k
    lost = (b_solved & ~c_solved).sum(axis=1)
    won = (~b_solved & c_solved).sum(axis=1)
    hits = 0
    for w, n_lost in zip(won, lost, strict=True):
        # statsmodels' exact binomial test: an implementation independent of the one under test
        if n_lost > w and binom_test(n_lost, w + n_lost, 0.5, alternative="larger") < alpha:
            hits += 1
    return hits / trials


def test_power_and_mde_agree_with_a_simulation_for_noisy_tasks_and_k3():
    rng = np.random.default_rng(20261201)
    rates = list(rng.uniform(0.4, 1.0, size=40))
    k = 3
    out = minimum_detectable_regression(rates, k, ALPHA)
    mde = out["mde_pp"] / 100
    trials = 4000
    at = _simulated_power(rates, k, mde, ALPHA, trials, rng)
    below = _simulated_power(rates, k, mde - 0.02, ALPHA, trials, rng)
    se = (0.8 * 0.2 / trials) ** 0.5
    assert abs(at - out["power_at_mde"]) < 4 * se  # exact power matches the simulation
    assert at >= 0.8 - 4 * se
    assert below < 0.8 + 4 * se
    assert regression_power(rates, k, mde - 0.02, ALPHA) < 0.8 <= regression_power(rates, k, mde, ALPHA)


def test_power_by_design_weights_equals_power_over_every_task():
    rates = [0.2] * 40 + [0.6] * 25 + [1.0] * 35
    weighted = regression_power([0.2, 0.6, 1.0], 3, 0.15, ALPHA, weights=[40, 25, 35])
    assert weighted == pytest.approx(regression_power(rates, 3, 0.15, ALPHA), abs=1e-12)
