"""agentdrift summary: compact Markdown under a byte budget, for hundreds of tasks."""

from __future__ import annotations

import copy
import importlib.util
import json
from pathlib import Path

import pytest

from pytest_agentdrift.compare.comparison import compare_runs
from pytest_agentdrift.compare.gates import GateParams
from pytest_agentdrift.compare.status import decision_document
from pytest_agentdrift.record.summary import run_summary

BENCH = Path(__file__).resolve().parents[2] / "benchmarks" / "bench_html_report.py"


def synthetic(n_tasks: int, k: int) -> dict:
    spec = importlib.util.spec_from_file_location("bench_html_report", BENCH)
    mod = importlib.util.module_from_spec(spec)
    spec.loader.exec_module(mod)
    return mod.synthetic_results(n_tasks, k)


def all_passed(record: dict) -> dict:
    """A copy of a record in which every run passed (a baseline the candidate is compared with)."""
    base = copy.deepcopy(record)
    for t in base["tasks"].values():
        for r in t["runs"]:
            r.update(passed=True, outcome="passed", critical_failed=[], failed_checks=[], tampered_pass=False)
    return base


@pytest.mark.slow  # compares two 1,500-run records: the full suite checks the stated scale, the inner loop does not
def test_hundreds_of_tasks_stay_under_the_budget_and_say_what_was_left_out(tmp_path):
    cand = synthetic(500, 3)
    base = all_passed(cand)
    run = tmp_path / "run"
    (run / "comparison").mkdir(parents=True)
    (run / "results.json").write_text(json.dumps(cand))
    c = compare_runs(base, cand, comparable=True, reasons=[], change_class="identical", gate=GateParams(draws=200))
    doc = decision_document(c)
    doc["exit_status"] = {
        "code": 1,
        "reason": "gate regression: ...",
        "line": "agentdrift: exit 1 — gate regression: ...",
    }
    (run / "comparison" / "comparison.json").write_text(json.dumps(c))
    (run / "comparison" / "decision.json").write_text(json.dumps(doc))
    for budget in (60_000, 1_500):
        text = run_summary(run, max_bytes=budget)
        assert len(text.encode()) <= budget
        assert text.startswith("## agentdrift\n\n**agentdrift: exit 1 — gate regression: ...**")
        assert "Regression gate: **FAIL**" in text
        assert budget > 2_000 or "more task row(s) left out to stay under" in text
        assert text.rstrip().endswith("in the uploaded record.")
