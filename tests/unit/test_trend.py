"""`agentdrift trend`: a seeded nightly series of ten records with one CLI upgrade and one
instruction change marks both, and flags the one task whose pass rate really moved."""

from __future__ import annotations

import json
import random
import subprocess
import sys
from pathlib import Path

import pytest
from helpers import night_results, run_entry

from pytest_agentdrift.compare import trend
from pytest_agentdrift.manifest.capture import runtime_id
from pytest_agentdrift.record.store import schema_problems
from pytest_agentdrift.tasks.taskspec import LAYERS
from pytest_agentdrift.vocabulary import IDENTITY_FIELDS

K = 12
#: per task: the pass probability before and from the move (only T03 moves, at the seventh record)
RATES = {"T01": (0.9, 0.9), "T02": (0.6, 0.6), "T03": (0.95, 0.1), "T04": (0.5, 0.5)}
MOVE_AT = 7


def _identity(night: int) -> dict:
    ident = {f: "same" for f in IDENTITY_FIELDS}
    ident.update(
        surface="cli", product="reference", task_set_id="sha256:" + "1" * 64, evaluator_id="sha256:" + "2" * 64
    )
    ident["cli_version"] = "1.0.0" if night < 4 else "1.1.0"  # upgraded before the fourth night
    ident["instruction_hash"] = "sha256:aaaa" if night < 9 else "sha256:bbbb"  # CLAUDE.md edited before the ninth
    return ident


def _run(rep: int, passed: bool) -> dict:
    return run_entry(
        rep,
        "passed" if passed else "failed",
        failed_checks=[] if passed else ["tests"],
        layers={layer: ("n/a" if layer != "correctness" else "pass" if passed else "fail") for layer in LAYERS},
        evidence={"duration_s": 1.0, "tamper": {}},
        usage={},
        raw=f"raw/x/r{rep}",
    )


def write_series(root: Path, seed: int = 7) -> list[Path]:
    rng = random.Random(seed)
    paths = []
    for night in range(1, 11):
        tasks = {}
        for tid, (before, after) in RATES.items():
            p = before if night < MOVE_AT else after
            runs = [_run(rep, rng.random() < p) for rep in range(1, K + 1)]
            tasks[tid] = {
                "title": tid,
                "suite": "s",
                "behavior": "b",
                "task_digest": "sha256:" + tid[-1] * 64,
                "runs": runs,
            }
        results = night_results(
            night,
            tasks,
            K,
            runtime_id=None,
            task_set_id="sha256:" + "1" * 64,
            evaluator_id="sha256:" + "2" * 64,
        )
        assert schema_problems(results) == []
        ident = _identity(night)
        d = root / f"night-{night:02d}"
        d.mkdir(parents=True)
        (d / "results.json").write_text(json.dumps(results))
        manifest = {"schema_version": 1, "identity": ident, "runtime_id": runtime_id(ident)}
        (d / "runtime-manifest.json").write_text(json.dumps(manifest))
        paths.append(d)
    return paths


def _apart_record(root: Path, src: Path) -> Path:
    """A record graded by other checks: shown apart, never pooled."""
    d = root / "other-grading"
    d.mkdir()
    results = json.loads((src / "results.json").read_text())
    results.update(
        evaluator_id="sha256:" + "3" * 64, run_id="20261111T020000Z-other", started_at="2026-11-11T02:00:00Z"
    )
    (d / "results.json").write_text(json.dumps(results))
    (d / "runtime-manifest.json").write_text((src / "runtime-manifest.json").read_text())
    return d


@pytest.fixture
def doc(tmp_path):
    paths = write_series(tmp_path)
    other = _apart_record(tmp_path, paths[-1])
    return trend.analyse([trend.load_record(p) for p in [other, *reversed(paths)]])


def test_both_changes_are_marked_where_they_happened(doc):
    changes = {rec["index"]: [c["field"] for c in rec["changes"]] for rec in doc["records"] if rec["changes"]}
    assert changes == {4: ["cli_version"], 9: ["instruction_hash"]}
    assert [r["started_at"][:10] for r in doc["records"]] == [f"2026-11-{n:02d}" for n in range(1, 11)]


def test_only_the_task_that_moved_is_flagged(doc):
    moved = {(row["task"], row["layer"]) for row in doc["rows"] if row["moves"]}
    assert moved == {("T03", "overall"), ("T03", "correctness")}
    move = next(row for row in doc["rows"] if row["task"] == "T03" and row["layer"] == "overall")["moves"]
    assert [(m["at"], m["direction"]) for m in move] == [(MOVE_AT - 1, "down")]


def test_a_record_of_other_grading_stands_apart(doc):
    assert len(doc["records"]) == 10
    assert [a["path"].endswith("other-grading") for a in doc["apart"]] == [True]
    assert "evaluator_id" in doc["apart"][0]["why"] and "agentdrift regrade" in doc["apart"][0]["why"]


def test_rates_carry_wilson_intervals(doc):
    row = next(r for r in doc["rows"] if r["task"] == "T01" and r["layer"] == "overall")
    for p in row["points"]:
        assert p["n"] == K and p["ci"][0] <= p["rate"] <= p["ci"][1]


def test_fisher_exact_matches_scipy():
    import scipy.stats as scipy_stats

    for a, n1, c, n2 in [(12, 12, 1, 12), (9, 12, 7, 12), (0, 5, 5, 5), (3, 10, 3, 10)]:
        expected = scipy_stats.fisher_exact([[a, n1 - a], [c, n2 - c]]).pvalue
        assert trend.fisher_exact(a, n1, c, n2) == pytest.approx(expected, rel=1e-9)


def test_cli_terminal_markdown_and_html(tmp_path):
    paths = write_series(tmp_path / "s")
    html, md = tmp_path / "trend.html", tmp_path / "trend.md"
    proc = subprocess.run(
        [
            sys.executable,
            "-m",
            "pytest_agentdrift",
            "trend",
            *map(str, paths),
            "--html",
            str(html),
            "--markdown",
            str(md),
        ],
        capture_output=True,
        text=True,
        timeout=120,
        check=False,
    )
    assert proc.returncode == 0, proc.stderr
    assert "#4: cli_version 1.0.0 -> 1.1.0" in proc.stdout
    assert "#9: instruction_hash sha256:aaaa -> sha256:bbbb" in proc.stdout
    assert "T03 overall: #6 -> #7 down" in proc.stdout
    text = md.read_text()
    assert "| T03 | overall |" in text and "\u25bc" in text
    page = html.read_text()
    assert "Content-Security-Policy" in page and "<script" not in page
    assert page.count('class="plot"') == sum(1 for _ in trend.analyse([trend.load_record(p) for p in paths])["rows"])
