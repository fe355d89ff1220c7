"""A session lists its tasks with the Grader before the first run: each task directory is listed
once, and the grading server starts then when any task has a check it serves (nothing starts it
when none has)."""

from pytest_agentdrift.tasks import load
from pytest_agentdrift.testing import make_task


def test_the_grading_server_starts_with_the_session_when_any_task_has_a_check_it_serves(tmp_path):
    from pytest_agentdrift.grade.grader import Grader
    from pytest_agentdrift.run.sandbox import Isolation

    served = load.load_task(
        make_task(tmp_path, "LS4", checks=[{"name": "t", "kind": "pytest", "layer": "correctness"}])
    )
    unserved = load.load_task(make_task(tmp_path, "LS5"))
    started = []
    for specs in ([served, unserved], [unserved, served], [unserved], []):
        grader = Grader(Isolation("none", "not_enforced", "not_enforced", False, False), tmp_path / "grading")
        grader.server.launch = lambda: started.append(True)  # type: ignore[method-assign]
        grader.note_tasks(iter(specs))  # any iterable, read once
        assert sorted(grader._task_before) == sorted(s.path for s in specs)
    assert started == [True, True]  # the served check is seen wherever it stands, and no task starts nothing
