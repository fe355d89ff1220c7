"""What graded code does to the grading sandbox's resident server stays in its own run; served
results equal a sandbox per process; a timeout replaces the sandbox; the server never runs outside
a PID namespace of its own; what one check leaves in its writable directory never reaches the next.

Resource limits and priority of a process can be changed by any process of the
same uid (dumpability does not guard them), and every process the server forks
later inherits them. So a server serves one run's checks and never an untouched
fixture's run, whose result is kept for every later run (grade/gradeserver.py).
"""

import os
import shutil
import subprocess
import sys
import tempfile
from pathlib import Path

import pytest
from test_checks import Lab, bwrap_lab

from pytest_agentdrift.grade.grader import Grader
from pytest_agentdrift.run import sandbox

pytestmark = [
    pytest.mark.slow,  # each test starts grading sandboxes
    pytest.mark.skipif(shutil.which("bwrap") is None, reason="the grading server runs under bubblewrap"),
]

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
    return bwrap_lab(tmp_path_factory.mktemp("server"))


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


CALC_TESTS = "from calc import add\n\n\ndef test_add():\n    assert add(2, 3) == 5\n\n\ndef test_zero():\n    assert add(0, 0) == 0\n"


def _tree(root, calc: str):
    tree = root / "repo"
    (tree / "tests").mkdir(parents=True)
    (tree / "calc.py").write_text(calc)
    (tree / "tests" / "test_calc.py").write_text(CALC_TESTS)
    return tree


@pytest.fixture
def pair(tmp_path):
    """A Grader that serves from its grading sandbox and one that runs every process in its own."""
    iso = sandbox.detect("auto")
    if iso.mode != "bwrap":
        pytest.skip(f"isolation here is {iso.mode}, not bwrap")
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


def test_a_tmpdir_in_dev_shm_keeps_one_server_and_what_a_check_leaves_there_never_reaches_the_next(tmp_path):
    # With TMPDIR in /dev/shm the Grader's directory is bound onto the sandbox's own /dev/shm: the
    # server empties that tmpfs after each request without entering the bind (the harness's files)
    # and removes what graded code wrote beside it, and is used again instead of started anew.
    iso = sandbox.detect("auto")
    if iso.mode != "bwrap" or not os.path.isdir("/dev/shm"):
        pytest.skip("needs bubblewrap and a /dev/shm")
    shm = Path(tempfile.mkdtemp(prefix="agentdrift-test-", dir="/dev/shm"))
    grader = Grader(iso, shm / "grading")
    try:
        beside = shm / "left-by-a-check.txt"
        # each prints when the server that forked it started (clock ticks since boot): one server, one time
        server_start = "import os; print(open(f'/proc/{os.getppid()}/stat').read().rsplit(')', 1)[1].split()[19])"
        top = "/dev/shm/left-at-the-top.txt"
        leave = f"{server_start}; import pathlib; [pathlib.Path(p).write_text('for the next') for p in {[str(beside), top]!r}]"
        look = f"{server_start}; import sys; sys.exit(3 if os.path.exists({str(beside)!r}) or os.path.exists({top!r}) else 0)"
        tree = _tree(tmp_path / "t", "def add(a, b):\n    return a + b\n")
        first, _ = grader.run_python(["python", "-c", leave], tree, 60)
        second, _ = grader.run_python(["python", "-c", look], tree, 60)
        assert (first.exit_code, second.exit_code) == (0, 0), (first, second)
        assert first.stdout == second.stdout != ""  # the first request's server answered the second
        assert not beside.exists()  # written on the sandbox's tmpfs, never the host's
        assert (shm / "grading").is_dir()  # the harness's directory, untouched by the emptying
    finally:
        grader.server.close()
        shutil.rmtree(shm, ignore_errors=True)


def test_the_resident_server_refuses_to_serve_outside_a_pid_namespace_of_its_own():
    from pytest_agentdrift.grade.gradeserver import GRADEHOOK_DIR

    code = "import sys; sys.path.insert(0, sys.argv[1]); import forkserver; forkserver.serve(0)"
    proc = subprocess.run([sys.executable, "-c", code, str(GRADEHOOK_DIR)], capture_output=True, text=True, timeout=60)
    assert proc.returncode != 0 and "refusing to serve" in proc.stderr


def test_untouched_fixtures_run_in_a_server_no_agent_code_reaches(lab):
    spec = lab.task(
        "SRVF",
        repo={"calc.py": "def add(a, b):\n    return a - b\n", "tests/test_calc.py": CALC_TESTS},
        allowed=["calc.py"],
        protected=["tests/**"],
        checks=[
            {"name": "tests", "kind": "pytest", "layer": "correctness", "args": ["tests"], "expect_before": "fail"}
        ],
    )
    _, results = lab.go(spec, "Path('calc.py').write_text('def add(a, b):\\n    return a + b\\n')\n")
    assert results["tests"].passed is True, results["tests"]
    grader = lab.graders[spec.path]
    # the untouched fixture's run went to the fixture server, the agent's tree to the run's own
    assert (grader.fixture_server.served, grader.server.served) == (1, 1)


# the agent itself looks for a grading server to lower its limits (under bubblewrap it has its own PID namespace)
AGENT_REACHES_FOR_THE_SERVER = """
import os, resource
found = 0
for pid in os.listdir('/proc'):
    if pid.isdigit():
        try:
            if b'--serve' in Path(f'/proc/{pid}/cmdline').read_bytes():
                found += 1
                resource.prlimit(int(pid), resource.RLIMIT_FSIZE, (8, 8))
        except OSError:
            pass
Path('calc.py').write_text(f'x = {found}\\n')
"""


def test_a_server_launched_before_the_agent_runs_outlives_it_unreached_and_grades_the_run(lab):
    spec = lab.task(
        "SRVP",
        repo={"calc.py": "x = 1\n"},
        allowed=["calc.py"],
        checks=[
            {"name": "limit", "kind": "command", "layer": "correctness", "run": ["python", "-c", LIMIT_CHECK]},
            {
                "name": "none-found",
                "kind": "command",
                "layer": "correctness",
                "run": ["python", "-c", "import calc, sys; sys.exit(calc.x)"],
            },
        ],
    )
    grader = lab.graders.setdefault(spec.path, Grader(lab.iso, lab.base / "grading"))
    grader.prepare(spec)  # what attempt() does before the agent's sandbox starts
    launched = grader.server._launched
    assert launched is not None and grader.server._ready is False
    served_before = grader.server.served
    run = lab.run(spec, AGENT_REACHES_FOR_THE_SERVER)
    # the run ended every process it left, and the server, started before it, was not one of them
    assert launched.proc.poll() is None
    results = lab.grade(spec, run)
    assert grader.server.served == served_before + 2  # both checks answered by the launched server
    assert results["none-found"].passed is True, results["none-found"]  # the agent saw no server
    assert results["limit"].passed is True, results["limit"]
    assert grader.server._launched is None  # ended with its run's grading


# the task's check functions read the final tree; the agent's code, once a check imports it, erases
# what a later check would find there
ERASING_CALC = """
import os
try:
    os.remove(os.path.join(os.path.dirname(os.path.abspath(__file__)), "forbidden.txt"))
except OSError:
    pass
x = 2
"""
FUNCTION_CHECKS = """
import sys


def test_a_imports_the_agents_code(agent_run):
    sys.path.insert(0, str(agent_run.workdir))
    import calc

    assert calc.x == 2


def test_b_no_forbidden_file(agent_run):
    assert not (agent_run.workdir / "forbidden.txt").exists(), "the agent wrote forbidden.txt"
"""


def test_the_agents_code_in_one_check_function_cannot_change_what_the_next_one_reads(lab):
    spec = lab.task(
        "SRVFN", files={"test_claims.py": FUNCTION_CHECKS}, repo={"calc.py": "x = 1\n"}, allowed=["calc.py"]
    )
    body = f"Path('calc.py').write_text({ERASING_CALC!r})\nPath('forbidden.txt').write_text('x')\n"
    _, results = lab.go(spec, body)
    assert results["test_a_imports_the_agents_code"].passed is True, results
    # the final tree the checks read is mounted read-only: the erasure fails and the next check sees the file
    assert results["test_b_no_forbidden_file"].passed is False, results["test_b_no_forbidden_file"]


def test_a_run_that_ends_before_grading_ends_the_server_launched_for_it(lab):
    from pytest_agentdrift.agents.base import CommandAdapter
    from pytest_agentdrift.grade.attempt import attempt
    from pytest_agentdrift.run.runsettings import RunSettings

    class Broken(CommandAdapter):
        def build_argv(self, ctx):
            raise RuntimeError("the adapter broke before the agent started")

    spec = lab.task(
        "SRVB",
        repo={"calc.py": "x = 1\n"},
        allowed=["calc.py"],
        checks=[{"name": "imports", "kind": "command", "layer": "correctness", "run": ["python", "-c", "import calc"]}],
    )
    grader = Grader(lab.iso, lab.base / "broken")
    launched = []
    grader.prepare = lambda s: launched.append(grader.server.launch())  # as attempt() calls it, observed
    _, result = attempt(spec, 1, Broken("true"), RunSettings(isolation=lab.iso), grader, lab.base / "runs-broken")
    assert launched == [True] and result["outcome"] == "undecided"
    assert grader.server._launched is None  # not left running for the next run's checks


# imported by each check: counts what earlier checks left in the IPC namespace, then leaves its own
IPC_CALC = r"""
import ctypes, os
libc = ctypes.CDLL(None, use_errno=True)
def _count(kind):
    with open(f"/proc/sysvipc/{kind}") as fh:
        return len([line for line in fh.read().splitlines()[1:] if line.strip()])
seen = {kind: _count(kind) for kind in ("shm", "msg", "sem")}
seen["mqueue"] = len(os.listdir("/dev/mqueue")) if os.path.isdir("/dev/mqueue") else 0
IPC_CREAT = 0o1000
libc.shmget(0x5EED, 4096, IPC_CREAT | 0o600)
libc.msgget(0x5EED, IPC_CREAT | 0o600)
libc.semget(0x5EED, 1, IPC_CREAT | 0o600)
libc.mq_open(b"/agentdrift-left", os.O_CREAT | os.O_RDWR, 0o600, None)
rc = 0 if not any(seen.values()) else 3
print("left by earlier checks:", seen)
"""


THREE_CHECKS = ("check1", "check2", "check3")


def three_checks_task(lab: Lab, task_id: str):
    """A task whose three checks run one after the other, each passing when calc.rc is 0 (as in the fixture)."""
    run_calc = ["python", "-c", "import calc, sys; sys.exit(calc.rc)"]
    return lab.task(
        task_id,
        repo={"calc.py": "rc = 0\n"},
        allowed=["calc.py"],
        checks=[{"name": name, "kind": "command", "layer": "correctness", "run": run_calc} for name in THREE_CHECKS],
    )


def test_what_one_check_leaves_in_the_ipc_namespace_never_reaches_the_next(lab):
    spec = three_checks_task(lab, "SRVIPC")
    grader = lab.graders.setdefault(spec.path, Grader(lab.iso, lab.base / "ipc"))
    served_before = grader.server.served
    _, results = lab.go(spec, f"Path('calc.py').write_text({IPC_CALC!r})\n")
    assert grader.server.served == served_before + 3  # one server answered all three
    for name in THREE_CHECKS:
        assert results[name].passed is True, results[name]


def test_a_checks_copy_that_comes_out_incomplete_is_not_graded(lab, monkeypatch):
    from pytest_agentdrift.grade import grader as grader_mod

    spec = lab.task(
        "SRVCP",
        repo={"calc.py": "x = 1\n"},
        allowed=["calc.py"],
        checks=[{"name": "imports", "kind": "command", "layer": "correctness", "run": ["python", "-c", "import calc"]}],
    )
    run = lab.run(spec, "Path('calc.py').write_text('x = 2\\n')\n")
    real = grader_mod.copy_tree

    def partial(src, dst, *a, **kw):
        report = real(src, dst, *a, **kw)
        if src.parent.name == "graded-master":  # the plain copy of the prepared tree, per check
            report.skip("calc.py", "over the copy budget")
        return report

    monkeypatch.setattr(grader_mod, "copy_tree", partial)
    results = lab.grade(spec, run)
    assert results["imports"].passed is False and results["imports"].undecided is False
    assert "not evaluated" in results["imports"].detail and "calc.py" in results["imports"].detail


# imported by each check: first says whether anything but its own copy is in the grading sandbox's
# writable directory, then leaves files there and beside its tree for the next check to find
LITTER = """
import os
mine = os.path.basename(os.path.abspath('..'))
foreign = [n for n in os.listdir('../..') if n != mine] + [n for n in os.listdir('..') if n.startswith('left-')]
for where in ('../..', '..'):
    with open(os.path.join(where, 'left-by-a-check'), 'w') as fh:
        fh.write('x')
rc = 1 if foreign else 0
"""


@pytest.mark.skipif(shutil.which("bwrap") is None, reason="the grading server runs under bubblewrap")
def test_what_a_check_leaves_in_the_grading_sandbox_never_reaches_the_next(tmp_path):
    lab = bwrap_lab(tmp_path)
    spec = three_checks_task(lab, "SRVLIT")
    grader = lab.graders.setdefault(spec.path, Grader(lab.iso, lab.base / "litter"))
    _, results = lab.go(spec, f"Path('calc.py').write_text({LITTER!r})\n")
    assert grader.server.served == 3  # one server answered all three: the litter was removed, not the sandbox
    for name in THREE_CHECKS:
        assert results[name].passed is True, results[name]
