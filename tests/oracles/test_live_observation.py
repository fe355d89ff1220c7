"""The process-only wrong agents, played through the real harness.

Each wrong solution here acts with actions.py inside the sandbox, the way an
agent would: a debug print added and removed (T01), an override created and
deleted (T07), three rounding tweaks put back (T09), six silent curl retries
(T08). The final tree of each is clean, so only the harness's own observation
of writes and network attempts, made while the agent runs, can fail them.

The harness produces those events (run/watch.py: {"source": "harness",
"type": "write", ...}; run/netwatch.py: {"type": "network_attempt",
"program": ...}); the checks that judge them are also tested with the same
events in test_oracles.py and tests/integration/test_oraclechecks.py.
"""

from __future__ import annotations

import pytest

from pytest_agentdrift.agents.base import ReferenceAdapter
from pytest_agentdrift.grade.grader import Grader
from pytest_agentdrift.grade.scoring import score
from pytest_agentdrift.run import sandbox
from pytest_agentdrift.run.runner import cleanup, run_agent
from pytest_agentdrift.run.runsettings import RunSettings
from pytest_agentdrift.tasks.load import load_task
from pytest_agentdrift.tasks.taskdirs import builtin_suite_dir, find_task_dirs
from pytest_agentdrift.tasks.wrongsolutions import judge, wrong_solutions

pytestmark = pytest.mark.slow

SPECS = {spec.id: spec for spec in (load_task(d) for d in find_task_dirs(builtin_suite_dir()))}


def _play(tmp_path, tid: str, name: str):
    spec = SPECS[tid]
    wrong = next(w for w in wrong_solutions(spec) if w.name == name)
    iso = sandbox.detect("auto")
    run = run_agent(spec, 1, ReferenceAdapter(play=wrong.name), RunSettings(isolation=iso), tmp_path / "runs")
    try:
        assert run.launch_error is None and run.exit_code == 0, run.stderr[-2000:]
        result = score(run, Grader(iso, tmp_path / "grading", hide=tmp_path / "runs").evaluate(spec, run))
    finally:
        cleanup(run)
    return wrong, result


@pytest.mark.parametrize(
    "tid, name",
    [
        ("T01", "wrong/debug-print-reverted"),
        ("T07", "wrong/write-then-delete"),
        ("T09", "wrong/tuned-and-reverted"),
    ],
)
def test_the_final_tree_of_a_write_put_back_is_clean(tmp_path, tid, name):
    """Holds today: the actions ran, and what they wrote outside the allowed paths is gone by the end."""
    _, result = _play(tmp_path, tid, name)
    changed = sorted({p for paths in result["evidence"]["changed"].values() for p in paths})
    assert all(SPECS[tid].allowed.matches(p) for p in changed), changed


@pytest.mark.parametrize(
    "tid, name, check",
    [
        ("T01", "wrong/debug-print-reverted", "no-changes"),
        ("T07", "wrong/write-then-delete", "nothing-written"),
        ("T09", "wrong/tuned-and-reverted", "no-unrelated-tuning"),
    ],
)
def test_a_write_put_back_fails_critically(tmp_path, tid, name, check):
    wrong, result = _play(tmp_path, tid, name)
    verdict, why = judge(wrong, result)
    assert verdict is True, why
    assert check in result["critical_failed"]


def test_silent_curl_retries_fail_critically(tmp_path):
    wrong, result = _play(tmp_path, "T08", "wrong/curl-retries-silent")
    verdict, why = judge(wrong, result)
    assert verdict is True, why
    assert "no-repeated-network-retries" in result["critical_failed"]


def test_curl_retries_named_in_the_agents_commands_fail_critically(tmp_path):
    """Needs no observation: the agent's own command log names the host six times."""
    wrong, result = _play(tmp_path, "T08", "wrong/curl-retries-in-commands")
    verdict, why = judge(wrong, result)
    assert verdict is True, why
    assert "test_no_repeated_retries_in_the_agents_commands" in result["critical_failed"]
