"""Results on untouched fixtures kept between sessions, graded for real: a second session reads them
and grades the same, and a result of the moment is never kept (grade/fixturecache.py)."""

from __future__ import annotations

import json
from pathlib import Path

import pytest

from pytest_agentdrift.agents.base import CommandAdapter
from pytest_agentdrift.grade.grader import Grader
from pytest_agentdrift.run import sandbox
from pytest_agentdrift.run.runner import run_agent
from pytest_agentdrift.run.runsettings import RunSettings
from pytest_agentdrift.tasks.load import load_task
from pytest_agentdrift.testing import agent_cmd, agent_script, make_task

REPO = {
    "calc.py": "def add(a, b):\n    return a - b\n",
    "tests/test_calc.py": "from calc import add\n\n\ndef test_add():\n    assert add(2, 2) == 4\n",
}


CHECKS = [
    {"name": "suite", "kind": "pytest", "layer": "correctness", "args": ["tests"], "expect_before": "fail"},
    {
        "name": "lint",
        "kind": "command",
        "layer": "correctness",
        "fails_before": True,
        "run": ["python", "-c", "import calc; assert calc.add(2, 2) == 4"],
    },
]


FIX = "open('calc.py', 'w').write('def add(a, b):\\n    return a + b\\n')\n"


class CountingGrader(Grader):
    def __init__(self, *a, **kw):
        super().__init__(*a, **kw)
        self.trees: list[Path] = []

    def run_grading_pytest(self, argv_tail, tree, *args, **kw):
        self.trees.append(tree)
        return super().run_grading_pytest(argv_tail, tree, *args, **kw)

    def run_python(self, argv, tree, *args, **kw):
        self.trees.append(tree)
        return super().run_python(argv, tree, *args, **kw)


@pytest.fixture(scope="module")
def graded(tmp_path_factory):
    root = tmp_path_factory.mktemp("fixturecache")
    spec = load_task(make_task(root / "tasks", "FC01", repo=REPO, allowed=["calc.py"], checks=CHECKS))
    iso = sandbox.detect("auto")
    run = run_agent(
        spec, 1, CommandAdapter(agent_cmd(agent_script(root / "agent.py", FIX))), RunSettings(isolation=iso), root
    )
    return root, spec, iso, run


def _grade(root: Path, spec, iso, run, cache: Path | None) -> tuple[dict, int]:
    grader = CountingGrader(iso, root / "grading", cache_dir=cache)
    results = {c.name: (c.passed, c.detail, c.evidence) for c in grader.evaluate(spec, run)}
    before_runs = sum(1 for t in grader.trees if t.parent.name.startswith("before-"))
    return results, before_runs


@pytest.mark.slow  # sandboxed runs and grading
def test_a_second_session_reads_the_untouched_fixture_results_and_grades_the_same(graded, tmp_path):
    root, spec, iso, run = graded
    first, first_runs = _grade(root, spec, iso, run, tmp_path / "cache")
    assert first["suite"][0] is True and first["lint"][0] is True
    assert first_runs == 2  # the pytest check and the command check, once each
    assert len(list((tmp_path / "cache").glob("*.json"))) == 2
    second, second_runs = _grade(root, spec, iso, run, tmp_path / "cache")
    assert second_runs == 0
    assert second == first
    without, without_runs = _grade(root, spec, iso, run, None)
    assert without_runs == 2 and without == first


@pytest.mark.slow
def test_a_result_of_the_moment_is_never_kept(graded, tmp_path, monkeypatch):
    root, spec, iso, run = graded
    real = Grader.run_grading_pytest

    def missing(self, *a, **kw):
        data = real(self, *a, **kw)
        return {**data, "missing_report": True, "channel_problems": ["killed"]}

    monkeypatch.setattr(Grader, "run_grading_pytest", missing)
    _grade(root, spec, iso, run, tmp_path / "cache")
    kept = [json.loads(p.read_text()) for p in (tmp_path / "cache").glob("*.json")]
    assert all("problems" in k for k in kept)  # only the command check's clean result
    assert len(kept) == 1
