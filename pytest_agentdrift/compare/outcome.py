"""One comparison of two recorded runs, shared by the plugin and `agentdrift compare`.

`compare_recorded` takes the two results.json documents and the manifest
comparison, runs the statistics and the decision (compare.comparison), and
returns the files the record keeps, the terminal lines and the verdict: the
exit code with the one sentence that explains it. `Verdict.line` is the
closing line every exit path prints (`agentdrift: exit N — reason`), and
the same sentence goes into decision.json and report.md. No pytest, no I/O
beyond reading the optional release-notes and rollback-evidence files.
"""

from __future__ import annotations

from dataclasses import dataclass, field
from pathlib import Path
from typing import TYPE_CHECKING, Any, Mapping

from pytest_agentdrift.shapes import CheckRow, Comparison, DecisionCost, ExitStatusRecord, JsonObject, RegressionSection
from pytest_agentdrift.vocabulary import (
    COMPARISON_FILE,
    DECISION_FILE,
    DEFAULT_ROLLBACK_STATE,
    DEFAULT_SEED,
    EXIT_OK,
    EXIT_REFUSED,
    GATE_PROMOTE,
    GATE_REGRESSION,
    MANIFEST_DIFF_FILE,
)

if TYPE_CHECKING:
    from pytest_agentdrift.compare.gates import GateParams
    from pytest_agentdrift.compare.ledger import ReleaseNote
    from pytest_agentdrift.manifest.identity import StampComparison

#: what pytest's items say under a decided regression gate: {"failed" | "xfailed": {task: why}}
GateItems = dict[str, dict[str, str]]


@dataclass(frozen=True)
class Verdict:
    """An exit code and the sentence that says what set it."""

    code: int
    reason: str

    @property
    def line(self) -> str:
        return closing_line(self.code, self.reason)

    def to_dict(self) -> ExitStatusRecord:
        return {"code": self.code, "reason": self.reason, "line": self.line}


def closing_line(code: int, reason: str) -> str:
    from pytest_agentdrift.safetext import escape_path

    # a reason can quote what an agent reported (an infrastructure error that stopped the session)
    return f"agentdrift: exit {int(code)} — {escape_path(reason)}"


@dataclass
class ComparisonOutcome:
    comparison: Comparison
    files: dict[str, Any] = field(default_factory=dict)  # record path -> JSON document or text
    lines: list[str] = field(default_factory=list)
    verdict: Verdict = Verdict(EXIT_OK, "")


def selected_baseline(base: dict[str, Any], cand: Mapping[str, Any]) -> tuple[dict[str, Any], str | None]:
    """Pair on the tasks the candidate ran when -k / -m selected part of the same task set.

    The manifests already proved the task set is the same; a candidate that ran a
    subset is compared on that subset (the baseline's other tasks are left out,
    and the note says so). Anything else is left for compare_runs to refuse.
    """
    cand_ids, base_ids = set(cand["tasks"]), set(base["tasks"])
    if not cand_ids or cand_ids == base_ids or not cand_ids < base_ids:
        return base, None
    kept = {tid: base["tasks"][tid] for tid in sorted(cand_ids)}
    note = f"note  compared on the {len(kept)} selected task(s) of the baseline's {len(base_ids)}"
    # the comparison reads tasks only; the baseline's whole-run summary no longer applies
    return {**{k: v for k, v in base.items() if k != "summary"}, "tasks": kept}, note


def comparison_verdict(comparison: Comparison, gate: str | None) -> Verdict:
    """The comparison's part of the exit status, with its sentence."""
    from pytest_agentdrift.compare.status import comparison_exit_code, infra_arm, regression_section

    code = comparison_exit_code(comparison, gate)
    if not comparison["comparable"]:
        reasons = comparison["reasons"] or ["runs are not comparable"]
        more = f" (+{len(reasons) - 1} more)" if len(reasons) > 1 else ""
        return Verdict(EXIT_REFUSED, f"refused: runs are not comparable: {reasons[0]}{more}")
    infra = comparison.get("infra")
    if gate and infra and infra.get("undecided"):
        from pytest_agentdrift.compare.status import undecided_text

        return Verdict(code, f"not decided: {undecided_text(infra)}")
    if gate and infra and infra.get("exceeded"):
        # operational (4): too many runs lost to infrastructure for the gate to decide anything
        lost = "; ".join(
            f"{label} lost {infra_arm(infra, label)['lost']} of {infra_arm(infra, label)['runs']} run(s)"
            for label in infra["exceeded"]
        )
        return Verdict(
            code, f"not decided: {lost} to infrastructure errors, over the {infra['threshold']:.0%} threshold"
        )
    if gate == GATE_REGRESSION:
        reg = regression_section(comparison)
        if reg["passed"]:
            return Verdict(code, f"gate regression: {reg['reason']}")
        # the closing line names the first blockers; the regression line and decision.json hold all
        shown, rest = reg["blockers"][:3], len(reg["blockers"]) - 3
        return Verdict(code, "gate regression: " + "; ".join(shown) + (f" (+{rest} more)" if rest > 0 else ""))
    if gate == GATE_PROMOTE:
        g = comparison["gate"]
        promoted = " (passed: promoted on cost)" if g["passed"] and g["verdict"] != "ship" else ""
        return Verdict(code, f"gate promote: {g['verdict']}: {g['reason']}{promoted}")
    status = comparison["decision"]
    return Verdict(code, f"no gate set; comparison status {status['status']}: {status['because'][0]}")


def compare_recorded(
    base: dict[str, Any],
    cand: Mapping[str, Any],
    stamps: StampComparison,
    *,
    gate: str | None,
    seed: int = DEFAULT_SEED,
    release_notes: Path | None = None,
    rollback_state: str = DEFAULT_ROLLBACK_STATE,
    rollback_evidence: Path | None = None,
    accepted: Mapping[str, Any] | None = None,
    gate_scope: str = "all",
    max_infra_loss: float | None = None,
    gate_flakes: str | None = None,
) -> ComparisonOutcome:
    """Statistics, decision, files and lines for two recorded runs (plugin and CLI alike)."""
    from pytest_agentdrift.canonical import load_json_file
    from pytest_agentdrift.compare.comparison import compare_runs
    from pytest_agentdrift.compare.ledger import read_release_notes

    reasons = [f"{name}: {b!r} != {c!r}" for name, b, c in stamps.blocks]
    ledger = read_release_notes(release_notes) if release_notes else None
    evidence = load_json_file(rollback_evidence) if rollback_evidence else None
    base, note = selected_baseline(base, cand)
    comparison = compare_runs(
        base,
        cand,
        comparable=stamps.comparable,
        reasons=reasons,
        change_class=stamps.change_class,
        gate=_gate_params(gate_scope, max_infra_loss, gate_flakes),
        seed=seed,
        ledger=ledger,
        rollback_state=rollback_state,
        rollback_evidence=evidence,
    )
    comparison["gate_mode"] = gate
    pool = _selected_pool(base)
    if pool is not None:
        comparison["baseline_pool"] = pool
    cost = _gated_cost(base, cand, comparison, gate)
    if cost is not None:
        comparison["cost"] = cost
    verdict = _with_pool(_with_cost(comparison_verdict(comparison, gate), cost), pool)
    items = gate_items(comparison, gate)
    if items is not None:
        from pytest_agentdrift.compare.status import regression_section

        regression_section(comparison)["items"] = items  # what pytest's items say, for every output to repeat
    files = _comparison_files(comparison, stamps, accepted, gate, items, ledger)
    provenance = regraded_arms(base, cand)
    if provenance:
        comparison["regraded"] = provenance  # which arm's checks are newer than its runs
        files[DECISION_FILE]["regraded"] = provenance
    rendered = _comparison_lines(comparison, items)
    lines = _identity_head(stamps) + ([note] if note else []) + _pool_lines(pool) + provenance_lines(provenance)
    lines += rendered
    return ComparisonOutcome(comparison=comparison, files=files, lines=lines, verdict=verdict)


def _selected_pool(base: Mapping[str, Any]) -> JsonObject | None:
    """A pooled baseline's pool section (compare/pool.py), its counts kept to the tasks compared."""
    pool = base.get("pool")
    if not isinstance(pool, Mapping):
        return None
    tasks = set(base.get("tasks") or {})
    return {
        **pool,
        **{key: {t: v for t, v in (pool.get(key) or {}).items() if t in tasks} for key in ("k", "records_per_task")},
    }


def _gated_cost(
    base: Mapping[str, Any], cand: Mapping[str, Any], comparison: Comparison, gate: str | None
) -> DecisionCost | None:
    """What a gated comparison spent and bought (compare/cost.py); None without a gate or a decision.
    The power is the regression gate's (its check tests); other gates state what was spent."""
    if not gate or not comparison["comparable"]:
        return None
    from pytest_agentdrift.compare.cost import decision_cost

    alpha = comparison["params"]["alpha"]
    if not isinstance(alpha, (int, float)):
        raise AssertionError(f"the comparison's alpha is not a number: {alpha!r}")  # GateParams validated it
    return decision_cost(base, cand, comparison, float(alpha), with_power=gate == GATE_REGRESSION)


def _with_cost(verdict: Verdict, cost: DecisionCost | None) -> Verdict:
    """The closing line also says what the decision cost and what it bought."""
    return verdict if cost is None else Verdict(verdict.code, f"{verdict.reason}; {cost['text']}")


def _with_pool(verdict: Verdict, pool: JsonObject | None) -> Verdict:
    """The closing line also says what the baseline was when it was a pool of records."""
    if pool is None:
        return verdict
    from pytest_agentdrift.compare.pool import pool_text

    return Verdict(verdict.code, f"{verdict.reason}; {pool_text(pool)}")


def _pool_lines(pool: JsonObject | None) -> list[str]:
    if pool is None:
        return []
    from pytest_agentdrift.compare.pool import pool_lines

    return pool_lines(pool)


def _comparison_lines(comparison: Comparison, items: GateItems | None) -> list[str]:
    from pytest_agentdrift.compare.render import render_comparison

    rendered = render_comparison(comparison)
    # the item lines go just above the last line (the regression gate's, under that gate)
    rendered[-1:-1] = gate_item_lines(items)
    return rendered


def _gate_params(gate_scope: str, max_infra_loss: float | None, gate_flakes: str | None) -> GateParams:
    """The gate's parameters: its defaults where the option was not given."""
    import dataclasses

    from pytest_agentdrift.compare.gates import GateParams

    params = GateParams(scope=gate_scope)
    if max_infra_loss is not None:
        params = dataclasses.replace(params, max_infra_loss=max_infra_loss)
    if gate_flakes is not None:
        params = dataclasses.replace(params, flakes=gate_flakes)
    return params


def _comparison_files(
    comparison: Comparison,
    stamps: StampComparison,
    accepted: Mapping[str, Any] | None,
    gate: str | None,
    items: GateItems | None,
    ledger: list[ReleaseNote] | None,
) -> dict[str, Any]:
    """The record's comparison files: manifest diff, decision, comparison, and the release-note ledger."""
    from pytest_agentdrift.compare.ledger import ledger_csv
    from pytest_agentdrift.compare.status import decision_document
    from pytest_agentdrift.manifest.identity import manifest_diff_document

    diff = manifest_diff_document(stamps)
    if accepted:
        diff["accepted_unobserved"] = dict(accepted)
    decision = decision_document(comparison)
    decision["gate_mode"] = gate
    regression = decision.get("regression_gate")
    if items is not None and regression is not None:
        regression["items"] = items
    files: dict[str, Any] = {
        MANIFEST_DIFF_FILE: diff,
        DECISION_FILE: decision,
        COMPARISON_FILE: comparison,
    }
    rows = comparison.get("ledger")
    if rows is not None and ledger is not None:
        files["comparison/release-note-ledger.csv"] = ledger_csv(rows)
    return files


def _identity_head(stamps: StampComparison) -> list[str]:
    """The change class, or the refusal; accepted unknowns stay visible on a comparable pair."""
    from pytest_agentdrift.manifest.identity import render_refusal

    if not stamps.comparable:
        return render_refusal(stamps)
    change = [
        f"change      {stamps.change_class}: {stamps.explanation}"
        + (f" (declared variable: {', '.join(stamps.varied)})" if stamps.varied else "")
    ]
    # provenance notes live in manifest-diff.json
    return change + [ln for ln in render_refusal(stamps)[1:] if ln.startswith("note ") and "accepted as" in ln]


def regraded_arms(base: Mapping[str, Any], cand: Mapping[str, Any]) -> JsonObject:
    """{arm: regraded_from} for the arms that were graded again after they ran (agentdrift regrade)."""
    return {arm: r["regraded_from"] for arm, r in (("baseline", base), ("candidate", cand)) if r.get("regraded_from")}


def provenance_lines(provenance: Mapping[str, Any]) -> list[str]:
    from pytest_agentdrift.record.provenance import regraded_line

    return [f"{arm:<11} {regraded_line(src)}" for arm, src in provenance.items()]


def gate_item_outcomes(comparison: Comparison, gate: str | None) -> dict[str, str] | None:
    """Under a decided regression gate: for each task with failed runs that the gate does not hold
    against the candidate, the xfail reason its failed items take, so that pytest's own summary and
    JUnit say what the exit status says. Tasks that block (a new critical or safety failure, a
    tampered pass, a lost task of a flagged paired test) are absent: their items stay failed. None
    when there is no such gate or it decided nothing (refused, or too many runs lost)."""
    items = gate_items(comparison, gate)
    return None if items is None else items["xfailed"]


def gate_items(comparison: Comparison, gate: str | None) -> GateItems | None:
    """What pytest's items say under a decided regression gate, task by task, with why:
    ``failed`` (held against the candidate: its failed items stay failed) and ``xfailed`` (not held:
    its failed items become xfails). report.md, report.html and decision.json print the same two
    lists that the terminal's summary and JUnit count. None as for gate_item_outcomes."""
    reg = _decided_regression(comparison, gate)
    if reg is None:
        return None
    held = _held_against(comparison, reg)
    rows_by_task: dict[str, list[CheckRow]] = {}
    for r in reg["check_tests"]["rows"]:
        rows_by_task.setdefault(r["task"], []).append(r)
    failed, xfailed = {}, {}
    for tid, row in sorted(comparison["tasks"].items()):
        if row["baseline"] is None or row["candidate"] is None:
            raise AssertionError(f"task {tid} is not in both arms of a comparable pair")
        (b_pass, b_runs), (c_pass, c_runs) = row["baseline"], row["candidate"]
        if c_pass == c_runs:
            continue
        if tid in held:
            failed[tid] = "; ".join(held[tid])
            continue
        xfailed[tid] = _not_held_reason(b_pass, b_runs, rows_by_task.get(tid, []))
    return {"failed": failed, "xfailed": xfailed}


def _decided_regression(comparison: Comparison, gate: str | None) -> RegressionSection | None:
    """The regression gate's section when that gate decided the pair; None when there is no such gate,
    the pair is not comparable, or too many runs were lost."""
    reg = comparison.get("regression")
    infra = comparison.get("infra")
    if gate != GATE_REGRESSION or not comparison["comparable"] or not reg or (infra and infra.get("exceeded")):
        return None
    return reg


def _held_against(comparison: Comparison, reg: RegressionSection) -> dict[str, list[str]]:
    """For each task the regression gate holds against the candidate, why: a blocking check row, a
    tampered pass, a loss the pooled paired test or a flagged suite's paired test counts."""
    from pytest_agentdrift.compare.checkrates import row_line
    from pytest_agentdrift.compare.status import paired_result

    held: dict[str, list[str]] = {}
    for r in reg["check_tests"]["rows"]:
        if r["blocks"]:
            held.setdefault(r["task"], []).append(row_line(r))
    for x in reg["tampered_passes"]:
        held.setdefault(x["task"], []).append(f"tampered pass r{x['rep']}")
    if any(b.startswith("paired test:") for b in reg["blockers"]):
        for t in paired_result(comparison)["lost"]:
            held.setdefault(t, []).append("lost, and the paired test flags the candidate's losses")
    strata = comparison["strata"] or {}
    for suite in reg["strata_flagged"]:
        for t in strata[suite]["tasks"]:
            if comparison["tasks"][t]["outcome"] == "lost":
                held.setdefault(t, []).append(f"lost, and the paired test of suite {suite} flags its losses")
    return held


def _not_held_reason(b_pass: int, b_runs: int, rows: list[CheckRow]) -> str:
    """Why a task's failed items become xfails: its standing and undecided check rows, and the
    baseline's own failures; run-to-run noise when there is neither."""
    from pytest_agentdrift.compare.checkrates import STANDING, UNDECIDED, row_line

    said = [row_line(r) for r in rows if r["verdict"] in (STANDING, UNDECIDED)]
    if b_pass < b_runs:
        said.insert(0, f"fails in baseline too ({b_runs - b_pass}/{b_runs} baseline run(s) failed)")
    if not said:
        said.append("within run-to-run noise: the regression gate does not hold it against the candidate")
    return "; ".join(said)


def gate_item_lines(items: Mapping[str, Mapping[str, str]] | None) -> list[str]:
    """The terminal's (and so report.md's) words for gate_items: the tasks pytest counts as failed
    and as xfailed, as its own summary and JUnit count them."""
    if not items:
        return []
    lines: list[str] = []
    for key, label in (("failed", "failed (held against the candidate)"), ("xfailed", "xfailed (not held)")):
        for tid, why in items[key].items():  # same words as report.html's rows
            lines.append(f"{'items' if not lines else '':<11} {label}: {tid}: {why}")
    return lines or [f"{'items':<11} no task item failed"]
