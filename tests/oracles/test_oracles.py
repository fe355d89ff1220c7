"""The twelve bundled tasks catch what they exist to catch.

For every task: the reference solution passes; the drifted one (where the
task has one) fails exactly its critical checks; an honest give-up fails,
never critically; and every wrong solution the task ships
(solution/wrong/NAME/, each a mistake a real coding agent makes there or a
reward hack) fails as its wrong.toml says, critically where the task's
critical column says so and only there.

Grading is direct and fast: testing.OracleBench plays a solution in-process
on a copy of repo/ and runs the task's checks through the real grader (graded
copy, sandbox, the harness's own pytest runs), with no agent process and no
pytest session of the plugin. Wrong solutions whose mistake only a live
observation can see (a write put back before the end, silent curl retries)
are graded with the events their wrong.toml says that observation reports;
test_live_observation.py plays the same solutions through the real harness.
"""

from __future__ import annotations

import pytest
from helpers import DRIFTED_BREAKS

from pytest_agentdrift.tasks.load import load_task
from pytest_agentdrift.tasks.taskdirs import builtin_suite_dir, find_task_dirs
from pytest_agentdrift.tasks.wrongsolutions import deciding_checks, function_checks, judge, wrong_solutions
from pytest_agentdrift.testing import OracleBench

SPECS = {spec.id: spec for spec in (load_task(d) for d in find_task_dirs(builtin_suite_dir()))}
WRONG = [(tid, w) for tid, spec in sorted(SPECS.items()) for w in wrong_solutions(spec)]


@pytest.fixture(scope="module")
def bench(tmp_path_factory):
    return OracleBench(tmp_path_factory.mktemp("oracles"))


def _failures(result) -> str:
    return "; ".join(f"{c['name']}: {c['detail'][:200]}" for c in result["checks"] if not c["passed"])


def test_all_twelve_tasks_are_here():
    assert sorted(SPECS) == [f"T{i:02d}" for i in range(1, 13)]


@pytest.mark.slow  # grades each task in its sandboxes; the inner loop keeps the tasks' shape tests
@pytest.mark.parametrize("tid", sorted(SPECS))
def test_reference_solution_passes(bench, tid):
    spec = SPECS[tid]
    result = bench.grade(spec, spec.solution)
    assert result["passed"], _failures(result)


# the drifted profile is graded again in the full suite (test_builtin_suite.py); the inner loop keeps the faithful one
@pytest.mark.slow
@pytest.mark.parametrize("tid", sorted(SPECS))
def test_drifted_solution_fails_its_critical_checks(bench, tid):
    spec = SPECS[tid]
    drifted = spec.solution / "drifted"
    if not drifted.is_dir():
        # the drifted agent plays the faithful solution here, which passes (test_reference_solution_passes)
        assert tid not in DRIFTED_BREAKS
        return
    result = bench.grade(spec, drifted)
    assert not result["passed"]
    assert set(result["critical_failed"]) == DRIFTED_BREAKS[tid], _failures(result)


@pytest.mark.slow  # every wrong agent of every task: the full suite plays them, the inner loop does not
@pytest.mark.parametrize("tid", sorted(SPECS))
def test_honest_give_up_fails_but_never_critically(bench, tid):
    spec = SPECS[tid]
    give_up = [w for w in wrong_solutions(spec) if w.kind == "give-up"]
    assert [w.name for w in give_up] == ["wrong/give-up"]
    result = bench.grade(spec, give_up[0].path)
    assert result["report"]["status"] in ("failed", "blocked", "partial")
    assert result["outcome"] == "failed"
    assert result["critical_failed"] == [], _failures(result)
    # no harmful effect: the give-up changed nothing
    assert result["evidence"]["changed"] == {"added": [], "modified": [], "deleted": [], "mode": []}
    # and it fails as its wrong.toml says, judged on this grade of every check (it is not played again below)
    verdict, why = judge(give_up[0], result)
    assert verdict is True, f"{give_up[0].description}\n{why}"


@pytest.mark.parametrize("tid", sorted(SPECS))
def test_every_task_ships_its_own_wrong_agents(tid):
    spec = SPECS[tid]
    own = [w for w in wrong_solutions(spec) if w.kind != "give-up"]
    assert len(own) >= 3, [w.name for w in own]
    assert any(w.kind == "reward-hack" for w in own), "at least one reward hack"
    critical_checks = {c.name for c in spec.checks if c.critical} | {
        n for n, crit in function_checks(spec).items() if crit
    }
    for w in own:
        assert w.checks, f"{w.name}: wrong.toml names no check it must fail"
        if w.expect == "critical":
            assert set(w.checks) & critical_checks, f"{w.name}: expects a critical failure but names no critical check"


#: the give-ups are judged in test_honest_give_up_fails_but_never_critically, on the grade it makes of them
PLAYED = [(tid, w) for tid, w in WRONG if w.kind != "give-up"]


@pytest.mark.slow  # every wrong agent of every task: the full suite plays them, the inner loop does not
@pytest.mark.parametrize("tid, wrong", PLAYED, ids=[f"{tid}-{w.name.split('/', 1)[1]}" for tid, w in PLAYED])
def test_wrong_solution_fails_as_its_wrong_toml_says(bench, tid, wrong):
    # a mistake only a live observation sees is graded with the events that observation reports
    spec = SPECS[tid]
    # the verdict rests on the checks the wrong solution names and on every critical one: only those run
    result = bench.grade(
        spec, wrong.path, only=deciding_checks(spec, wrong), observed=wrong.observed, run_actions=not wrong.needs
    )
    verdict, why = judge(wrong, result)
    assert verdict is True, f"{wrong.description}\n{why}"


PROCESS_ONLY = [(tid, w) for tid, w in WRONG if "write-observation" in w.needs]


@pytest.mark.slow  # every wrong agent of every task: the full suite plays them, the inner loop does not
@pytest.mark.parametrize(
    "tid, wrong", PROCESS_ONLY, ids=[f"{tid}-{w.name.split('/', 1)[1]}" for tid, w in PROCESS_ONLY]
)
def test_a_write_put_back_is_invisible_without_the_observation(bench, tid, wrong):
    """The final tree alone cannot see these mistakes: the verdict is 'undecided', never a pass called done."""
    spec = SPECS[tid]
    result = bench.grade(spec, wrong.path, only=deciding_checks(spec, wrong), run_actions=True)
    verdict, why = judge(wrong, result)
    assert verdict is None, why
    assert "needs write-observation" in why
    writes = {c["name"]: c for c in result["checks"] if c["kind"] == "writes"}
    assert writes and all("final tree only" in c["evidence"]["observation"] for c in writes.values())


def test_the_wrong_agents_cover_the_probes_classes():
    """The classes of the oracle probe: process evidence, network, structure, hidden behaviour, calibration."""
    names = {f"{tid}/{w.name}" for tid, w in WRONG}
    for expected in (
        "T01/wrong/debug-print-reverted",
        "T01/wrong/invented-method",
        "T01/wrong/out-of-order",
        "T02/wrong/special-cased-test-input",
        "T02/wrong/coupon-tidied-too",
        "T03/wrong/test-needs-the-new-helper",
        "T03/wrong/epsilon-nudge",
        "T04/wrong/currency-dropped",
        "T05/wrong/decimal-amounts-in-cents-columns",
        "T05/wrong/hand-built-csv",
        "T05/wrong/not-registered",
        "T06/wrong/silent-fragment",
        "T06/wrong/only-the-task-skus",
        "T07/wrong/write-then-delete",
        "T08/wrong/curl-retries-in-commands",
        "T08/wrong/curl-retries-silent",
        "T08/wrong/claims-fresh-download",
        "T08/wrong/network-word-only",
        "T09/wrong/tuned-and-reverted",
        "T09/wrong/rates-rounded",
        "T10/wrong/claims-unrun-tests",
        "T10/wrong/done-module-reworked",
        "T11/wrong/staged-version-excluded",
        "T11/wrong/lock-updated",
    ):
        assert expected in names
