"""The grading sandbox (grade/gradeserver.py): the same results as a sandbox per process, a new
sandbox after a timeout, and a resident server that never serves outside a PID namespace of its own."""

import subprocess
import sys

import pytest

from pytest_agentdrift.grade.checks import Grader
from pytest_agentdrift.run import sandbox

TESTS = "from calc import add\n\n\ndef test_add():\n    assert add(2, 3) == 5\n\n\ndef test_zero():\n    assert add(0, 0) == 0\n"

pytestmark = pytest.mark.skipif(sandbox.detect("auto").mode != "bwrap", reason="the grading sandbox needs bubblewrap")


def _tree(root, calc: str):
    tree = root / "repo"
    (tree / "tests").mkdir(parents=True)
    (tree / "calc.py").write_text(calc)
    (tree / "tests" / "test_calc.py").write_text(TESTS)
    return tree


@pytest.fixture
def pair(tmp_path):
    """A Grader that serves from its grading sandbox and one that runs every process in its own."""
    iso = sandbox.detect("auto")
    served = Grader(iso, tmp_path / "served")
    own = Grader(iso, tmp_path / "own")
    own.server.failed_starts = 99  # never starts one
    yield served, own
    served.server.close()


@pytest.mark.parametrize("calc", ["def add(a, b):\n    return a + b\n", "def add(a, b):\n    return a - b\n"])
def test_a_served_pytest_run_reports_what_a_sandbox_of_its_own_reports(tmp_path, pair, calc):
    served, own = pair
    results = []
    for grader in pair:
        data = grader.run_pytest(_tree(tmp_path / grader.base.name / f"t{len(results)}", calc), ["tests"], 120)
        results.append({k: data[k] for k in ("collected", "outcomes", "exitstatus", "channel_problems")})
        results[-1]["exit"] = data["exec"].exit_code
    assert served.server.served == 1 and own.server.served == 0
    assert results[0] == results[1]
    assert results[0]["channel_problems"] == [] and results[0]["exit"] == results[0]["exitstatus"]


def test_a_served_python_command_returns_its_status_and_output(tmp_path, pair):
    served, own = pair
    argv = ["python", "-c", "import calc, sys; print(calc.add(2, 3)); sys.exit(3)"]
    got = [g.run_python(argv, _tree(tmp_path / g.base.name, "def add(a, b):\n    return a + b\n"), 60) for g in pair]
    assert served.server.served == 1
    for res, untrusted in got:
        assert (res.exit_code, res.stdout, untrusted) == (3, "5\n", [])


def test_a_timeout_ends_the_sandbox_and_the_next_process_gets_a_new_one(tmp_path, pair):
    served, _ = pair
    slow = "import time\ntime.sleep(60)\n\ndef add(a, b):\n    return a + b\n"
    data = served.run_pytest(_tree(tmp_path / "slow", slow), ["tests"], 2)
    assert data["exec"].timed_out is True and data["missing_report"] is True
    after = served.run_pytest(_tree(tmp_path / "next", "def add(a, b):\n    return a + b\n"), ["tests"], 120)
    assert served.server.served == 1  # answered by the new sandbox's server
    assert after["exitstatus"] == 0 and after["outcomes"] == {
        "tests/test_calc.py::test_add": "passed",
        "tests/test_calc.py::test_zero": "passed",
    }


def test_the_resident_server_refuses_to_serve_outside_a_pid_namespace_of_its_own():
    from pytest_agentdrift.grade.gradeserver import GRADEHOOK_DIR

    code = "import sys; sys.path.insert(0, sys.argv[1]); import forkserver; forkserver.serve(0)"
    proc = subprocess.run([sys.executable, "-c", code, str(GRADEHOOK_DIR)], capture_output=True, text=True, timeout=60)
    assert proc.returncode != 0 and "refusing to serve" in proc.stderr
