"""The agentdrift CLI: validate, freeze, show, diff, compare, merge."""

import json
import shutil
from concurrent.futures import ThreadPoolExecutor
from pathlib import Path

import pytest
from helpers import agentdrift as cli
from helpers import run_pytest

from pytest_agentdrift.testing import load_results, make_task

pytestmark = pytest.mark.slow  # every test here starts pytest sessions with agents

FIXTURES = Path(__file__).parents[2] / "fixtures"


def session(cwd, *args):
    return run_pytest(cwd, "-q", *args)


@pytest.fixture
def two_tasks(tmp_path):
    for name in ("EX01-fix-discount", "EX02-explain-readonly"):
        shutil.copytree(FIXTURES / name, tmp_path / name)
    return tmp_path


def test_validate_reports_a_task_that_decides_nothing(tmp_path):
    # the "solution" changes nothing, and nothing is checked but an unchanged tree: passes untouched
    make_task(tmp_path, "V01", solution={}, solution_report={"status": "complete"})
    proc = cli("validate", tmp_path, cwd=tmp_path)
    assert proc.returncode == 1
    assert "passes on the untouched repo with an agent that does nothing: the checks decide nothing" in proc.stdout


def test_validate_a_broken_task_is_one_error(tmp_path):
    d = make_task(tmp_path, "V02")
    (d / "task.toml").write_text("id = 'V02'\ntitle = [\n")
    proc = cli("validate", d, cwd=tmp_path)
    assert proc.returncode == 4
    assert proc.stderr.startswith("agentdrift: error: ") and "task.toml: invalid TOML" in proc.stderr
    assert "Traceback" not in proc.stderr


def test_freeze_then_a_change_is_refused(tmp_path):
    d = make_task(
        tmp_path,
        "V03",
        repo={"a.txt": "a\n"},
        checks=[{"name": "a-changed", "kind": "paths", "layer": "scope", "must_change": ["a.txt"]}],
        allowed=["a.txt"],
        solution={"a.txt": "c\n"},
    )
    (d / "repo" / "a.txt").write_text("b\n")
    refused = cli("validate", d, cwd=tmp_path)
    assert refused.returncode == 4 and "does not match initial-tree.sha256" in refused.stderr
    assert cli("freeze", d, cwd=tmp_path).returncode == 0
    assert (d / "initial-tree.sha256").read_text().endswith("  a.txt\n")
    valid = cli("validate", d, cwd=tmp_path)
    assert valid.returncode == 0, valid.stdout + valid.stderr
    assert "1 of 1 task(s) valid" in valid.stdout


def test_show_diff_compare_and_merge(two_tasks):
    t = two_tasks
    both = ("EX01-fix-discount", "EX02-explain-readonly", "--agent", "reference")
    assert session(t, *both, "--agent-record", "runs/base").returncode == 0
    # the three other records side by side (each its own directory; the untouched fixtures' grading
    # the first session cached is read by all three): most of a session's time here waits on the disk
    drifted = ("EX02-explain-readonly", "--agent", "reference-drifted", "--agent-record", "runs/drift")
    others = [(*both, "-k", "EX01", "--agent-record", "runs/s1"), (*both, "-k", "EX02", "--agent-record", "runs/s2")]
    with ThreadPoolExecutor(3) as pool:
        procs = list(pool.map(lambda args: session(t, *args), [*others, drifted]))
    assert [p.returncode for p in procs] == [0, 0, 0], [p.stdout[-2000:] for p in procs]

    show = cli("show", "runs/base", cwd=t)
    assert show.returncode == 0 and "2 of 2 run(s) passed (100%)" in show.stdout

    merged = cli("merge", "runs/m", "runs/s1", "runs/s2", cwd=t)
    assert merged.returncode == 0, merged.stderr
    m = load_results(t / "runs" / "m")
    assert sorted(m["tasks"]) == ["EX01", "EX02"] and m["complete"] and len(m["merged_from"]) == 2
    assert (t / "runs" / "m" / "raw" / "EX02" / "r1" / "report.json").is_file()

    same = cli("compare", "runs/base", "runs/m", "--json", cwd=t)
    assert same.returncode == 0, same.stdout + same.stderr
    assert json.loads(same.stdout)["comparison"]["comparable"] is True

    assert cli("merge", "runs/m2", "runs/s1", "runs/base", cwd=t).returncode == 4  # overlapping tasks
    assert not (t / "runs" / "m2").exists()
    refused = cli("merge", "runs/m3", "runs/s1", "runs/drift", cwd=t)
    assert refused.returncode == 6 and "BLOCK cli_version" in refused.stderr

    diff = cli("diff", "runs/base", "runs/drift", cwd=t)
    assert diff.returncode == 6
    assert "BLOCK cli_version: reference-1.0.0 != reference-1.1.0-drifted" in diff.stdout
    as_json = json.loads(cli("diff", "runs/base", "runs/drift", "--json", cwd=t).stdout)
    assert as_json["changed"]["cli_version"] == {"baseline": "reference-1.0.0", "current": "reference-1.1.0-drifted"}
    assert as_json["comparable"] is False

    missing = cli("compare", "runs/base", "runs/nope", cwd=t)
    assert missing.returncode == 4 and "runs/nope: no such run directory" in missing.stderr
