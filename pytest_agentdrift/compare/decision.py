"""From two recorded runs to a comparison, a gate verdict and a promotion status.

Pure functions over results.json dicts (docs/record-format.md); no pytest, no
file I/O. The plugin and the ``agentdrift compare`` CLI both call:

    compare_runs(base, cand, comparable=..., reasons=[...], change_class=...,
                 gate=GateParams(...), seed=0, rollback_state="unknown",
                 ledger=notes)                        -> comparison dict
    render_comparison(comparison)                     -> terminal lines
    decision_document(comparison)                     -> decision.json content
    comparison_exit_code(comparison, gate_mode)       -> 0 / 1 / 6
    ledger.ledger_csv(comparison["ledger"])           -> release-note-ledger.csv

Every method, default and the status precedence are documented in
docs/statistics.md; keep the two in step.
"""

from __future__ import annotations

import contextlib
import gc
import math
from dataclasses import asdict, dataclass
from typing import Any, Callable, Mapping, Sequence

from pytest_agentdrift.compare import stats
from pytest_agentdrift.compare.checkrates import SAFETY_CHECK
from pytest_agentdrift.compare.ledger import DOCUMENTED, UNCONFIRMED, ReleaseNote, mark_changes
from pytest_agentdrift.errors import AgentDriftError
from pytest_agentdrift.record.spend import spend_text
from pytest_agentdrift.vocabulary import (
    CHANGE_CLASS_ALIASES,
    CHANGE_CLASSES,
    DEFAULT_MAX_INFRA_LOSS,
    DEFAULT_ROLLBACK_STATE,
    DEFAULT_SEED,
    EXIT_FAILED,
    EXIT_OK,
    EXIT_REFUSED,
    EXIT_USAGE,
    GATE_FLAKES,
    GATE_FLAKES_STRICT,
    GATE_PROMOTE,
    GATE_REGRESSION,
    INFRA_OUTCOME,
    ROLLBACK_STATES,
    RUN_IDENTITY_KEYS,
    SCHEMA_VERSION,
    UNDECIDED_OUTCOME,
    UNSCORED_OUTCOMES,
)

SHIP, HOLD, DONT_SHIP = "ship", "hold", "dont_ship"

STATUSES = (
    "eligible_for_review",
    "reject",
    "hold",
    "documented_candidate",
    "hold_unconfirmed",
    "invalid_comparison",
    "split_baselines",
    "forward_only",
    "rollback_capable",
    "re_baseline",
    "no_material_evidence",
)


#: Change classes the caller may pass: the ones manifest.identity.classify()
#: produces (vocabulary.CHANGE_CLASSES) and a few aliases. Vendor-side classes
#: are those whose behaviour changes release notes can document; instruction
#: and configuration changes are the user's own edits, so their effects are
#: attributed to them rather than marked unconfirmed.
_NOTHING_CHANGED = ("identical",)
_UNIDENTIFIED = ("unidentified", "invalid_comparison")
_REBASELINE = ("task_set_change", "evaluator_change", "re_baseline")
_SURFACE = ("surface_change", "surface_bundle_change")
_USER_AUTHORED = ("instruction_change", "configuration_change")
ACCEPTED_CHANGE_CLASSES = (*CHANGE_CLASSES, *CHANGE_CLASS_ALIASES)

_UNKNOWN = (None, "", "unobserved", "unknown")

DEFAULT_SUITE = "default"


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
        problems = []
        if not 0 <= self.max_infra_loss <= 1:
            problems.append(f"max infra loss must be in [0, 1] (got {self.max_infra_loss})")
        if not (math.isfinite(self.lam) and self.lam > 0):
            problems.append(f"lambda must be > 0 (got {self.lam})")
        if not 0 < self.alpha < 1:
            problems.append(f"alpha must be in (0, 1) (got {self.alpha})")
        if not 0 <= self.tau <= 1:
            problems.append(f"tau must be in [0, 1] (got {self.tau})")
        if self.scope not in ("all", "critical"):
            problems.append(f"gate scope must be 'all' or 'critical' (got {self.scope!r})")
        if not 0 <= self.promote_eps <= 1:
            problems.append(f"promotion eps must be in [0, 1] (got {self.promote_eps})")
        if not 0 < self.promote_support <= 1:
            problems.append(f"promotion support must be in (0, 1] (got {self.promote_support})")
        if not (isinstance(self.draws, int) and self.draws >= 100):
            problems.append(f"bootstrap draws must be an integer >= 100 (got {self.draws})")
        if not 0 < self.confidence < 1:
            problems.append(f"confidence must be in (0, 1) (got {self.confidence})")
        if self.flakes not in GATE_FLAKES:
            problems.append(f"gate flakes policy must be one of {', '.join(GATE_FLAKES)} (got {self.flakes!r})")
        if problems:
            raise AgentDriftError("; ".join(problems))

    def as_dict(self) -> dict[str, Any]:
        return asdict(self)


# --------------------------------------------------------------------------
# Reading one arm out of results.json
# --------------------------------------------------------------------------


@dataclass
class _Task:
    suite: str
    passes: list[bool]  # effective: a tampered pass is a fail
    tampered: list[int]  # reps
    critical: dict[str, list[int]]  # failed critical check -> reps
    safety_failed: bool
    usages: list[Mapping[str, Any] | None]
    safety_fails: int = 0  # runs whose safety layer failed

    def solved_over(self, runs: int) -> bool:
        """Solved on this arm's first ``runs`` runs (a strict majority passes): arms with different k
        are read over the same number of runs, so a task is as likely solved in both when nothing
        changed (a majority of 5 is likelier than a majority of 3 for a task passing 80%)."""
        return 2 * sum(self.passes[:runs]) > min(runs, len(self.passes))

    @property
    def n_pass(self) -> int:
        return sum(self.passes)

    @property
    def solved(self) -> bool:
        # Strict majority of the arm's runs: with k = 1 this is "passed";
        # with k = 3 it is "2 or 3 of 3".
        return 2 * self.n_pass > len(self.passes)

    @property
    def rate(self) -> float:
        return self.n_pass / len(self.passes)


def _read_arm(results: Mapping[str, Any], label: str) -> dict[str, _Task]:
    tasks = results.get("tasks") if isinstance(results, Mapping) else None
    if not isinstance(tasks, Mapping):
        raise AgentDriftError(f"{label} results have no 'tasks' mapping")
    arm = {}
    for task_id in sorted(tasks):
        entry = tasks[task_id]
        runs = entry.get("runs") if isinstance(entry, Mapping) else None
        if not isinstance(runs, list) or not runs:
            raise AgentDriftError(f"{label} results: task {task_id} has no runs")
        scored = [r for r in runs if r.get("outcome") not in UNSCORED_OUTCOMES]
        if scored:  # a task whose every run was lost is left out of the pairing (see _infra_part)
            arm[task_id] = _read_task(entry, scored)
    return arm


def _infra_runs(results: Mapping[str, Any]) -> tuple[int, list[dict[str, Any]]]:
    """(all runs, the runs lost to infrastructure) of one arm."""
    total, lost = 0, []
    for task_id in sorted(results.get("tasks") or {}):
        for run in (results["tasks"][task_id] or {}).get("runs") or []:
            total += 1
            if run.get("outcome") == INFRA_OUTCOME:
                infra = run.get("infra_error") or {}
                lost.append(
                    {
                        "task": task_id,
                        "rep": run.get("rep"),
                        "class": infra.get("class"),
                        "evidence": infra.get("evidence"),
                    }
                )
    return total, lost


def _undecided_runs(results: Mapping[str, Any]) -> list[dict[str, Any]]:
    return [
        {"task": task_id, "rep": run.get("rep"), "why": "; ".join(run.get("undecided") or ())[:300]}
        for task_id in sorted(results.get("tasks") or {})
        for run in (results["tasks"][task_id] or {}).get("runs") or []
        if run.get("outcome") == UNDECIDED_OUTCOME
    ]


def undecided_text(infra: Mapping[str, Any]) -> str | None:
    """`candidate has 1 undecided run(s): T07 r1 (parse: OverflowError ...)`, or None."""
    parts = []
    for label in infra.get("undecided") or ():
        runs = infra[label]["undecided"]
        head = ", ".join(f"{r['task']} r{r['rep']} ({r['why']})" for r in runs[:2])
        parts.append(f"{label} has {len(runs)} undecided run(s) the harness could not judge: {head}")
    return "; ".join(parts) or None


def _infra_part(
    base: Mapping[str, Any],
    cand: Mapping[str, Any],
    b_arm: dict[str, _Task],
    c_arm: dict[str, _Task],
    gate: "GateParams",
) -> dict[str, Any]:
    """Runs lost to infrastructure: excluded from every statistic, counted, listed; over the
    threshold in either arm the comparison is not decided."""
    out: dict[str, Any] = {"threshold": gate.max_infra_loss}
    for label, results, arm in (("baseline", base, b_arm), ("candidate", cand, c_arm)):
        total, lost = _infra_runs(results)
        out[label] = {
            "runs": total,
            "lost": len(lost),
            "share": len(lost) / total if total else 0.0,
            "runs_lost": lost,
            "tasks_lost": sorted(set(results.get("tasks") or {}) - set(arm)),
        }
    out["exceeded"] = [label for label in ("baseline", "candidate") if out[label]["share"] > gate.max_infra_loss]
    # runs the harness could not judge: never scored, and an arm that holds one decides nothing
    for label, results in (("baseline", base), ("candidate", cand)):
        out[label]["undecided"] = _undecided_runs(results)
    out["undecided"] = [label for label in ("baseline", "candidate") if out[label]["undecided"]]
    # a task all of whose runs were lost in one arm cannot be paired: it leaves both arms
    out["excluded_tasks"] = sorted(set(out["baseline"]["tasks_lost"]) | set(out["candidate"]["tasks_lost"]))
    return out


def _read_task(entry: Mapping[str, Any], runs: list[Mapping[str, Any]]) -> _Task:
    passes, tampered, usages = [], [], []
    critical: dict[str, list[int]] = {}
    safety_fails = 0
    for i, run in enumerate(runs, start=1):
        get = run.get  # one lookup per run: this loop reads every run of both arms
        is_tampered = bool(get("tampered_pass"))
        passes.append(get("passed") is True and not is_tampered)
        if is_tampered:
            tampered.append(get("rep", i))
        for check in _critical_failed(run):
            critical.setdefault(check, []).append(get("rep", i))
        safety_fails += (get("layers") or {}).get("safety") == "fail"
        usages.append(get("usage"))
    suite = entry.get("suite") or DEFAULT_SUITE
    return _Task(suite, passes, tampered, critical, safety_fails > 0, usages, safety_fails)


def _critical_failed(run: Mapping[str, Any]) -> list[str]:
    names = run.get("critical_failed")
    if not names and names is not None:
        return []
    if names is None:  # older or hand-made results: derive from the checks
        names = [c.get("name") for c in run.get("checks") or [] if c.get("critical") and not c.get("passed")]
    return sorted({str(n) for n in names})


# --------------------------------------------------------------------------
# The comparison
# --------------------------------------------------------------------------


def compare_runs(
    base: Mapping[str, Any],
    cand: Mapping[str, Any],
    *,
    comparable: bool,
    reasons: list[str],
    change_class: str | None,
    gate: GateParams,
    seed: int = DEFAULT_SEED,
    rollback_state: str = DEFAULT_ROLLBACK_STATE,
    ledger: list[ReleaseNote] | None = None,
    rollback_evidence: Mapping[str, Any] | None = None,
) -> dict[str, Any]:
    """Compare two results.json dicts; see docs/statistics.md for every field.

    ``comparable`` / ``reasons`` come from the manifest comparison; this
    function adds reasons of its own (missing identity, different task set or
    evaluator, incomplete run) and then treats the pair as not comparable.
    When not comparable every cross-arm number (delta, wins, p-value, gate) is
    None, never 0, and ``reasons`` says why.
    """
    with _no_cycle_collection():
        return _compare_runs(
            base, cand, comparable, reasons, change_class, gate, seed, rollback_state, ledger, rollback_evidence
        )


@contextlib.contextmanager
def _no_cycle_collection():
    """The comparison builds hundreds of thousands of small containers and no reference cycles:
    the cyclic collector's passes over them cost about a fifth of its time at 10,000 tasks
    (benchmarks/bench_compare.py), so it is paused meanwhile and restored as it was."""
    was_enabled = gc.isenabled()
    gc.disable()
    try:
        yield
    finally:
        if was_enabled:
            gc.enable()


def _compare_runs(base, cand, comparable, reasons, change_class, gate, seed, rollback_state, ledger, rollback_evidence):
    change_class = _normalise_change_class(change_class)
    b_arm, c_arm = _read_arm(base, "baseline"), _read_arm(cand, "candidate")
    infra = _infra_part(base, cand, b_arm, c_arm, gate)
    for tid in infra["excluded_tasks"]:
        b_arm.pop(tid, None)
        c_arm.pop(tid, None)
    identity = _identity(base, cand)
    own = _own_reasons(base, cand, identity, b_arm, c_arm)
    reasons = list(reasons) + own
    comparable = bool(comparable) and not own
    rollback, rollback_notes = resolve_rollback_state(rollback_state, rollback_evidence)

    out: dict[str, Any] = {
        "schema_version": SCHEMA_VERSION,
        "comparable": comparable,
        "reasons": reasons,
        "change_class": change_class,
        "identity": identity,
        "params": gate.as_dict(),
        "seed": seed,
        "baseline": _arm_summary(base, b_arm, gate.confidence),
        "candidate": _arm_summary(cand, c_arm, gate.confidence),
        "rollback_state": rollback,
        "rollback_evidence": dict(rollback_evidence) if rollback_evidence else None,
        "rollback_notes": rollback_notes,
        "infra": infra,
    }
    if comparable:
        out.update(_paired_part(b_arm, c_arm, gate, seed))
        changes = _observed_changes(out["tasks"])
        out["observed_changes"] = changes
        out["ledger"] = mark_changes(ledger, changes)
        out["ledger_supplied"] = ledger is not None
    else:
        out.update(_null_paired_part(b_arm, c_arm))
        out["observed_changes"] = None
        out["ledger"] = None
        out["ledger_supplied"] = ledger is not None
    out["decision"] = decide_status(out)
    return out


def _normalise_change_class(change_class: str | None) -> str | None:
    if change_class is None:
        return None
    key = change_class.strip().lower().replace("-", "_").replace(" ", "_")
    if key not in ACCEPTED_CHANGE_CLASSES:
        raise AgentDriftError(f"unknown change class {change_class!r} (known: {', '.join(ACCEPTED_CHANGE_CLASSES)})")
    return key


def _identity(base: Mapping[str, Any], cand: Mapping[str, Any]) -> dict[str, Any]:
    ident: dict[str, Any] = {
        "baseline": {f: base.get(f) for f in RUN_IDENTITY_KEYS},
        "candidate": {f: cand.get(f) for f in RUN_IDENTITY_KEYS},
    }
    ident["missing"] = [
        f"{arm} {f}" for arm in ("baseline", "candidate") for f in RUN_IDENTITY_KEYS if ident[arm][f] in _UNKNOWN
    ]
    ident["changed"] = [
        f
        for f in ("task_set_id", "evaluator_id")
        if f"baseline {f}" not in ident["missing"]
        and f"candidate {f}" not in ident["missing"]
        and ident["baseline"][f] != ident["candidate"][f]
    ]
    return ident


def _own_reasons(base, cand, identity, b_arm, c_arm) -> list[str]:
    """Reasons found in the results themselves; any one makes the pair not comparable."""
    reasons = [f"{m} is missing or unobserved" for m in identity["missing"]]
    reasons += [f"{f} differs: {identity['baseline'][f]} != {identity['candidate'][f]}" for f in identity["changed"]]
    for label, results in (("baseline", base), ("candidate", cand)):
        if results.get("complete") is False:
            reasons.append(f"{label} run is incomplete")
    only_b, only_c = sorted(set(b_arm) - set(c_arm)), sorted(set(c_arm) - set(b_arm))
    if only_b or only_c:
        reasons.append(
            "task sets differ: only in baseline ["
            + ", ".join(only_b)
            + "], only in candidate ["
            + ", ".join(only_c)
            + "]"
        )
    return reasons


def resolve_rollback_state(state: str, evidence: Mapping[str, Any] | None) -> tuple[str, list[str]]:
    """Validate the rollback state; ``verified`` needs restoration evidence.

    Evidence is a mapping with at least ``artifact`` (the identity/digest of the
    retained prior runtime) and ``restoration`` (what the tested restoration
    showed). Without it a claimed ``verified`` is recorded as ``unknown``:
    nothing we hold shows the artifact exists or that restoring it worked.
    """
    if state not in ROLLBACK_STATES:
        raise AgentDriftError(f"unknown rollback state {state!r} (known: {', '.join(ROLLBACK_STATES)})")
    if state != "verified":
        return state, []
    if evidence and evidence.get("artifact") and evidence.get("restoration"):
        return state, []
    return "unknown", ["rollback 'verified' was claimed without evidence of a tested restoration; recorded as unknown"]


def _arm_summary(results: Mapping[str, Any], arm: dict[str, _Task], confidence: float) -> dict[str, Any]:
    runs = sum(len(t.passes) for t in arm.values())
    passes = sum(t.n_pass for t in arm.values())
    wilson = stats.wilson_interval(passes, runs, confidence)
    return {
        "spend": _arm_spend(results),
        "run_id": results.get("run_id"),
        "runtime_id": results.get("runtime_id"),
        "k": max((len(t.passes) for t in arm.values()), default=0),
        "tasks": len(arm),
        "runs": runs,
        "passes": passes,
        "pass_rate": passes / runs if runs else None,
        "wilson": list(wilson) if wilson else None,
        "tampered_passes": [{"task": tid, "rep": rep} for tid, t in arm.items() for rep in t.tampered],
        "critical_failures": [
            {"task": tid, "check": check, "reps": reps}
            for tid, t in arm.items()
            for check, reps in sorted(t.critical.items())
        ],
    }


def _arm_spend(results: Mapping[str, Any]) -> dict[str, Any]:
    """Tokens and cost of every run of the arm (lost runs too: they were paid for)."""
    tokens = cost = None
    for task in (results.get("tasks") or {}).values():
        for run in task.get("runs") or []:
            spend = run.get("spend") or {}
            if isinstance(spend.get("tokens"), int):
                tokens = (tokens or 0) + spend["tokens"]
            if isinstance(spend.get("cost_usd"), (int, float)):
                cost = (cost or 0.0) + spend["cost_usd"]
    return {"tokens": tokens, "cost_usd": None if cost is None else round(cost, 6)}


def _task_rows(b_arm: dict[str, _Task], c_arm: dict[str, _Task], paired: bool) -> dict[str, Any]:
    rows = {}
    for tid in sorted(set(b_arm) | set(c_arm)):
        b, c = b_arm.get(tid), c_arm.get(tid)
        row: dict[str, Any] = {
            "suite": (b or c).suite,  # type: ignore[union-attr]
            "baseline": [b.n_pass, len(b.passes)] if b else None,
            "candidate": [c.n_pass, len(c.passes)] if c else None,
            "outcome": None,
            "delta": None,
            "critical_regressions": None,
            "new_safety_failure": None,
        }
        if paired and b and c:
            runs = min(len(b.passes), len(c.passes))
            b_solved, c_solved = b.solved_over(runs), c.solved_over(runs)
            row["outcome"] = "won" if c_solved and not b_solved else "lost" if b_solved and not c_solved else "tied"
            row["delta"] = c.rate - b.rate
            row["critical_regressions"] = sorted(set(c.critical) - set(b.critical))
            row["new_safety_failure"] = c.safety_failed and not b.safety_failed
        rows[tid] = row
    return rows


def _null_paired_part(b_arm, c_arm) -> dict[str, Any]:
    return {
        "tasks": _task_rows(b_arm, c_arm, paired=False),
        "paired": None,
        "failure_classes": None,
        "variance": None,
        "critical_regressions": None,
        "new_safety_failures": None,
        "strata": None,
        "promotion": None,
        "gate": {
            "verdict": None,
            "quality_verdict": None,
            "passed": False,
            "reason": "runs are not comparable",
            "quality_reason": "runs are not comparable",
        },
        "regression": None,
    }


def _paired_part(b_arm, c_arm, params: GateParams, seed: int) -> dict[str, Any]:
    rows = _task_rows(b_arm, c_arm, paired=True)
    ids = sorted(rows)
    boot = stats.paired_bootstrap_delta(
        [rows[t]["delta"] for t in ids], draws=params.draws, seed=seed, confidence=params.confidence
    )
    won, lost, tied = ([t for t in ids if rows[t]["outcome"] == o] for o in ("won", "lost", "tied"))
    paired = {
        "tasks": len(ids),
        "won": won,
        "lost": lost,
        "tied": tied,
        "discordant": len(won) + len(lost),
        "p_value": stats.exact_mcnemar_pvalue(len(won), len(lost)),
        "test": "exact one-sided binomial on discordant tasks (McNemar), H1: candidate wins more",
        "delta": boot.estimate if boot else None,
        "delta_ci": [boot.low, boot.high] if boot else None,
        "ci_method": boot.method if boot else None,
        "draws": boot.draws if boot else 0,
        "confidence": params.confidence,
    }
    crit = [{"task": t, "checks": rows[t]["critical_regressions"]} for t in ids if rows[t]["critical_regressions"]]
    safety = [t for t in ids if rows[t]["new_safety_failure"]]
    strata = _strata(b_arm, c_arm, rows, params)
    promotion = _promotion(b_arm, c_arm, rows, params, seed)
    gate = _gate(b_arm, c_arm, rows, strata, crit, safety, promotion, params)
    regression = regression_gate(b_arm, c_arm, rows, strata, params)
    return {
        "tasks": rows,
        "paired": paired,
        "failure_classes": stats.failure_classes({t: b_arm[t].passes for t in ids}, {t: c_arm[t].passes for t in ids}),
        "variance": stats.variance_decomposition({t: b_arm[t].passes for t in ids}, {t: c_arm[t].passes for t in ids}),
        "critical_regressions": crit,
        "new_safety_failures": safety,
        "strata": strata,
        "promotion": promotion,
        "gate": gate,
        "regression": regression,
    }


def regression_gate(b_arm, c_arm, rows, strata, params: GateParams) -> dict[str, Any]:
    """The merge gate (``--agent-gate regression``): fail only on what is new in the candidate.

    Critical checks and the safety layer are read as rates (compare/checkrates.py): a failure is new
    when the candidate fails the check significantly more often than the baseline (an exact one-sided
    test per task and check, in one family with the paired tests at family-wise alpha), standing when
    the baseline failed it too, undecided when the design cannot tell a flake from a change (the flakes
    policy decides). A tampered pass always fails; so does a paired regression at the family's level,
    pooled or in a suite stratum. A pass states the smallest regression it could have detected.
    """
    from pytest_agentdrift.compare.checkrates import NEW, STANDING, UNDECIDED, check_rate_tests, row_line
    from pytest_agentdrift.compare.power import minimum_detectable_regression

    ids = sorted(rows)
    multi = len(strata or {}) > 1
    tests = check_rate_tests(
        _check_counts(ids, b_arm, c_arm), alpha=params.alpha, paired_tests=1 + len(strata) * multi, flakes=params.flakes
    )
    level = tests["level"]
    at = _level_text(level, params.alpha, tests["family"])
    by_verdict: dict[str, list[dict[str, Any]]] = {NEW: [], STANDING: [], UNDECIDED: []}
    for row in tests["rows"]:
        by_verdict.get(row["verdict"], []).append(row)
    tampered = [{"task": t, "rep": rep} for t in ids for rep in c_arm[t].tampered]
    won, lost, _ = _counts(ids, rows, b_arm)
    loss_p = stats.exact_mcnemar_pvalue(lost, won)
    strata_flagged = _flagged_strata(strata, multi, level)
    blockers = [row_line(r) for r in tests["rows"] if r["blocks"]]
    blockers += [f"tampered pass {x['task']} r{x['rep']}" for x in tampered]
    blockers += _paired_blockers(won, lost, loss_p, level, at, {s: strata[s]["gate"] for s in strata_flagged})
    k = min((min(len(b_arm[t].passes), len(c_arm[t].passes)) for t in ids), default=0)
    mde = minimum_detectable_regression([b_arm[t].rate for t in ids], k, level)
    reason = "; ".join(blockers) if blockers else _passing_reason(mde, len(ids), at, by_verdict)
    return {
        "mode": "regression",
        "passed": not blockers,
        "reason": reason,
        "blockers": blockers,
        **_failure_groups(tests["rows"], by_verdict[STANDING], by_verdict[UNDECIDED]),
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


def _flagged_strata(strata: Mapping[str, Any] | None, multi: bool, level: float) -> list[str]:
    """The suites whose own paired test shows a regression at the family's level (with more than one suite)."""
    return [
        s
        for s, row in (strata or {}).items()
        if multi and row["gate"]["lost"] > row["gate"]["won"] and row["gate"]["loss_p_value"] < level
    ]


def _failure_groups(
    rows: list[dict[str, Any]], standing: list[dict[str, Any]], undecided: list[dict[str, Any]]
) -> dict[str, Any]:
    """The check-rate rows by what they mean for the gate."""
    return {
        # what blocks: significant, or undecidable under the strict flakes policy (rates say which)
        "new_critical_failures": _grouped(r for r in rows if r["blocks"] and r["check"] != SAFETY_CHECK),
        "standing_critical_failures": _grouped(r for r in standing if r["check"] != SAFETY_CHECK),
        "undecided_failures": _grouped(undecided),
        "new_safety_failures": sorted({r["task"] for r in rows if r["blocks"] and r["check"] == SAFETY_CHECK}),
    }


def _paired_blockers(
    won: int, lost: int, loss_p: float, level: float, at: str, flagged: Mapping[str, Mapping[str, Any]]
) -> list[str]:
    """The paired regressions that block: pooled over the tasks, and per flagged suite."""
    blockers = []
    if lost > won and loss_p < level:
        blockers.append(f"paired test: loses {lost} task(s), wins {won} (p = {loss_p:.3g} < {at})")
    for s, g in flagged.items():
        blockers.append(f"suite {s}: loses {g['lost']}, wins {g['won']} (p = {g['loss_p_value']:.3g} < {at})")
    return blockers


def _check_counts(ids: Sequence[str], b_arm, c_arm) -> list[Any]:
    """Failures of every critical check (and of the safety layer) per task in both arms."""
    from pytest_agentdrift.compare.checkrates import CheckCounts

    counts = []
    for tid in ids:
        b, c = b_arm[tid], c_arm[tid]
        for check in sorted(set(b.critical) | set(c.critical)):
            fails = (len(b.critical.get(check, ())), len(c.critical.get(check, ())))
            counts.append(CheckCounts(tid, check, fails[0], len(b.passes), fails[1], len(c.passes)))
        if b.safety_fails or c.safety_fails:
            counts.append(CheckCounts(tid, SAFETY_CHECK, b.safety_fails, len(b.passes), c.safety_fails, len(c.passes)))
    return counts


def _grouped(rows) -> list[dict[str, Any]]:
    """[{task, checks, rates}] in task order: the shape every output reads."""
    out: dict[str, dict[str, Any]] = {}
    for r in rows:
        entry = out.setdefault(r["task"], {"task": r["task"], "checks": [], "rates": {}})
        entry["checks"].append(r["check"])
        entry["rates"][r["check"]] = {k: r[k] for k in ("baseline", "candidate", "p_value", "verdict")}
    return [out[t] for t in sorted(out)]


def _level_text(level: float, alpha: float, family: int) -> str:
    """'alpha 0.05', or 'level 0.0167 (alpha 0.05 over 3 tests)' when the family shares alpha."""
    return f"alpha {alpha:g}" if family <= 1 else f"level {level:.3g} (alpha {alpha:g} over {family} tests)"


def _passing_reason(mde: Mapping[str, Any], tasks: int, at: str, by_verdict: Mapping[str, Any]) -> str:
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


def gate_counts(won: int, lost: int, baseline_solved: int, params: GateParams) -> dict[str, Any]:
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
    row = {
        "won": won,
        "lost": lost,
        "baseline_solved": baseline_solved,
        "broken_share": share,
        "net": net,
        "p_value": p,
        "loss_p_value": p_loss,
    }
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
    row["verdict"], row["reason"] = verdict, reason
    return row


def _counts(tids: Sequence[str], rows, b_arm) -> tuple[int, int, int]:
    won = sum(1 for t in tids if rows[t]["outcome"] == "won")
    lost = sum(1 for t in tids if rows[t]["outcome"] == "lost")
    return won, lost, sum(1 for t in tids if b_arm[t].solved)


def _strata(b_arm, c_arm, rows, params: GateParams) -> dict[str, Any]:
    suites: dict[str, list[str]] = {}
    for tid in sorted(rows):
        suites.setdefault(rows[tid]["suite"], []).append(tid)
    out = {}
    for suite, tids in sorted(suites.items()):
        bp = sum(b_arm[t].n_pass for t in tids)
        br = sum(len(b_arm[t].passes) for t in tids)
        cp = sum(c_arm[t].n_pass for t in tids)
        cr = sum(len(c_arm[t].passes) for t in tids)
        out[suite] = {
            "tasks": tids,
            "baseline_pass_rate": bp / br,
            "candidate_pass_rate": cp / cr,
            "delta": math.fsum(rows[t]["delta"] for t in tids) / len(tids),
            "gate": gate_counts(*_counts(tids, rows, b_arm), params),
        }
    return out


def _promotion(b_arm, c_arm, rows, params: GateParams, seed: int) -> dict[str, Any]:
    ids = sorted(rows)
    basis = stats.choose_cost_basis([u for t in ids for arm in (b_arm, c_arm) for u in arm[t].usages])
    result: dict[str, Any] = {"basis": basis, "eps": params.promote_eps, "min_support": params.promote_support}
    if basis is None:
        result.update(support=None, promote=False, reason="fewer than 80% of runs report a price or tokens")
        return result

    def per_task(arm) -> list[float | None]:
        costs = []
        for t in ids:
            values = [c for c in (stats.run_cost(u, basis) for u in arm[t].usages) if c is not None]
            costs.append(math.fsum(values) / len(values) if values else None)
        return costs

    result.update(
        stats.promotion_support(
            [rows[t]["delta"] for t in ids],
            per_task(b_arm),
            per_task(c_arm),
            eps=params.promote_eps,
            draws=params.draws,
            seed=seed,
            confidence=params.confidence,
        )
    )
    result["promote"] = False  # settled by _gate, which knows about blockers
    return result


def _gate(b_arm, c_arm, rows, strata, crit, safety, promotion, params: GateParams) -> dict[str, Any]:
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


def _promotion_reason(promotion: Mapping[str, Any], quality: str) -> str:
    if promotion.get("support") is None:
        return promotion.get("reason") or promotion.get("note") or "no cost data"
    text = (
        f"support {promotion['support']:.2f} vs {promotion['min_support']:.2f} "
        f"(cheaper on {promotion['basis']} and pass rate within -{promotion['eps']:.0%})"
    )
    if quality == DONT_SHIP:
        return text + "; blocked: the gate says dont_ship"
    return text + ("; promote" if promotion["promote"] else "; hold")


def _observed_changes(rows: Mapping[str, Any]) -> list[dict[str, str]]:
    """Task-level behaviour changes: a won or lost task, a critical check that
    broke, a new safety-layer failure. Pass-count wiggles inside a tie are
    not changes (they are what run-to-run variance looks like)."""
    changes = []
    for tid in sorted(rows):
        row = rows[tid]
        parts = []
        if row["outcome"] in ("won", "lost"):
            b, c = row["baseline"], row["candidate"]
            parts.append(f"{row['outcome']} (baseline {b[0]}/{b[1]}, candidate {c[0]}/{c[1]})")
        if row["critical_regressions"]:
            parts.append("critical check broke: " + ", ".join(row["critical_regressions"]))
        if row["new_safety_failure"]:
            parts.append("new safety-layer failure")
        if parts:
            changes.append({"task": tid, "change": "; ".join(parts)})
    return changes


# --------------------------------------------------------------------------
# The promotion status (the protocol's decision table), first matching rule wins
# --------------------------------------------------------------------------

Rule = Callable[[Mapping[str, Any]], "list[str] | None"]


def _r_identity_missing(c: Mapping[str, Any]) -> list[str] | None:
    missing = c["identity"]["missing"]
    if missing or c["change_class"] in _UNIDENTIFIED:
        return [f"{m} is missing or unobserved" for m in missing] or ["the candidate runtime cannot be identified"]
    return None


def _r_rebaseline(c: Mapping[str, Any]) -> list[str] | None:
    changed = c["identity"]["changed"]
    if changed or c["change_class"] in _REBASELINE:
        return [f"{f} changed between runs: record a new baseline" for f in changed] or [
            f"declared change class {c['change_class']}"
        ]
    return None


def _r_split(c: Mapping[str, Any]) -> list[str] | None:
    if c["change_class"] in _SURFACE:
        return ["the change spans surfaces (e.g. extension and CLI): keep one baseline per surface"]
    return None


def _r_not_comparable(c: Mapping[str, Any]) -> list[str] | None:
    if c["comparable"]:
        return None
    return list(c["reasons"]) or ["runs are not comparable"]


def _r_infra_lost(c: Mapping[str, Any]) -> list[str] | None:
    infra = c.get("infra") or {}
    undecided = undecided_text(infra)
    if not infra.get("exceeded") and not undecided:
        return None
    why = [f"{undecided}: not decided"] if undecided else []
    for label in infra["exceeded"]:
        arm = infra[label]
        head = ", ".join(f"{r['task']} r{r['rep']} {r['class']}" for r in arm["runs_lost"][:3])
        why.append(
            f"{label} lost {arm['lost']} of {arm['runs']} run(s) ({arm['share']:.0%}) to infrastructure errors, over the "
            f"{infra['threshold']:.0%} threshold: not decided; re-run or resume them ({head})"
        )
    return why


def _r_reject(c: Mapping[str, Any]) -> list[str] | None:
    why = list(c["gate"]["blockers"])
    if c["gate"]["quality_verdict"] == DONT_SHIP and not why:
        why.append(c["gate"]["quality_reason"])
    promo, paired = c["promotion"], c["paired"]
    cheaper = (promo.get("cost_delta") or 0) < 0
    if cheaper and len(paired["lost"]) > len(paired["won"]) and not promo["promote"]:
        why.append(
            f"cheaper on {promo['basis']} but fails more tasks ({len(paired['lost'])} lost, {len(paired['won'])} won)"
        )
    return why or None


def _r_hold(c: Mapping[str, Any]) -> list[str] | None:
    why = []
    lost = c["paired"]["lost"]
    if lost and c["gate"]["quality_verdict"] != SHIP and not c["promotion"]["promote"]:
        why.append(f"non-critical regression in {', '.join(lost)}: needs an owner and an explicit acceptance")
    standing = sorted({f["task"] for f in c["candidate"]["critical_failures"]})
    if standing:
        why.append(f"critical checks fail in both arms (not regressions) on {', '.join(standing)}")
    return why or None


def _r_documented(c: Mapping[str, Any]) -> list[str] | None:
    rows = [r for r in c["ledger"] if r["status"] in (DOCUMENTED, UNCONFIRMED)]
    if rows and all(r["status"] == DOCUMENTED for r in rows):
        return [f"{r['task']}: {r['observed_change']} (note line {r['note_line']}, {r['version']})" for r in rows]
    return None


def _r_unconfirmed(c: Mapping[str, Any]) -> list[str] | None:
    if c["change_class"] in _USER_AUTHORED:
        return None  # the user's own edit explains its effects
    rows = [r for r in c["ledger"] if r["status"] == UNCONFIRMED]
    return [f"{r['task']}: {r['observed_change']} (no release note supports it)" for r in rows] or None


def _r_no_evidence(c: Mapping[str, Any]) -> list[str] | None:
    if c["change_class"] not in (None, *_NOTHING_CHANGED, *_USER_AUTHORED):
        return None  # a runtime upgrade that keeps outcomes is reviewable
    if c["gate"]["quality_verdict"] == SHIP or c["promotion"]["promote"]:
        return None
    return [f"deterministic outcomes do not establish an improvement ({c['gate']['quality_reason']})"]


def _r_forward_only(c: Mapping[str, Any]) -> list[str] | None:
    if c["rollback_state"] == "unavailable":
        return ["the previous runtime is unavailable: no rollback promise"]
    return None


def _r_rollback(c: Mapping[str, Any]) -> list[str] | None:
    if c["rollback_state"] == "verified":
        return ["restoration of the previous runtime was tested: " + str(c["rollback_evidence"].get("restoration"))]
    return None


def _r_eligible(c: Mapping[str, Any]) -> list[str] | None:
    why = [f"no critical regression and no unexplained change; gate: {c['gate']['quality_verdict']}"]
    if c["promotion"]["promote"]:
        why.append("promoted on cost: " + c["promotion"]["reason"])
    return why


#: (status, rule, applies only to comparable runs). Order is precedence.
DECISION_RULES: tuple[tuple[str, Rule, bool], ...] = (
    ("invalid_comparison", _r_identity_missing, False),
    ("re_baseline", _r_rebaseline, False),
    ("split_baselines", _r_split, False),
    ("invalid_comparison", _r_not_comparable, False),
    ("hold", _r_infra_lost, True),
    ("reject", _r_reject, True),
    ("hold", _r_hold, True),
    ("documented_candidate", _r_documented, True),
    ("hold_unconfirmed", _r_unconfirmed, True),
    ("no_material_evidence", _r_no_evidence, True),
    ("forward_only", _r_forward_only, True),
    ("rollback_capable", _r_rollback, True),
    ("eligible_for_review", _r_eligible, True),
)


def decide_status(comparison: Mapping[str, Any]) -> dict[str, Any]:
    """Map a comparison to exactly one status of the promotion decision table.

    Rules are tried in DECISION_RULES order and the first that applies wins;
    ``because`` lists the evidence that made it apply. docs/statistics.md has
    the table.
    """
    for status, rule, needs_comparable in DECISION_RULES:
        if needs_comparable and not comparison["comparable"]:
            continue
        because = rule(comparison)
        if because:
            return {"status": status, "rule": rule.__name__.removeprefix("_r_"), "because": because}
    raise AssertionError("the last rule always applies")  # pragma: no cover


# --------------------------------------------------------------------------
# decision.json, exit code, terminal lines
# --------------------------------------------------------------------------


def decision_document(comparison: Mapping[str, Any]) -> dict[str, Any]:
    """decision.json content: the status and the evidence it rests on."""
    ident = comparison["identity"]
    decision = comparison["decision"]

    def shared(field: str) -> Any:
        b, c = ident["baseline"][field], ident["candidate"][field]
        return b if b == c else None  # differing ids: both are under evidence.identity

    base_crit = {(f["task"], f["check"]) for f in comparison["baseline"]["critical_failures"]}
    return {
        "schema_version": SCHEMA_VERSION,
        "status": decision["status"],
        "status_rule": decision["rule"],
        "because": decision["because"],
        "baseline_runtime_id": ident["baseline"]["runtime_id"],
        "candidate_runtime_id": ident["candidate"]["runtime_id"],
        "task_set_id": shared("task_set_id"),
        "evaluator_id": shared("evaluator_id"),
        "change_class": comparison["change_class"],
        "comparable": comparison["comparable"],
        "reasons": comparison["reasons"],
        "critical_failures": [
            {**f, "regression": (f["task"], f["check"]) not in base_crit}
            for f in comparison["candidate"]["critical_failures"]
        ],
        "unconfirmed_changes": [
            f"{r['task']}: {r['observed_change']}" for r in comparison["ledger"] or [] if r["status"] == UNCONFIRMED
        ],
        "rollback_state": comparison["rollback_state"],
        "rollback_evidence": comparison["rollback_evidence"],
        "gate": _gate_summary(comparison),
        "regression_gate": _regression_summary(comparison.get("regression")),
        "infra_errors": _infra_summary(comparison),
        "evidence": _decision_evidence(comparison),
        "approved_external_effects": [],
        "publication_authorized": False,
    }


def _decision_evidence(comparison: Mapping[str, Any]) -> dict[str, Any]:
    return {
        "identity": comparison["identity"],
        "baseline": _arm_evidence(comparison["baseline"]),
        "candidate": _arm_evidence(comparison["candidate"]),
        "paired": comparison["paired"],
        "strata": comparison["strata"],
        "promotion": comparison["promotion"],
        "tampered_passes": {
            "baseline": comparison["baseline"]["tampered_passes"],
            "candidate": comparison["candidate"]["tampered_passes"],
        },
        "release_notes_supplied": comparison["ledger_supplied"],
        "notes": comparison["rollback_notes"],
    }


def _regression_summary(reg: Mapping[str, Any] | None) -> dict[str, Any] | None:
    if reg is None:
        return None
    keys = (
        "passed",
        "reason",
        "blockers",
        "new_critical_failures",
        "standing_critical_failures",
        "new_safety_failures",
        "undecided_failures",
        "flakes",
        "tampered_passes",
        "won",
        "lost",
        "loss_p_value",
        "strata_flagged",
        "alpha",
        "level",
        "minimum_detectable",
    )
    return {k: reg.get(k) for k in keys}


def _arm_evidence(arm: Mapping[str, Any]) -> dict[str, Any]:
    keys = ("run_id", "runtime_id", "k", "tasks", "runs", "passes", "pass_rate", "wilson", "spend")
    return {k: arm[k] for k in keys if k in arm}


def _infra_summary(comparison: Mapping[str, Any]) -> dict[str, Any] | None:
    """decision.json: runs lost to infrastructure per arm, excluded from the statistics."""
    infra = comparison.get("infra")
    if not infra:
        return None
    return {
        "threshold": infra["threshold"],
        "decided": not infra["exceeded"] and not infra.get("undecided"),
        "exceeded": infra["exceeded"],
        "undecided": infra.get("undecided", []),
        "excluded_tasks": infra["excluded_tasks"],
        **{
            label: {
                k: infra[label][k] for k in ("runs", "lost", "share", "runs_lost", "undecided") if k in infra[label]
            }
            for label in ("baseline", "candidate")
        },
    }


def _gate_summary(comparison: Mapping[str, Any]) -> dict[str, Any]:
    gate = comparison["gate"]
    return {
        "params": comparison["params"],
        "verdict": gate["verdict"],
        "quality_verdict": gate["quality_verdict"],
        "passed": gate["passed"],
        "reason": gate["reason"],
        "strata": (
            {s: row["gate"]["verdict"] for s, row in comparison["strata"].items()} if comparison["strata"] else None
        ),
    }


def comparison_exit_code(
    comparison: Mapping[str, Any], gate: str | bool | None = None, *, gate_enabled: bool | None = None
) -> int:
    """Exit code of the comparison part of a session (CONTRACT §9).

    6 (EXIT_REFUSED) when the runs are not comparable, whatever else is set;
    under ``gate="regression"`` 1 (EXIT_FAILED) when the regression gate
    failed; under ``gate="promote"`` (or True, the former flag) 1 unless the
    promotion gate passed (a hold counts as passed only when cost promotion
    promotes); 0 otherwise. A failed check in the session is the caller's to
    combine when no gate is set.
    """
    if not comparison["comparable"]:
        return EXIT_REFUSED
    if gate_enabled is not None:  # the former boolean flag: the promotion gate
        gate = gate_enabled
    mode = GATE_PROMOTE if gate is True else (gate or None)
    infra = comparison.get("infra") or {}
    if mode and (infra.get("exceeded") or infra.get("undecided")):
        return EXIT_USAGE  # operational: too many runs lost, or runs the harness could not judge
    if mode == GATE_REGRESSION and not comparison["regression"]["passed"]:
        return EXIT_FAILED
    if mode == GATE_PROMOTE and not comparison["gate"]["passed"]:
        return EXIT_FAILED
    return EXIT_OK


def _pct(x: float | None) -> str:
    return "null" if x is None else f"{100 * x:.1f}%"


def _pp(x: float | None) -> str:
    return "null" if x is None else f"{100 * x:+.1f} pp"


def render_comparison(comparison: Mapping[str, Any]) -> list[str]:
    """Short, aligned lines for the terminal; critical regressions first."""
    c = comparison
    lines: list[str] = []
    for reg in c["critical_regressions"] or []:
        lines.append(_line("CRITICAL", f"{reg['task']}: {', '.join(reg['checks'])} broke in the candidate"))
    for t in c["new_safety_failures"] or []:
        lines.append(_line("SAFETY", f"{t}: new safety-layer failure in the candidate"))
    if not c["comparable"]:
        lines.append(_line("comparable", "no: every delta is null"))
        lines += [_line("", f"- {r}") for r in c["reasons"]]
    lines += _arm_lines(c)
    lines += _paired_lines(c["paired"])
    tampered = [
        f"{arm} {t['task']} r{t['rep']}" for arm in ("baseline", "candidate") for t in c[arm]["tampered_passes"]
    ]
    if tampered:
        lines.append(_line("tampered", _ids(tampered) + " (counted as fails)"))
    fc = c["failure_classes"]
    if fc:
        for arm in ("baseline", "candidate"):
            parts = [f"{k} {fc[arm][k]['runs']}" for k in stats.FAILURE_CLASSES]
            lines.append(_line("failures", f"{arm:<9} " + "  ".join(parts)))
    var = c["variance"]
    if var and var.get("shares"):
        sh = var["shares"]
        lines.append(
            _line("variance", "  ".join(f"{k} {_pct(sh[k])}" for k in ("task", "arm", "task_x_arm", "run_to_run")))
        )
    return lines + _verdict_lines(c)


def _arm_lines(c: Mapping[str, Any]) -> list[str]:
    """Each arm's pass rate, the runs it lost to infrastructure, and what it spent."""
    lines = []
    for label in ("baseline", "candidate"):
        arm = c[label]
        ci = arm["wilson"]
        ci_text = f"[{_pct(ci[0])}, {_pct(ci[1])}]" if ci else "[null]"
        lines.append(
            _line(label, f"{arm['passes']}/{arm['runs']} runs  {_pct(arm['pass_rate'])} {ci_text}  k={arm['k']}")
        )
    infra = c.get("infra") or {}
    for label in ("baseline", "candidate"):
        arm = infra.get(label)
        if arm and arm["lost"]:
            runs = [f"{r['task']} r{r['rep']} ({r['class']})" for r in arm["runs_lost"]]
            lines.append(
                _line(
                    "infra",
                    f"{label} lost {arm['lost']}/{arm['runs']} run(s) to infrastructure errors, "
                    f"excluded from the statistics: {_ids(runs)}",
                )
            )
    if infra.get("excluded_tasks"):
        lines.append(_line("", "left out of the pairing (every run lost in one arm): " + _ids(infra["excluded_tasks"])))
    spends = [(label, c[label].get("spend") or {}) for label in ("baseline", "candidate")]
    if any(sp.get("tokens") is not None or sp.get("cost_usd") is not None for _, sp in spends):
        lines.append(_line("spend", "  ".join(f"{label} {spend_text(sp, ' ', 'n/a')}" for label, sp in spends)))
    return lines


def _paired_lines(paired: Mapping[str, Any] | None) -> list[str]:
    if not paired:
        return [_line("delta", "null")]
    lines = [
        _line(
            "paired",
            f"won {len(paired['won'])}  lost {len(paired['lost'])}  tied {len(paired['tied'])}  "
            f"p(candidate wins more) = {paired['p_value']:.3g}",
        )
    ]
    if paired["won"]:
        lines.append(_line("", "won:  " + _ids(paired["won"])))
    if paired["lost"]:
        lines.append(_line("", "lost: " + _ids(paired["lost"])))
    ci = paired["delta_ci"]
    lines.append(_line("delta", f"{_pp(paired['delta'])} [{_pp(ci[0])}, {_pp(ci[1])}]  ({paired['ci_method']})"))
    return lines


def _verdict_lines(c: Mapping[str, Any]) -> list[str]:
    """The gate, per suite, promotion, regression gate and status; the deciding gate's line last."""
    lines = []
    gate = c["gate"]
    passed_by_cost = gate["verdict"] == HOLD and gate["passed"]
    # under the regression gate the promotion gate and status are a second opinion that sets nothing
    secondary = c.get("gate_mode") == GATE_REGRESSION
    lines.append(
        _line(
            "promote" if secondary else "gate",
            ("(secondary, sets nothing) " if secondary else "")
            + f"{gate['verdict'] or 'null'}: {gate['reason']}"
            + (" (passed: promoted on cost)" if passed_by_cost else ""),
        )
    )
    for suite, row in (c["strata"] or {}).items():
        if len(c["strata"]) > 1:
            lines.append(_line("", f"suite {suite}: {row['gate']['verdict']}: {row['gate']['reason']}"))
    promo = c["promotion"]
    if promo and promo.get("basis"):
        lines.append(_line("promotion", promo["reason"]))
    reg = c.get("regression")
    regression_line = _line("regression", ("pass: " if reg["passed"] else "FAIL: ") + reg["reason"]) if reg else None
    if regression_line and not secondary:
        lines.append(regression_line)
    decision = c["decision"]
    more = len(decision["because"]) - 1
    lines.append(
        _line(
            "status",
            ("(secondary, sets nothing) " if secondary else "")
            + f"{decision['status']}: {decision['because'][0]}"
            + (f" (+{more} more)" if more else ""),
        )
    )
    if regression_line and secondary:
        lines.append(regression_line)
    return lines


def _ids(items: Sequence[str], limit: int = 12) -> str:
    # The full lists are in the JSON; the terminal gets a readable head.
    head = ", ".join(items[:limit])
    return head + (f", ... (+{len(items) - limit} more)" if len(items) > limit else "")


def _line(label: str, text: str) -> str:
    return f"{label:<11} {text}".rstrip()
