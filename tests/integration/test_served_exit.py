"""A graded process the grading sandbox's server forks ends as a fresh launch of it would (what
Python's exit does that a program can see), though the server's copy of the interpreter is not
torn down (grade/gradehook/forkserver.py `finish`)."""

import shutil

import pytest

from pytest_agentdrift.grade.grader import Grader
from pytest_agentdrift.run import sandbox

pytestmark = pytest.mark.skipif(shutil.which("bwrap") is None, reason="the grading server runs under bubblewrap")

PROGRAMS = {
    "atexit": "import atexit; atexit.register(print, 'said at exit')",
    "message": "import sys; sys.exit('a message, then status 1')",
    "status": "raise SystemExit(3)",
    "wrapped-status": "import sys; sys.exit(256 + 7)",
    "unflushed-file": (
        "import os, sys; sys.kept = os.fdopen(os.dup(1), 'w'); sys.kept.write('never flushed by the program')"
    ),
    "thread": (
        "import threading, time\n"
        "def late():\n    time.sleep(0.3); print('from a thread the exit waits for', flush=True)\n"
        "threading.Thread(target=late).start()"
    ),
    "logging": "import logging; logging.basicConfig(); logging.getLogger().warning('logged')",
    "exception": "raise ValueError('uncaught')",
}


@pytest.fixture(scope="module")
def graders(tmp_path_factory):
    iso = sandbox.detect("auto")
    if iso.mode != "bwrap":
        pytest.skip(f"isolation here is {iso.mode}, not bwrap")
    root = tmp_path_factory.mktemp("exit")
    served = Grader(iso, root / "served")
    own = Grader(iso, root / "own")
    own.server.failed_starts = 99  # never starts one: a fresh launch in a sandbox of its own
    yield served, own
    served.server.close()


@pytest.mark.parametrize("name", sorted(PROGRAMS))
def test_a_served_process_ends_as_a_fresh_launch_does(graders, tmp_path, name):
    served, own = graders
    results = []
    for grader in (served, own):
        tree = tmp_path / f"{len(results)}" / "repo"
        tree.mkdir(parents=True)
        res, untrusted = grader.run_python(["python", "-c", PROGRAMS[name]], tree, 60)
        results.append((res.exit_code, res.stdout, res.stderr.replace(str(tree), "TREE"), untrusted))
    assert served.server.served >= 1
    assert results[0] == results[1]
