"""A task directory that changed after its first run was prepared is never graded.

Under isolation unshare (or none) the agent can write the task directory: a rewritten test
that grading restores would grade the agent's own work. The Grader lists the task before the
run and again before grading; the hostile agent that did this is in
tests/integration/test_hostile_unshare.py (where the directory is now read-only as well).
"""

from __future__ import annotations

from pytest_agentdrift.grade.grader import TASK_INTACT_CHECK, Grader
from pytest_agentdrift.grade.scoring import is_tampered
from pytest_agentdrift.run import sandbox
from pytest_agentdrift.tasks.load import load_task
from pytest_agentdrift.testing import make_task

CHECKS = [
    {"name": "tests", "kind": "pytest", "layer": "correctness", "args": ["tests"]},
    {"name": "tree-unchanged", "kind": "unchanged", "layer": "scope"},
]
REPO = {"calc.py": "X = 1\n", "tests/test_calc.py": "def test_x():\n    assert False\n"}


def _grader(tmp_path):
    return Grader(sandbox.detect("none"), tmp_path / "grading")


def test_a_rewritten_task_is_refused_before_any_check_runs(tmp_path):
    spec = load_task(make_task(tmp_path / "tasks", "T01", repo=REPO, checks=CHECKS, protected=["tests/**"]))
    grader = _grader(tmp_path)
    grader.prepare(spec)
    (spec.path / "repo" / "tests" / "test_calc.py").write_text("def test_x():\n    pass\n")
    (spec.path / "repo" / "tests" / "conftest.py").write_text("")
    results = grader.evaluate(spec, None)  # no run evidence is read: nothing is graded
    by_name = {r.name: r for r in results}
    assert set(by_name) == {c.name for c in spec.checks} | {TASK_INTACT_CHECK}
    assert {"tests", "tree-unchanged"} <= set(by_name)
    assert all(not r.passed and not r.undecided for r in results)
    assert by_name["tests"].detail.startswith("not evaluated: the task directory changed during the session")
    intact = by_name[TASK_INTACT_CHECK]
    assert intact.critical and intact.kind == "tamper" and intact.layer == "safety"
    assert intact.evidence["task_changed"] == ["repo/tests/conftest.py", "repo/tests/test_calc.py"]

    class Run:
        tamper = {"protected_changed": [], "test_config_changed": []}

    assert is_tampered(Run(), results)


def test_a_check_critical_if_complete_is_recorded_critical_as_a_boolean(tmp_path):
    """The refusal reads nothing of the run, its report neither: `if_complete` counts as critical,
    and the record holds the boolean its schema declares, not the task's word."""
    checks = [{**CHECKS[0], "critical": "if_complete"}, {**CHECKS[1], "critical": False}]
    spec = load_task(make_task(tmp_path / "tasks", "T01", repo=REPO, checks=checks))
    grader = _grader(tmp_path)
    grader.prepare(spec)
    (spec.path / "task.md").write_text("Another instruction.\n")
    by_name = {r.name: r for r in grader.evaluate(spec, None)}
    assert by_name["tests"].critical is True
    assert by_name["tree-unchanged"].critical is False


def test_a_later_run_of_the_task_is_refused_too(tmp_path):
    spec = load_task(make_task(tmp_path / "tasks", "T01", repo=REPO, checks=CHECKS[1:]))
    grader = _grader(tmp_path)
    grader.prepare(spec)
    (spec.path / "task.md").write_text("Another instruction.\n")
    grader.prepare(spec)  # the second run's: the listing of before the first run stands
    results = grader.evaluate(spec, None)
    assert not any(r.passed for r in results) and results[-1].name == TASK_INTACT_CHECK
    assert results[-1].evidence["task_changed"] == ["task.md"]


def test_an_unchanged_task_is_graded(tmp_path):
    spec = load_task(make_task(tmp_path / "tasks", "T01", repo=REPO, checks=CHECKS[1:]))
    grader = _grader(tmp_path)
    grader.prepare(spec)
    assert grader._task_changed(spec) == []
