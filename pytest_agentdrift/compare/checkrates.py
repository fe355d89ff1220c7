"""Critical and safety checks read as rates: is a failure new, standing, or undecidable?

Pure; scipy is imported inside the function. The regression gate
(compare/gates.py) calls ``check_rate_tests`` with, for every task, how
often each critical check (and the safety layer) failed in the baseline's
and in the candidate's runs. docs/statistics.md ("Checks read as rates")
has the rules; keep the two in step.

Test. One exact one-sided test per (task, check): Fisher's conditional test
of "the candidate fails this check more often than the baseline". Given the
check's failures in both arms together (T), the candidate's count is
hypergeometric under the null (same failure probability in both arms), and
p = P(X >= candidate failures).

Correction. The gate's family is the pooled paired test, one test per suite
stratum (with two or more) and every (task, check) test, at family-wise
alpha. Discrete tests make plain Bonferroni wasteful: a (task, check) whose
margins cannot produce a p-value small enough (one failure in all runs of
both arms can never be significant) cannot reject and need not be paid for.
Tarone's procedure counts only those that can: the level is alpha / m for
the smallest m with (paired tests) + #{tests whose smallest achievable
p-value is below alpha / m} <= m. Family-wise error stays <= alpha given the
margins (Tarone 1990).

Verdict of a check the candidate failed:
  new           p < level: the candidate fails it significantly more often;
  standing      not significant, and the baseline failed it too (any rate);
  undecided     not significant, never failed in the baseline, and the design
                cannot tell a flake from a change: even every candidate run
                failing against none of the baseline's would not reach alpha
                (1 / C(n_b + n_c, n_c) >= alpha: k = 1 against anything below
                20 baseline runs, 3 against 3, ...). The flakes policy decides:
                ``strict`` blocks (saying it may be a flake), ``report`` lists it;
  within_noise  not significant, never failed in the baseline, and the design
                could have told: a flake at the rate the test allows.
"""

from __future__ import annotations

from bisect import bisect_left
from dataclasses import dataclass
from math import comb
from typing import Sequence

from pytest_agentdrift.shapes import CheckRow, CheckTests, RowRates
from pytest_agentdrift.vocabulary import GATE_FLAKES_STRICT

SAFETY_CHECK = "safety layer"  # the safety layer, tested like a check
NEW, STANDING, UNDECIDED, WITHIN_NOISE = "new", "standing", "undecided", "within_noise"


@dataclass(frozen=True)
class CheckCounts:
    """How often one check failed in each arm's scored runs of one task."""

    task: str
    check: str
    base_failed: int
    base_runs: int
    cand_failed: int
    cand_runs: int


def design_can_tell(base_runs: int, cand_runs: int, alpha: float) -> bool:
    """Could the most extreme outcome (every candidate run failing, no baseline run) reach alpha?"""
    return base_runs > 0 and cand_runs > 0 and 1.0 / comb(base_runs + cand_runs, cand_runs) < alpha


def tarone_level(min_p: Sequence[float], always: int, alpha: float) -> tuple[float, int]:
    """(per-test level, family size m): the smallest m with always + #{min_p < alpha/m} <= m."""
    ordered = sorted(min_p)
    m = max(always, 1)
    while True:
        testable = bisect_left(ordered, alpha / m)  # how many min_p < alpha / m: linear, not quadratic
        if always + testable <= m:
            return alpha / m, m
        m += 1


def check_rate_tests(counts: Sequence[CheckCounts], *, alpha: float, paired_tests: int, flakes: str) -> CheckTests:
    """Every (task, check) row with its p-value and verdict, the family's level and what blocks."""
    import numpy as np
    from scipy.stats import hypergeom

    rows = [c for c in counts if c.base_failed + c.cand_failed > 0]
    if rows:
        total = np.array([c.base_runs + c.cand_runs for c in rows])
        failed = np.array([c.base_failed + c.cand_failed for c in rows])
        drawn = np.array([c.cand_runs for c in rows])
        observed = np.array([c.cand_failed for c in rows])
        p_values = hypergeom.sf(observed - 1, total, failed, drawn)
        most = np.minimum(failed, drawn)  # the most candidate failures these margins allow
        min_p = hypergeom.sf(most - 1, total, failed, drawn)
    else:
        p_values = min_p = np.zeros(0)
    level, family = tarone_level([float(p) for p in min_p], paired_tests, alpha)
    out_rows: list[CheckRow] = []
    for c, p, low in zip(rows, p_values, min_p, strict=True):
        if not c.cand_failed:
            continue  # only a check the candidate failed can be new
        p_value = float(min(1.0, p))
        verdict = _verdict(c, p_value, level, alpha)
        out_rows.append(
            {
                "task": c.task,
                "check": c.check,
                "baseline": [c.base_failed, c.base_runs],
                "candidate": [c.cand_failed, c.cand_runs],
                "p_value": p_value,
                "min_p_value": float(min(1.0, low)),
                "verdict": verdict,
                "blocks": verdict == NEW or (verdict == UNDECIDED and flakes == GATE_FLAKES_STRICT),
            }
        )
    return {"level": level, "family": family, "paired_tests": paired_tests, "flakes": flakes, "rows": out_rows}


def _verdict(c: CheckCounts, p: float, level: float, alpha: float) -> str:
    if p < level:
        return NEW
    if c.base_failed:
        return STANDING
    return WITHIN_NOISE if design_can_tell(c.base_runs, c.cand_runs, alpha) else UNDECIDED


def rate_text(row: CheckRow | RowRates) -> str:
    """'failed 3/3, baseline 0/10, p = 0.0035': the words every output uses for a row's rates."""
    (bf, bn), (cf, cn) = row["baseline"], row["candidate"]
    return f"failed {cf}/{cn}, baseline {bf}/{bn}, p = {row['p_value']:.3g}"


def row_line(row: CheckRow) -> str:
    """One row in words: what it is, its rates, and why it blocks or not."""
    (bf, bn), (cf, cn) = row["baseline"], row["candidate"]
    what = (
        f"safety-layer failure {row['task']}"
        if row["check"] == SAFETY_CHECK
        else f"critical failure {row['task']} {row['check']}"
    )
    confirmed = row.get("confirmed_at")  # a candidate that confirmed on suspicion (compare/confirm.py)
    if row["verdict"] == NEW:
        if confirmed:
            return (
                f"new {what} ({rate_text(row).replace('failed', 'confirming runs failed', 1)}; decided at r{confirmed})"
            )
        return f"new {what} ({rate_text(row)})"
    if row["verdict"] == UNDECIDED and confirmed:
        stop = "blocked under --agent-gate-flakes strict" if row.get("blocks") else "reported, not blocking"
        return f"undecided {what} (confirmation stopped at r{confirmed} before the evidence decided; {stop})"
    if row["verdict"] == STANDING:
        seen = f"flaky: {bf}/{bn}" if bf < bn else f"{bf}/{bn}"
        return f"standing {what} ({seen} in baseline, {cf}/{cn} now)"
    if row["verdict"] == UNDECIDED:
        why = f"may be a flake: failed {cf}/{cn}, never in {bn} baseline run(s); k {bn} against {cn} cannot tell"
        if row.get("blocks"):
            return f"new {what} ({why}; blocked under --agent-gate-flakes strict)"
        return f"undecided {what} ({why}; reported, not blocking under --agent-gate-flakes report)"
    return f"{what} within noise ({rate_text(row)})"
