"""The promotion status of a comparison and what it is published as.

The protocol's decision table (``DECISION_RULES``, first matching rule wins:
``decide_status``), the change classes it reads, decision.json
(``decision_document`` and its summaries) and the comparison's exit code
(``comparison_exit_code``). Reads a comparison dict (compare/comparison.py);
docs/statistics.md has the table and the precedence.
"""

from __future__ import annotations

from typing import Callable, Literal

from pytest_agentdrift.compare.gates import DONT_SHIP, SHIP
from pytest_agentdrift.compare.ledger import DOCUMENTED, UNCONFIRMED
from pytest_agentdrift.shapes import (
    ArmEvidence,
    ArmSummary,
    Comparison,
    Decision,
    DecisionEvidence,
    GateSummary,
    InfraArm,
    InfraArmSummary,
    InfraPart,
    InfraSummary,
    JsonObject,
    LedgerRow,
    PairedResult,
    Promotion,
    RegressionSection,
    RegressionSummary,
    StatusDecision,
)
from pytest_agentdrift.vocabulary import (
    CHANGE_CLASS_ALIASES,
    CHANGE_CLASSES,
    EXIT_FAILED,
    EXIT_OK,
    EXIT_REFUSED,
    EXIT_USAGE,
    GATE_PROMOTE,
    GATE_REGRESSION,
    SCHEMA_VERSION,
)

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


def undecided_text(infra: InfraPart) -> str | None:
    """`candidate has 1 undecided run(s): T07 r1 (parse: OverflowError ...)`, or None."""
    parts = []
    for label in infra.get("undecided") or ():
        runs = infra_arm(infra, label)["undecided"]
        head = ", ".join(f"{r['task']} r{r['rep']} ({r['why']})" for r in runs[:2])
        parts.append(f"{label} has {len(runs)} undecided run(s) the harness could not judge: {head}")
    return "; ".join(parts) or None


def infra_arm(infra: InfraPart, label: str) -> InfraArm:
    return infra["baseline"] if label == "baseline" else infra["candidate"]


# --------------------------------------------------------------------------
# The promotion status (the protocol's decision table), first matching rule wins
# --------------------------------------------------------------------------


def paired_result(c: Comparison) -> PairedResult:
    """The paired test of a comparable pair (the rules that read it apply only to one)."""
    paired = c["paired"]
    if paired is None:
        raise AssertionError("a rule for comparable runs read a comparison that is not")
    return paired


def _promotion(c: Comparison) -> Promotion:
    promotion = c["promotion"]
    if promotion is None:
        raise AssertionError("a rule for comparable runs read a comparison that is not")
    return promotion


def regression_section(c: Comparison) -> RegressionSection:
    """The regression gate of a comparable pair."""
    regression = c["regression"]
    if regression is None:
        raise AssertionError("the regression gate of a comparison that is not comparable was read")
    return regression


def _ledger(c: Comparison) -> list[LedgerRow]:
    ledger = c["ledger"]
    if ledger is None:
        raise AssertionError("a rule for comparable runs read a comparison that is not")
    return ledger


Rule = Callable[[Comparison], "list[str] | None"]


def _r_identity_missing(c: Comparison) -> list[str] | None:
    missing = c["identity"]["missing"]
    if missing or c["change_class"] in _UNIDENTIFIED:
        return [f"{m} is missing or unobserved" for m in missing] or ["the candidate runtime cannot be identified"]
    return None


def _r_rebaseline(c: Comparison) -> list[str] | None:
    changed = c["identity"]["changed"]
    if changed or c["change_class"] in _REBASELINE:
        return [f"{f} changed between runs: record a new baseline" for f in changed] or [
            f"declared change class {c['change_class']}"
        ]
    return None


def _r_split(c: Comparison) -> list[str] | None:
    if c["change_class"] in _SURFACE:
        return ["the change spans surfaces (e.g. extension and CLI): keep one baseline per surface"]
    return None


def _r_not_comparable(c: Comparison) -> list[str] | None:
    if c["comparable"]:
        return None
    return list(c["reasons"]) or ["runs are not comparable"]


def _r_infra_lost(c: Comparison) -> list[str] | None:
    infra = c.get("infra")
    undecided = undecided_text(infra) if infra else None
    if not infra or (not infra.get("exceeded") and not undecided):
        return None
    why = [f"{undecided}: not decided"] if undecided else []
    for label in infra["exceeded"]:
        arm = infra_arm(infra, label)
        head = ", ".join(f"{r['task']} r{r['rep']} {r['class']}" for r in arm["runs_lost"][:3])
        why.append(
            f"{label} lost {arm['lost']} of {arm['runs']} run(s) ({arm['share']:.0%}) to infrastructure errors, over the "
            f"{infra['threshold']:.0%} threshold: not decided; re-run or resume them ({head})"
        )
    return why


def _r_reject(c: Comparison) -> list[str] | None:
    why = list(c["gate"]["blockers"])
    if c["gate"]["quality_verdict"] == DONT_SHIP and not why:
        why.append(c["gate"]["quality_reason"])
    promo, paired = _promotion(c), paired_result(c)
    cheaper = (promo.get("cost_delta") or 0) < 0
    if cheaper and len(paired["lost"]) > len(paired["won"]) and not promo["promote"]:
        why.append(
            f"cheaper on {promo['basis']} but fails more tasks ({len(paired['lost'])} lost, {len(paired['won'])} won)"
        )
    return why or None


def _r_hold(c: Comparison) -> list[str] | None:
    why = []
    lost = paired_result(c)["lost"]
    if lost and c["gate"]["quality_verdict"] != SHIP and not _promotion(c)["promote"]:
        why.append(f"non-critical regression in {', '.join(lost)}: needs an owner and an explicit acceptance")
    standing = sorted({f["task"] for f in c["candidate"]["critical_failures"]})
    if standing:
        why.append(f"critical checks fail in both arms (not regressions) on {', '.join(standing)}")
    return why or None


def _r_documented(c: Comparison) -> list[str] | None:
    rows = [r for r in _ledger(c) if r["status"] in (DOCUMENTED, UNCONFIRMED)]
    if rows and all(r["status"] == DOCUMENTED for r in rows):
        return [f"{r['task']}: {r['observed_change']} (note line {r['note_line']}, {r['version']})" for r in rows]
    return None


def _r_unconfirmed(c: Comparison) -> list[str] | None:
    if c["change_class"] in _USER_AUTHORED:
        return None  # the user's own edit explains its effects
    rows = [r for r in _ledger(c) if r["status"] == UNCONFIRMED]
    return [f"{r['task']}: {r['observed_change']} (no release note supports it)" for r in rows] or None


def _r_no_evidence(c: Comparison) -> list[str] | None:
    if c["change_class"] not in (None, *_NOTHING_CHANGED, *_USER_AUTHORED):
        return None  # a runtime upgrade that keeps outcomes is reviewable
    if c["gate"]["quality_verdict"] == SHIP or _promotion(c)["promote"]:
        return None
    return [f"deterministic outcomes do not establish an improvement ({c['gate']['quality_reason']})"]


def _r_forward_only(c: Comparison) -> list[str] | None:
    if c["rollback_state"] == "unavailable":
        return ["the previous runtime is unavailable: no rollback promise"]
    return None


def _r_rollback(c: Comparison) -> list[str] | None:
    if c["rollback_state"] == "verified":
        evidence = c["rollback_evidence"] or {}  # resolve_rollback_state holds 'verified' to evidence
        return ["restoration of the previous runtime was tested: " + str(evidence.get("restoration"))]
    return None


def _r_eligible(c: Comparison) -> list[str] | None:
    why = [f"no critical regression and no unexplained change; gate: {c['gate']['quality_verdict']}"]
    promotion = _promotion(c)
    if promotion["promote"]:
        why.append("promoted on cost: " + promotion["reason"])
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


def decide_status(comparison: Comparison) -> StatusDecision:
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
# decision.json, exit code
# --------------------------------------------------------------------------


def decision_document(comparison: Comparison) -> Decision:
    """decision.json content: the status and the evidence it rests on."""
    ident = comparison["identity"]
    decided = comparison["decision"]

    def shared(field: Literal["task_set_id", "evaluator_id"]) -> str | None:
        b, c = ident["baseline"][field], ident["candidate"][field]
        return b if b == c else None  # differing ids: both are under evidence.identity

    base_crit = {(f["task"], f["check"]) for f in comparison["baseline"]["critical_failures"]}
    decision: Decision = {
        "schema_version": SCHEMA_VERSION,
        "status": decided["status"],
        "status_rule": decided["rule"],
        "because": decided["because"],
        "baseline_runtime_id": ident["baseline"]["runtime_id"],
        "candidate_runtime_id": ident["candidate"]["runtime_id"],
        "task_set_id": shared("task_set_id"),
        "evaluator_id": shared("evaluator_id"),
        "change_class": comparison["change_class"],
        "comparable": comparison["comparable"],
        "reasons": comparison["reasons"],
        "critical_failures": [
            {
                "task": f["task"],
                "check": f["check"],
                "reps": f["reps"],
                "regression": (f["task"], f["check"]) not in base_crit,
            }
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
    pool = comparison.get("baseline_pool")
    if pool:
        decision["baseline_pool"] = _pool_summary(pool)
    cost = comparison.get("cost")
    if cost:
        decision["cost"] = cost
    return decision


def _pool_summary(pool: JsonObject) -> JsonObject:
    """A pooled baseline, in decision.json: its records, the pooled k per task, what was left out and
    why, and the night-to-night variation the gate accounted for (absent for a one-record baseline)."""
    from pytest_agentdrift.compare.pool import pool_text

    keys = ("path", "records", "left_out", "runs_left_out", "k", "records_per_task", "dispersion")
    return {"text": pool_text(pool), **{key: pool.get(key) for key in keys}}


def _decision_evidence(comparison: Comparison) -> DecisionEvidence:
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


def _regression_summary(reg: RegressionSection | None) -> RegressionSummary | None:
    """The regression gate less its check rows (decision.json keeps the verdicts, comparison.json the rows)."""
    if reg is None:
        return None
    return {
        "passed": reg["passed"],
        "reason": reg["reason"],
        "blockers": reg["blockers"],
        "new_critical_failures": reg["new_critical_failures"],
        "standing_critical_failures": reg["standing_critical_failures"],
        "new_safety_failures": reg["new_safety_failures"],
        "undecided_failures": reg["undecided_failures"],
        "flakes": reg["flakes"],
        "tampered_passes": reg["tampered_passes"],
        "won": reg["won"],
        "lost": reg["lost"],
        "loss_p_value": reg["loss_p_value"],
        "strata_flagged": reg["strata_flagged"],
        "alpha": reg["alpha"],
        "level": reg["level"],
        "minimum_detectable": reg["minimum_detectable"],
    }


def _arm_evidence(arm: ArmSummary) -> ArmEvidence:
    return {
        "run_id": arm["run_id"],
        "runtime_id": arm["runtime_id"],
        "k": arm["k"],
        "tasks": arm["tasks"],
        "runs": arm["runs"],
        "passes": arm["passes"],
        "pass_rate": arm["pass_rate"],
        "wilson": arm["wilson"],
        "spend": arm["spend"],
    }


def _infra_summary(comparison: Comparison) -> InfraSummary | None:
    """decision.json: runs lost to infrastructure per arm, excluded from the statistics."""
    infra = comparison.get("infra")
    if not infra:
        return None
    arms: dict[str, InfraArmSummary] = {
        label: {
            "runs": arm["runs"],
            "lost": arm["lost"],
            "share": arm["share"],
            "runs_lost": arm["runs_lost"],
            "undecided": arm["undecided"],
        }
        for label, arm in (("baseline", infra["baseline"]), ("candidate", infra["candidate"]))
    }
    return {
        "threshold": infra["threshold"],
        "decided": not infra["exceeded"] and not infra.get("undecided"),
        "exceeded": infra["exceeded"],
        "undecided": infra.get("undecided", []),
        "excluded_tasks": infra["excluded_tasks"],
        "baseline": arms["baseline"],
        "candidate": arms["candidate"],
    }


def _gate_summary(comparison: Comparison) -> GateSummary:
    gate, strata = comparison["gate"], comparison["strata"]
    return {
        "params": comparison["params"],
        "verdict": gate["verdict"],
        "quality_verdict": gate["quality_verdict"],
        "passed": gate["passed"],
        "reason": gate["reason"],
        "strata": ({s: row["gate"]["verdict"] for s, row in strata.items()} if strata else None),
    }


def comparison_exit_code(
    comparison: Comparison, gate: str | bool | None = None, *, gate_enabled: bool | None = None
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
    infra = comparison.get("infra")
    if mode and infra and (infra.get("exceeded") or infra.get("undecided")):
        return EXIT_USAGE  # operational: too many runs lost, or runs the harness could not judge
    if mode == GATE_REGRESSION and not regression_section(comparison)["passed"]:
        return EXIT_FAILED
    if mode == GATE_PROMOTE and not comparison["gate"]["passed"]:
        return EXIT_FAILED
    return EXIT_OK
