"""What a passing regression gate could not see: the minimum detectable regression.

Pure; numpy and scipy are imported inside the functions (the plugin imports
this package into every pytest run). The model and its assumptions are in
docs/statistics.md ("The smallest detectable regression"); keep them in step.

Model. Task t passes each baseline run with probability p_t (its observed
baseline pass rate). A regression of size delta lowers every task's per-run
pass probability to max(0, p_t - delta) in the candidate. Each arm is read
over k runs of every task; a task is solved when a strict majority of its
runs pass (the gate's rule). The arms are independent, so task t is lost with
probability S(p_t) (1 - S(p_t - delta)) and won with (1 - S(p_t)) S(p_t - delta),
where S(p) = P(Bin(k, p) > k/2). The gate's test rejects when the candidate
loses more tasks than it wins and the exact one-sided binomial test on the
discordant tasks gives P(Bin(won + lost, 1/2) >= lost) < alpha.

Exact and fast. Observed rates take few distinct values (multiples of 1/k),
so the tasks fall into a handful of groups sharing (P(won), P(lost)). The
joint (won, lost) distribution is the inverse 2-D DFT of its generating
function, a product of one power per group, over a window of +- 8 standard
deviations (mass outside < 1e-14): exact to ~1e-12 in power, and as cheap for
10,000 tasks as for a few hundred (the former task-by-task recursion was
quadratic in the number of tasks). The search for the smallest detectable
drop starts where a normal approximation puts it and walks with exact powers,
and its result is cached by design (tasks per baseline rate, k, alpha, power).
"""

from __future__ import annotations

import functools
from typing import Any, Callable, Sequence

from pytest_agentdrift.shapes import MinimumDetectable
from pytest_agentdrift.vocabulary import MDE_POWER

_TAIL = 1e-15  # total probability mass the tables may drop


def loss_thresholds(d_lo: int, d_hi: int, alpha: float) -> Any:
    """For d = d_lo..d_hi discordant tasks, the fewest lost tasks the one-sided test rejects at
    (d + 1 where it never rejects): the smallest l with P(Bin(d, 1/2) >= l) < alpha."""
    size = 64
    while size <= d_hi:
        size *= 2
    return _thresholds_upto(size, alpha)[d_lo : d_hi + 1]


@functools.lru_cache(maxsize=16)
def _thresholds_upto(size: int, alpha: float) -> Any:
    """loss_thresholds for d = 0..size-1, computed once per size and alpha (read-only)."""
    import numpy as np
    from scipy.special import bdtrc
    from scipy.stats import binom

    d = np.arange(size)
    # isf is a quantile near the boundary; the exact threshold is checked among its neighbours
    guess = np.nan_to_num(binom.isf(alpha, d, 0.5), nan=0.0).astype(int)
    candidates = guess[:, None] + np.arange(-1, 3)[None, :]
    tail = bdtrc(candidates - 1, d[:, None], 0.5)  # P(Bin(d, 1/2) >= candidate)
    ok = (candidates >= 0) & (candidates <= d[:, None]) & (tail < alpha)
    first = candidates[np.arange(d.size), np.argmax(ok, axis=1)]
    out = np.where(ok.any(axis=1), first, d + 1)
    out.setflags(write=False)
    return out


def rejection_region(n: int, alpha: float) -> Any:
    """R[w, l] is True where the gate's one-sided test rejects with w won and l lost tasks."""
    import numpy as np

    return _region(0, 0, n + 1, n + 1, alpha) & (np.add.outer(np.arange(n + 1), np.arange(n + 1)) <= n)


def _region(w0: int, l0: int, rows: int, cols: int, alpha: float) -> Any:
    """The rejection region over won = w0..w0+rows-1, lost = l0..l0+cols-1."""
    import numpy as np

    w = np.arange(w0, w0 + rows)[:, None]
    lost = np.arange(l0, l0 + cols)[None, :]
    threshold = loss_thresholds(w0 + l0, w0 + l0 + rows + cols - 2, alpha)
    return (lost > w) & (lost >= threshold[(w + lost) - (w0 + l0)])


def solved_probability(p: Any, k: int) -> Any:
    """S(p): probability that a strict majority of k runs pass, each with probability p."""
    from scipy.special import bdtrc

    return bdtrc(k // 2, k, p)  # P(Bin(k, p) > k // 2)


def won_lost_distribution(p_won: Any, p_lost: Any, weights: Any = None) -> tuple[Any, int, int]:
    """Joint distribution of (won, lost) over independent tasks: (table, won offset, lost offset).

    The table covers the mean +- 8 standard deviations (+ 24 for skewed small counts) of each
    count; the mass outside is below 1e-14. It is the inverse DFT of the joint probability
    generating function prod_g (1 - pw_g - pl_g + pw_g x + pl_g y) ** n_g over the task groups
    sharing (pw, pl), evaluated on that window's roots of unity. ``weights`` (default 1 each) says
    how many tasks each (p_won, p_lost) entry stands for.
    """
    import numpy as np
    from scipy import fft

    pw, pl = np.asarray(p_won, float), np.asarray(p_lost, float)
    weights = np.ones(pw.size, dtype=np.int64) if weights is None else np.asarray(weights, dtype=np.int64)
    n = int(weights.sum())
    pairs = np.round(np.stack([pw, pl], axis=1), 15)
    groups, inverse = np.unique(pairs, axis=0, return_inverse=True)
    counts = np.bincount(inverse.reshape(-1), weights=weights).astype(np.int64)
    moving = (groups[:, 0] > 0) | (groups[:, 1] > 0)
    groups, counts = groups[moving], counts[moving]
    if not len(groups):
        return np.ones((1, 1)), 0, 0  # every task tied for sure
    windows = []
    for p in (groups[:, 0], groups[:, 1]):
        mean, sd = float(counts @ p), float(np.sqrt(counts @ (p * (1.0 - p))))
        lo = max(0, int(np.floor(mean - 8 * sd - 24)))
        hi = min(n, int(np.ceil(mean + 8 * sd + 24)))
        windows.append((lo, fft.next_fast_len(hi - lo + 1, real=True)))
    (w0, mw), (l0, ml) = windows
    # the table is real, so half of the spectrum's columns determine it (irfft2)
    j, i = np.arange(mw)[:, None], np.arange(ml // 2 + 1)[None, :]
    x, y = np.exp(-2j * np.pi * j / mw), np.exp(-2j * np.pi * i / ml)
    # x^-w0 y^-l0 starts the window at (w0, l0); the angle is reduced exactly in integers first
    spectrum = np.exp(2j * np.pi * ((w0 * j % mw) / mw + (l0 * i % ml) / ml))
    for (gw, gl), count in zip(groups, counts, strict=True):
        spectrum = spectrum * _int_power((1.0 - gw - gl) + gw * x + gl * y, int(count))
    table = np.clip(fft.irfft2(spectrum, s=(mw, ml)), 0.0, None)
    return table[: n - w0 + 1, : n - l0 + 1], w0, l0


def _int_power(base: Any, exponent: int) -> Any:
    """base ** exponent for a complex array and a whole exponent, by repeated squaring: a few
    complex products per element where numpy's power goes through a complex log and exp."""
    result = None
    while exponent:
        if exponent & 1:
            result = base if result is None else result * base
        exponent >>= 1
        if exponent:
            base = base * base
    return 1.0 if result is None else result


def regression_power(
    base_rates: Sequence[float], k: int, delta: float, alpha: float, weights: Sequence[int] | None = None
) -> float:
    """Probability that the gate's paired test flags a regression of ``delta`` (see the module doc);
    ``weights``: how many tasks each rate stands for (default one each)."""
    import numpy as np

    if len(base_rates) == 0:
        return 0.0
    p = np.clip(np.asarray(base_rates, dtype=float), 0.0, 1.0)
    sb = solved_probability(p, k)
    sc = solved_probability(np.clip(p - delta, 0.0, 1.0), k)
    dist, w0, l0 = won_lost_distribution((1.0 - sb) * sc, sb * (1.0 - sc), weights)
    rows, cols = dist.shape
    return float(min(1.0, dist[_region(w0, l0, rows, cols, alpha)].sum()))


def _approximate_power(base_rates: Sequence[float], weights: Sequence[int], k: int, deltas: Any, alpha: float) -> Any:
    """Normal approximation of regression_power at each delta, only to start the exact search:
    L - W against z(alpha) sqrt(E[W + L]), with the counts' means and variances."""
    import numpy as np
    from scipy.stats import norm

    p = np.clip(np.asarray(base_rates, dtype=float), 0.0, 1.0)[None, :]
    d = np.asarray(deltas, dtype=float)[:, None]
    sb = solved_probability(p, k)
    sc = solved_probability(np.clip(p - d, 0.0, 1.0), k)
    pw, pl = (1.0 - sb) * sc, sb * (1.0 - sc)
    w = np.asarray(weights, dtype=float)
    mean = (pl - pw) @ w
    sd = np.sqrt(np.maximum((pl + pw - (pl - pw) ** 2) @ w, 1e-12))
    bar = norm.isf(alpha) * np.sqrt((pl + pw) @ w) + 0.5
    return norm.sf((bar - mean) / sd)


def minimum_detectable_regression(
    base_rates: Sequence[float], k: int, alpha: float, power: float = MDE_POWER
) -> MinimumDetectable:
    """The smallest per-run pass-rate drop (whole pp) the gate detects with ``power``; cached by
    design (how many tasks have each baseline rate, k, alpha, power): see _mde_for_design."""
    from collections import Counter

    design = tuple(sorted(Counter(round(float(r), 12) for r in base_rates).items()))
    return _mde_for_design(design, k, alpha, power).copy()  # the cached one stays as computed


@functools.lru_cache(maxsize=64)
def _first_detected(exact: Callable[[int], float], guess: int, power: float) -> int:
    """The smallest drop in 1..100 pp with exact(pp) >= power, given exact(100) >= power: gallop
    from ``guess`` to bracket it, then bisect."""
    lo, hi = 0, 100  # exact(lo) < power <= exact(hi); lo = 0 is a drop of nothing
    step = 1
    if exact(guess) >= power:
        hi = guess
        while hi - step > lo and exact(hi - step) >= power:
            hi, step = hi - step, 2 * step
        lo = max(lo, hi - step)
    else:
        lo = guess
        while lo + step < hi and exact(lo + step) < power:
            lo, step = lo + step, 2 * step
        hi = min(hi, lo + step)
    while hi - lo > 1:
        mid = (lo + hi) // 2
        lo, hi = (lo, mid) if exact(mid) >= power else (mid, hi)
    return hi


def _mde_for_design(design: tuple[tuple[float, int], ...], k: int, alpha: float, power: float) -> MinimumDetectable:
    """The smallest per-run pass-rate drop (whole pp) the gate detects with ``power``.

    ``mde_pp`` is None when even a drop to zero on every task stays below the
    power (too few tasks the baseline solves): no regression is detectable.
    The search starts where a normal approximation puts the answer and walks
    with exact powers from there (power is non-decreasing in delta), so it
    costs a few exact evaluations instead of a bisection's eight.
    """
    import numpy as np

    rates, weights = [rate for rate, _ in design], [count for _, count in design]
    n = sum(weights)
    out: MinimumDetectable = {
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
    at: dict[int, float] = {}

    def exact(pp: int) -> float:
        if pp not in at:
            at[pp] = regression_power(rates, k, pp / 100, alpha, weights)
        return at[pp]

    if exact(100) < power:
        out["power_at_mde"] = at[100]
        return out
    approx = _approximate_power(rates, weights, k, np.arange(1, 101) / 100, alpha)
    guess = int(np.argmax(approx >= power)) + 1 if (approx >= power).any() else 100
    hi = _first_detected(exact, guess, power)
    out["mde_pp"] = hi
    out["power_at_mde"] = exact(hi)
    return out
