"""Confirm on suspicion, as records see it: what a run failed, a task's pool, and the gate's rows.

Pure: no pytest, no file I/O. The statistics are compare/sequential.py; this
module reads results.json dicts into them. A session that confirms
(``--agent-confirm CAP``) records its plan as the candidate's ``confirm``
section; the same functions decide which confirming runs a worker runs
(session/confirm.py) and, from the record, what the regression gate says
(compare/gates.py), so the two never disagree.
"""

from __future__ import annotations

from typing import Any, Mapping, Sequence

from pytest_agentdrift.compare import sequential as seq
from pytest_agentdrift.compare.arms import read_task
from pytest_agentdrift.compare.checkrates import NEW, SAFETY_CHECK, STANDING, UNDECIDED, WITHIN_NOISE
from pytest_agentdrift.shapes import CheckRow, CheckTests, JsonObject
from pytest_agentdrift.vocabulary import GATE_FLAKES_STRICT, UNSCORED_OUTCOMES


def plan_document(k: int, cap: int, tasks: int) -> dict[str, Any]:
    """The candidate's ``confirm`` section: the screen's k, the cap, the gate's alpha, the session's tasks,
    and the rules that decide (futility bound, looks, spending, screen level), so the record is read
    again by the rules it was made by."""
    from pytest_agentdrift.compare.gates import GateParams

    plan = seq.ConfirmPlan(k, cap, GateParams.alpha, tasks)
    return {
        "k": k,
        "cap": cap,
        "alpha": plan.alpha,
        "tasks": tasks,
        "futility": plan.futility,
        "looks": list(plan.looks),
        "spending": plan.spending,
        "screen_level": plan.screen_level,
    }


def plan_of(doc: Mapping[str, Any]) -> seq.ConfirmPlan:
    """The plan a record's ``confirm`` section describes; one written before the looks, the spending
    and the screen level were recorded is read by the rules of its time."""
    k, cap = int(doc["k"]), int(doc["cap"])
    if "looks" in doc:
        looks = tuple(int(n) for n in doc["looks"])
        spending, screen = float(doc["spending"]), doc.get("screen_level")
    else:
        looks, spending, screen = seq.growth_looks(k, cap), 1.0, None
    return seq.ConfirmPlan(
        k,
        cap,
        float(doc["alpha"]),
        int(doc["tasks"]),
        float(doc["futility"]),
        spending,
        looks,
        None if screen is None else float(screen),
    )


def run_failures(run: Mapping[str, Any]) -> list[str] | None:
    """The hypotheses one run failed (critical checks, the safety layer, the pass rate); None when the
    run was not scored (lost to infrastructure, or the harness could not judge it)."""
    if run.get("outcome") in UNSCORED_OUTCOMES:
        return None
    one = read_task({}, [run])
    failed = sorted(one.critical)
    if one.safety_fails:
        failed.append(SAFETY_CHECK)
    if not one.passes[0]:
        failed.append(seq.PASS_RATE)
    return failed


def task_runs(entry: Mapping[str, Any]) -> list[list[str]]:
    """A task's scored runs in repetition order, each as the hypotheses it failed."""
    runs = sorted((entry or {}).get("runs") or [], key=lambda r: r.get("rep", 0))
    return [f for f in (run_failures(r) for r in runs) if f is not None]


def pools(baseline: Mapping[str, Any]) -> dict[str, seq.Pool]:
    """Each task's pool from a baseline results dict (one record, or several pooled: its ``pool``
    section then says how much the nights vary)."""
    spread = ((baseline.get("pool") or {}).get("dispersion")) or {}
    rho = float(spread.get("rho") or 0.0)
    effect = seq.design_effect(rho, float(spread.get("runs_per_record") or 1.0))
    out = {}
    for task_id, entry in (baseline.get("tasks") or {}).items():
        runs = task_runs(entry)
        fails: dict[str, int] = {}
        for failed in runs:
            for check in failed:
                fails[check] = fails.get(check, 0) + 1
        out[task_id] = seq.Pool(fails, len(runs), effect, rho)
    return out


def screened_count(
    plan: seq.ConfirmPlan, firsts: Mapping[str, Sequence[Sequence[str]]], pools: Mapping[str, seq.Pool]
) -> int:
    """How many tasks the screen sent on to confirmation, from each task's first scored runs (a task
    the baseline lacks is counted when any check failed: its share of alpha is reserved all the same)."""
    return sum(seq.screened(runs[: plan.k], pools.get(t), plan.screen_level) for t, runs in firsts.items())


def candidate_runs(cand: Mapping[str, Any]) -> dict[str, list[list[str]]]:
    """Each task's scored runs in the candidate record, as the hypotheses each failed."""
    return {t: task_runs(e) for t, e in (cand.get("tasks") or {}).items()}


def confirm_tests(base: Mapping[str, Any], cand: Mapping[str, Any], flakes: str) -> CheckTests:
    """The regression gate's check rows for a confirming candidate, shaped like checkrates.check_rate_tests.

    A check is new when its task's sequence (compare/sequential.py) found it significant at a look; a
    check the candidate failed otherwise is standing (the pool failed it too) or within noise (the
    confirming runs decided it was not significant). The rates shown are the pool's and the confirming
    runs'; ``looks`` says where and why each task stopped."""
    doc = dict(cand["confirm"])
    plan = plan_of(doc)
    by_task = pools(base)
    screened = screened_count(plan, candidate_runs(cand), by_task)
    rows: list[CheckRow] = []
    looks: dict[str, list[JsonObject]] = {}
    for task_id, entry in sorted((cand.get("tasks") or {}).items()):
        runs, pool = task_runs(entry), by_task.get(task_id)
        if pool is None or not runs:
            continue
        seqs = seq.sequence(plan, screened, runs, pool)
        looks[task_id] = [_look_dict(x) for x in seqs]
        rows += _task_rows(task_id, runs, pool, seqs[-1], plan, flakes)
    return {
        "method": "confirm",
        "level": plan.paired_level,
        "family": plan.tasks + 1,
        "paired_tests": 1,
        "flakes": flakes,
        "screened": screened,
        "plan": {**doc, "screened": screened, "looks": list(plan.looks)},
        "looks": looks,
        "rows": rows,
    }


def _look_dict(x: seq.Look) -> JsonObject:
    return {"state": x.state, "runs": x.runs, "level": x.level, "new": list(x.new), "odds": x.odds}


def _task_rows(
    task_id: str, runs: Sequence[Sequence[str]], pool: seq.Pool, last: seq.Look, plan: seq.ConfirmPlan, flakes: str
) -> list[CheckRow]:
    confirming = runs[plan.k : last.runs] if last.runs > plan.k else []
    checks = sorted({c for failed in runs for c in failed} - {seq.PASS_RATE})
    p_values = dict(last.p_values)
    out: list[CheckRow] = []
    for check in checks:
        base_failed = pool.fails.get(check, 0)
        shown = confirming if confirming else runs[: plan.k]
        failed = sum(check in f for f in shown)
        if check in last.new:
            verdict = NEW
        elif last.state == seq.CONTINUE:  # the design wanted more runs than the session gave it
            verdict = UNDECIDED
        else:
            verdict = STANDING if base_failed else WITHIN_NOISE
        out.append(
            {
                "task": task_id,
                "check": check,
                "baseline": [base_failed, pool.runs],
                "candidate": [failed, len(shown)],
                "p_value": float(p_values.get(check, 1.0)),
                "min_p_value": None,
                "verdict": verdict,
                "blocks": verdict == NEW or (verdict == UNDECIDED and flakes == GATE_FLAKES_STRICT),
                "confirmed_at": last.runs,
                "stopped": last.state,
            }
        )
    return out
