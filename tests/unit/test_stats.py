"""pytest_agentdrift.compare.stats against independent references.

References: statsmodels' Wilson interval, scipy's exact binomial test,
statsmodels' two-way ANOVA, a pure-Python bootstrap, and values computed by
hand in the comments.
"""

from __future__ import annotations

import json
import math
import random
import subprocess
import sys

import pytest

from pytest_agentdrift.compare import stats


def test_importing_the_statistics_modules_does_not_import_numpy_or_scipy():
    code = (
        "import sys\n"
        "import pytest_agentdrift.compare.stats, pytest_agentdrift.compare.comparison, pytest_agentdrift.compare.render, "
        "pytest_agentdrift.compare.ledger\n"
        "print(sorted(m for m in ('numpy', 'scipy', 'statsmodels') if m in sys.modules))\n"
    )
    out = subprocess.run([sys.executable, "-c", code], capture_output=True, text=True, check=True)
    assert json.loads(out.stdout.replace("'", '"')) == []


# --- Wilson ------------------------------------------------------------------


@pytest.mark.parametrize(
    "successes,n",
    [(0, 1), (1, 1), (0, 12), (12, 12), (3, 10), (7, 12), (1, 2), (500, 1000), (9999, 10000), (0, 10000)],
)
@pytest.mark.parametrize("confidence", [0.95, 0.90])
def test_wilson_matches_statsmodels(successes, n, confidence):
    from statsmodels.stats.proportion import proportion_confint

    expected = proportion_confint(successes, n, alpha=1 - confidence, method="wilson")
    low, high = stats.wilson_interval(successes, n, confidence)
    assert low == pytest.approx(expected[0], abs=1e-12)
    assert high == pytest.approx(expected[1], abs=1e-12)
    assert 0.0 <= low <= successes / n <= high <= 1.0


def test_wilson_pins_the_exact_bound_at_0_of_n_and_n_of_n():
    assert stats.wilson_interval(0, 12)[0] == 0.0
    assert stats.wilson_interval(12, 12)[1] == 1.0
    # Hand-computed: 0/12 upper bound = z^2/(n+z^2) = 3.8415/15.8415
    assert stats.wilson_interval(0, 12)[1] == pytest.approx(3.841458820694124 / 15.841458820694124)


def test_wilson_without_runs_is_none_not_nan():
    assert stats.wilson_interval(0, 0) is None


@pytest.mark.parametrize("successes,n", [(-1, 3), (4, 3), (0, -1)])
def test_wilson_rejects_impossible_counts(successes, n):
    with pytest.raises(ValueError):
        stats.wilson_interval(successes, n)


# --- exact tests ---------------------------------------------------------------


@pytest.mark.parametrize("wins,losses", [(1, 0), (5, 0), (12, 3), (3, 12), (7, 7), (0, 4), (40, 25), (200, 170)])
def test_exact_mcnemar_matches_scipy_binomtest(wins, losses):
    from scipy.stats import binomtest

    expected = binomtest(wins, wins + losses, 0.5, alternative="greater").pvalue
    assert stats.exact_mcnemar_pvalue(wins, losses) == pytest.approx(expected, rel=1e-12, abs=1e-15)


def test_exact_mcnemar_hand_computed():
    # P(X >= 12 | Bin(15, 1/2)) = (455 + 105 + 15 + 1) / 2**15
    assert stats.exact_mcnemar_pvalue(12, 3) == pytest.approx(576 / 32768, rel=1e-12)
    assert stats.exact_mcnemar_pvalue(5, 0) == pytest.approx(1 / 32)


def test_zero_discordant_pairs_give_p_one():
    assert stats.exact_mcnemar_pvalue(0, 0) == 1.0
    assert stats.weighted_win_pvalue(0, 0, 2.0) == 1.0


@pytest.mark.parametrize("wins,losses,lam", [(8, 0, 2.0), (7, 0, 2.0), (20, 3, 2.0), (12, 3, 1.0), (9, 2, 3.0)])
def test_weighted_win_test_matches_scipy(wins, losses, lam):
    from scipy.stats import binomtest

    expected = binomtest(wins, wins + losses, lam / (1 + lam), alternative="greater").pvalue
    assert stats.weighted_win_pvalue(wins, losses, lam) == pytest.approx(expected, rel=1e-12)


def test_weighted_win_test_needs_eight_clean_wins_at_lambda_two():
    # (2/3)^7 = 0.0585 > 0.05 >= (2/3)^8 = 0.0390
    assert stats.weighted_win_pvalue(7, 0, 2.0) == pytest.approx((2 / 3) ** 7)
    assert stats.weighted_win_pvalue(8, 0, 2.0) == pytest.approx((2 / 3) ** 8)


# --- bootstrap -------------------------------------------------------------------


#: the pure-Python reference's draws: its percentile bounds move by 0.001 or less from this to 20,000
#: draws, well inside the 0.01 the comparisons allow, at a quarter of the cost
REFERENCE_DRAWS = 5_000


def _reference_bootstrap(deltas, draws, seed, confidence=0.95):
    rng = random.Random(seed)
    n = len(deltas)
    means = sorted(sum(deltas[rng.randrange(n)] for _ in range(n)) / n for _ in range(draws))
    tail = (1 - confidence) / 2

    # Same interpolation as numpy's default quantile ("linear").
    def q(p):
        pos = p * (draws - 1)
        lo = math.floor(pos)
        return means[lo] + (means[min(lo + 1, draws - 1)] - means[lo]) * (pos - lo)

    return q(tail), q(1 - tail)


def _deltas(n, seed):
    rng = random.Random(seed)
    return [rng.choice([-1.0, -1 / 3, 0.0, 0.0, 0.0, 1 / 3, 2 / 3, 1.0]) for _ in range(n)]


def test_same_seed_gives_the_same_interval_and_another_seed_a_different_one():
    deltas = _deltas(60, 1)
    a = stats.paired_bootstrap_delta(deltas, draws=2000, seed=7)
    b = stats.paired_bootstrap_delta(deltas, draws=2000, seed=7)
    c = stats.paired_bootstrap_delta(deltas, draws=2000, seed=8)
    assert (a.low, a.high) == (b.low, b.high)
    assert (a.low, a.high) != (c.low, c.high)


def test_bootstrap_agrees_with_a_pure_python_reference():
    deltas = _deltas(300, 2)
    ours = stats.paired_bootstrap_delta(deltas, draws=20_000, seed=3)
    ref = _reference_bootstrap(deltas, REFERENCE_DRAWS, 3)
    assert ours.estimate == pytest.approx(sum(deltas) / len(deltas))
    assert ours.low == pytest.approx(ref[0], abs=0.01)
    assert ours.high == pytest.approx(ref[1], abs=0.01)
    assert ours.method == stats.PERCENTILE_METHOD and ours.draws == 20_000


def test_bootstrap_with_many_distinct_deltas_agrees_with_the_reference():
    # Unequal repetitions give many distinct deltas: the task-index path.
    rng = random.Random(6)
    deltas = [rng.uniform(-1, 1) for _ in range(200)]
    ours = stats.paired_bootstrap_delta(deltas, draws=20_000, seed=1)
    ref = _reference_bootstrap(deltas, REFERENCE_DRAWS, 1)
    assert ours.low == pytest.approx(ref[0], abs=0.01) and ours.high == pytest.approx(ref[1], abs=0.01)


def test_value_count_shortcut_has_the_task_resampling_distribution():
    deltas = _deltas(500, 8)
    shortcut = stats.bootstrap_mean_of_values(deltas, draws=20_000, seed=2)
    by_task = stats.bootstrap_means({"d": deltas}, draws=20_000, seed=3)["d"]
    assert float(shortcut.mean()) == pytest.approx(float(by_task.mean()), abs=0.002)
    assert float(shortcut.std()) == pytest.approx(float(by_task.std()), rel=0.03)


def test_bootstrap_resamples_tasks_with_replacement():
    # Two tasks with deltas 0 and 1: a draw's mean is 0, 1/2 or 1 with
    # probabilities 1/4, 1/2, 1/4 (hand-computed). Check the empirical shares.
    means = stats.bootstrap_means({"d": [0.0, 1.0]}, draws=40_000, seed=5)["d"]
    shares = [float((means == v).mean()) for v in (0.0, 0.5, 1.0)]
    assert shares == pytest.approx([0.25, 0.5, 0.25], abs=0.01)
    interval = stats.paired_bootstrap_delta([0.0, 1.0], draws=40_000, seed=5)
    assert (interval.low, interval.high) == (0.0, 1.0)


def test_bootstrap_spread_matches_the_standard_error():
    deltas = _deltas(400, 4)
    n = len(deltas)
    mean = sum(deltas) / n
    se = math.sqrt(sum((d - mean) ** 2 for d in deltas) / n / n)  # plug-in SE of the mean
    means = stats.bootstrap_means({"d": deltas}, draws=20_000, seed=1)["d"]
    assert float(means.std()) == pytest.approx(se, rel=0.05)


@pytest.mark.parametrize("deltas", [[0.0] * 12, [1.0] * 5, [-0.2] * 30, [0.5]])
def test_constant_deltas_give_a_degenerate_interval_without_nan(deltas):
    result = stats.paired_bootstrap_delta(deltas, draws=1000, seed=0)
    assert result.low == result.high == result.estimate == pytest.approx(deltas[0])
    assert result.method == stats.CONSTANT_METHOD and result.draws == 0
    assert all(math.isfinite(x) for x in (result.low, result.high, result.estimate))


def test_bootstrap_without_tasks_is_none():
    assert stats.paired_bootstrap_delta([]) is None


# --- failure classes and variance --------------------------------------------------


def test_failure_classes_hand_built():
    base = {"A": [True, False, True], "B": [False, False, False], "C": [False, False, False], "D": [True] * 3}
    cand = {"A": [True, True, True], "B": [True, False, True], "C": [False, False, False], "D": [True] * 3}
    fc = stats.failure_classes(base, cand)
    assert fc["baseline"]["bad-run"] == {"runs": 1, "tasks": ["A"]}
    assert fc["baseline"]["beyond-arm"] == {"runs": 3, "tasks": ["B"]}
    assert fc["baseline"]["unsolved-by-all"] == {"runs": 3, "tasks": ["C"]}
    assert fc["candidate"]["bad-run"] == {"runs": 1, "tasks": ["B"]}
    assert fc["candidate"]["beyond-arm"] == {"runs": 0, "tasks": []}
    assert fc["candidate"]["unsolved-by-all"] == {"runs": 3, "tasks": ["C"]}


def test_failure_classes_need_repetitions():
    assert stats.failure_classes({"A": [False]}, {"A": [True]}) is None


def _anova_reference(base, cand):
    import pandas as pd
    import statsmodels.api as sm
    from statsmodels.formula.api import ols

    rows = [
        {"y": float(ok), "task": t, "arm": arm}
        for arm, data in (("b", base), ("c", cand))
        for t, runs in data.items()
        for ok in runs
    ]
    table = sm.stats.anova_lm(ols("y ~ C(task) * C(arm)", data=pd.DataFrame(rows)).fit(), typ=1)
    return {
        "task": table.loc["C(task)", "sum_sq"],
        "arm": table.loc["C(arm)", "sum_sq"],
        "task_x_arm": table.loc["C(task):C(arm)", "sum_sq"],
        "run_to_run": table.loc["Residual", "sum_sq"],
    }


def test_variance_decomposition_matches_statsmodels_anova():
    rng = random.Random(9)
    base = {f"T{i}": [rng.random() < 0.2 + 0.06 * i for _ in range(5)] for i in range(10)}
    cand = {f"T{i}": [rng.random() < 0.3 + 0.05 * i for _ in range(5)] for i in range(10)}
    row = stats.variance_decomposition(base, cand)
    expected = _anova_reference(base, cand)
    for key, value in expected.items():
        assert row["ss"][key] == pytest.approx(value, abs=1e-9)
    assert sum(row["shares"].values()) == pytest.approx(1.0)


def test_variance_of_constant_outcomes_has_no_shares():
    row = stats.variance_decomposition({"A": [True, True]}, {"A": [True, True]})
    assert row["shares"] is None and row["total_ss"] == 0.0 and "note" in row


def test_variance_shares_hand_computed():
    # Arm is everything: baseline always fails, candidate always passes.
    row = stats.variance_decomposition({"A": [False] * 2, "B": [False] * 2}, {"A": [True] * 2, "B": [True] * 2})
    assert row["shares"] == pytest.approx({"task": 0.0, "arm": 1.0, "task_x_arm": 0.0, "run_to_run": 0.0})
    # Run-to-run is everything: each cell is half pass, half fail.
    row = stats.variance_decomposition({"A": [True, False]}, {"A": [False, True]})
    assert row["shares"]["run_to_run"] == pytest.approx(1.0)
    assert row["run_to_run_exceeds_arm"] is True


# --- cost ----------------------------------------------------------------------------


def test_cost_basis_follows_the_80_percent_rule():
    priced = {"cost_usd": 0.1, "input_tokens": 10, "output_tokens": 5}
    tokens_only = {"cost_usd": None, "input_tokens": 10, "output_tokens": 5}
    assert stats.choose_cost_basis([priced] * 8 + [tokens_only] * 2) == "cost_usd"
    assert stats.choose_cost_basis([priced] * 7 + [tokens_only] * 3) == "tokens"
    assert stats.choose_cost_basis([priced] * 7 + [None] * 3) is None
    assert stats.run_cost(tokens_only, "tokens") == 15.0
    assert stats.run_cost({"cost_usd": True}, "cost_usd") is None  # a bool is not a price


def test_promotion_support_for_a_cheaper_equal_candidate_is_one():
    result = stats.promotion_support([0.0] * 20, [1.0] * 20, [0.6] * 20, eps=0.05, draws=500, seed=0)
    assert result["support"] == 1.0
    assert result["cost_change"] == pytest.approx(-0.4)


def test_promotion_support_is_zero_when_dearer_or_clearly_worse():
    dearer = stats.promotion_support([0.0] * 20, [1.0] * 20, [1.2] * 20, eps=0.05, draws=500, seed=0)
    assert dearer["support"] == 0.0
    worse = stats.promotion_support([-0.25] * 20, [1.0] * 20, [0.5] * 20, eps=0.05, draws=500, seed=0)
    assert worse["support"] == 0.0  # quality delta -25 points in every draw
    within = stats.promotion_support([-0.05] * 20, [1.0] * 20, [0.5] * 20, eps=0.05, draws=500, seed=0)
    assert within["support"] == 1.0  # exactly at -eps still keeps quality


def test_promotion_support_against_a_pure_python_reference():
    rng = random.Random(11)
    q = [rng.choice([-1.0, 0.0, 0.0, 0.0, 1.0]) for _ in range(80)]
    b = [rng.uniform(0.5, 1.5) for _ in range(80)]
    c = [x * rng.uniform(0.7, 1.2) for x in b]
    ours = stats.promotion_support(q, b, c, eps=0.05, draws=20_000, seed=2)["support"]
    ref_rng, hits, draws = random.Random(2), 0, 20_000
    for _ in range(draws):
        idx = [ref_rng.randrange(80) for _ in range(80)]
        hits += sum(q[i] for i in idx) / 80 >= -0.05 and sum(c[i] for i in idx) < sum(b[i] for i in idx)
    assert ours == pytest.approx(hits / draws, abs=0.02)


def test_promotion_support_ignores_tasks_without_cost_in_an_arm():
    result = stats.promotion_support([0.0, 0.0], [1.0, None], [0.5, 9.0], eps=0.0, draws=200, seed=0)
    assert result["priced_tasks"] == 1 and result["cost_delta"] == pytest.approx(-0.5)
    none = stats.promotion_support([0.0], [None], [1.0], eps=0.0, draws=200, seed=0)
    assert none["support"] == 0.0 and none["priced_tasks"] == 0


@pytest.mark.parametrize("priced_share, shift", [(1.0, 0.0001), (0.85, -0.0001)])
def test_grouped_promotion_bootstrap_is_within_its_stated_error_of_the_exact_one(monkeypatch, priced_share, shift):
    """Above the exact budget the cost side is drawn by its normal approximation: support and the
    interval agree with the exact task resampling within the Berry-Esseen bound it reports."""
    rng = random.Random(5)
    n = 3000
    q = [rng.choice([-0.4, -0.2, 0.0, 0.0, 0.0, 0.2, 0.4]) for _ in range(n)]
    b = [rng.uniform(0.01, 0.05) for _ in range(n)]
    # a cost difference near zero (shift), so support sits in the middle where an error would show
    c = [x + rng.gauss(shift, 0.01) if rng.random() < priced_share else None for x in b]
    b = [x if y is not None else None for x, y in zip(b, c, strict=True)]
    monkeypatch.setattr(stats, "EXACT_BOOTSTRAP_BUDGET", 10**12)
    exact = stats.promotion_support(q, b, c, eps=0.1, draws=4000, seed=3)
    monkeypatch.setattr(stats, "EXACT_BOOTSTRAP_BUDGET", 0)
    grouped = stats.promotion_support(q, b, c, eps=0.1, draws=4000, seed=3)
    assert exact["approximation_error"] is None and exact["method"] == stats.PROMOTION_EXACT
    bound = grouped["approximation_error"]
    assert grouped["method"] == stats.PROMOTION_GROUPED and 0 < bound < 0.05
    assert 0.1 < exact["support"] < 0.9  # a support the approximation could get wrong
    # the bound, plus the Monte Carlo error of two runs of 4,000 draws each (4 standard errors)
    assert grouped["support"] == pytest.approx(exact["support"], abs=bound + 4 * math.sqrt(2 * 0.25 / 4000))
    width = exact["cost_delta_ci"][1] - exact["cost_delta_ci"][0]
    for ours, theirs in zip(grouped["cost_delta_ci"], exact["cost_delta_ci"], strict=True):
        assert ours == pytest.approx(theirs, abs=0.05 * width)
    assert grouped["priced_tasks"] == exact["priced_tasks"] and grouped["cost_delta"] == exact["cost_delta"]


def test_grouped_bootstrap_is_exact_when_the_continuous_column_is_constant_by_group():
    means, bound = stats.bootstrap_means_grouped({"q": [0.0, 1.0, 1.0]}, [2.0, 5.0, 5.0], draws=500, seed=0)
    assert bound == 0.0
    # the continuous column is 2 where q is 0 and 5 where q is 1: its mean follows q's exactly
    assert means["continuous"] == pytest.approx(2.0 + 3.0 * means["q"])
