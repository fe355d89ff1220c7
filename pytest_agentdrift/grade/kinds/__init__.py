"""The check kinds of docs/task-format.md, in one table: `KINDS` maps a kind's name to its row,
the function that decides a check of that kind and whether its graded processes run in the
grading sandbox's server. No pytest.

The kinds live beside this table, one module for what they read: `tree.py` (what changed in the
work tree), `commands.py` (code run in a graded copy), `report.py` (the agent's final report),
`events.py` (what the agent did while it ran, beyond its tree). Each is called as
`check(grader, spec, run, check_spec) -> Outcome`; the grader is grade/grader.Grader, named
in the kinds by the protocol grade/results.Grading because the Grader imports this table
(siblings import one way).
"""

from __future__ import annotations

from collections.abc import Callable
from dataclasses import dataclass

from pytest_agentdrift.grade.kinds import commands, events, report, tree
from pytest_agentdrift.grade.results import Grading, Outcome
from pytest_agentdrift.run.evidence import RunEvidence
from pytest_agentdrift.tasks.taskspec import CheckSpec, TaskSpec

EVALUATOR_COMPONENT = "checks"  # names this file in evaluator_id (pytest_agentdrift.grade.evaluator)


@dataclass(frozen=True)
class Kind:
    """One check kind: the function that decides it, and how the Grader runs it."""

    check: Callable[[Grading, TaskSpec, RunEvidence, CheckSpec], Outcome]
    #: its graded processes are run by the grading sandbox's server (Grader.execute_reporting),
    #: which Grader.prepare starts while the agent works
    served: bool = False


KINDS: dict[str, Kind] = {
    "paths": Kind(tree.check_paths),
    "unchanged": Kind(tree.check_unchanged),
    "pytest": Kind(commands.check_pytest, served=True),
    "command": Kind(commands.check_command, served=True),
    "golden": Kind(commands.check_golden, served=True),
    "diff_matches": Kind(tree.check_diff_matches),
    "report_status": Kind(report.check_report_status),
    "report_mentions": Kind(report.check_report_mentions),
    "events": Kind(events.check_events),
    "effects": Kind(events.check_effects),
    "tamper": Kind(tree.check_tamper),
    "files": Kind(tree.check_files),
    # process and structure checks (writes while the agent ran, the change made, a cited call path)
    "writes": Kind(tree.check_writes),
    "changed": Kind(tree.check_changed),
    "call_path": Kind(report.check_call_path),
}
