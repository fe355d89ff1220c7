"""One arm of a comparison: a results.json dict read into per-task runs.

Reads the scored runs of every task (``read_arm``, one ``TaskRuns`` per task:
effective passes, tampered passes, failed critical checks, safety-layer
failures, usages), the runs lost to infrastructure and the runs the harness
could not judge, and summarises an arm for the comparison (pass rate, Wilson
interval, spend). The pairing and the gates see an arm only as the
``dict[str, TaskRuns]`` that ``read_arm`` returns, so an arm built another
way (several records pooled per task, confirmation runs added) is one of
those. Pure: no pytest, no file I/O.
"""

from __future__ import annotations

from dataclasses import dataclass
from typing import Any, Mapping

from pytest_agentdrift.compare import stats
from pytest_agentdrift.errors import AgentDriftError
from pytest_agentdrift.shapes import ArmSpend, ArmSummary, InfraLostRun, UndecidedRun, UsageRecord
from pytest_agentdrift.vocabulary import INFRA_OUTCOME, UNDECIDED_OUTCOME, UNSCORED_OUTCOMES

DEFAULT_SUITE = "default"


@dataclass
class TaskRuns:
    """One task's scored runs in one arm (runs lost to infrastructure or undecided are not here)."""

    suite: str
    passes: list[bool]  # effective: a tampered pass is a fail
    tampered: list[int]  # reps
    critical: dict[str, list[int]]  # failed critical check -> reps
    safety_failed: bool
    usages: list[UsageRecord | None]
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


def read_arm(results: Mapping[str, Any], label: str) -> dict[str, TaskRuns]:
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
        if scored:  # a task whose every run was lost is left out of the pairing (see comparison._infra_part)
            arm[task_id] = read_task(entry, scored)
    return arm


def read_task(entry: Mapping[str, Any], runs: list[Mapping[str, Any]]) -> TaskRuns:
    passes: list[bool] = []
    tampered: list[int] = []
    usages: list[UsageRecord | None] = []
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
    return TaskRuns(suite, passes, tampered, critical, safety_fails > 0, usages, safety_fails)


def _critical_failed(run: Mapping[str, Any]) -> list[str]:
    names = run.get("critical_failed")
    if not names and names is not None:
        return []
    if names is None:  # older or hand-made results: derive from the checks
        names = [c.get("name") for c in run.get("checks") or [] if c.get("critical") and not c.get("passed")]
    return sorted({str(n) for n in names})


def infra_runs(results: Mapping[str, Any]) -> tuple[int, list[InfraLostRun]]:
    """(all runs, the runs lost to infrastructure) of one arm."""
    total = 0
    lost: list[InfraLostRun] = []
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


def undecided_runs(results: Mapping[str, Any]) -> list[UndecidedRun]:
    return [
        {"task": task_id, "rep": run.get("rep"), "why": "; ".join(run.get("undecided") or ())[:300]}
        for task_id in sorted(results.get("tasks") or {})
        for run in (results["tasks"][task_id] or {}).get("runs") or []
        if run.get("outcome") == UNDECIDED_OUTCOME
    ]


def arm_summary(results: Mapping[str, Any], arm: dict[str, TaskRuns], confidence: float) -> ArmSummary:
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


def _arm_spend(results: Mapping[str, Any]) -> ArmSpend:
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
