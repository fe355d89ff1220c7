"""What a passing regression gate could not see: the minimum detectable regression.

Pure; numpy and scipy are imported inside the function (the plugin imports
this package into every pytest run). The model and its assumptions are in
docs/statistics.md ("The smallest detectable regression"); keep them in step.

Model. Task t passes each baseline run with probability p_t (its observed
baseline pass rate). A regression of size delta lowers every task's per-run
pass probability to max(0, p_t - delta) in the candidate. Each arm runs every
task k times; a task is solved when a strict majority of its runs pass (the
gate's rule). The arms are independent, so task t is lost with probability
S(p_t) (1 - S(p_t - delta)) and won with (1 - S(p_t)) S(p_t - delta), where
S(p) = P(Bin(k, p) > k/2). The gate's test rejects when the candidate loses
more tasks than it wins and the exact one-sided binomial test on the
discordant tasks gives P(Bin(won + lost, 1/2) >= lost) < alpha. Power is
summed exactly over the joint distribution of (won, lost), built task by
task. The minimum detectable regression is the smallest delta, in whole
percentage points, whose power reaches the target.
"""

from __future__ import annotations

from typing import Any, Sequence

from pytest_agentdrift.vocabulary import MDE_POWER


def rejection_region(n: int, alpha: float) -> Any:
    """R[w, l] is True where the gate's one-sided test rejects with w won and l lost tasks."""
    import numpy as np
    from scipy.stats import binom

    # P(Bin(d, 1/2) >= l) decreases in l, so for each number of discordant tasks d the region
    # is l >= threshold[d]: one row of tail probabilities per d (w + l <= n has all the mass)
    d = np.arange(n + 1)
    # isf is a quantile near the boundary; the exact threshold is checked among its neighbours
    guess = np.nan_to_num(binom.isf(alpha, d, 0.5), nan=0.0).astype(int)
    candidates = guess[:, None] + np.arange(-1, 3)[None, :]
    below = (candidates >= 0) & (binom.sf(candidates - 1, d[:, None], 0.5) < alpha) & (candidates <= d[:, None])
    threshold = np.where(below.any(axis=1), candidates[np.arange(n + 1), np.argmax(below, axis=1)], n + 1)
    threshold = np.concatenate([threshold, np.full(n, n + 1)])  # w + l > n never happens
    w = np.arange(n + 1)[:, None]
    lost = np.arange(n + 1)[None, :]
    return (lost > w) & (lost >= threshold[w + lost])


def solved_probability(p: Any, k: int) -> Any:
    """S(p): probability that a strict majority of k runs pass, each with probability p."""
    from scipy.stats import binom

    return binom.sf(k // 2, k, p)


def regression_power(base_rates: Sequence[float], k: int, delta: float, alpha: float, region: Any = None) -> float:
    """Probability that the gate's paired test flags a regression of ``delta`` (see the module doc)."""
    import numpy as np

    n = len(base_rates)
    if n == 0:
        return 0.0
    p = np.clip(np.asarray(base_rates, dtype=float), 0.0, 1.0)
    sb = solved_probability(p, k)
    sc = solved_probability(np.clip(p - delta, 0.0, 1.0), k)
    p_lost = sb * (1.0 - sc)
    p_won = (1.0 - sb) * sc
    # The (won, lost) table grows only where a task can move mass, and tails below 1e-15 are
    # dropped as it grows: a deterministic suite stays one row wide, hundreds of noisy tasks
    # stay near mean + a few standard deviations (exact to 1e-12 in total probability).
    dist = np.ones((1, 1))
    for pw, pl in zip(p_won, p_lost, strict=True):
        rows, cols = dist.shape
        new = np.zeros((rows + (pw > 0), cols + (pl > 0)))
        new[:rows, :cols] += dist * (1.0 - pw - pl)
        if pw > 0:
            new[1 : rows + 1, :cols] += dist * pw
        if pl > 0:
            new[:rows, 1 : cols + 1] += dist * pl
        dist = _trim(new)
    region = (rejection_region(n, alpha) if region is None else region)[: dist.shape[0], : dist.shape[1]]
    return float(dist[region].sum())


def _trim(dist, tail: float = 1e-15):
    """Drop trailing rows and columns whose whole mass is below ``tail``."""
    import numpy as np

    rows = np.nonzero(np.cumsum(dist.sum(axis=1)[::-1]) > tail)[0]
    cols = np.nonzero(np.cumsum(dist.sum(axis=0)[::-1]) > tail)[0]
    r = dist.shape[0] - (rows[0] if rows.size else 0)
    c = dist.shape[1] - (cols[0] if cols.size else 0)
    return dist[: max(r, 1), : max(c, 1)]


def minimum_detectable_regression(
    base_rates: Sequence[float], k: int, alpha: float, power: float = MDE_POWER
) -> dict[str, Any]:
    """The smallest per-run pass-rate drop (whole pp) the gate detects with ``power``.

    ``mde_pp`` is None when even a drop to zero on every task stays below the
    power (too few tasks the baseline solves): no regression is detectable.
    """
    n = len(base_rates)
    out: dict[str, Any] = {
        "method": "exact power of the gate's one-sided paired test under a uniform per-run drop",
        "alpha": alpha,
        "power": power,
        "tasks": n,
        "k": k,
        "mde_pp": None,
        "power_at_mde": None,
    }
    if n == 0 or k < 1:
        return out
    lo, hi = 0, 100  # in pp; power is non-decreasing in delta
    region = rejection_region(n, alpha)
    if regression_power(base_rates, k, 1.0, alpha, region) < power:
        out["power_at_mde"] = regression_power(base_rates, k, 1.0, alpha, region)
        return out
    while hi - lo > 1:
        mid = (lo + hi) // 2
        if regression_power(base_rates, k, mid / 100, alpha, region) >= power:
            hi = mid
        else:
            lo = mid
    out["mde_pp"] = hi
    out["power_at_mde"] = regression_power(base_rates, k, hi / 100, alpha, region)
    return out
