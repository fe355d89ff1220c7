"""Under bubblewrap the run's prepared graded tree is never run in: every graded process, served by
the grading sandbox or in a sandbox of its own, Python or not, gets a fresh copy of it, so what one
check writes never reaches the next (grade/grader.py `_request_copy`)."""

import os
import shutil

import pytest
from test_checks import bwrap_lab

from pytest_agentdrift.grade.grader import Grader
from pytest_agentdrift.run import sandbox

pytestmark = pytest.mark.skipif(shutil.which("bwrap") is None, reason="the graded copies under bubblewrap")

# imported by each Python check: fails when an earlier check's writes are in its tree, then writes
POISON_NEXT = """
import os
rc = 1 if os.path.exists('poisoned.txt') else 0
with open('poisoned.txt', 'w') as fh:
    fh.write('x')
with open(__file__, 'a') as fh:
    fh.write('\\nrc = 1\\n')
"""
PY_CHECK = ["python", "-c", "import calc, sys; sys.exit(calc.rc)"]
SH_CHECK = [
    "sh",
    "-c",
    "test ! -e poisoned.txt && ! grep -qx 'rc = 1' calc.py && echo 'rc = 1' | tee poisoned.txt >> calc.py",
]


@pytest.fixture(scope="module")
def lab(tmp_path_factory):
    return bwrap_lab(tmp_path_factory.mktemp("copies"))


@pytest.mark.slow  # grading sandboxes
@pytest.mark.parametrize("served", [True, False], ids=["grading-sandbox", "sandbox-of-its-own"])
def test_no_check_sees_what_an_earlier_check_wrote(lab, served):
    checks = [
        {"name": f"{kind}{i}", "kind": "command", "layer": "correctness", "run": run}
        for i in (1, 2)
        for kind, run in (("py", PY_CHECK), ("sh", SH_CHECK))
    ]
    spec = lab.task(f"CP{int(served)}", repo={"calc.py": "rc = 0\n"}, allowed=["calc.py"], checks=checks)
    grader = Grader(lab.iso, lab.base / f"copies-{served}")
    if not served:
        grader.server.failed_starts = 99  # never starts one: every process in a sandbox of its own
    run = lab.run(spec, f"Path('calc.py').write_text({POISON_NEXT!r})\n")
    results = {c.name: c for c in grader.evaluate(spec, run)}
    for name in ("py1", "sh1", "py2", "sh2"):
        assert results[name].passed is True, results[name]
    assert grader.server.served == (2 if served else 0)


@pytest.mark.slow
def test_the_graded_tree_has_no_fixture_repository_but_keeps_a_nested_one(lab):
    look = "import os, sys; sys.exit(0 if os.path.isfile('sub/.git/kept') and not os.path.lexists('.git') else 1)"
    spec = lab.task(
        "CPGIT",
        repo={"calc.py": "rc = 0\n"},
        allowed=["calc.py", "sub/**"],
        checks=[{"name": "look", "kind": "command", "layer": "correctness", "run": ["python", "-c", look]}],
    )
    assert spec.git
    grader = Grader(lab.iso, lab.base / "copies-git")
    run = lab.run(spec, "Path('sub/.git').mkdir(parents=True)\nPath('sub/.git/kept').write_text('x')\n")
    assert (run.work / ".git").is_dir()  # the fixture's repository is there for the agent
    results = {c.name: c for c in grader.evaluate(spec, run)}
    assert results["look"].passed is True, results["look"]


def test_what_sits_beside_a_graded_tree_is_copied_as_it_is_never_through_a_link(tmp_path):
    # a link beside the tree stays a link in the graded process's directory: following it would put
    # the bytes of what it names (a hidden solution, a host file) where graded code reads
    grader = Grader(sandbox.detect("auto"), tmp_path / "grading")
    secret = tmp_path / "task" / "hidden" / "solution.py"
    secret.parent.mkdir(parents=True)
    secret.write_text("THE HIDDEN SOLUTION\n")
    beside = tmp_path / "request"
    (beside / "repo").mkdir(parents=True)
    (beside / "repo" / "calc.py").write_text("x = 1\n")
    (beside / "home").mkdir()
    (beside / "home" / ".profile").write_text("# the process's home\n")
    (beside / "empty.ini").write_text("[pytest]\n")
    os.symlink(secret, beside / "leak")
    grader._request_copy(beside / "repo", tmp_path / "dest")
    dest = tmp_path / "dest"
    assert (dest / "leak").is_symlink() and os.readlink(dest / "leak") == str(secret)
    assert (dest / "home" / ".profile").read_text() == "# the process's home\n"
    assert (dest / "empty.ini").read_text() == "[pytest]\n" and (dest / "repo" / "calc.py").is_file()
