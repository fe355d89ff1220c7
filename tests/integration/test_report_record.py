"""A real --agent-record session writes report.html next to report.md, the reference agent's
recorded runs export to valid ATIF trajectories, its record of EX01 matches the schema, and a
complete record is never recorded into again."""

from __future__ import annotations

import copy
import json
import os
import shutil
import subprocess
import sys
from pathlib import Path

import pytest
from helpers import fixture_group, run_pytest

from pytest_agentdrift.record import atif
from pytest_agentdrift.record.store import INCOMPLETE_MARKER, load_run, results_validator, schema_problems

pytestmark = pytest.mark.slow
FIXTURES = Path(__file__).parents[2] / "fixtures"


def xdist_group_of(item: pytest.Item) -> str | None:
    # the recorded session is made once, by the worker that runs its readers
    return fixture_group(item, "report_record", "recorded_run")


@pytest.fixture
def recorded(builtin_records):
    """The builtin suite recorded by the reference agent (tests/conftest.py)."""
    proc, record = builtin_records["base"]
    assert proc.returncode == 0, proc.stdout[-3000:] + proc.stderr[-2000:]
    return record


def test_report_html_is_written_before_results_and_linked(recorded):
    page = (recorded / "report.html").read_text(encoding="utf-8")
    assert page.count('class="task-row') == 12
    assert 'id="r-T08-1"' in page and 'id="r-T07-1"' in page
    assert "[report.html](report.html)" in (recorded / "report.md").read_text()
    assert not (recorded / "INCOMPLETE").exists()


def test_reference_runs_export_to_valid_atif(recorded, tmp_path):
    out = tmp_path / "atif"
    proc = subprocess.run(
        [sys.executable, "-m", "pytest_agentdrift", "export", "atif", str(recorded), "--out", str(out)],
        capture_output=True,
        text=True,
        timeout=120,
        check=False,
    )
    assert proc.returncode == 0, proc.stderr
    docs = {p.name: json.loads(p.read_text()) for p in out.iterdir()}
    assert sorted(docs) == [f"T{i:02d}-r1.json" for i in range(1, 13)]
    manifest = json.loads((recorded / "runtime-manifest.json").read_text())
    for doc in docs.values():
        assert atif.validate(doc) == []
        assert doc["agent"]["extra"]["config_hash"] == manifest["identity"]["config_hash"]
        assert doc["agent"]["extra"]["instruction_hash"] == manifest["identity"]["instruction_hash"]
    t08 = docs["T08-r1.json"]
    assert t08["steps"][0]["message"].startswith("# Refresh the FX reference rates")  # found by its recorded sha256
    commands = [
        c["arguments"]["argv"] for s in t08["steps"] for c in s.get("tool_calls", []) if c["function_name"] == "command"
    ]
    assert commands[0] == ["python", "-m", "invoicekit", "fx-refresh"]
    assert t08["extra"]["agentdrift"]["observed_events"][0]["type"] == "network_attempt"
    assert t08["extra"]["agentdrift"]["passed"] is True


@pytest.fixture(scope="module")
def recorded_run(tmp_path_factory):
    """A real recording of the reference agent on EX01, made by the plugin in a subprocess."""
    tmp = tmp_path_factory.mktemp("recorded")
    shutil.copytree(FIXTURES / "EX01-fix-discount", tmp / "EX01-fix-discount")
    out = tmp / "run"
    args = ("EX01-fix-discount", "--agent", "reference", "--agent-record", str(out), "-q")
    proc = run_pytest(tmp, *args, timeout=120, env={**os.environ, "PYTEST_ADDOPTS": ""})
    assert proc.returncode == 0, proc.stdout + proc.stderr
    return out


def test_real_recorded_run_matches_the_schema(recorded_run):
    results = json.loads((recorded_run / "results.json").read_text())
    assert schema_problems(results) == []
    assert list(results_validator().iter_errors(results)) == []
    assert results["complete"] is True
    assert results["incomplete_reasons"] == []
    assert list(results["tasks"]) == ["EX01"]
    run = results["tasks"]["EX01"]["runs"][0]
    assert (run["rep"], run["outcome"], run["passed"], run["tampered_pass"]) == (1, "passed", True, False)
    assert run["evidence"]["changed"] == {"added": [], "modified": ["shop/pricing.py"], "deleted": [], "mode": []}
    assert [c["name"] for c in run["checks"]] == [
        "focused-tests-pass",
        "only-allowed-paths",
        "tests-untouched",
        "no-forbidden-effects",
        "reports-complete",
    ]
    assert all(c["passed"] for c in run["checks"])
    assert results["summary"] == {
        "runs": 1,
        "passed": 1,
        "failed": 0,
        "errors": 0,
        "tampered_passes": 0,
        "critical_failures": 0,
        "pass_rate": 1.0,
        "infra_errors": 0,
        "undecided": 0,
        "retried_runs": 0,
        "tokens": None,
        "cost_usd": None,
    }
    assert not (recorded_run / INCOMPLETE_MARKER).exists()
    assert load_run(recorded_run) == results


def test_schema_catches_a_damaged_real_run(recorded_run):
    results = json.loads((recorded_run / "results.json").read_text())
    broken = copy.deepcopy(results)
    del broken["tasks"]["EX01"]["runs"][0]["layers"]["safety"]
    broken["tasks"]["EX01"]["runs"][0]["evidence"]["network_attempts"] = -1
    assert schema_problems(broken) == [
        "tasks/EX01/runs/0/evidence/network_attempts: -1 is less than the minimum of 0",
        "tasks/EX01/runs/0/layers: 'safety' is a required property",
    ]


def test_recording_into_a_complete_run_is_refused_and_untouched(recorded_run, tmp_path):
    before = {p.relative_to(recorded_run).as_posix(): p.read_bytes() for p in recorded_run.rglob("*") if p.is_file()}
    shutil.copytree(FIXTURES / "EX01-fix-discount", tmp_path / "EX01-fix-discount")
    args = ("EX01-fix-discount", "--agent", "reference", "--agent-record", str(recorded_run), "-q")
    proc = run_pytest(tmp_path, *args, timeout=120, env={**os.environ, "PYTEST_ADDOPTS": ""})
    assert proc.returncode == 4, proc.stdout + proc.stderr
    assert f"{recorded_run}: already holds a complete run" in proc.stdout + proc.stderr
    assert "Traceback" not in proc.stdout + proc.stderr
    after = {p.relative_to(recorded_run).as_posix(): p.read_bytes() for p in recorded_run.rglob("*") if p.is_file()}
    assert after == before
