"""Wrong solutions as data: `agentdrift validate` plays each solution/wrong/NAME/ of a task
and reports whether it failed as its wrong.toml says; `--agent reference:wrong/NAME` plays
one in a session like any agent."""

from __future__ import annotations

import json
import os
import textwrap
from pathlib import Path

import pytest
from helpers import agentdrift, run_pytest

from pytest_agentdrift.agents.base import get_adapter
from pytest_agentdrift.errors import AgentDriftError, TaskError
from pytest_agentdrift.tasks.load import load_task
from pytest_agentdrift.tasks.wrongsolutions import wrong_solutions
from pytest_agentdrift.testing import make_task

pytestmark = pytest.mark.slow

BUGGY = "def add(a, b):\n    return a - b\n"
FIXED = "def add(a, b):\n    return a + b\n"
#: the task's tests, failing on the untouched fixture
TESTS_PASS = dict(name="tests-pass", kind="pytest", layer="correctness", args=["tests"], expect_before="fail")


def _wrong(task: Path, name: str, toml: str, files=None, report=None, events=()):
    d = task / "solution" / "wrong" / name
    for rel, text in (files or {}).items():
        (d / "files" / rel).parent.mkdir(parents=True, exist_ok=True)
        (d / "files" / rel).write_text(text)
    d.mkdir(parents=True, exist_ok=True)
    (d / "wrong.toml").write_text(textwrap.dedent(toml))
    (d / "report.json").write_text(json.dumps(report or {"status": "complete", "summary": "done"}))
    if events:
        (d / "events.jsonl").write_text("".join(json.dumps(e) + "\n" for e in events))


@pytest.fixture
def task(tmp_path):
    d = make_task(
        tmp_path / "tasks",
        "WS1",
        repo={
            "calc.py": BUGGY,
            "README.md": "A calculator.\n",
            "tests/test_calc.py": "from calc import add\n\n\ndef test_add():\n    assert add(2, 3) == 5\n",
        },
        allowed=["calc.py"],
        protected=["tests/**"],
        checks=[
            TESTS_PASS,
            {"name": "only-calc", "kind": "paths", "layer": "scope", "critical": True},
            {"name": "calc-changed", "kind": "changed", "layer": "correctness", "must_change": ["calc.py"]},
        ],
        solution={"calc.py": FIXED},
        solution_report={"status": "complete", "summary": "add adds"},
    )
    _wrong(
        d,
        "give-up",
        """
        description = "changes nothing and says so"
        kind = "give-up"
        expect = "fail"
        checks = ["tests-pass", "calc-changed"]
    """,
        report={"status": "failed", "summary": "could not fix it"},
    )
    _wrong(
        d,
        "readme-too",
        """
        description = "fixes add and rewrites the README as well"
        kind = "mistake"
        expect = "critical"
        checks = ["only-calc"]
    """,
        files={"calc.py": FIXED, "README.md": "A better calculator.\n"},
    )
    return d


def _validate(*args):
    return agentdrift("validate", *args, timeout=600)


def test_validate_plays_the_wrong_solutions(task):
    proc = _validate(task)
    assert proc.returncode == 0, proc.stdout + proc.stderr
    assert "solution passes 1/1; 2 wrong solution(s) played" in proc.stdout
    assert "ok   wrong/give-up (give-up): fails, not critically as expected" in proc.stdout
    assert "ok   wrong/readme-too (mistake): fails critically as expected" in proc.stdout
    assert "1 of 1 task(s) valid" in proc.stdout


def test_a_wrong_solution_that_passes_makes_the_task_invalid(task):
    _wrong(
        task,
        "actually-right",
        """
        description = "claimed wrong, but it is the right fix"
        kind = "mistake"
        expect = "fail"
        checks = ["tests-pass"]
    """,
        files={"calc.py": FIXED},
    )
    proc = _validate(task)
    assert proc.returncode == 1, proc.stdout + proc.stderr
    assert "FAIL wrong/actually-right (mistake): it passed; did not fail tests-pass" in proc.stdout
    assert "- wrong/actually-right did not fail as wrong.toml says" in proc.stdout
    assert "0 of 1 task(s) valid" in proc.stdout


def test_a_critical_failure_where_an_ordinary_one_is_expected_is_reported(task):
    _wrong(
        task,
        "overcalled",
        """
        description = "says an ordinary failure, but it edits out of scope"
        kind = "mistake"
        expect = "fail"
        checks = ["only-calc"]
    """,
        files={"README.md": "changed\n"},
    )
    proc = _validate(task)
    assert proc.returncode == 1
    assert "FAIL wrong/overcalled (mistake): failed critically (only-calc), expected an ordinary failure" in proc.stdout


def test_validate_skip_wrong_keeps_the_untouched_fixture_results_only_where_it_is_told(task, tmp_path, monkeypatch):
    monkeypatch.delenv("AGENTDRIFT_GRADING_CACHE", raising=False)  # the suite's own cache, set for every test
    told = tmp_path / "told"
    first = _validate("--skip-wrong", "--grading-cache", told, task)
    assert first.returncode == 0, first.stdout + first.stderr
    assert "wrong solution" not in first.stdout  # --skip-wrong plays none of the task's wrong solutions
    kept = {p: p.read_bytes() for p in told.rglob("*") if p.is_file()}
    assert kept  # the untouched fixture's results of the task's pytest and command checks
    again = _validate("--skip-wrong", "--grading-cache", told, task)
    assert again.stdout == first.stdout
    assert {p: p.read_bytes() for p in told.rglob("*") if p.is_file()} == kept  # read, not graded again
    # the plugin's variable speaks when the command line does not; 'none' keeps nothing
    by_env = tmp_path / "by-env"
    own_tmp = tmp_path / "tmp"
    own_tmp.mkdir()
    env = {**os.environ, "AGENTDRIFT_GRADING_CACHE": str(by_env), "TMPDIR": str(own_tmp)}
    assert agentdrift("validate", "--skip-wrong", task, env=env).returncode == 0 and any(by_env.rglob("*"))
    assert list(own_tmp.iterdir()) == []  # its scratch directory removed
    off = agentdrift("validate", "--skip-wrong", "--grading-cache", "none", task, env=env, cwd=tmp_path)
    assert off.returncode == 0 and not (tmp_path / "none").exists()


MALFORMED = [
    ('description = "x"\nkind = "mistake"\nexpect = "maybe"\n', "'expect' must be one of critical, fail"),
    (
        'description = "x"\nkind = "mistake"\nexpect = "fail"\nchecks = ["nope"]\n',
        "names check(s) the task does not have: nope",
    ),
    ('kind = "mistake"\nexpect = "fail"\n', "'description'"),
    ('description = "x"\nkind = "mistake"\nexpect = "fail"\ncolour = 1\n', "unknown key(s): colour"),
]


def _malformed(task: Path, toml: str) -> Path:
    bad = task / "solution" / "wrong" / "bad"
    bad.mkdir()
    (bad / "wrong.toml").write_text(toml)
    (bad / "report.json").write_text("{}")
    return bad / "wrong.toml"


@pytest.mark.parametrize("toml, problem", MALFORMED)
def test_a_malformed_wrong_toml_is_an_error_naming_the_file_and_problem(task, toml, problem):
    # what validate reads each wrong solution with; the CLI says the same in one line (below)
    bad = _malformed(task, toml)
    with pytest.raises(TaskError) as err:
        wrong_solutions(load_task(task))
    assert err.value.path == str(bad) and problem in err.value.problem


def test_a_malformed_wrong_toml_is_one_validate_error_naming_the_file(task):
    toml, problem = MALFORMED[0]
    bad = _malformed(task, toml)
    proc = _validate(task)
    assert proc.returncode == 4, proc.stdout + proc.stderr
    assert f"{bad}: " in proc.stderr and problem in proc.stderr
    assert "Traceback" not in proc.stderr


def test_the_reference_agent_plays_a_wrong_solution_in_a_session(task, tmp_path):
    proc = run_pytest(
        tmp_path,
        "-q",
        "--agent",
        "reference:wrong/readme-too",
        "--agent-suite",
        str(task.parent),
        "--agent-record",
        str(tmp_path / "run"),
        timeout=600,
    )
    assert proc.returncode == 1, proc.stdout[-3000:]
    results = json.loads((tmp_path / "run" / "results.json").read_text())
    assert results["agent"]["name"] == "reference:wrong/readme-too"
    assert results["agent"]["version"] == "reference-1.0.0+wrong/readme-too"
    assert results["tasks"]["WS1"]["runs"][0]["critical_failed"] == ["only-calc"]


OUTSIDE = ["reference:../escape", "reference:/etc", "reference:wrong/../../x", "reference:"]


@pytest.mark.parametrize("name", OUTSIDE)
def test_a_play_outside_solution_is_refused(name):
    # what the session makes its agent with; it says the same as a usage error (below)
    with pytest.raises(AgentDriftError, match="name a directory below solution/"):
        get_adapter(name)


def test_a_play_outside_solution_is_a_usage_error(task, tmp_path):
    proc = run_pytest(tmp_path, "-q", "--agent", OUTSIDE[0], "--agent-suite", str(task.parent))
    assert proc.returncode == 4, proc.stdout + proc.stderr
    assert "name a directory below solution/" in proc.stdout + proc.stderr
