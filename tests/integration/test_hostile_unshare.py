"""A hostile agent under `--agent-isolation unshare` rewrites its own task.

Under unshare nothing of the file system is hidden: the agent found the session's task
directory through the harness's working directory and rewrote the frozen test that grading
restores, so a wrong fix passed every check, critical included. Now the task directories are
bound read-only for the agent, in a mount namespace a nested user namespace cannot undo, and
the task directory is listed before its first run and again before grading: a changed one is
never graded (a critical tamper finding; tests/integration/test_task_intact.py). Fails on the code
before these defences (the backdoor passed), passes after.
"""

from __future__ import annotations

import pytest
from hostile_helpers import CALC_REPO, CALC_TASK, assert_session_went_on, available, run_session, shared

pytestmark = [
    pytest.mark.slow,
    pytest.mark.xdist_group("hostile-unshare"),
    pytest.mark.skipif(not available("unshare"), reason="unshare cannot create a network namespace here"),
]

# the session's directory, as a search of the disk (or, before, /proc/PID/cwd of the harness) finds it
REWRITE_TASK = """
import subprocess
from pathlib import Path as P
found = list(P(SESSION_ROOT).glob("tasks/HT1-*/repo/tests/test_calc.py"))
# a backdoor: the rewritten tests fail on the untouched code and pass on the agent's, unfixed
backdoor = "import calc\\n\\n\\ndef test_add():\\n    assert calc.BACKDOOR\\n\\n\\ndef test_negative():\\n    assert calc.BACKDOOR\\n"
rewritten, refused = 0, []
for test in set(found):
    for undo in (["umount", str(test.parents[3])], ["mount", "-o", "remount,rw", str(test.parents[3])]):
        subprocess.run(undo, capture_output=True)
    try:
        test.write_text(backdoor)
        rewritten += 1
    except OSError as exc:
        refused.append(exc.strerror)
Path("calc.py").write_text(Path("calc.py").read_text() + "BACKDOOR = True\\n")
report("complete", summary="found %d, rewrote %d, refused: %s" % (len(set(found)), rewritten, refused))
"""
TASKS = {"HT1": CALC_TASK}


@pytest.fixture(scope="module")
def session(tmp_path_factory):
    return shared(
        tmp_path_factory,
        "unshare-task",
        lambda root: run_session(
            root, TASKS, {"HT1": f"SESSION_ROOT = {str(root)!r}\n" + REWRITE_TASK}, isolation="unshare", timeout=600
        ),
    )


def test_the_session_went_on(session):
    assert_session_went_on(session, list(TASKS))


def test_a_backdoored_task_never_passes(session):
    run = session.run("HT1")
    assert "found 1," in run["report"]["summary"]  # the attack was tried
    assert run["outcome"] == "failed" and run["passed"] is False, run["checks"]
    assert session.check("HT1", "tests")["passed"] is False


def test_the_task_directory_is_read_only_for_the_agent(session):
    run = session.run("HT1")
    assert "rewrote 0, refused: ['Read-only file system']" in run["report"]["summary"]
    (task,) = (session.root / "tasks").glob("HT1-*")
    assert (task / "repo" / "tests" / "test_calc.py").read_text() == CALC_REPO["tests/test_calc.py"]
    assert "task-untouched" not in {c["name"] for c in run["checks"]}  # nothing changed: graded as usual
