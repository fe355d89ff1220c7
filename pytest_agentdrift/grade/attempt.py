"""One attempt: run the agent on a fresh copy, grade the run, score it.

The plugin's items and `agentdrift validate` both go through `attempt`, so
a task is judged the same way wherever it runs. No pytest.
"""

from __future__ import annotations

from pathlib import Path
from typing import TYPE_CHECKING, Any

from pytest_agentdrift.agents.base import Usage
from pytest_agentdrift.errors import AgentDriftError
from pytest_agentdrift.grade.scoring import score
from pytest_agentdrift.run.evidence import RunEvidence
from pytest_agentdrift.run.finaltree import capture as final_tree
from pytest_agentdrift.run.runner import cleanup, run_agent
from pytest_agentdrift.run.runsettings import RunSettings

EVALUATOR_COMPONENT = "attempt"  # names this file in evaluator_id (pytest_agentdrift.grade.evaluator)

if TYPE_CHECKING:
    from pytest_agentdrift.agents.base import AgentAdapter
    from pytest_agentdrift.grade.grader import Grader
    from pytest_agentdrift.grade.results import CheckResult
    from pytest_agentdrift.tasks.taskspec import TaskSpec


def attempt(
    spec: TaskSpec,
    rep: int,
    adapter: AgentAdapter,
    settings: RunSettings,
    grader: Grader,
    runs_dir: Path,
    *,
    keep_workdirs: bool = False,
) -> tuple[RunEvidence | None, dict[str, Any]]:
    """(the run's evidence or None, its scored result); the private work tree is removed unless kept.

    Whatever goes wrong while the harness handles this one run makes the run `undecided`
    with the reason, keeping the evidence gathered so far (a fixture that fails its
    initial-tree check is still refused as a task error): nothing the agent left may cost
    the session or the other runs, and no harness error may pass or fail the agent.
    """
    run, checks = None, []
    try:
        grader.prepare(spec)  # before the agent's sandbox starts: see GradingServer.launch
        run = run_agent(spec, rep, adapter, settings, runs_dir)
        if run.stopped is None and settings.overspent is not None:
            run.stopped = settings.overspent(run)  # the final spend, held against the per-run budget
        tree = final_tree(run)  # kept in the record, so the run can be graded again (agentdrift regrade)
        try:
            checks = grader.evaluate(spec, run)
        except AgentDriftError:
            raise
        except Exception as exc:  # the run's own evidence stays; what grading decided is lost
            run.harness_errors.append(f"grading: {type(exc).__name__}: {str(exc)[:300]}")
            checks = []
        result = score(run, checks)
        result["_final_tree"] = tree
        return run, result
    except AgentDriftError:
        raise
    except Exception as exc:
        reason = f"the harness failed on this run: {type(exc).__name__}: {exc}"
        return run, error_result(rep, run, reason, checks)
    finally:
        grader.server.close()  # launched for this run (Grader.prepare), never the next run's; idempotent
        if run is not None and not keep_workdirs:
            cleanup(run)


def error_result(
    rep: int, run: RunEvidence | None, reason: str, checks: list[CheckResult] | None = None
) -> dict[str, Any]:
    """The result of a run the harness could not finish handling: `undecided`, the reason and
    whatever evidence was gathered kept (never a pass, never the agent's failure)."""
    from pytest_agentdrift.tasks.taskspec import LAYERS
    from pytest_agentdrift.vocabulary import (
        HARNESS_ERROR_FILE,
        PATCH_FILE,
        STDERR_FILE,
        STDOUT_FILE,
        UNDECIDED_OUTCOME,
    )

    evidence: dict[str, Any] = {
        "exit_code": None,
        "timed_out": False,
        "duration_s": 0.0,
        "changed": {"added": [], "modified": [], "deleted": [], "mode": []},
        "writes_outside": [],
        "git_mutations": [],
        "network_attempts": 0,
        "tamper": {"protected_changed": [], "test_config_changed": []},
    }
    raw: dict[str, str] = {}
    if run is not None:  # the agent ran: keep what was observed
        try:
            evidence.update(run.evidence_dict())
        except Exception as exc:  # the evidence itself may be what failed
            evidence["evidence_error"] = f"{type(exc).__name__}: {exc}"
        raw = {STDOUT_FILE: run.stdout, STDERR_FILE: run.stderr, PATCH_FILE: run.patch}
    evidence["harness_error"] = reason
    return {
        "rep": rep,
        "outcome": UNDECIDED_OUTCOME,
        "undecided": [*(getattr(run, "harness_errors", None) or []), reason],
        "passed": False,
        "tampered_pass": False,
        # the checks grading decided before the failure are kept: a critical failure stays visible
        "critical_failed": [c.name for c in checks or () if c.critical and not c.passed],
        "failed_checks": [c.name for c in checks or () if not c.passed],
        "layers": {layer: "n/a" for layer in LAYERS},
        "checks": [c.to_dict() for c in checks or ()],
        "evidence": evidence,
        "usage": Usage().to_dict(),
        "model_stamp": None,
        "report": None,
        "report_error": None,
        "_raw_files": {**raw, HARNESS_ERROR_FILE: reason + "\n"},
    }
