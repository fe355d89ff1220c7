"""A real --agent-record session writes report.html next to report.md, and the
reference agent's recorded runs export to valid ATIF trajectories."""

from __future__ import annotations

import json
import subprocess
import sys

import pytest

from pytest_agentdrift.record import atif

pytestmark = pytest.mark.slow


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
