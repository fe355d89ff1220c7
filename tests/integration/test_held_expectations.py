"""Values the harness holds: pytest checks with an `expected` file.

The tests call `observe(name, value)`; the harness compares each value with a
file beside task.toml that no graded process can read, so code that rewrites
the grading reporter in its own process can make every test read as passed
but cannot say what the right values were. The file is recorded from the
reference solution by `agentdrift task expect` (cli/expect.py).
"""

import json
import textwrap
from pathlib import Path

import pytest
from test_checks import Lab

from pytest_agentdrift.cli.expect import expectations_text, record_expectations
from pytest_agentdrift.errors import TaskError
from pytest_agentdrift.grade.kinds.commands import observation_problems
from pytest_agentdrift.tasks.checkparams import read_expectations
from pytest_agentdrift.tasks.load import load_task
from pytest_agentdrift.testing import FORGED_REPORTER, make_task
from pytest_agentdrift.vocabulary import EXIT_OK, EXIT_USAGE

CALC_REPO = {
    "calc.py": "def add(a, b):\n    return a - b\n",
    "tests/__init__.py": "",
    "tests/test_observed.py": textwrap.dedent(
        """\
        import pytest
        from agentdrift_grade import observe

        from calc import add


        @pytest.mark.parametrize("a, b", [(2, 3), (0, 7)])
        def test_add(a, b):
            observe("sum", add(a, b))
        """
    ),
}
HELD = {
    "name": "held",
    "kind": "pytest",
    "layer": "correctness",
    "args": ["tests/test_observed.py"],
    "expected": "expected/held.json",
    "expect_before": "fail",
}
PLAIN = {"name": "plain", "kind": "pytest", "layer": "correctness", "args": ["tests/test_observed.py"]}
FIX = "Path('calc.py').write_text('def add(a, b):\\n    return a + b\\n')\n"


@pytest.fixture(scope="module")
def lab(tmp_path_factory):
    return Lab(tmp_path_factory.mktemp("held"))


def calc_task(root: Path, checks: list[dict]) -> Path:
    """The task HELD: calc.py's add subtracts, its reference solution adds."""
    return make_task(
        root,
        "HELD",
        repo=CALC_REPO,
        allowed=["calc.py"],
        protected=["tests/**"],
        checks=checks,
        solution={"calc.py": "def add(a, b):\n    return a + b\n"},
    )


@pytest.fixture(scope="module")
def held_task(lab):
    d = calc_task(lab.root / "tasks", [HELD, PLAIN])
    lines, ok = record_expectations(load_task(d, recording_expectations=True), lab.iso)
    assert ok, lines
    return load_task(d)


@pytest.mark.slow  # records and grades in sandboxes
def test_recorded_from_the_reference_solution(held_task):
    doc = json.loads((held_task.path / "expected" / "held.json").read_text())
    assert doc == {
        "check": "held",
        "observations": {
            "tests/test_observed.py::test_add[0-7]": [["sum", "7"]],
            "tests/test_observed.py::test_add[2-3]": [["sum", "5"]],
        },
    }


@pytest.mark.slow
def test_honest_fix_passes_and_says_what_the_harness_compared(lab, held_task):
    _, res = lab.go(held_task, FIX)
    assert res["held"].passed is True, res["held"].detail
    assert res["held"].detail == "2 frozen test(s) passed; 2 test(s) observed the values the harness holds"


@pytest.mark.slow
def test_unfixed_code_fails_on_the_values_although_every_test_passed_in_process(lab, held_task):
    _, res = lab.go(held_task, "pass\n")
    assert res["plain"].passed is True  # the tests only observe: in-process nothing fails
    assert res["held"].passed is False
    assert res["held"].detail == (
        "2 of 2 test(s) observed values the harness does not expect: "
        "tests/test_observed.py::test_add[0-7] sum: expected 7, observed -7; "
        "tests/test_observed.py::test_add[2-3] sum: expected 5, observed -1"
    )


@pytest.mark.slow
def test_a_forged_reporter_passes_a_plain_pytest_check_but_not_a_held_one(lab, held_task):
    body = f"Path('calc.py').write_text({(FORGED_REPORTER + 'def add(a, b):' + chr(10) + '    return a - b' + chr(10))!r})\n"
    _, res = lab.go(held_task, body)
    # the forgery is real: the in-process reporter says what the graded code wants
    assert res["plain"].passed is True, res["plain"].detail
    assert res["held"].passed is False
    assert "tests/test_observed.py::test_add[2-3] sum: expected 5, observed -1" in res["held"].detail


# ---- the pure parts -------------------------------------------------------------------------


def test_observation_problems_name_each_test_and_value():
    expected = {"t::a": [["x", "1"]], "t::b": [["y", "2"], ["z", "3"]], "t::c": [["w", "4"]]}
    assert observation_problems(expected, {"observed": dict(expected)}) == []
    got = {"t::a": [["x", "1"]], "t::b": [["y", "2"], ["z", "4"]], "t::c": [["w", "4"], ["extra", "5"]]}
    (problem,) = observation_problems(expected, {"observed": got})
    assert problem == (
        "2 of 3 test(s) observed values the harness does not expect: t::b z: expected 3, observed 4; "
        "t::c observed other values than the 1 expected"
    )
    (missing,) = observation_problems(expected, {"observed": {}})
    assert "t::a observed nothing" in missing and missing.startswith("3 of 3")


def test_observed_text_reaches_the_detail_escaped():
    (problem,) = observation_problems({"t::a": [["x", "1"]]}, {"observed": {"t::a": [["x", "\x1b[2J1"]]}})
    assert "\x1b" not in problem


def _task_with(tmp_path: Path, expected: str, content: str | None) -> Path:
    d = make_task(tmp_path, "EXP", repo=CALC_REPO, checks=[{**HELD, "expected": expected}])
    if content is not None:
        (d / expected).parent.mkdir(parents=True, exist_ok=True)
        (d / expected).write_text(content)
    return d


@pytest.mark.parametrize("where", ["repo/expected.json", "hidden/expected.json", "solution/expected.json"])
def test_expectations_graded_code_could_read_are_refused(tmp_path, where):
    d = _task_with(tmp_path, where, '{"observations": {}}')
    with pytest.raises(TaskError, match="graded code can read; keep expectations beside task.toml"):
        load_task(d)


def test_a_missing_expectations_file_is_one_clear_error_unless_recording(tmp_path):
    d = _task_with(tmp_path, "expected/held.json", None)
    with pytest.raises(TaskError, match="expected file 'expected/held.json' is missing"):
        load_task(d)
    assert load_task(d, recording_expectations=True).id == "EXP"


@pytest.mark.parametrize(
    "content, problem",
    [
        ("{", "invalid JSON"),
        ('{"observations": []}', "needs an object 'observations'"),
        ('{"observations": {"t::a": [["x"]]}}', "must be a list of \\[name, repr\\] pairs"),
        ('{"observations": {"t::a": [["x", 1]]}}', "must be a list of \\[name, repr\\] pairs"),
    ],
)
def test_malformed_expectations_name_the_file(tmp_path, content, problem):
    d = _task_with(tmp_path, "expected/held.json", content)
    with pytest.raises(TaskError, match=problem) as exc:
        load_task(d)
    assert "held.json" in str(exc.value)


def test_recorded_text_is_one_test_per_line_and_reads_back(tmp_path):
    text = expectations_text("held", {"t::b": [["y", "'2'"]], "t::a": [["x", "1"]]})
    assert text.splitlines()[3:5] == ['  "t::a": [["x", "1"]],', '  "t::b": [["y", "\'2\'"]]']
    path = tmp_path / "held.json"
    path.write_text(text)
    assert read_expectations(path) == {"t::a": [["x", "1"]], "t::b": [["y", "'2'"]]}


@pytest.mark.slow
def test_recording_refuses_when_the_reference_solution_observes_wrongly(lab):
    d = make_task(
        lab.root / "tasks",
        "BADREF",
        repo=CALC_REPO,
        allowed=["calc.py"],
        protected=["tests/**"],
        checks=[{**HELD, "expect_before": "any"}],
        solution={"calc.py": "def add(a, b):\n    raise RuntimeError('no')\n"},
    )
    lines, ok = record_expectations(load_task(d, recording_expectations=True), lab.iso)
    assert ok is False
    assert lines[0].startswith("FAIL BADREF held: not recorded:"), lines
    assert not (d / "expected" / "held.json").exists()


def test_added_lines_naming_the_grading_plugins_are_tamper_evidence():
    from pytest_agentdrift.run.tamper import harness_references_added

    added = {
        "pkg/mod.py": ["import sys", "g = sys.modules['agentdrift_grade']"],
        "pkg/boot.pth": ["import agentdrift_functions"],
        "README.md": ["agentdrift_grade is the harness's plugin"],  # not code
        "pkg/env.py": ["key = os.environ['AGENTDRIFT_GRADE_CHANNEL']", "x = 1"],
    }
    assert harness_references_added(added) == [
        "pkg/boot.pth: import agentdrift_functions",
        "pkg/env.py: key = os.environ['AGENTDRIFT_GRADE_CHANNEL']",
        "pkg/mod.py: g = sys.modules['agentdrift_grade']",
    ]


@pytest.mark.slow
def test_the_cli_reads_isolation_as_sessions_do(tmp_path, monkeypatch, capsys):
    """`agentdrift task expect` takes --isolation from the flag, else from the ini's agent_isolation."""
    from pytest_agentdrift.cli import main

    task = calc_task(tmp_path / "tasks", [HELD])
    (tmp_path / "pytest.ini").write_text("[pytest]\nagent_isolation = bogus\n")
    monkeypatch.chdir(tmp_path)
    assert main(["task", "expect", str(task)]) == EXIT_USAGE
    assert "agent_isolation" in capsys.readouterr().err
    assert not (task / "expected").exists()
    assert main(["task", "expect", str(task), "--isolation", "none"]) == EXIT_OK
    assert json.loads((task / "expected" / "held.json").read_text())["check"] == "held"
