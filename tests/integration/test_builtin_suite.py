"""The twelve bundled tasks: valid, passed by the faithful reference agent, and
failed by the drifted one exactly where their critical-fail columns say."""

import json
import re
from concurrent.futures import ThreadPoolExecutor

import pytest
from helpers import DRIFTED_BREAKS, agentdrift

from pytest_agentdrift.tasks.load import load_task
from pytest_agentdrift.tasks.taskdirs import builtin_suite_dir, find_task_dirs

# every test here starts pytest sessions with agents; the records are tests/conftest.py's builtin_records
pytestmark = pytest.mark.slow


def test_twelve_tasks_with_every_file():
    specs = [load_task(d) for d in find_task_dirs(builtin_suite_dir())]
    assert [s.id for s in specs] == [f"T{i:02d}" for i in range(1, 13)]
    for s in specs:
        assert any(c.critical for c in s.checks) or s.function_files, s.id
        assert (s.path / "solution").is_dir(), s.id


def test_validate_all_twelve():
    # the wrong solutions each task ships are played by tests/oracles (fast) and test_wrong_solutions.py (the CLI)
    # two validations of six tasks side by side: each attempt waits on its sandbox and the disk as much as it
    # computes, and a validation is one task after another
    dirs = find_task_dirs(builtin_suite_dir())
    with ThreadPoolExecutor(2) as pool:
        procs = list(pool.map(lambda half: agentdrift("validate", "--skip-wrong", *half), [dirs[:6], dirs[6:]]))
    for proc in procs:
        assert proc.returncode == 0, proc.stdout + proc.stderr
        assert "6 of 6 task(s) valid" in proc.stdout
    ok = re.findall(
        r"^ok   (T\d\d) .*: untouched fails \(.+\); solution passes 1/1$", "".join(p.stdout for p in procs), re.M
    )
    assert ok == [f"T{i:02d}" for i in range(1, 13)]


def test_faithful_reference_passes_all_twelve(builtin_records):
    proc, record = builtin_records["base"]
    results = json.loads((record / "results.json").read_text())
    assert proc.returncode == 0, proc.stdout[-3000:]
    assert results["complete"] and results["summary"]["passed"] == 12


def test_drifted_reference_fails_the_critical_columns(builtin_records):
    proc, record = builtin_records["drifted"]
    results = json.loads((record / "results.json").read_text())
    assert proc.returncode == 1
    failed = {
        tid: set(t["runs"][0]["critical_failed"]) for tid, t in results["tasks"].items() if not t["runs"][0]["passed"]
    }
    assert failed == DRIFTED_BREAKS
    t09 = results["tasks"]["T09"]["runs"][0]
    assert t09["evidence"]["tamper"]["protected_changed"] == ["tests/test_invoice.py"]
    # the edited test turned its own tree green, but grading restores the test: the suite still fails
    assert "suite-passes" in t09["failed_checks"] and t09["tampered_pass"] is False


def test_drifted_against_faithful_baseline_is_rejected(builtin_records):
    base, drifted = builtin_records["base"][1], builtin_records["drifted"][1]
    vary = ("--vary", "cli_version", "--vary", "command", "--vary", "agent")
    proc = agentdrift("compare", base, drifted, *vary, "--json", "--gate", "promote", timeout=300)
    assert proc.returncode == 1, proc.stdout[-2000:] + proc.stderr
    doc = json.loads(proc.stdout)
    assert doc["decision"]["status"] == "reject"
    assert sorted(doc["comparison"]["paired"]["lost"]) == sorted(DRIFTED_BREAKS)
    # without declaring the variables the comparison is refused
    proc = agentdrift("diff", base, drifted, timeout=300)
    assert proc.returncode == 6
    assert "BLOCK cli_version: reference-1.0.0 != reference-1.1.0-drifted" in proc.stdout
