"""A session compared with a baseline, as an experiment: the experiment rows, the drop-it gate, the
null experiment and the pre-registered plan. No pytest.

The session calls `experiment_outcome` once compare/experiment.compare_with_rows compared it with
its baseline (the path `agentdrift compare` takes too).
"""

from __future__ import annotations

from pathlib import Path
from typing import Any, Mapping

from pytest_agentdrift.compare.outcome import Verdict
from pytest_agentdrift.shapes import PlanCheck
from pytest_agentdrift.vocabulary import DECISION_FILE, EXIT_OK, EXIT_REFUSED, EXPERIMENT_FILE, NULL_FILE, PLAN_FILE


def plan_check(plan: dict[str, Any], results: Mapping[str, Any]) -> PlanCheck:
    """Did this run follow its pre-registered plan (the recommended design)?"""
    rec = plan.get("recommended") or {}
    runs = [len(t["runs"]) for t in results.get("tasks", {}).values()]
    k = min(runs) if runs else 0
    tasks = len(runs)
    problems = []
    if rec.get("k") and k < rec["k"]:
        problems.append(f"k {k} < planned {rec['k']}")
    if rec.get("tasks") and tasks < rec["tasks"]:
        problems.append(f"{tasks} task(s) < planned {rec['tasks']}")
    same_tasks = plan["source"].get("task_set_id") in (None, results.get("task_set_id"))
    if not same_tasks:
        problems.append("the plan was made from another task set")
    return {
        "digest": plan["digest"],
        "created_at": plan.get("created_at"),
        "delta": plan["question"]["delta"],
        "alpha": plan["question"]["alpha"],
        "power": plan["question"]["power"],
        "planned": rec,
        "ran": {"tasks": tasks, "k": k},
        "followed": not problems,
        "problems": problems,
        "pre_registered": bool(plan.get("created_at")) and plan["created_at"] <= str(results.get("started_at", "")),
        "file": PLAN_FILE,
    }


def experiment_outcome(
    settings: Any,
    arms: tuple[Mapping[str, Any], Mapping[str, Any]],
    manifests: tuple[Any, Any],
    compared: Any,
    files: dict[str, Any],
    *,
    plan: dict[str, Any] | None,
) -> tuple[list[str], Verdict | None]:
    """The experiment's lines and the session's comparison verdict.

    `compared` is what compare.experiment.compare_with_rows returned (the experiment section,
    its lines, the verdict with the drop-it gate applied); `arms` are the (baseline, this
    session's) results, `manifests` their runtime manifests and `files` the record's comparison
    files (the experiment, null and plan files are added to it). `--agent-null` decides the
    verdict when it suspects drift (1) or the two runs were no null experiment (6); a refusal
    (6) is never overridden."""
    lines = list(compared.lines)
    files[EXPERIMENT_FILE] = compared.section
    if plan is not None:
        files[PLAN_FILE] = plan
    verdict = compared.verdict
    if settings.null:
        null_lines, verdict = _null_experiment(settings, arms, manifests, files, verdict)
        lines += null_lines
    return lines, verdict


def _null_experiment(settings: Any, arms: tuple, manifests: tuple, files: dict[str, Any], verdict: Verdict | None):
    """`--agent-null`: the same runtime twice; its lines, and the verdict it sets."""
    from pytest_agentdrift.compare.null import null_exit_code, null_experiment, render_null

    result = null_experiment(
        list(arms),
        list(manifests),
        labels=[str(Path(settings.baseline)), "this session"],
        alpha=0.05,
        seed=settings.seed,
        accept_unobserved=settings.accept_unobserved,
    )
    files[NULL_FILE] = result
    if isinstance(files.get(DECISION_FILE), dict):
        files[DECISION_FILE]["null_experiment"] = {"status": result["status"], "because": result["because"]}
    null_code = null_exit_code(result)
    if (verdict is None or verdict.code != EXIT_REFUSED) and null_code != EXIT_OK:
        # drift suspected (1), or not a null experiment (6)
        because = result.get("because", "")
        if isinstance(because, list):
            because = because[0] if because else ""
        verdict = Verdict(null_code, f"null experiment: {result['status']}" + (f": {because}" if because else ""))
    return render_null(result), verdict


__all__ = ["experiment_outcome", "plan_check"]
