"""Confirm on suspicion: screen every task with a few runs, confirm the suspicious ones with fresh runs.

Pure; scipy is imported inside the function that needs it. docs/statistics.md
("Confirming on suspicion") has the rules; keep the two in step.

Screen. A pull request runs every task ``k`` times. A task is **screened**
when one of its critical checks (or its safety layer) failed in those runs
at least as often as the pool makes rare (``SCREEN_LEVEL``; a check the pool
seldom fails screens on any failure): the threshold is fixed by the pool
before any candidate run, and the test that follows reads the confirming runs
only, so the screen chooses tasks without biasing that test. A task the
baseline solved and the screen did not (a **lost** task) gets one batch of
confirming runs too; they feed the paired test over the tasks, which decides
lost tasks with its own share of alpha.

Confirm. A screened task runs again, in batches of 2, 4, 6, ... runs
(``batch_looks``: 3, 5, 9, 15, 23, 30 for k = 3), up to ``cap`` runs in all. Its hypotheses, one per
critical check that failed in the pool or in the confirming runs, "the
candidate fails this more often than the pooled baseline", are tested on the
**confirming runs only** (the screen's runs chose the task and would bias the
test) against the pool at each look, with Boschloo's exact unconditional
one-sided test (scipy): exact like Fisher's, and uniformly more powerful,
since it does not condition on the total failures of both arms.

Levels. Alpha is split before any confirming run: the paired test keeps a
fixed share ``alpha / (tasks + 1)``; the rest is split evenly over the S
screened tasks (S is known once the screen is over, before any confirming
run) and, within a task, over its looks by the spending function
alpha x t ** 3 (t: the share of the confirming runs made by a look): little
early, most at the cap. Within a task at a look, Tarone's rule counts only
the hypotheses whose margins could reach the level at all.
Given the screen, the confirming runs are fresh draws, so under the null
they are exchangeable with the pool's runs and each test is exact; the union
bound over tasks, looks and hypotheses then holds the family-wise error at
alpha whatever was stopped early. Each task's own batches are decided by its
own data (a worker decides alone); the level depends on S only, which the
controller fixes when the screen is over.

Stopping, at each look of a screened task:
  new         some hypothesis is significant at its level: decided, blocks;
  clear       every hypothesis's confirming runs are at least 1 / ``futility``
  / futile    times likelier under the pool's rate p0 than under the
              behaviour the design is powered for (a new failure in half the
              runs: p1 = p0 + (1 - p0) / 2); "clear" when they also failed
              nothing more often than the pool, "futile" when they did
              (decided, not blocking, said with what it could not detect).
              A hypothesis that could not become significant by the cap even
              if every run left failed it asks for no runs. The cap reached
              without significance is futile too;
  continue    otherwise: one more batch.

Why the futility rule costs at most ``futility`` of the power: under the
alternative the likelihood ratio p(runs | p0) / p(runs | p1) is a
nonnegative martingale with mean 1, so by Ville's inequality it ever reaches
1 / futility with probability at most ``futility``, however often it is
looked at. It never raises the false-alarm rate: it only stops a task
without blocking.
"""

from __future__ import annotations

import math
from bisect import bisect_left
from dataclasses import dataclass
from functools import cached_property, lru_cache
from math import ceil, comb, floor
from typing import TYPE_CHECKING, Mapping, Sequence

if TYPE_CHECKING:
    import numpy as np
    from numpy.typing import NDArray

    #: per night of a (task, check) with failures: its failures, its runs, the (task, check)'s pooled rate
    NightArrays = tuple[NDArray[np.float64], NDArray[np.float64], NDArray[np.float64]]

PASS_RATE = "pass rate"  # the task's own pass rate, read to confirm a lost task
NEW, FUTILE, CLEAR, CONTINUE, SCREENED_OUT = "new", "futile", "clear", "continue", "screened_out"
DEFAULT_FUTILITY = 0.05  # the most power the futility stop may cost against the design's alternative
HALF = 0.5  # the design's alternative: a new failure in half the runs
#: the level of the test that decides whether a pool's nights vary. Both errors cost: variation missed
#: raises false alarms, and variation seen by chance makes the confirming runs (one night's) count for
#: less. At 0.25 one pool in five of nights that did not vary was read as varying, costing about eight
#: points of power; at 0.1 the power is nearly whole (docs/statistics.md measures both)
HOMOGENEITY_LEVEL = 0.1
#: alpha spent as alpha * t ** 3 over a task's confirming runs (t: the share made by a look): little at
#: the early looks, where few runs could reject anyway, most at the cap, where a changed task decides
SPENDING_POWER = 3.0
#: the screen sends a task on when its first runs fail a check at least as often as the pool would
#: produce this rarely: any failure of a check the pool fails in under about 15 % of its runs (k = 3)
SCREEN_LEVEL = 0.4


@dataclass(frozen=True)
class ConfirmPlan:
    """The screen (``k`` runs per task), the cap, the family's alpha and its task count, fixed in advance.

    ``schedule``: the looks as a record wrote them (empty: this version's rule, ``batch_looks``);
    ``spending``: the power of the alpha-spending function (1 spends in proportion to the runs added);
    ``screen_level``: the screen's level against the pool (None: any failure screens). Records written
    before these were recorded read as 1, ``growth_looks`` and None, the rules they were decided by."""

    k: int
    cap: int
    alpha: float
    tasks: int
    futility: float = DEFAULT_FUTILITY
    spending: float = SPENDING_POWER
    schedule: tuple[int, ...] = ()
    screen_level: float | None = SCREEN_LEVEL

    @cached_property  # read at every look of every task; the plan is frozen, so computed once
    def looks(self) -> tuple[int, ...]:
        """Cumulative runs of a screened task at each look (see ``batch_looks``)."""
        return self.schedule or batch_looks(self.k, self.cap)

    @property
    def paired_level(self) -> float:
        """The paired test's share of alpha, fixed before any run."""
        return self.alpha / (self.tasks + 1)

    def level(self, screened: int, runs: int) -> float:
        """One screened task's share of alpha at the look of ``runs`` runs in all (the screen's included):
        the spending function alpha * t ** spending, t the share of the confirming runs made by then."""
        i = self.looks.index(runs)
        span = self.cap - self.k
        spent = math.pow((runs - self.k) / span, self.spending) - math.pow(
            (self.looks[i - 1] - self.k) / span, self.spending
        )
        return (self.alpha - self.paired_level) / max(screened, 1) * spent


def batch_looks(k: int, cap: int) -> tuple[int, ...]:
    """Cumulative runs at each look: k, then batches of 2, 4, 6, ... runs, then the cap: 3, 5, 9, 15,
    23, 30 for k = 3 and a cap of 30.

    The first batches are small because most screened tasks are unchanged ones that flaked once, and
    those stop after a few clean runs (the futility rule); the batches grow so a changed task reaches
    the cap in a handful of looks."""
    looks = [k]
    # a look goes in only if the cap stays at least half a batch beyond it (no batch of one run at the end)
    while (nxt := looks[-1] + 2 * len(looks)) < cap and cap - nxt > len(looks):
        looks.append(nxt)
    if cap > k:
        looks.append(cap)
    return tuple(looks)


def growth_looks(k: int, cap: int) -> tuple[int, ...]:
    """The looks of records written before the schedule was recorded: each half again the one before
    (rounded up), then the cap. Kept so such a record decides as it did when it was written."""
    looks = [k]
    while ceil(looks[-1] * 1.5) < cap:
        looks.append(ceil(looks[-1] * 1.5))
    if cap > k:
        looks.append(cap)
    return tuple(looks)


@dataclass(frozen=True)
class Counts:
    """One hypothesis of one task: failures and runs in the pool and in the confirming runs so far."""

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
    tail = sum(comb(failed, x) * comb(total - failed, cand_runs - x) for x in range(cand_failed, hi + 1))
    return min(1.0, tail / comb(total, cand_runs))


@lru_cache(maxsize=65536)
def exceed_p(base_failed: int, base_runs: int, cand_failed: int, cand_runs: int) -> float:
    """One-sided p-value that the candidate fails more often than the baseline: Boschloo's exact test.

    It orders the tables by Fisher's p-value and takes the largest tail probability over the common
    failure rate (the nuisance parameter), so it holds its level whatever that rate is and rejects
    at least whenever Fisher's test does."""
    failed, total = base_failed + cand_failed, base_runs + cand_runs
    if cand_failed <= 0 or failed == 0 or failed == total:
        return 1.0
    from scipy.stats import boschloo_exact

    table = [[cand_failed, base_failed], [cand_runs - cand_failed, base_runs - base_failed]]
    p = float(boschloo_exact(table, alternative="greater", n=64).pvalue)
    return min(1.0, p) if p == p else 1.0  # nan (a degenerate table) decides nothing


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
    bf = min(bn, ceil(c.base_failed * bn / c.base_runs)) if c.base_runs else 0
    cf = min(cn, floor(c.cand_failed * cn / c.cand_runs)) if c.cand_runs else 0
    return Counts(c.check, bf, bn, cf, cn)


def _min_p(c: Counts) -> float:
    """The smallest p-value these margins allow (as many candidate failures as could be)."""
    total = c.base_failed + c.cand_failed
    most = min(total, c.cand_runs)
    return exceed_p(total - most, c.base_runs, most, c.cand_runs)


def tarone_count(min_p: Sequence[float], level: float) -> int:
    """The smallest m with #{min_p < level / m} <= m (at least 1)."""
    ordered = sorted(min_p)
    m = 1
    while bisect_left(ordered, level / m) > m:
        m += 1
    return m


@dataclass(frozen=True)
class Look:
    """What one look decided for one task: its state, runs in all, level, what was new, the p-values."""

    state: str
    runs: int
    level: float | None = None
    new: tuple[str, ...] = ()
    p_values: tuple[tuple[str, float], ...] = ()
    odds: float | None = None  # the smallest null-to-alternative likelihood ratio, when futility was asked


@dataclass(frozen=True)
class Pool:
    """One task's pooled baseline: failures per hypothesis, runs, and the pool's night-to-night variation."""

    fails: Mapping[str, int]
    runs: int
    base_effect: float = 1.0
    rho: float = 0.0


def _tally(runs: Sequence[Sequence[str]]) -> dict[str, int]:
    fails: dict[str, int] = {}
    for failed in runs:
        for check in set(failed):
            fails[check] = fails.get(check, 0) + 1
    return fails


def screened(first: Sequence[Sequence[str]], pool: Pool | None = None, level: float | None = SCREEN_LEVEL) -> bool:
    """The screen: a critical check (or the safety layer) failed in the task's first runs more often than
    its pool makes unremarkable (P(as many failures or more | the pool's rate) at most ``level``);
    without a pool or a level, any failure.

    Read against the pool, a check that flakes in a fifth of the nightly runs needs two failures in
    three to send its task on, so a flaky suite does not confirm most of its tasks on every pull
    request; a check the pool rarely or never fails still sends its task on at its first failure."""
    fails = _tally(first)
    fails.pop(PASS_RATE, None)
    if pool is None or level is None:
        return bool(fails)
    return any(_screen_tail(len(first), x, pool.fails.get(c, 0), pool.runs) <= level for c, x in fails.items())


def screen_needs(plan: ConfirmPlan, base_failed: int, base_runs: int) -> int | None:
    """The fewest failures of one check in the screen's ``k`` runs that send a task on, against a pool
    that failed it ``base_failed`` times in ``base_runs`` (None: no count does)."""
    level = plan.screen_level
    needs = (
        x for x in range(1, plan.k + 1) if level is None or _screen_tail(plan.k, x, base_failed, base_runs) <= level
    )
    return next(needs, None)


@lru_cache(maxsize=4096)
def _screen_tail(k: int, failed: int, base_failed: int, base_runs: int) -> float:
    """P(at least ``failed`` failures in ``k`` runs) at the pool's rate, kept off 0 (as ``null_odds``)."""
    from pytest_agentdrift.compare.stats import binomial_tail_pvalue

    return binomial_tail_pvalue(failed, k, (base_failed + 0.5) / (base_runs + 1.0))


def lost(first: Sequence[Sequence[str]], pool: Pool) -> bool:
    """The baseline solved the task and its first runs did not (a strict majority of passes)."""
    base_pass = pool.runs - pool.fails.get(PASS_RATE, 0)
    cand_pass = len(first) - sum(PASS_RATE in failed for failed in first)
    return 2 * base_pass > pool.runs and not 2 * cand_pass > len(first)


def look(
    plan: ConfirmPlan,
    screened_tasks: int | None,
    runs: int,
    confirming: Sequence[Sequence[str]],
    pool: Pool,
    suspected: Sequence[str] = (),
) -> Look:
    """Decide one screened task at the look of ``runs`` runs in all, from its confirming runs so far.

    ``suspected``: the checks the screen's runs failed, the reason for confirming: each stays a
    hypothesis even while the confirming runs have not failed it (clean confirming runs of a
    check that never failed in the pool are evidence for the null, not the absence of a question).
    ``screened_tasks`` None: not known yet (a worker while other tasks still screen): the level is the
    one of every task screened, the lowest it can be, so what it calls new stays new."""
    screened_tasks = plan.tasks if screened_tasks is None else screened_tasks
    fails = _tally(confirming)
    checks = sorted((set(pool.fails) | set(fails) | set(suspected)) - {PASS_RATE})
    cand_effect = design_effect(pool.rho, len(confirming))
    raw = [Counts(c, pool.fails.get(c, 0), pool.runs, fails.get(c, 0), len(confirming)) for c in checks]
    hyps = [effective(h, pool.base_effect, cand_effect) for h in raw]
    share = plan.level(screened_tasks, runs)
    level = share / tarone_count([_min_p(h) for h in hyps], share)
    p_values = tuple(
        (h.check, exceed_p(h.base_failed, h.base_runs, h.cand_failed, h.cand_runs)) for h in hyps if h.cand_failed
    )
    new = tuple(check for check, p in p_values if p < level)
    if new:
        return Look(NEW, runs, level, new, p_values)
    above = any(h.cand_failed * h.base_runs > h.base_failed * h.cand_runs for h in hyps)
    if runs >= plan.cap:
        return Look(FUTILE if above else CLEAR, runs, level, (), p_values)
    # a hypothesis that could not be significant by the cap, whatever the runs left do, asks for none
    open_hyps = [e for h, e in zip(raw, hyps, strict=True) if _reachable(plan, screened_tasks, h, pool)]
    odds = min((null_odds(h) for h in open_hyps), default=float("inf"))
    if odds * plan.futility < 1.0:
        return Look(CONTINUE, runs, level, (), p_values, odds)
    return Look(FUTILE if above else CLEAR, runs, level, (), p_values, odds)


def _reachable(plan: ConfirmPlan, screened_tasks: int, h: Counts, pool: Pool) -> bool:
    """Could this hypothesis still be significant at the cap, were every run left to fail it? (A check
    the baseline fails in nearly every run leaves no room: more runs cannot show it failing more.)"""
    left = plan.cap - plan.k - h.cand_runs
    final = Counts(h.check, h.base_failed, h.base_runs, h.cand_failed + left, h.cand_runs + left)
    final = effective(final, pool.base_effect, design_effect(pool.rho, final.cand_runs))
    return exceed_p(final.base_failed, final.base_runs, final.cand_failed, final.cand_runs) < plan.level(
        screened_tasks, plan.cap
    )


def null_odds(h: Counts) -> float:
    """How much likelier the confirming runs are under the pool's rate p0 than under the design's
    alternative p1 = p0 + (1 - p0) / 2 (a new failure in half the runs); p0 kept off 0 and 1."""
    p0 = (h.base_failed + 0.5) / (h.base_runs + 1.0)
    p1 = p0 + (1.0 - p0) * HALF
    return float((p0 / p1) ** h.cand_failed * ((1.0 - p0) / (1.0 - p1)) ** (h.cand_runs - h.cand_failed))


def sequence(plan: ConfirmPlan, screened_tasks: int | None, per_run: Sequence[Sequence[str]], pool: Pool) -> list[Look]:
    """The looks one task went through, from its runs in order (each: the hypotheses that run failed).

    The same function decides while a session runs (on the runs so far) and when the record is read
    again, so a record always says where and why each task stopped."""
    first = per_run[: plan.k]
    if not screened(first, pool, plan.screen_level):
        if lost(first, pool) and len(plan.looks) > 1 and len(per_run) >= plan.looks[1]:
            return [Look(CONTINUE, plan.k), Look(CLEAR, plan.looks[1])]  # confirmed for the paired test
        return [Look(SCREENED_OUT, plan.k)]
    looks = [Look(CONTINUE, plan.k)]
    suspected = sorted(_tally(first))
    for n in plan.looks[1:]:
        if n > len(per_run):
            break
        decided = look(plan, screened_tasks, n, per_run[plan.k : n], pool, suspected)
        looks.append(decided)
        if decided.state != CONTINUE:
            break
    return looks


def runs_wanted(plan: ConfirmPlan, screened_tasks: int | None, per_run: Sequence[Sequence[str]], pool: Pool) -> int:
    """How many runs of this task the design asks for, given the runs it has: the next look's count while
    the task is undecided, else the runs it already has."""
    looks = sequence(plan, screened_tasks, per_run, pool)
    last = looks[-1]
    if last.state == CONTINUE:
        later = [n for n in plan.looks if n > last.runs]
        return later[0] if later else last.runs
    return last.runs


@dataclass(frozen=True)
class Dispersion:
    """Night-to-night variation in a pool: the intra-record correlation and whether it is real.

    ``rho_upper``: the most variation the pool cannot rule out (``NIGHT_BOUND_CONFIDENCE``), which the
    pool states beside ``rho``: a pool of few nights with few failures cannot tell nights that vary from
    nights that do not, and where nights vary that much the gate's false alarms exceed alpha. None when no
    check failed in the pool (nothing to vary)."""

    rho: float
    p_value: float
    runs_per_record: float
    records: int
    rho_upper: float | None = None

    @property
    def base_effect(self) -> float:
        return design_effect(self.rho, self.runs_per_record)


def dispersion(groups: Sequence[Sequence[tuple[int, int]]], alpha: float = HOMOGENEITY_LEVEL) -> Dispersion:
    """Overdispersion of failure counts across records, pooled over every (task, check) with failures.

    ``groups``: for each (task, check), the (failures, runs) of each record. Homogeneity is tested by the
    chi-square statistic of the counts against each group's pooled rate; when it rejects at ``alpha`` the
    intra-record correlation is the ANOVA estimate (Fleiss), else 0 (plain binomial)."""
    from scipy.stats import chi2

    chi, df, msb_num, msw_num, dfw, sizes = 0.0, 0, 0.0, 0.0, 0, []
    for p, kept in _varying(groups):
        n_all = sum(n for _, n in kept)
        chi += sum((x - n * p) ** 2 / (n * p * (1 - p)) for x, n in kept)
        df += len(kept) - 1
        msb_num += sum(n * (x / n - p) ** 2 for x, n in kept)
        msw_num += sum(x * (1 - x / n) for x, n in kept)
        dfw += n_all - len(kept)
        sizes += [n for _, n in kept]
    records = max((len(g) for g in groups), default=0)
    m = sum(sizes) / len(sizes) if sizes else 1.0
    if df == 0 or dfw == 0:
        return Dispersion(0.0, 1.0, m, records)
    p_value = float(chi2.sf(chi, df))
    msb, msw = msb_num / df, msw_num / dfw
    rho = (msb - msw) / (msb + (m - 1) * msw) if msb + (m - 1) * msw > 0 else 0.0
    return Dispersion(max(rho, 0.0) if p_value < alpha else 0.0, p_value, m, records, rho_upper(groups))


def _varying(groups: Sequence[Sequence[tuple[int, int]]]) -> list[tuple[float, list[tuple[int, int]]]]:
    """The (task, check)s whose nights can show variation, with their pooled rate and their nights that
    ran: at least two such nights, and failures in some runs but not all."""
    out = []
    for group in groups:
        kept = [(x, n) for x, n in group if n > 0]
        x_all, n_all = sum(x for x, _ in kept), sum(n for _, n in kept)
        if len(kept) >= 2 and 0 < x_all < n_all:
            out.append((x_all / n_all, kept))
    return out


def _night_loglik(nights: NightArrays, rho: float) -> float:
    """The pool's beta-binomial log-likelihood at intra-night correlation ``rho``: ``nights`` holds, per
    night of a (task, check), its failures, runs and the (task, check)'s pooled rate (numpy arrays). The
    binomial coefficients, the same at every rho, are left out."""
    import numpy as np
    from scipy.special import betaln

    x, n, p = nights
    if rho <= 0.0:
        return float(np.sum(x * np.log(p) + (n - x) * np.log1p(-p)))
    a, b = p * (1.0 / rho - 1.0), (1.0 - p) * (1.0 / rho - 1.0)
    return float(np.sum(betaln(x + a, n - x + b) - betaln(a, b)))


#: the confidence the pool states for its upper bound on night-to-night variation: the share of pools whose
#: bound covers the true variation, measured by simulation (tests/unit/test_sequential.py) rather than
#: taken from the likelihood's nominal level, which the rates estimated from few failures make undercover
#: (a nominal 90 % covered 67-86 % of pools of ten nights; the nominal 99 % used covers 96-100 %)
NIGHT_BOUND_CONFIDENCE = 0.95
_NIGHT_BOUND_NOMINAL = 0.99
_RHO_CEILING = 0.99  # "any variation at all": a bound this high says the pool rules out nothing


def rho_upper(groups: Sequence[Sequence[tuple[int, int]]]) -> float | None:
    """The largest intra-night correlation the pool's failures cannot rule out at ``NIGHT_BOUND_CONFIDENCE``
    (one shared rho over every (task, check) that failed in some night but not in every run; the profile
    likelihood's one-sided bound at the nominal level that reaches that coverage,
    2 (max log L - log L(rho)) <= chi-square(1) at 1 - 2 (1 - nominal))."""
    import numpy as np
    from scipy.optimize import brentq, minimize_scalar
    from scipy.stats import chi2

    rows = [(x, n, p) for p, kept in _varying(groups) for x, n in kept]
    if not rows:
        return None
    x, n, p = np.array(rows, dtype=float).T
    informative: NightArrays = (x, n, p)
    best = minimize_scalar(
        lambda r: -_night_loglik(informative, r), bounds=(0.0, _RHO_CEILING), method="bounded", options={"xatol": 1e-4}
    )
    at_zero = _night_loglik(informative, 0.0)
    # the maximum, and where it is: the bounded search never evaluates the boundary rho = 0 itself
    top, start = (-float(best.fun), float(best.x)) if -float(best.fun) >= at_zero else (at_zero, 0.0)
    drop = float(chi2.ppf(1.0 - 2.0 * (1.0 - _NIGHT_BOUND_NOMINAL), 1)) / 2.0

    def short(r: float) -> float:
        return top - _night_loglik(informative, r) - drop

    if short(_RHO_CEILING) <= 0.0:
        return _RHO_CEILING
    return float(brentq(short, start, _RHO_CEILING, xtol=1e-4))
