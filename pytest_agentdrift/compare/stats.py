"""Statistics for comparing two recorded runs: pure functions, no pytest.

Everything here works on plain Python values (ints, lists, dicts) and returns
plain Python values, so results can go straight into JSON. numpy and scipy
are imported inside the functions that need them: this module is imported by
the pytest plugin, which is loaded into every pytest run of an environment,
and a test checks that importing it pulls in neither.

No function returns NaN. Where a quantity is undefined (no runs, no variance)
the function says so with ``None`` or with an explicit, documented fallback.
The methods, parameters and fallbacks are described in docs/statistics.md.
"""

from __future__ import annotations

import math
from collections.abc import Iterable
from dataclasses import dataclass
from statistics import NormalDist
from typing import TYPE_CHECKING, Any, Mapping, Sequence, TypeGuard

from pytest_agentdrift.shapes import FailureClass, Promotion, UsageRecord, VarianceDecomposition
from pytest_agentdrift.vocabulary import DEFAULT_SEED, UNSCORED_OUTCOMES

if TYPE_CHECKING:
    import numpy as np
    import numpy.typing as npt

#: Resamples processed per block in the bootstrap: bounds memory at about
#: BLOCK x n_tasks indices while keeping numpy's per-call overhead negligible.
_BOOTSTRAP_BLOCK = 250

#: Share of runs that must carry a value for a cost basis to be used.
COST_COVERAGE = 0.80

FAILURE_CLASSES = ("bad-run", "beyond-arm", "unsolved-by-all")


# --------------------------------------------------------------------------
# One arm: Wilson interval
# --------------------------------------------------------------------------


def scored_passes(runs: Iterable[Mapping[str, Any]]) -> tuple[int, int]:
    """(passes, scored runs) of one task: a run lost to infrastructure or undecided is not scored, a tampered
    pass is a fail."""
    scored = [r for r in runs if r.get("outcome") not in UNSCORED_OUTCOMES]
    return sum(1 for r in scored if r.get("passed") is True and not r.get("tampered_pass")), len(scored)


def wilson_interval(successes: int, n: int, confidence: float = 0.95) -> tuple[float, float] | None:
    """Wilson score interval for a binomial proportion.

    Chosen over the normal (Wald) interval because it stays inside [0, 1] and
    keeps a sensible width at 0/n and n/n, which are common here (a small suite
    where every task passes). ``None`` when n == 0: there is no proportion.
    """
    _check_count(successes, n)
    if n == 0:
        return None
    z = NormalDist().inv_cdf(0.5 + confidence / 2.0)
    p = successes / n
    z2n = z * z / n
    centre = (p + z2n / 2.0) / (1.0 + z2n)
    half = z / (1.0 + z2n) * math.sqrt(p * (1.0 - p) / n + z2n / (4.0 * n))
    # At 0/n and n/n one bound is exactly 0 or 1 in exact arithmetic; pin it
    # so float rounding never reports 1e-17 or 0.9999999999999999.
    low = 0.0 if successes == 0 else max(0.0, centre - half)
    high = 1.0 if successes == n else min(1.0, centre + half)
    return (low, high)


def _check_count(successes: int, n: int) -> None:
    if n < 0 or successes < 0 or successes > n:
        raise ValueError(f"need 0 <= successes <= n, got {successes}/{n}")


# --------------------------------------------------------------------------
# Between arms: exact tests on the discordant tasks
# --------------------------------------------------------------------------


def binomial_tail_pvalue(successes: int, n: int, p0: float = 0.5) -> float:
    """One-sided exact binomial p-value P(X >= successes), X ~ Bin(n, p0).

    With n == 0 (no discordant tasks) there is no evidence either way, and the
    p-value is defined as 1.0: the test cannot reject. scipy.stats.binom.sf
    computes the tail without summing small terms by hand.
    """
    _check_count(successes, n)
    if not 0.0 < p0 < 1.0:
        raise ValueError(f"p0 must be in (0, 1), got {p0}")
    if n == 0 or successes == 0:
        return 1.0
    from scipy.stats import binom

    return float(min(1.0, max(0.0, binom.sf(successes - 1, n, p0))))


def exact_mcnemar_pvalue(wins: int, losses: int) -> float:
    """Exact one-sided McNemar test that the candidate wins more than it loses.

    Conditional on the number of discordant tasks (wins + losses), wins is
    Bin(wins + losses, 1/2) under "no difference". Returns 1.0 with zero
    discordant tasks (see binomial_tail_pvalue).
    """
    return binomial_tail_pvalue(wins, wins + losses, 0.5)


def weighted_win_pvalue(wins: int, losses: int, lam: float) -> float:
    """One-sided exact test that wins outnumber lam x losses.

    If one broken task is worth lam fixed ones, "no net gain" means a
    discordant task is a win with probability at most lam / (1 + lam). The
    p-value is the binomial tail at that boundary; lam = 1 is exact McNemar.
    """
    if lam <= 0:
        raise ValueError(f"lambda must be > 0, got {lam}")
    return binomial_tail_pvalue(wins, wins + losses, lam / (1.0 + lam))


# --------------------------------------------------------------------------
# Between arms: seeded paired bootstrap
# --------------------------------------------------------------------------

PERCENTILE_METHOD = "paired percentile bootstrap over tasks"
CONSTANT_METHOD = "constant per-task deltas: degenerate interval (no resampling)"


@dataclass(frozen=True)
class BootstrapInterval:
    """A point estimate with its bootstrap interval (all plain floats)."""

    estimate: float
    low: float
    high: float
    method: str
    draws: int
    seed: int
    confidence: float

    def as_dict(self) -> dict[str, Any]:
        return {
            "estimate": self.estimate,
            "ci": [self.low, self.high],
            "confidence": self.confidence,
            "method": self.method,
            "draws": self.draws,
            "seed": self.seed,
        }


def bootstrap_means(
    columns: Mapping[str, Sequence[float] | npt.NDArray[np.float64]], *, draws: int, seed: int
) -> dict[str, Any]:
    """Per-draw means of several per-task columns under one task resampling.

    Each draw resamples the n tasks with replacement (a task keeps all its
    repetitions and both arms together: that is what makes it paired). All
    columns share the same resamples, so a draw's quality and cost figures
    describe the same pseudo-suite. Returns numpy arrays of length ``draws``.

    Vectorised over blocks of draws: numpy samples a block of task indices
    and gathers each column with ``take``; no Python loop per draw or task.
    The block is small enough to stay in cache, which matters more here than
    the per-call overhead.
    """
    import numpy as np

    names = list(columns)
    values = [np.asarray(columns[k], dtype=np.float64) for k in names]
    n = len(values[0]) if values else 0
    if n == 0 or any(len(v) != n for v in values):
        raise ValueError("bootstrap needs at least one task and columns of equal length")
    if draws < 1:
        raise ValueError(f"draws must be >= 1, got {draws}")
    rng = np.random.default_rng(seed)
    out = {k: np.empty(draws, dtype=np.float64) for k in names}
    for start in range(0, draws, _BOOTSTRAP_BLOCK):
        block = min(_BOOTSTRAP_BLOCK, draws - start)
        idx = rng.integers(0, n, size=(block, n), dtype=np.intp)
        for name, column in zip(names, values, strict=False):
            out[name][start : start + block] = np.take(column, idx).sum(axis=1) / n
    return out


#: above this many task draws (tasks x resamples) promotion_support reads the continuous cost column
#: through its normal approximation (bootstrap_means_grouped); below it the resampling is exact
EXACT_BOOTSTRAP_BUDGET = 20_000_000
#: Shevtsova (2010): Berry-Esseen constant for sums of independent, not identically distributed terms
BERRY_ESSEEN_C = 0.56


def bootstrap_means_grouped(
    discrete: Mapping[str, Sequence[float]], continuous: Sequence[float], *, draws: int, seed: int
) -> tuple[dict[str, Any], float]:
    """Per-draw means of discrete columns (exact) and one continuous column (normal), and the error bound.

    Tasks are grouped by their discrete values (pass-rate deltas are multiples of 1/k, a priced mask
    is 0/1), so how many resampled tasks land in each group is exactly Multinomial(n, group shares):
    the discrete columns' bootstrap means are exact in distribution. Given those counts, the
    continuous column's resampled sum is a sum of independent draws from each group's values,
    replaced by the normal with the same mean and variance. Berry-Esseen bounds the error of that
    step: no probability about the continuous mean (in particular "it is below 0") is off by more
    than C * sum(n_g rho_g) / (sum(n_g sigma_g^2))^1.5 at the expected group sizes n_g, which the
    second value returns (0 when the column is constant inside every group). Cost: draws x groups
    instead of draws x tasks.
    """
    import numpy as np

    names = list(discrete)
    keys = np.stack([np.asarray(discrete[k], dtype=np.float64) for k in names], axis=1)
    values = np.asarray(continuous, dtype=np.float64)
    n = values.size
    groups, inverse = np.unique(keys, axis=0, return_inverse=True)
    inverse = inverse.reshape(-1)
    sizes = np.bincount(inverse, minlength=len(groups)).astype(np.float64)
    mean = np.bincount(inverse, weights=values, minlength=len(groups)) / sizes
    centred = values - mean[inverse]
    var = np.bincount(inverse, weights=centred**2, minlength=len(groups)) / sizes
    rho = np.bincount(inverse, weights=np.abs(centred) ** 3, minlength=len(groups)) / sizes
    rng = np.random.default_rng(seed)
    hits = rng.multinomial(n, sizes / n, size=draws).astype(np.float64)
    out = {name: hits @ groups[:, i] / n for i, name in enumerate(names)}
    spread = np.sqrt(hits @ var)
    out["continuous"] = (hits @ mean + spread * rng.standard_normal(draws)) / n
    total_var = float(sizes @ var)
    bound = 0.0 if total_var <= 0 else min(1.0, BERRY_ESSEEN_C * float(sizes @ rho) / total_var**1.5)
    return out, bound


def bootstrap_mean_of_values(values: Sequence[float], *, draws: int, seed: int) -> Any:
    """Per-draw bootstrap means of one column, exploiting repeated values.

    Per-task pass-rate deltas take few distinct values (multiples of 1/k).
    Resampling n tasks with replacement only matters through how many draws
    land on each distinct value, and that count vector is exactly
    Multinomial(n, observed frequencies). Sampling it directly gives the same
    bootstrap distribution as resampling tasks, at a cost proportional to the
    number of distinct values instead of n. With many distinct values (more
    than n / 8) the task-index resampling of bootstrap_means is used instead.
    """
    import numpy as np

    data = np.asarray(values, dtype=np.float64)
    n = data.size
    if n == 0:
        raise ValueError("bootstrap needs at least one task")
    distinct, counts = np.unique(data, return_counts=True)
    if distinct.size * 8 > n:
        return bootstrap_means({"v": data}, draws=draws, seed=seed)["v"]
    rng = np.random.default_rng(seed)
    hits = rng.multinomial(n, counts / n, size=draws)
    return (hits @ distinct) / n


def percentile_interval(samples: Any, confidence: float = 0.95) -> tuple[float, float]:
    """Equal-tailed percentile interval (numpy's default linear interpolation)."""
    import numpy as np

    tail = (1.0 - confidence) / 2.0
    low, high = np.quantile(np.asarray(samples, dtype=np.float64), [tail, 1.0 - tail])
    return float(low), float(high)


def paired_bootstrap_delta(
    deltas: Sequence[float], *, draws: int = 10_000, seed: int = DEFAULT_SEED, confidence: float = 0.95
) -> BootstrapInterval | None:
    """Mean per-task delta with a seeded paired percentile bootstrap interval.

    ``deltas[i]`` is candidate pass rate minus baseline pass rate on task i.
    The percentile method is used rather than BCa: BCa's acceleration is a
    ratio of jackknife moments that is 0/0 (NaN) when every task has the same
    delta, which is the normal case for a stable suite. When all deltas are
    equal (including a single task) the bootstrap distribution is a point, so
    the interval is [delta, delta] and no resampling is done: stated in
    ``method``. ``None`` when there are no tasks.
    """
    if not deltas:
        return None
    estimate = math.fsum(deltas) / len(deltas)
    if max(deltas) == min(deltas):
        return BootstrapInterval(estimate, estimate, estimate, CONSTANT_METHOD, 0, seed, confidence)
    means = bootstrap_mean_of_values(deltas, draws=draws, seed=seed)
    low, high = percentile_interval(means, confidence)
    return BootstrapInterval(estimate, low, high, PERCENTILE_METHOD, draws, seed, confidence)


# --------------------------------------------------------------------------
# Failure classes and variance (need k >= 2 to mean anything)
# --------------------------------------------------------------------------

Outcomes = Mapping[str, Sequence[bool]]  # task id -> pass/fail per repetition


def failure_classes(base: Outcomes, cand: Outcomes) -> dict[str, dict[str, FailureClass]] | None:
    """Sort every failed run of each arm into one class.

    * ``bad-run``: the same arm passed this task in another attempt (retrying
      would help: the failure is run-to-run noise, not inability);
    * ``beyond-arm``: this arm never passed the task, the other arm did;
    * ``unsolved-by-all``: neither arm passed the task in any attempt.

    Only meaningful when some task ran at least twice in an arm: with k = 1 a
    lucky or unlucky single run cannot be told from inability, so ``None``.
    """
    tasks = sorted(set(base) & set(cand))
    if not tasks or max(max(len(base[t]), len(cand[t])) for t in tasks) < 2:
        return None
    result: dict[str, dict[str, FailureClass]] = {}
    for arm, own, other in (("baseline", base, cand), ("candidate", cand, base)):
        classes: dict[str, FailureClass] = {c: {"runs": 0, "tasks": []} for c in FAILURE_CLASSES}
        for task in tasks:
            fails = sum(1 for ok in own[task] if not ok)
            if not fails:
                continue
            if any(own[task]):
                cls = "bad-run"
            elif any(other[task]):
                cls = "beyond-arm"
            else:
                cls = "unsolved-by-all"
            classes[cls]["runs"] += fails
            classes[cls]["tasks"].append(task)
        result[arm] = classes
    return result


def variance_decomposition(base: Outcomes, cand: Outcomes) -> VarianceDecomposition | None:
    """Split the variance of 0/1 run outcomes into task, arm and run shares.

    A two-way analysis of variance on cell means (cell = task x arm):
    total SS = task SS + arm SS + task x arm SS + run-to-run SS, where
    run-to-run is the spread of repetitions inside a cell. Shares are each SS
    over the total. The decomposition is exact for a balanced design (same k
    everywhere); with unequal repetitions the interaction is the remainder,
    clipped at 0. ``shares`` is ``None`` when every run has the same outcome
    (total SS = 0: there is nothing to apportion, and 0/0 is not a share).
    """
    import numpy as np

    tasks = sorted(set(base) & set(cand))
    # one entry per run: its outcome, its cell (task x arm), its task and its arm, summed by bincount
    cells = [arm[t] for t in tasks for arm in (base, cand)]
    sizes = np.fromiter((len(c) for c in cells), dtype=np.intp, count=len(cells))
    if not sizes.sum():
        return None
    values = np.fromiter((ok for c in cells for ok in c), dtype=np.float64, count=int(sizes.sum()))
    cell = np.repeat(np.arange(len(cells)), sizes)
    task, arm = cell // 2, cell % 2
    grand = float(values.mean())
    total = float(((values - grand) ** 2).sum())
    cell_mean = np.bincount(cell, weights=values, minlength=len(cells)) / np.maximum(sizes, 1)
    within = float(((values - cell_mean[cell]) ** 2).sum())
    task_ss = _factor_ss(task, values, grand)
    arm_ss = _factor_ss(arm, values, grand)
    interaction = max(0.0, total - within - task_ss - arm_ss)
    row: VarianceDecomposition = {
        "runs": int(values.size),
        "total_ss": total,
        "ss": {"task": task_ss, "arm": arm_ss, "task_x_arm": interaction, "run_to_run": within},
        "shares": None,
    }
    if total <= 1e-12:
        row["note"] = "every run has the same outcome: no variance to apportion"
        return row
    row["shares"] = {k: v / total for k, v in row["ss"].items()}
    # The practical question behind this row: would more attempts help more
    # than a different arm? (Seed 002's "add attempts" advice.)
    row["run_to_run_exceeds_arm"] = within > arm_ss + interaction
    return row


def _factor_ss(factor: Any, values: Any, grand: float) -> float:
    """Sum over the factor's levels of runs x (level mean - grand mean)^2."""
    import numpy as np

    runs = np.bincount(factor)
    seen = runs > 0
    means = np.bincount(factor, weights=values)[seen] / runs[seen]
    return float((runs[seen] * (means - grand) ** 2).sum())


# --------------------------------------------------------------------------
# Cost-aware promotion
# --------------------------------------------------------------------------


def run_cost(usage: UsageRecord | None, basis: str) -> float | None:
    """Cost of one run on a basis: ``cost_usd``, or ``tokens`` (input + output)."""
    if not usage:
        return None
    if basis == "cost_usd":
        value = usage.get("cost_usd")
        return float(value) if _is_number(value) else None
    parts = [usage.get("input_tokens"), usage.get("output_tokens")]
    numbers = [float(p) for p in parts if _is_number(p)]
    return math.fsum(numbers) if numbers else None


def choose_cost_basis(usages: Sequence[UsageRecord | None]) -> str | None:
    """``cost_usd`` when at least 80% of runs have a price, else ``tokens`` when
    at least 80% report tokens, else ``None`` (too little to compare costs)."""
    if not usages:
        return None
    for basis in ("cost_usd", "tokens"):
        have = sum(1 for u in usages if run_cost(u, basis) is not None)
        if have >= COST_COVERAGE * len(usages):
            return basis
    return None


def _is_number(value: object) -> TypeGuard[int | float]:
    return isinstance(value, (int, float)) and not isinstance(value, bool) and math.isfinite(value)


PROMOTION_EXACT = "paired bootstrap over tasks"
PROMOTION_GROUPED = (
    "paired bootstrap over tasks: pass-rate deltas exact by group, the cost difference by its normal "
    "approximation (Berry-Esseen bound in approximation_error)"
)


def _priced_costs(
    base_cost: Sequence[float | None], cand_cost: Sequence[float | None]
) -> tuple[list[float], list[float], list[float]]:
    """(1.0 where both arms priced the task else 0.0, and each arm's costs with 0.0 where not both did)."""
    both = [(b, c) if b is not None and c is not None else None for b, c in zip(base_cost, cand_cost, strict=False)]
    mask = [1.0 if pair else 0.0 for pair in both]
    cb = [pair[0] if pair else 0.0 for pair in both]
    cc = [pair[1] if pair else 0.0 for pair in both]
    return mask, cb, cc


def _promotion_means(
    columns: dict[str, Sequence[float]], n: int, draws: int, seed: int
) -> tuple[dict[str, Any], float | None]:
    """The columns' bootstrap means: exact up to EXACT_BOOTSTRAP_BUDGET, else grouped with its error bound."""
    if n * draws > EXACT_BOOTSTRAP_BUDGET:
        discrete = {k: v for k, v in columns.items() if k != "d"}
        m, error_bound = bootstrap_means_grouped(discrete, columns["d"], draws=draws, seed=seed)
        m["d"] = m.pop("continuous")
        return m, error_bound
    return bootstrap_means(columns, draws=draws, seed=seed), None


def _support_and_cost_interval(
    m: Mapping[str, Any], draws: int, eps: float, confidence: float
) -> tuple[float, float, float]:
    """From the draws' column means: the share where quality holds and cost drops, and the cost interval."""
    import numpy as np

    share = m["m"] if "m" in m else np.ones(draws)
    has = share > 0
    cheaper = has & (m["d"] < 0)
    keeps = m["q"] >= -eps - 1e-12  # tolerance: deltas are sums of multiples of 1/k
    support = float(np.mean(cheaper & keeps))
    diff = np.where(has, m["d"] / np.where(has, share, 1.0), 0.0)  # mean difference per priced task
    low, high = percentile_interval(diff, confidence)
    return support, low, high


def promotion_support(
    quality_deltas: Sequence[float],
    base_cost: Sequence[float | None],
    cand_cost: Sequence[float | None],
    *,
    eps: float,
    draws: int = 10_000,
    seed: int = DEFAULT_SEED,
    confidence: float = 0.95,
) -> Promotion:
    """Bootstrap support that the candidate keeps quality at a lower cost.

    Per task: the pass-rate delta and each arm's mean cost per run (``None``
    where an arm has no cost for the task; such tasks count for quality but
    not for cost). Each draw resamples tasks with replacement and asks: is
    the quality delta >= -eps AND is the candidate's mean cost per run below
    the baseline's on the tasks both arms priced? ``support`` is the share of
    draws where both hold. A draw that contains no priced task counts as
    "not cheaper".

    Up to EXACT_BOOTSTRAP_BUDGET task draws (tasks x draws) the tasks are
    resampled; above it (10,000 tasks x 10,000 draws is 10^8 gathers) the
    cost side is read through bootstrap_means_grouped, whose Berry-Esseen
    bound is returned as ``approximation_error`` (None when exact).
    """
    n = len(quality_deltas)
    if not (n == len(base_cost) == len(cand_cost)) or n == 0:
        raise ValueError("need one quality delta and one cost per arm for each task, and at least one task")
    mask, cb, cc = _priced_costs(base_cost, cand_cost)
    priced = int(sum(mask))
    if priced == 0:
        return {"support": 0.0, "priced_tasks": 0, "note": "no task has a cost in both arms"}
    base_mean = math.fsum(cb) / priced
    cand_mean = math.fsum(cc) / priced
    # Cheaper within a draw <=> the summed per-task cost difference over the
    # priced tasks drawn is negative, so one column carries the cost side.
    columns = {"q": quality_deltas, "d": [c - b for b, c in zip(cb, cc, strict=False)]}
    if priced < n:
        columns["m"] = mask  # only needed when some task is unpriced
    m, error_bound = _promotion_means(columns, n, draws, seed)
    support, low, high = _support_and_cost_interval(m, draws, eps, confidence)
    return {
        "support": support,
        "priced_tasks": priced,
        "baseline_mean_cost": base_mean,
        "candidate_mean_cost": cand_mean,
        "cost_delta": cand_mean - base_mean,
        "cost_delta_ci": [low, high],
        "cost_change": (cand_mean - base_mean) / base_mean if base_mean > 0 else None,
        "quality_delta": math.fsum(quality_deltas) / n,
        "draws": draws,
        "seed": seed,
        "method": PROMOTION_EXACT if error_bound is None else PROMOTION_GROUPED,
        # with the grouped method: how far support (and the interval's tail shares) may be from exact
        "approximation_error": error_bound,
    }
