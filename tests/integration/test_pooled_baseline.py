"""A baseline made of the history, end to end: nightly records of the reference agent in one directory
are the baseline of a gated session; a record of another identity is left out, named, with the field
that differs; a directory none of whose records can be pooled refuses the session (exit 6)."""

from __future__ import annotations

import json
import shutil
from pathlib import Path

import pytest
from helpers import agentdrift, fixture_group, last_line, run_pytest
from test_gate import tasks

from pytest_agentdrift.compare.planning import render_plan

pytestmark = pytest.mark.slow


def xdist_group_of(item: pytest.Item) -> str | None:
    return fixture_group(item, "pooled", "nightly_project")  # one worker records the nights once


@pytest.fixture(scope="module")
def nightly_project(tmp_path_factory) -> Path:
    """Two tasks and runs/nightly: the oldest record ran one task only (another task set), then three
    nights of both; recorded once for the module (each test copies it: some edit the tasks or add nights)."""
    root = tmp_path_factory.mktemp("nightly")
    tasks(root, 2)
    # the scoring digest is the package's own code, which other work may edit between this test's
    # sessions: pinned here, so that the fields this test is about decide which records pool
    (root / "conftest.py").write_text(
        "def pytest_agentdrift_update_manifest(config, manifest):\n"
        "    manifest['identity']['scoring_script_digest'] = 'sha256:pinned-by-the-test'\n"
    )
    for n, only in ((0, ["G01-task"]), (1, []), (2, []), (3, [])):
        record = ("--agent-record", f"runs/nightly/n{n}")
        night = run_pytest(root, *only, "--agent", "reference", "--agent-k", "2", *record, home=True)
        assert night.returncode == 0, night.stdout[-3000:] + night.stderr[-2000:]
    return root


@pytest.fixture
def nightly(pytester, nightly_project):
    """The module's nights and their tasks, copied into this test's project (runs/nightly)."""
    shutil.copytree(nightly_project, pytester.path, dirs_exist_ok=True)
    return pytester.path / "runs" / "nightly"


def gated_session(pytester: pytest.Pytester, baseline: str, record: str) -> pytest.RunResult:
    """The reference agent's session gated (regression) against `baseline`, recorded into `record`."""
    return run_pytest(
        pytester,
        "--agent", "reference",
        "--agent-baseline", baseline,
        "--agent-gate", "regression",
        "--agent-record", record,
    )  # fmt: skip


def test_a_gated_session_compares_against_the_pool_and_says_what_it_pooled(pytester, nightly):
    pr = gated_session(pytester, "runs/nightly", "runs/pr")
    out = pr.stdout.str()
    assert pr.ret == 0, out
    closing = last_line(pr)
    assert closing.startswith("agentdrift: exit 0 — gate regression: ")
    assert closing.endswith("baseline: pool of 3 record(s), 6 runs per task, 1 record(s) left out")
    # the record of another task set is left out, named, with the first identity field that differs
    assert "left out runs/nightly/n0: identity differs from the newest record's" in out
    assert "runs of G01 from 3 record(s)" in out
    rec = pytester.path / "runs" / "pr"
    decision = json.loads((rec / "comparison" / "decision.json").read_text())
    pool = decision["baseline_pool"]
    assert pool["k"] == {"G01": 6, "G02": 6} and pool["records_per_task"] == {"G01": 3, "G02": 3}
    assert [Path(r["path"]).name for r in pool["records"]] == ["n3", "n2", "n1"]
    (left,) = pool["left_out"]
    assert Path(left["path"]).name == "n0" and left["field"] in left["reason"]
    assert decision["exit_status"]["line"] == closing
    report = (rec / "report.md").read_text()
    assert "6 runs of G02 from 3 record(s)" in report and closing in report
    html = (rec / "report.html").read_text()
    assert "baseline pool" in html and "record left out" in html and "n0" in html
    # agentdrift compare reads the same pool, the window keeping the newest record only
    cli = agentdrift("compare", nightly, rec, "--gate", "regression", "--baseline-window", "1", cwd=pytester.path)
    assert cli.returncode == 0, cli.stdout + cli.stderr
    assert (
        cli.stdout.strip()
        .splitlines()[-1]
        .endswith("baseline: pool of 1 record(s), 2 runs per task, 3 record(s) left out")
    )
    assert "outside the window: only the 1 newest record(s) are pooled" in cli.stdout


def test_no_record_that_can_be_pooled_refuses_with_exit_6(pytester, nightly):
    bad = pytester.path / "runs" / "bad"
    for n in (1, 2):
        shutil.copytree(nightly / f"n{n}", bad / f"n{n}")
    # one edited after it was written, one interrupted before its results.json
    results = json.loads((bad / "n1" / "results.json").read_text())
    results.update(complete=False, incomplete_reasons=["interrupted by KeyboardInterrupt"])
    (bad / "n1" / "results.json").write_text(json.dumps(results))
    (bad / "n2" / "results.json").unlink()
    (bad / "n2" / "INCOMPLETE").write_text("recording\n")
    pr = gated_session(pytester, "runs/bad", "runs/refused")
    out = pr.stdout.str()
    assert pr.ret == 6, out
    assert last_line(pr).startswith("agentdrift: exit 6 — refused: runs/bad: no record of the pool can be used")
    assert "left out runs/bad/n1: " in out
    assert "left out runs/bad/n2: the run was interrupted before it finished" in out
    refusal = json.loads((pytester.path / "runs" / "refused" / "refusal.json").read_text())
    assert refusal["exit_status"]["code"] == 6
    cli = agentdrift("compare", bad, nightly / "n1", cwd=pytester.path)
    assert cli.returncode == 6 and "no record of the pool can be used" in cli.stdout


def test_an_empty_directory_as_the_baseline_is_a_usage_error_naming_it(pytester):
    tasks(pytester.path, 2)
    (pytester.path / "runs" / "empty").mkdir(parents=True)
    pr = run_pytest(pytester, "--agent", "reference", "--agent-baseline", "runs/empty", "--agent-gate", "regression")
    assert pr.ret == 4
    assert "runs/empty: neither a recorded run nor a directory of records" in pr.stdout.str() + pr.stderr.str()


EXTRA_CHECK = '\n[[checks]]\nname = "no-changelog"\nkind = "files"\nlayer = "scope"\nabsent = ["CHANGELOG.md"]\n'


def test_records_regraded_by_a_fixed_check_pool_with_fresh_ones_of_that_evaluator(pytester, nightly):
    toml = pytester.path / "G02-task" / "task.toml"
    toml.write_text(toml.read_text() + EXTRA_CHECK)  # a check is fixed: the evaluator changes
    for n in (1, 2):
        proc = agentdrift(
            "regrade", nightly / f"n{n}", "--out", nightly / f"n{n}-regraded", "--tasks", pytester.path,
            cwd=pytester.path,
        )  # fmt: skip
        assert proc.returncode == 0, proc.stdout + proc.stderr
    fresh = run_pytest(pytester, "--agent", "reference", "--agent-k", "2", "--agent-record", "runs/nightly/n4")
    assert fresh.ret == 0, fresh.stdout.str()
    pr = run_pytest(pytester, "--agent", "reference", "--agent-baseline", "runs/nightly", "--agent-gate", "regression")
    out = pr.stdout.str()
    assert pr.ret == 0, out
    decision_line = last_line(pr)
    # tonight's record and the two re-graded ones pool; the records graded by the old checks do not
    assert decision_line.endswith("baseline: pool of 3 record(s), 6 runs per task, 4 record(s) left out"), out
    lines = out.splitlines()
    for old in ("n1", "n2", "n3"):
        # the task file holding the checks changed: the first identity field to differ is the source's
        (line,) = [ln for ln in lines if f"left out runs/nightly/{old}: " in ln]
        assert "identity differs from the newest record's" in line and line.endswith(": source_id")
    assert not [ln for ln in lines if "left out" in ln and "regraded" in ln]


def test_plan_prices_a_confirming_design_from_the_pool_a_gate_would_use(pytester, nightly):
    """`agentdrift plan DIR` pools the directory as --agent-baseline does (the record of another task set
    left out, said so) and recommends a pool, PR k and cap, priced per pull request beside the cheapest
    fixed design; the reference agent reports no cost, so the price is in runs only."""
    out = agentdrift("plan", nightly, "--json", cwd=pytester.path)
    assert out.returncode == 0, out.stdout + out.stderr
    doc = json.loads(out.stdout)
    assert doc["source"]["k"] == 6 and doc["source"]["pool"].startswith("baseline: pool of 3 record(s), 6 runs")
    confirm = doc["confirm"]
    rec, fixed = confirm["recommended"], confirm["fixed"]
    assert confirm["pool_now"] == 6 and confirm["tasks"] == 2 and rec["pool"] >= 6
    assert rec["unchanged"]["cost_usd"] is None and rec["unchanged"]["runs"] >= 2 * rec["k"]
    # its text, as `agentdrift plan DIR` prints it (the CLI's text path is test_bundles_session's)
    text = "\n".join(render_plan(doc))
    assert "left out " in text and "n0" in text
    assert f"--agent-k {rec['k']} --agent-confirm {rec['cap']}: power {rec['power']:.2f}" in text
    assert "expected agent runs per pull request:" in text and "priced in runs only" in text
    if fixed["k"] is not None:
        assert f"the cheapest fixed design of that power on this pool: --agent-k {fixed['k']}" in text
