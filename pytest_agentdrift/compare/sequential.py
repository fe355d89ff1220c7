"""Confirm on suspicion: a group-sequential test of one task's critical checks against a pooled baseline.

Pure; scipy is imported inside the functions that need it. A pull request runs
every task ``looks[0]`` times. A task whose evidence is not yet decided gets
more runs of that task only, up to the next look, until the evidence decides
or the cap (``looks[-1]``) is reached. docs/statistics.md ("Confirming on
suspicion") has the rules; keep the two in step.

Hypotheses of one task. One per critical check that failed in either arm
(and the safety layer): "the candidate fails this more often than the
pooled baseline". The task's pass rate (a lost task) is read the same way
to decide whether more runs are worth buying, but it is not a hypothesis of
the task's family: a lost task is decided by the paired test over the tasks
(compare/gates.py), which keeps its own share of alpha and reads the extra
runs too. Each is Fisher's exact one-sided
conditional test on (baseline failures, baseline runs) against (candidate
failures, candidate runs), where the counts are effective counts when the
pool shows night-to-night variation (see ``design_effect``).

Levels fixed in advance, so each worker decides alone. The family is every
(task, look, hypothesis) and the paired test. Its alpha is split evenly over
the tasks and the paired test (``tasks + 1`` shares) and, within
a task, over the looks in proportion to the runs each look adds (the alpha
spending function alpha x t with t the share of the cap run so far; summing
the spent shares is Bonferroni, valid whatever the dependence between
looks, and it keeps most of the alpha for the look that has most runs), and within a
task at a look Tarone's rule counts only the hypotheses whose margins could
reach the level at all (a check with one failure in all runs of both arms
can never be significant and costs nothing). Family-wise error <= alpha, the
interim looks included, without knowing the other tasks' data.

Stopping, at each look, per task:
  new         some hypothesis is significant at its level: decided, blocks;
  futile      no hypothesis can still become significant at the cap with a
              conditional power of at least ``futility`` under the rate
              observed so far: decided, not blocking (said as what it could
              not have detected);
  clear       the candidate failed nothing the baseline did not already fail
              at least as often: decided, nothing to confirm;
  continue    otherwise: run the task up to the next look.
"""

from __future__ import annotations

from bisect import bisect_left
from dataclasses import dataclass
from functools import lru_cache
from math import ceil, comb, floor
from typing import Mapping, Sequence

PASS_RATE = "pass rate"  # the task's own pass rate, tested like a check (a lost task)
NEW, FUTILE, CLEAR, CONTINUE = "new", "futile", "clear", "continue"
DEFAULT_FUTILITY = 0.1


@dataclass(frozen=True)
class ConfirmPlan:
    """The looks (cumulative runs per task), the family's alpha and its size, fixed before any run."""

    looks: tuple[int, ...]
    alpha: float
    tasks: int
    futility: float = DEFAULT_FUTILITY

    @property
    def cap(self) -> int:
        return self.looks[-1]

    def level(self, runs: int) -> float:
        """One task's share of alpha at the look of ``runs`` runs: alpha spent in proportion to the runs
        the look adds (the spending function alpha x t, t = runs / cap), split evenly over the tasks."""
        i = self.looks.index(runs)
        added = runs - (self.looks[i - 1] if i else 0)
        return self.alpha * added / self.cap / (self.tasks + 1)

    @property
    def paired_level(self) -> float:
        """The paired test's share: one of ``tasks + 1``."""
        return self.alpha / (self.tasks + 1)


def plan_looks(k: int, cap: int) -> tuple[int, ...]:
    """k, then about sqrt(k x cap), then the cap: three looks spaced geometrically (fewer when close)."""
    if cap <= k:
        return (k,)
    middle = round((k * cap) ** 0.5)
    return tuple(sorted({k, middle, cap})) if k < middle < cap else (k, cap)


@dataclass(frozen=True)
class Counts:
    """One hypothesis of one task: failures and runs in the pool and in the candidate so far."""

    check: str
    base_failed: int
    base_runs: int
    cand_failed: int
    cand_runs: int


@lru_cache(maxsize=65536)
def fisher_sf(base_failed: int, base_runs: int, cand_failed: int, cand_runs: int) -> float:
    """P(candidate failures >= observed) given both arms' total failures (hypergeometric)."""
    total, failed = base_runs + cand_runs, base_failed + cand_failed
    if cand_failed <= 0 or failed == 0:
        return 1.0
    hi = min(failed, cand_runs)
    denom = comb(total, cand_runs)
    tail = sum(comb(failed, x) * comb(total - failed, cand_runs - x) for x in range(cand_failed, hi + 1))
    return min(1.0, tail / denom)


def design_effect(rho: float, runs_per_cluster: float) -> float:
    """Kish's design effect 1 + (m - 1) rho: how many runs of one night count as one independent run."""
    return max(1.0, 1.0 + (runs_per_cluster - 1.0) * max(rho, 0.0))


def effective(c: Counts, base_effect: float, cand_effect: float) -> Counts:
    """The counts as independent runs (Rao-Scott), rounded the conservative way: the pool's failures up,
    the candidate's down."""
    if base_effect == 1.0 and cand_effect == 1.0:
        return c
    bn = max(1, round(c.base_runs / base_effect))
    cn = max(1, round(c.cand_runs / cand_effect))
    bf = min(bn, ceil(c.base_failed * bn / c.base_runs))
    cf = min(cn, floor(c.cand_failed * cn / c.cand_runs))
    return Counts(c.check, bf, bn, cf, cn)


def _min_p(c: Counts) -> float:
    """The smallest p-value these margins allow (every candidate run failing that could)."""
    total_failed = c.base_failed + c.cand_failed
    return fisher_sf(
        total_failed - min(total_failed, c.cand_runs), c.base_runs, min(total_failed, c.cand_runs), c.cand_runs
    )


def tarone_count(min_p: Sequence[float], level: float) -> int:
    """The smallest m with #{min_p < level / m} <= m (at least 1)."""
    ordered = sorted(min_p)
    m = 1
    while bisect_left(ordered, level / m) > m:
        m += 1
    return m


@dataclass(frozen=True)
class Look:
    """What one look decided for one task."""

    state: str
    runs: int
    level: float
    new: tuple[str, ...] = ()
    p_values: tuple[tuple[str, float], ...] = ()
    power: float | None = (
        None  # conditional power of the most promising hypothesis, when it continued or stopped futile
    )


def look(plan: ConfirmPlan, runs: int, hyps: Sequence[Counts], *, base_effect: float = 1.0, rho: float = 0.0) -> Look:
    """Decide one task at the look of ``runs`` candidate runs (one of the plan's looks)."""
    adjusted = [effective(h, base_effect, design_effect(rho, h.cand_runs)) for h in hyps]
    checks = [h for h in adjusted if h.check != PASS_RATE]
    share = plan.level(runs)
    level = share / tarone_count([_min_p(h) for h in checks], share)
    p_values = tuple(
        (h.check, fisher_sf(h.base_failed, h.base_runs, h.cand_failed, h.cand_runs)) for h in adjusted if h.cand_failed
    )
    new = tuple(check for check, p in p_values if p < level and check != PASS_RATE)
    if new:
        return Look(NEW, runs, level, new, p_values)
    suspicious = [
        h
        for h in hyps
        if h.check != PASS_RATE and h.cand_failed and h.cand_failed * h.base_runs > h.base_failed * h.cand_runs
    ]
    lost = any(
        h.check == PASS_RATE and _solved(h.base_failed, h.base_runs) and not _solved(h.cand_failed, h.cand_runs)
        for h in hyps
    )
    if not suspicious and not lost:
        return Look(CLEAR, runs, level, (), p_values)
    if runs >= plan.cap:
        return Look(FUTILE, runs, level, (), p_values, 0.0)
    at_cap = plan.level(plan.cap) / max(len(checks), 1)  # the cap's level, counting every check (conservative)
    power = max((_conditional_power(plan, h, base_effect, rho, at_cap) for h in suspicious), default=0.0)
    if lost and runs == plan.looks[0]:  # a lost task gets one more look: the paired test reads them all
        return Look(CONTINUE, runs, level, (), p_values, power)
    return Look(CONTINUE if power >= plan.futility else FUTILE, runs, level, (), p_values, power)


def _solved(failed: int, runs: int) -> bool:
    """A strict majority of the runs passed (docs/statistics.md, 'What counts as a pass')."""
    return 2 * (runs - failed) > runs


def _conditional_power(plan: ConfirmPlan, h: Counts, base_effect: float, rho: float, level: float) -> float:
    """P(significant at the cap | the runs so far, the rate seen so far): the chance that running to the
    cap decides, were the candidate to go on failing at the rate it shows (kept off 0 and 1)."""
    more = plan.cap - h.cand_runs
    rate = (h.cand_failed + 0.5) / (h.cand_runs + 1.0)
    cap_effect = design_effect(rho, plan.cap)
    power = 0.0
    for extra in range(more, -1, -1):
        final = effective(
            Counts(h.check, h.base_failed, h.base_runs, h.cand_failed + extra, plan.cap), base_effect, cap_effect
        )
        if fisher_sf(final.base_failed, final.base_runs, final.cand_failed, final.cand_runs) >= level:
            break  # fewer failures only raise the p-value
        power += comb(more, extra) * rate**extra * (1.0 - rate) ** (more - extra)
    return power


def task_hypotheses(
    base_fails: Mapping[str, int], base_runs: int, cand_fails: Mapping[str, int], cand_runs: int
) -> list[Counts]:
    """One task's hypotheses from failure counts per check (PASS_RATE included by the caller as a check)."""
    checks = sorted(set(base_fails) | set(cand_fails))
    return [Counts(c, base_fails.get(c, 0), base_runs, cand_fails.get(c, 0), cand_runs) for c in checks]


def sequence(
    plan: ConfirmPlan,
    per_run: Sequence[Sequence[str]],
    base_fails: Mapping[str, int],
    base_runs: int,
    *,
    base_effect: float = 1.0,
    rho: float = 0.0,
) -> list[Look]:
    """The looks one task went through, from its candidate runs in order (each: the hypotheses it failed).

    The same function decides while a session runs (on the runs so far) and when the record is read
    again, so a record always says where and why each task stopped."""
    looks: list[Look] = []
    for n in plan.looks:
        if n > len(per_run):
            break
        fails: dict[str, int] = {}
        for failed in per_run[:n]:
            for check in set(failed):
                fails[check] = fails.get(check, 0) + 1
        decided = look(plan, n, task_hypotheses(base_fails, base_runs, fails, n), base_effect=base_effect, rho=rho)
        looks.append(decided)
        if decided.state != CONTINUE:
            break
    return looks


@dataclass(frozen=True)
class Dispersion:
    """Night-to-night variation in a pool: the intra-record correlation and whether it is real."""

    rho: float
    p_value: float
    runs_per_record: float
    records: int

    @property
    def base_effect(self) -> float:
        return design_effect(self.rho, self.runs_per_record)


def dispersion(groups: Sequence[Sequence[tuple[int, int]]], alpha: float = 0.1) -> Dispersion:
    """Overdispersion of failure counts across records, pooled over every (task, check) with failures.

    ``groups``: for each (task, check), the (failures, runs) of each record. Homogeneity is tested by
    the chi-square statistic of the counts against each group's pooled rate; when it rejects at
    ``alpha`` the intra-record correlation is the ANOVA estimate (Fleiss), else 0 (plain binomial)."""
    from scipy.stats import chi2

    chi, df, msb_num, msw_num, dfb, dfw, sizes = 0.0, 0, 0.0, 0.0, 0, 0, []
    for group in groups:
        group = [(x, n) for x, n in group if n > 0]
        x_all, n_all = sum(x for x, _ in group), sum(n for _, n in group)
        if len(group) < 2 or x_all == 0 or x_all == n_all:
            continue
        p = x_all / n_all
        chi += sum((x - n * p) ** 2 / (n * p * (1 - p)) for x, n in group)
        df += len(group) - 1
        msb_num += sum(n * (x / n - p) ** 2 for x, n in group)
        msw_num += sum(x * (1 - x / n) for x, n in group)
        dfb += len(group) - 1
        dfw += n_all - len(group)
        sizes += [n for _, n in group]
    records = max((len(g) for g in groups), default=0)
    m = sum(sizes) / len(sizes) if sizes else 1.0
    if df == 0 or dfw == 0:
        return Dispersion(0.0, 1.0, m, records)
    p_value = float(chi2.sf(chi, df))
    msb, msw = msb_num / dfb, msw_num / dfw
    rho = (msb - msw) / (msb + (m - 1) * msw) if msb + (m - 1) * msw > 0 else 0.0
    return Dispersion(max(rho, 0.0) if p_value < alpha else 0.0, p_value, m, records)
