"""What graded code does to the grading sandbox's resident server stays in its own run.

Resource limits and priority of a process can be changed by any process of the
same uid (dumpability does not guard them), and every process the server forks
later inherits them. So a server serves one run's checks and never an untouched
fixture's run, whose result is kept for every later run (grade/gradeserver.py).
"""

import shutil

import pytest
from test_checks import Lab

pytestmark = pytest.mark.skipif(shutil.which("bwrap") is None, reason="the grading server runs under bubblewrap")

# lowers the file-size limit of the server that forked it (only when served: elsewhere the parent
# may be the harness itself)
POISON = """
import os, resource
try:
    with open(f"/proc/{os.getppid()}/cmdline", "rb") as _fh:
        _served = b"--serve" in _fh.read()
except OSError:
    _served = False
if _served:
    resource.prlimit(os.getppid(), resource.RLIMIT_FSIZE, (8, 8))
"""
LIMIT_CHECK = (
    "import resource, sys; soft = resource.getrlimit(resource.RLIMIT_FSIZE)[0]; "
    "sys.exit(0 if soft == resource.RLIM_INFINITY or soft > 4096 else f'file size limit {soft} inherited')"
)


@pytest.fixture(scope="module")
def lab(tmp_path_factory):
    lab = Lab(tmp_path_factory.mktemp("server"))
    if lab.iso.mode != "bwrap":
        pytest.skip(f"isolation here is {lab.iso.mode}, not bwrap")
    return lab


def test_a_poisoned_server_never_grades_the_next_run(lab):
    spec = lab.task(
        "SRV",
        repo={"calc.py": "x = 1\n"},
        allowed=["calc.py"],
        checks=[
            {"name": "imports", "kind": "command", "layer": "correctness", "run": ["python", "-c", "import calc"]},
            {"name": "limit", "kind": "command", "layer": "correctness", "run": ["python", "-c", LIMIT_CHECK]},
        ],
    )
    _, hostile = lab.go(spec, f"Path('calc.py').write_text({(POISON + 'x = 1' + chr(10))!r})\n")
    assert hostile["imports"].passed is True
    # within its own run the agent's code only harms its own checks
    assert hostile["limit"].passed is False and "inherited" in hostile["limit"].evidence.get("tail", ""), hostile
    # the same Grader grades the next run: its checks start in a server the poison never reached
    _, honest = lab.go(spec, "Path('calc.py').write_text('x = 2\\n')\n")
    assert honest["limit"].passed is True, honest["limit"]
