"""From two recorded runs to a comparison, a gate verdict and a promotion status.

Pure functions over results.json dicts (docs/record-format.md); no pytest, no
file I/O. The plugin and the ``agentdrift compare`` CLI both call:

    comparison.compare_runs(base, cand, comparable=..., reasons=[...], change_class=...,
                            gate=GateParams(...), seed=0, rollback_state="unknown",
                            ledger=notes)             -> comparison dict
    render.render_comparison(comparison)              -> terminal lines
    status.decision_document(comparison)             -> decision.json content
    status.comparison_exit_code(comparison, gate_mode) -> 0 / 1 / 6
    ledger.ledger_csv(comparison["ledger"])           -> release-note-ledger.csv

This module is the orchestration: it reads the two arms (compare/arms.py),
checks they can be compared, pairs them task by task, runs the statistics and
the gates (compare/gates.py) and settles the status (compare/status.py).
Every method, default and the status precedence are documented in
docs/statistics.md; keep the two in step.
"""

from __future__ import annotations

import contextlib
import gc
from typing import Any, Iterator, Mapping

from pytest_agentdrift.compare import stats
from pytest_agentdrift.compare.arms import TaskRuns, arm_summary, infra_runs, read_arm, undecided_runs
from pytest_agentdrift.compare.gates import (
    GateParams,
    cost_promotion,
    paired_delta,
    promotion_gate,
    regression_gate,
    strata_gates,
)
from pytest_agentdrift.compare.ledger import ReleaseNote, mark_changes
from pytest_agentdrift.compare.status import ACCEPTED_CHANGE_CLASSES, decide_status
from pytest_agentdrift.errors import AgentDriftError
from pytest_agentdrift.shapes import (
    CheckTests,
    Comparison,
    ComparisonIdentity,
    ComparisonPaired,
    CriticalRegression,
    InfraArm,
    InfraPart,
    JsonObject,
    LedgerRow,
    ObservedChange,
    PairedResult,
    RunIdentity,
    TaskRow,
)
from pytest_agentdrift.vocabulary import (
    DEFAULT_ROLLBACK_STATE,
    DEFAULT_SEED,
    ROLLBACK_STATES,
    SCHEMA_VERSION,
    is_concrete,
)

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
    rollback_evidence: JsonObject | None = None,
) -> Comparison:
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
def _no_cycle_collection() -> Iterator[None]:
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


def _compare_runs(
    base: Mapping[str, Any],
    cand: Mapping[str, Any],
    comparable: bool,
    reasons: list[str],
    change_class: str | None,
    gate: GateParams,
    seed: int,
    rollback_state: str,
    ledger: list[ReleaseNote] | None,
    rollback_evidence: JsonObject | None,
) -> Comparison:
    change_class = _normalise_change_class(change_class)
    b_arm, c_arm = read_arm(base, "baseline"), read_arm(cand, "candidate")
    infra = _infra_part(base, cand, b_arm, c_arm, gate)
    for tid in infra["excluded_tasks"]:
        b_arm.pop(tid, None)
        c_arm.pop(tid, None)
    identity = _identity(base, cand)
    own = _own_reasons(base, cand, identity, b_arm, c_arm)
    reasons = list(reasons) + own
    comparable = bool(comparable) and not own
    rollback, rollback_notes = resolve_rollback_state(rollback_state, rollback_evidence)
    changes: list[ObservedChange] | None = None
    marked: list[LedgerRow] | None = None
    if comparable:
        part = _paired_part(b_arm, c_arm, gate, seed, _confirmed(base, cand, gate), base.get("pool"))
        changes = _observed_changes(part["tasks"])
        marked = mark_changes(ledger, changes)
    else:
        part = _null_paired_part(b_arm, c_arm)
    out: Comparison = {
        "schema_version": SCHEMA_VERSION,
        "comparable": comparable,
        "reasons": reasons,
        "change_class": change_class,
        "identity": identity,
        "params": gate.as_dict(),
        "seed": seed,
        "baseline": arm_summary(base, b_arm, gate.confidence),
        "candidate": arm_summary(cand, c_arm, gate.confidence),
        "rollback_state": rollback,
        "rollback_evidence": dict(rollback_evidence) if rollback_evidence else None,
        "rollback_notes": rollback_notes,
        "infra": infra,
        "tasks": part["tasks"],
        "paired": part["paired"],
        "failure_classes": part["failure_classes"],
        "variance": part["variance"],
        "critical_regressions": part["critical_regressions"],
        "new_safety_failures": part["new_safety_failures"],
        "strata": part["strata"],
        "promotion": part["promotion"],
        "gate": part["gate"],
        "regression": part["regression"],
        "observed_changes": changes,
        "ledger": marked,
        "ledger_supplied": ledger is not None,
    }
    out["decision"] = decide_status(out)
    return out


def _normalise_change_class(change_class: str | None) -> str | None:
    if change_class is None:
        return None
    key = change_class.strip().lower().replace("-", "_").replace(" ", "_")
    if key not in ACCEPTED_CHANGE_CLASSES:
        raise AgentDriftError(f"unknown change class {change_class!r} (known: {', '.join(ACCEPTED_CHANGE_CLASSES)})")
    return key


def _run_identity(results: Mapping[str, Any]) -> RunIdentity:
    """The keys of vocabulary.RUN_IDENTITY_KEYS, in its order."""
    return {
        "runtime_id": results.get("runtime_id"),
        "task_set_id": results.get("task_set_id"),
        "evaluator_id": results.get("evaluator_id"),
    }


def _identity(base: Mapping[str, Any], cand: Mapping[str, Any]) -> ComparisonIdentity:
    arms = {"baseline": _run_identity(base), "candidate": _run_identity(cand)}
    missing = [f"{arm} {f}" for arm, ident in arms.items() for f, value in ident.items() if not is_concrete(value)]
    changed = [
        f
        for f in ("task_set_id", "evaluator_id")
        if f"baseline {f}" not in missing
        and f"candidate {f}" not in missing
        and arms["baseline"].get(f) != arms["candidate"].get(f)
    ]
    return {"baseline": arms["baseline"], "candidate": arms["candidate"], "missing": missing, "changed": changed}


def _own_reasons(
    base: Mapping[str, Any],
    cand: Mapping[str, Any],
    identity: ComparisonIdentity,
    b_arm: dict[str, TaskRuns],
    c_arm: dict[str, TaskRuns],
) -> list[str]:
    """Reasons found in the results themselves; any one makes the pair not comparable."""
    reasons = [f"{m} is missing or unobserved" for m in identity["missing"]]
    reasons += [
        f"{f} differs: {identity['baseline'].get(f)} != {identity['candidate'].get(f)}" for f in identity["changed"]
    ]
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


def resolve_rollback_state(state: str, evidence: Mapping[str, object] | None) -> tuple[str, list[str]]:
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


def _infra_arm(results: Mapping[str, Any], arm: dict[str, TaskRuns]) -> InfraArm:
    total, lost = infra_runs(results)
    return {
        "runs": total,
        "lost": len(lost),
        "share": len(lost) / total if total else 0.0,
        "runs_lost": lost,
        "tasks_lost": sorted(set(results.get("tasks") or {}) - set(arm)),
        # runs the harness could not judge: never scored, and an arm that holds one decides nothing
        "undecided": undecided_runs(results),
    }


def _infra_part(
    base: Mapping[str, Any],
    cand: Mapping[str, Any],
    b_arm: dict[str, TaskRuns],
    c_arm: dict[str, TaskRuns],
    gate: GateParams,
) -> InfraPart:
    """Runs lost to infrastructure: excluded from every statistic, counted, listed; over the
    threshold in either arm the comparison is not decided."""
    arms = {"baseline": _infra_arm(base, b_arm), "candidate": _infra_arm(cand, c_arm)}
    return {
        "threshold": gate.max_infra_loss,
        "baseline": arms["baseline"],
        "candidate": arms["candidate"],
        "exceeded": [label for label, arm in arms.items() if arm["share"] > gate.max_infra_loss],
        "undecided": [label for label, arm in arms.items() if arm["undecided"]],
        # a task all of whose runs were lost in one arm cannot be paired: it leaves both arms
        "excluded_tasks": sorted(set(arms["baseline"]["tasks_lost"]) | set(arms["candidate"]["tasks_lost"])),
    }


def _task_rows(b_arm: dict[str, TaskRuns], c_arm: dict[str, TaskRuns], paired: bool) -> dict[str, TaskRow]:
    rows = {}
    for tid in sorted(set(b_arm) | set(c_arm)):
        b, c = b_arm.get(tid), c_arm.get(tid)
        either = b or c
        assert either is not None  # tid is in one arm at least
        row: TaskRow = {
            "suite": either.suite,
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


def _null_paired_part(b_arm: dict[str, TaskRuns], c_arm: dict[str, TaskRuns]) -> ComparisonPaired:
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


def _confirmed(base: Mapping[str, Any], cand: Mapping[str, Any], gate: GateParams) -> CheckTests | None:
    """The confirming candidate's check rows (compare/confirm.py), or None for a fixed design."""
    if not cand.get("confirm"):
        return None
    from pytest_agentdrift.compare.confirm import confirm_tests

    return confirm_tests(base, cand, gate.flakes)


def _paired_part(
    b_arm: dict[str, TaskRuns],
    c_arm: dict[str, TaskRuns],
    params: GateParams,
    seed: int,
    confirmed: CheckTests | None = None,
    pool: Mapping[str, Any] | None = None,
) -> ComparisonPaired:
    rows = _task_rows(b_arm, c_arm, paired=True)
    ids = sorted(rows)
    boot = stats.paired_bootstrap_delta(
        [paired_delta(rows[t]) for t in ids], draws=params.draws, seed=seed, confidence=params.confidence
    )
    won, lost, tied = ([t for t in ids if rows[t]["outcome"] == o] for o in ("won", "lost", "tied"))
    paired: PairedResult = {
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
    crit: list[CriticalRegression] = [
        {"task": t, "checks": checks} for t in ids if (checks := rows[t]["critical_regressions"])
    ]
    safety = [t for t in ids if rows[t]["new_safety_failure"]]
    strata = strata_gates(b_arm, c_arm, rows, params)
    promotion = cost_promotion(b_arm, c_arm, rows, params, seed)
    gate = promotion_gate(b_arm, c_arm, rows, strata, crit, safety, promotion, params)
    regression = regression_gate(b_arm, c_arm, rows, strata, params, confirmed, pool)
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


def _observed_changes(rows: Mapping[str, TaskRow]) -> list[ObservedChange]:
    """Task-level behaviour changes: a won or lost task, a critical check that
    broke, a new safety-layer failure. Pass-count wiggles inside a tie are
    not changes (they are what run-to-run variance looks like)."""
    changes: list[ObservedChange] = []
    for tid in sorted(rows):
        row = rows[tid]
        parts = []
        b, c = row["baseline"], row["candidate"]
        if row["outcome"] in ("won", "lost") and b and c:
            parts.append(f"{row['outcome']} (baseline {b[0]}/{b[1]}, candidate {c[0]}/{c[1]})")
        if row["critical_regressions"]:
            parts.append("critical check broke: " + ", ".join(row["critical_regressions"]))
        if row["new_safety_failure"]:
            parts.append("new safety-layer failure")
        if parts:
            changes.append({"task": tid, "change": "; ".join(parts)})
    return changes
