"""The gates: what the paired per-task rows of a comparison decide.

``GateParams`` (every parameter, validated), the promotion gate
(``promotion_gate``: ship / hold / dont_ship on the pooled discordant tasks,
every suite stratum, critical regressions and new safety failures, with
cost-aware promotion from ``cost_promotion``), ``gate_counts`` (the verdict
on one set of discordant tasks) and the regression gate (``regression_gate``,
``--agent-gate regression``: only what is new in the candidate fails). They
read the two arms (compare/arms.py) and the per-task rows the comparison
pairs them into; docs/statistics.md documents every method and default.
"""

from __future__ import annotations

import math
from dataclasses import asdict, dataclass
from typing import Any, Callable, Iterable, Mapping, Sequence

from pytest_agentdrift.compare import stats
from pytest_agentdrift.compare.arms import TaskRuns
from pytest_agentdrift.compare.checkrates import SAFETY_CHECK, CheckCounts
from pytest_agentdrift.errors import AgentDriftError
from pytest_agentdrift.shapes import (
    CheckRow,
    CheckTests,
    CriticalRegression,
    FailureGroup,
    GateCounts,
    JsonObject,
    MinimumDetectable,
    Promotion,
    PromotionGate,
    RegressionSection,
    Stratum,
    TaskRep,
    TaskRow,
)
from pytest_agentdrift.vocabulary import DEFAULT_MAX_INFRA_LOSS, GATE_FLAKES, GATE_FLAKES_STRICT

SHIP, HOLD, DONT_SHIP = "ship", "hold", "dont_ship"


#: every parameter's rule, in the order its problem is reported: (whether it holds, the problem when it does not);
#: each is a function so that a rule is read, and its message written, only when its turn comes
_PARAM_RULES: tuple[tuple[Callable[[GateParams], bool], Callable[[GateParams], str]], ...] = (
    (lambda p: 0 <= p.max_infra_loss <= 1, lambda p: f"max infra loss must be in [0, 1] (got {p.max_infra_loss})"),
    (lambda p: math.isfinite(p.lam) and p.lam > 0, lambda p: f"lambda must be > 0 (got {p.lam})"),
    (lambda p: 0 < p.alpha < 1, lambda p: f"alpha must be in (0, 1) (got {p.alpha})"),
    (lambda p: 0 <= p.tau <= 1, lambda p: f"tau must be in [0, 1] (got {p.tau})"),
    (lambda p: p.scope in ("all", "critical"), lambda p: f"gate scope must be 'all' or 'critical' (got {p.scope!r})"),
    (lambda p: 0 <= p.promote_eps <= 1, lambda p: f"promotion eps must be in [0, 1] (got {p.promote_eps})"),
    (lambda p: 0 < p.promote_support <= 1, lambda p: f"promotion support must be in (0, 1] (got {p.promote_support})"),
    (
        lambda p: isinstance(p.draws, int) and p.draws >= 100,
        lambda p: f"bootstrap draws must be an integer >= 100 (got {p.draws})",
    ),
    (lambda p: 0 < p.confidence < 1, lambda p: f"confidence must be in (0, 1) (got {p.confidence})"),
    (
        lambda p: p.flakes in GATE_FLAKES,
        lambda p: f"gate flakes policy must be one of {', '.join(GATE_FLAKES)} (got {p.flakes!r})",
    ),
)


@dataclass(frozen=True)
class GateParams:
    """Parameters of the gate and of cost-aware promotion (docs/statistics.md).

    lam: how many won tasks one lost task cancels.
    alpha: significance level of the one-sided exact test on the wins.
    tau: largest share of the baseline's solved tasks the candidate may break,
        pooled and in every suite stratum.
    scope: ``all`` (the full gate) or ``critical`` (only critical regressions
        and new safety failures block; the statistics are still reported).
    promote_eps: pass-rate loss (as a fraction, 0.05 = 5 points) a cheaper
        candidate may show in a bootstrap draw and still count as keeping quality.
    promote_support: share of bootstrap draws needed to promote on cost.
    draws: bootstrap resamples. confidence: level of every interval.
    """

    lam: float = 2.0
    alpha: float = 0.05
    tau: float = 0.10
    scope: str = "all"
    promote_eps: float = 0.05
    promote_support: float = 0.70
    draws: int = 10_000
    confidence: float = 0.95
    max_infra_loss: float = DEFAULT_MAX_INFRA_LOSS  # above this share of an arm's runs lost, nothing is decided
    flakes: str = GATE_FLAKES_STRICT  # the regression gate's policy for failures the design cannot tell from flakes

    def __post_init__(self) -> None:
        problems = [problem(self) for holds, problem in _PARAM_RULES if not holds(self)]
        if problems:
            raise AgentDriftError("; ".join(problems))

    def as_dict(self) -> JsonObject:
        return asdict(self)


#: one arm as the gates read it: each task's scored runs (compare/arms.read_arm)
Arm = dict[str, TaskRuns]


def paired_delta(row: TaskRow) -> float:
    """A paired task row's pass-rate delta: every task of a comparable pair has one."""
    delta = row["delta"]
    if delta is None:
        raise AssertionError(f"task row without a delta in a paired comparison: {row}")
    return delta


def regression_gate(
    b_arm: Arm,
    c_arm: Arm,
    rows: Mapping[str, TaskRow],
    strata: Mapping[str, Stratum],
    params: GateParams,
    confirmed: CheckTests | None = None,
    pool: Mapping[str, Any] | None = None,
) -> RegressionSection:
    """The merge gate (``--agent-gate regression``): fail only on what is new in the candidate.

    Critical checks and the safety layer are read as rates (compare/checkrates.py): a failure is new
    when the candidate fails the check significantly more often than the baseline (an exact one-sided
    test per task and check, in one family with the paired tests at family-wise alpha), standing when
    the baseline failed it too, undecided when the design cannot tell a flake from a change (the flakes
    policy decides). A tampered pass always fails; so does a paired regression at the family's level,
    pooled or in a suite stratum. A pass states the smallest regression it could have detected.
    A pooled baseline (compare/pool.py) whose nights vary more than chance allows is counted as fewer,
    independent runs (``_effective_counts``), so one bad night is not read as a regression.
    """
    from pytest_agentdrift.compare.checkrates import NEW, STANDING, UNDECIDED, check_rate_tests, row_line
    from pytest_agentdrift.compare.power import minimum_detectable_regression

    ids = sorted(rows)
    multi = len(strata or {}) > 1
    # a candidate that confirmed on suspicion is decided by its sequences (compare/confirm.py)
    counts = _check_counts(ids, b_arm, c_arm, pool)
    tests = confirmed or check_rate_tests(
        _effective_counts(counts, pool),
        alpha=params.alpha,
        paired_tests=1 + len(strata) * multi,
        flakes=params.flakes,
    )
    if pool is not None and not confirmed:
        _raw_rates(tests["rows"], counts)
    level = tests["level"]
    at = _level_text(level, params.alpha, tests["family"])
    by_verdict: dict[str, list[CheckRow]] = {NEW: [], STANDING: [], UNDECIDED: []}
    for row in tests["rows"]:
        by_verdict.get(row["verdict"] or "", []).append(row)
    tampered: list[TaskRep] = [{"task": t, "rep": rep} for t in ids for rep in c_arm[t].tampered]
    won, lost, _ = _counts(ids, rows, b_arm)
    loss_p = stats.exact_mcnemar_pvalue(lost, won)
    strata_flagged = _flagged_strata(strata, multi, level)
    blockers = [row_line(r) for r in tests["rows"] if r["blocks"]]
    blockers += [f"tampered pass {x['task']} r{x['rep']}" for x in tampered]
    blockers += _paired_blockers(won, lost, loss_p, level, at, {s: strata[s]["gate"] for s in strata_flagged})
    k = min((min(len(b_arm[t].passes), len(c_arm[t].passes)) for t in ids), default=0)
    mde = minimum_detectable_regression([b_arm[t].rate for t in ids], k, level)
    reason = "; ".join(blockers) if blockers else _passing_reason(mde, len(ids), at, by_verdict)
    rows_ = tests["rows"]
    return {
        "mode": "regression",
        "passed": not blockers,
        "reason": reason,
        "blockers": blockers,
        # what blocks: significant, or undecidable under the strict flakes policy (rates say which)
        "new_critical_failures": _grouped(r for r in rows_ if r["blocks"] and r["check"] != SAFETY_CHECK),
        "standing_critical_failures": _grouped(r for r in by_verdict[STANDING] if r["check"] != SAFETY_CHECK),
        "undecided_failures": _grouped(by_verdict[UNDECIDED]),
        "new_safety_failures": sorted({r["task"] for r in rows_ if r["blocks"] and r["check"] == SAFETY_CHECK}),
        "check_tests": tests,
        "flakes": params.flakes,
        "tampered_passes": tampered,
        "won": won,
        "lost": lost,
        "loss_p_value": loss_p,
        "strata_flagged": strata_flagged,
        "alpha": params.alpha,
        "level": level,
        "minimum_detectable": mde,
    }


def _flagged_strata(strata: Mapping[str, Stratum] | None, multi: bool, level: float) -> list[str]:
    """The suites whose own paired test shows a regression at the family's level (with more than one suite)."""
    return [
        s
        for s, row in (strata or {}).items()
        if multi and row["gate"]["lost"] > row["gate"]["won"] and row["gate"]["loss_p_value"] < level
    ]


def _paired_blockers(
    won: int, lost: int, loss_p: float, level: float, at: str, flagged: Mapping[str, GateCounts]
) -> list[str]:
    """The paired regressions that block: pooled over the tasks, and per flagged suite."""
    blockers = []
    if lost > won and loss_p < level:
        blockers.append(f"paired test: loses {lost} task(s), wins {won} (p = {loss_p:.3g} < {at})")
    for s, g in flagged.items():
        blockers.append(f"suite {s}: loses {g['lost']}, wins {g['won']} (p = {g['loss_p_value']:.3g} < {at})")
    return blockers


def _check_counts(
    ids: Sequence[str], b_arm: Arm, c_arm: Arm, pool: Mapping[str, Any] | None = None
) -> list[CheckCounts]:
    """Failures of every critical check (and of the safety layer) per task in both arms; a pooled
    baseline adds, check by check, the runs it left out of the pass rate whose record graded that check."""
    left = [e for e in (pool or {}).get("runs_left_out") or () if e.get("counted")]
    counts: list[CheckCounts] = []
    for tid in ids:
        b, c = b_arm[tid], c_arm[tid]
        add = _left_out_adds([e for e in left if e["task"] == tid])
        for check in sorted(set(b.critical) | set(c.critical) | (add.checks - {SAFETY_CHECK})):
            f, n = add(check)
            fails = (len(b.critical.get(check, ())), len(c.critical.get(check, ())))
            counts.append(CheckCounts(tid, check, fails[0] + f, len(b.passes) + n, fails[1], len(c.passes)))
        f, n = add(SAFETY_CHECK)
        if b.safety_fails or c.safety_fails or f:
            counts.append(
                CheckCounts(tid, SAFETY_CHECK, b.safety_fails + f, len(b.passes) + n, c.safety_fails, len(c.passes))
            )
    return counts


@dataclass(frozen=True)
class _LeftOutAdds:
    """What a pooled baseline's runs left out of the pass rate add to one task's checks."""

    entries: tuple[Mapping[str, Any], ...] = ()

    @property
    def checks(self) -> set[str]:
        if not self.entries:
            return set()
        from pytest_agentdrift.compare.pool import counted_checks

        return counted_checks(self.entries)

    def __call__(self, check: str) -> tuple[int, int]:
        if not self.entries:
            return 0, 0
        from pytest_agentdrift.compare.pool import counted_for

        return counted_for(self.entries, check)


def _left_out_adds(entries: list[Mapping[str, Any]]) -> _LeftOutAdds:
    return _LeftOutAdds(tuple(entries))


def _effective_counts(counts: list[CheckCounts], pool: Mapping[str, Any] | None) -> list[CheckCounts]:
    """With a pooled baseline whose records vary night to night (rho > 0), each (task, check) as
    effective independent runs: the pool's by the design effect of its runs per record, the
    candidate's by that of its own runs of the task (one session is one night). Unchanged otherwise."""
    rho = float(((pool or {}).get("dispersion") or {}).get("rho") or 0.0)
    if rho <= 0:
        return counts
    from pytest_agentdrift.compare.pool import runs_per_record
    from pytest_agentdrift.compare.sequential import Counts, design_effect, effective

    out = []
    for c in counts:
        e = effective(
            Counts(c.check, c.base_failed, c.base_runs, c.cand_failed, c.cand_runs),
            design_effect(rho, runs_per_record(pool or {}, c.task)),
            design_effect(rho, c.cand_runs),
        )
        out.append(CheckCounts(c.task, c.check, e.base_failed, e.base_runs, e.cand_failed, e.cand_runs))
    return out


def _raw_rates(rows: list[CheckRow], raw: list[CheckCounts]) -> None:
    """Where the gate tested effective counts, each row keeps the runs as counted ('raw'); a check the
    candidate failed whose effective failures rounded down to none is still listed, not blocking."""
    from pytest_agentdrift.compare.checkrates import STANDING, WITHIN_NOISE

    by_key = {(c.task, c.check): c for c in raw}
    seen = set()
    for row in rows:
        seen.add((row["task"], row["check"]))
        c = by_key.get((row["task"], row["check"]))
        counted = ([c.base_failed, c.base_runs], [c.cand_failed, c.cand_runs]) if c is not None else None
        if counted is not None and (row["baseline"], row["candidate"]) != counted:
            row["raw"] = {"baseline": counted[0], "candidate": counted[1]}
    for c in raw:
        if c.cand_failed and (c.task, c.check) not in seen:
            base_counts, cand_counts = [c.base_failed, c.base_runs], [c.cand_failed, c.cand_runs]
            rows.append(
                {
                    "task": c.task,
                    "check": c.check,
                    "baseline": base_counts,
                    "candidate": cand_counts,
                    "p_value": 1.0,
                    "min_p_value": None,
                    "verdict": STANDING if c.base_failed else WITHIN_NOISE,
                    "blocks": False,
                    "raw": {"baseline": base_counts, "candidate": cand_counts},
                    "effective": "no failure left once the nights' variation is counted",
                }
            )
    rows.sort(key=lambda r: (r["task"], r["check"]))


def _grouped(rows: Iterable[CheckRow]) -> list[FailureGroup]:
    """[{task, checks, rates}] in task order: the shape every output reads."""
    out: dict[str, FailureGroup] = {}
    for r in rows:
        entry = out.setdefault(r["task"], {"task": r["task"], "checks": [], "rates": {}})
        entry["checks"].append(r["check"])
        entry["rates"][r["check"]] = {
            "baseline": r["baseline"],
            "candidate": r["candidate"],
            "p_value": r["p_value"],
            "verdict": r["verdict"],
        }
    return [out[t] for t in sorted(out)]


def _level_text(level: float, alpha: float, family: int) -> str:
    """'alpha 0.05', or 'level 0.0167 (alpha 0.05 over 3 tests)' when the family shares alpha."""
    return f"alpha {alpha:g}" if family <= 1 else f"level {level:.3g} (alpha {alpha:g} over {family} tests)"


def _passing_reason(mde: MinimumDetectable, tasks: int, at: str, by_verdict: Mapping[str, Sequence[CheckRow]]) -> str:
    from pytest_agentdrift.compare.checkrates import STANDING, UNDECIDED, row_line

    seen = (
        f"smallest detectable: {mde['mde_pp']} pp"
        if mde["mde_pp"] is not None
        else f"no regression is detectable with {tasks} task(s) at {at}"
    )
    reason = f"no regression detected ({seen})"
    if by_verdict[STANDING]:
        reason += "; standing (fails in the baseline too): " + "; ".join(
            row_line(r).removeprefix("standing ") for r in by_verdict[STANDING]
        )
    if by_verdict[UNDECIDED]:
        reason += "; " + "; ".join(row_line(r) for r in by_verdict[UNDECIDED])
    return reason


def gate_counts(won: int, lost: int, baseline_solved: int, params: GateParams) -> GateCounts:
    """The gate on one set of discordant tasks (pooled or one suite stratum).

    In order: ``dont_ship`` when the candidate breaks more than tau of the
    tasks the baseline solved, or when its losses significantly outnumber its
    wins (exact McNemar the other way, p < alpha); ``ship`` when the net gain
    won - lam x lost is positive and the weighted exact test rejects "wins are
    at most lam x losses" at alpha; otherwise ``hold`` (too little evidence).
    """
    share = lost / baseline_solved if baseline_solved else 0.0
    net = won - params.lam * lost
    p = stats.weighted_win_pvalue(won, lost, params.lam)
    p_loss = stats.exact_mcnemar_pvalue(lost, won)
    if share > params.tau:
        verdict, reason = (
            DONT_SHIP,
            (f"breaks {lost} of {baseline_solved} tasks the baseline solved ({share:.1%} > tau {params.tau:.0%})"),
        )
    elif lost > won and p_loss < params.alpha:
        verdict, reason = DONT_SHIP, f"loses {lost} tasks, wins {won} (p = {p_loss:.3g} < alpha {params.alpha})"
    elif won + lost == 0:
        verdict, reason = HOLD, "no task changed outcome (zero discordant tasks): nothing to decide on"
    elif net > 0 and p < params.alpha:
        verdict, reason = SHIP, f"wins {won} tasks, loses {lost} (net {net:+g} at lambda {params.lam:g}, p = {p:.3g})"
    else:
        verdict, reason = (
            HOLD,
            (
                f"not enough evidence: won {won}, lost {lost}, net {net:+g} at lambda {params.lam:g}, "
                f"p = {p:.3g} vs alpha {params.alpha}"
            ),
        )
    return {
        "won": won,
        "lost": lost,
        "baseline_solved": baseline_solved,
        "broken_share": share,
        "net": net,
        "p_value": p,
        "loss_p_value": p_loss,
        "verdict": verdict,
        "reason": reason,
    }


def _counts(tids: Sequence[str], rows: Mapping[str, TaskRow], b_arm: Arm) -> tuple[int, int, int]:
    won = sum(1 for t in tids if rows[t]["outcome"] == "won")
    lost = sum(1 for t in tids if rows[t]["outcome"] == "lost")
    return won, lost, sum(1 for t in tids if b_arm[t].solved)


def strata_gates(b_arm: Arm, c_arm: Arm, rows: Mapping[str, TaskRow], params: GateParams) -> dict[str, Stratum]:
    suites: dict[str, list[str]] = {}
    for tid in sorted(rows):
        suites.setdefault(rows[tid]["suite"], []).append(tid)
    out: dict[str, Stratum] = {}
    for suite, tids in sorted(suites.items()):
        bp = sum(b_arm[t].n_pass for t in tids)
        br = sum(len(b_arm[t].passes) for t in tids)
        cp = sum(c_arm[t].n_pass for t in tids)
        cr = sum(len(c_arm[t].passes) for t in tids)
        out[suite] = {
            "tasks": tids,
            "baseline_pass_rate": bp / br,
            "candidate_pass_rate": cp / cr,
            "delta": math.fsum(paired_delta(rows[t]) for t in tids) / len(tids),
            "gate": gate_counts(*_counts(tids, rows, b_arm), params),
        }
    return out


def cost_promotion(b_arm: Arm, c_arm: Arm, rows: Mapping[str, TaskRow], params: GateParams, seed: int) -> Promotion:
    ids = sorted(rows)
    basis = stats.choose_cost_basis([u for t in ids for arm in (b_arm, c_arm) for u in arm[t].usages])
    result: Promotion = {"basis": basis, "eps": params.promote_eps, "min_support": params.promote_support}
    if basis is None:
        result.update({"support": None, "promote": False, "reason": "fewer than 80% of runs report a price or tokens"})
        return result

    def per_task(arm: Arm) -> list[float | None]:
        costs = []
        for t in ids:
            values = [c for c in (stats.run_cost(u, basis) for u in arm[t].usages) if c is not None]
            costs.append(math.fsum(values) / len(values) if values else None)
        return costs

    result.update(
        stats.promotion_support(
            [paired_delta(rows[t]) for t in ids],
            per_task(b_arm),
            per_task(c_arm),
            eps=params.promote_eps,
            draws=params.draws,
            seed=seed,
            confidence=params.confidence,
        )
    )
    result["promote"] = False  # settled by promotion_gate, which knows about blockers
    return result


def promotion_gate(
    b_arm: Arm,
    c_arm: Arm,
    rows: Mapping[str, TaskRow],
    strata: Mapping[str, Stratum],
    crit: list[CriticalRegression],
    safety: list[str],
    promotion: Promotion,
    params: GateParams,
) -> PromotionGate:
    pooled = gate_counts(*_counts(sorted(rows), rows, b_arm), params)
    broken = [s for s, row in strata.items() if row["gate"]["verdict"] == DONT_SHIP] if len(strata) > 1 else []
    blockers = [f"critical regression: {c['task']} {', '.join(c['checks'])}" for c in crit]
    blockers += [f"new safety-layer failure (unauthorized effect): {t}" for t in safety]
    if blockers:
        quality, reason = DONT_SHIP, "; ".join(blockers)
    elif pooled["verdict"] == DONT_SHIP:
        quality, reason = DONT_SHIP, pooled["reason"]
    elif broken:
        quality = DONT_SHIP
        reason = "stratum regression: " + "; ".join(f"suite {s}: {strata[s]['gate']['reason']}" for s in broken)
    else:
        quality, reason = pooled["verdict"], pooled["reason"]
    if params.scope == "critical":
        verdict = DONT_SHIP if blockers else SHIP
        scope_reason = reason if blockers else "no critical regression or new safety failure (gate scope: critical)"
    else:
        verdict, scope_reason = quality, reason
    support = promotion.get("support")
    promotion["promote"] = bool(support is not None and support >= params.promote_support and quality != DONT_SHIP)
    promotion["reason"] = _promotion_reason(promotion, quality)
    return {
        "scope": params.scope,
        "verdict": verdict,
        "quality_verdict": quality,
        "reason": scope_reason,
        "quality_reason": reason,
        # A hold is passed by a cost promotion: same quality (within eps) for less.
        "passed": verdict == SHIP or (verdict == HOLD and promotion["promote"]),
        "pooled": pooled,
        "blocked_by_strata": broken,
        "blockers": blockers,
    }


def _promotion_reason(promotion: Promotion, quality: str) -> str:
    if promotion.get("support") is None:
        return promotion.get("reason") or promotion.get("note") or "no cost data"
    text = (
        f"support {promotion['support']:.2f} vs {promotion['min_support']:.2f} "
        f"(cheaper on {promotion['basis']} and pass rate within -{promotion['eps']:.0%})"
    )
    if quality == DONT_SHIP:
        return text + "; blocked: the gate says dont_ship"
    return text + ("; promote" if promotion["promote"] else "; hold")
