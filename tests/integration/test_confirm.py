"""Confirm on suspicion end to end (--agent-confirm): real sessions under xdist, a generic agent that
stops writing on one task, and the same agent unchanged."""

from __future__ import annotations

import json
import os
import shutil
import subprocess
import sys
import time
import xml.etree.ElementTree as ET
from pathlib import Path
from types import SimpleNamespace
from typing import cast

import pytest
from helpers import fixture_group, last_line, run_pytest
from test_gate import assert_cost_said_alike, lazy_on_g02, tasks

pytestmark = pytest.mark.slow


INTERRUPT_AFTER = (
    "import os\n"
    "seen = []\n"
    "def pytest_runtest_logfinish(nodeid, location):\n"
    "    seen.append(nodeid)\n"
    "    if len(seen) == int(os.environ.get('INTERRUPT_AFTER') or 0):\n"
    "        raise KeyboardInterrupt\n"
)


def xdist_group_of(item: pytest.Item) -> str | None:
    return fixture_group(item, "confirm", "baseline_project")  # one worker records the baseline once


@pytest.fixture(scope="module")
def baseline_project(tmp_path_factory) -> tuple[Path, list[str]]:
    """Two tasks, a home-made agent and a six-run baseline of it (runs/base), recorded once for the
    module; the agent's arguments. The project holds a conftest that interrupts a session after
    INTERRUPT_AFTER items, inert unless that is set: the baseline is recorded with it too (the conftest
    is part of the scoring the identity compares)."""
    root = tmp_path_factory.mktemp("confirm")
    args = lazy_on_g02(cast(pytest.Pytester, SimpleNamespace(path=root)), 2)
    (root / "conftest.py").write_text(INTERRUPT_AFTER)
    env = {k: v for k, v in os.environ.items() if k != "INTERRUPT_AFTER"} | {"AGENT_MODE": "good"}
    base = run_pytest(root, *args, "--agent-k", "6", "--agent-record", "runs/base", home=True, env=env)
    assert base.returncode == 0, base.stdout[-3000:] + base.stderr[-2000:]
    return root, args


@pytest.fixture
def gated(pytester, monkeypatch, baseline_project):
    """The module's project and baseline copied into this test's; the gated session's arguments (its
    agent the copy's script: the identity names it by its place in the project, as the baseline's)."""
    root, args = baseline_project
    shutil.copytree(root, pytester.path, dirs_exist_ok=True)
    args = [a.replace(str(root), str(pytester.path)) for a in args]
    monkeypatch.setenv("AGENT_MODE", "good")
    return [*args, "--agent-baseline", "runs/base", "--agent-gate", "regression", "--agent-k", "3"]


def test_an_unchanged_agent_runs_only_the_screen_and_passes(pytester, gated):
    result = run_pytest(pytester, *gated, "--agent-confirm", "12", "--agent-record", "runs/pr", "-n", "2", "-rs")
    assert result.ret == 0, result.stdout.str()[-3000:]
    assert last_line(result).startswith("agentdrift: exit 0 — gate regression: no regression detected")
    result.assert_outcomes(passed=6, skipped=18)
    assert "not needed: G01 decided at r3 (screened out)" in result.stdout.str()
    doc = json.loads((pytester.path / "runs/pr/results.json").read_text())
    assert doc["complete"] is True and len(doc["confirm"]["not_needed"]) == 18
    assert all(len(t["runs"]) == 3 for t in doc["tasks"].values())


def test_a_task_that_starts_failing_is_confirmed_and_named_in_every_output(pytester, gated, monkeypatch):
    monkeypatch.setenv("AGENT_MODE", "lazy")
    result = run_pytest(
        pytester, *gated, "--agent-confirm", "12", "--agent-record", "runs/pr", "--junitxml", "junit.xml", "-n", "2"
    )
    assert result.ret == 1, result.stdout.str()[-3000:]
    closing = last_line(result)
    assert closing.startswith("agentdrift: exit 1 — gate regression: new critical failure G02 notes-written")
    assert "confirming runs failed" in closing and "baseline 0/6" in closing and "decided at r" in closing
    doc = json.loads((pytester.path / "runs/pr/results.json").read_text())
    runs = {t: len(e["runs"]) for t, e in doc["tasks"].items()}
    assert runs["G01"] == 3 and 3 < runs["G02"] <= 12
    decision = json.loads((pytester.path / "runs/pr/comparison/decision.json").read_text())
    assert decision["regression_gate"]["passed"] is False
    assert "G02 notes-written" in decision["regression_gate"]["reason"]
    report = (pytester.path / "runs/pr/report.md").read_text()
    assert closing in report
    skipped = ET.parse(pytester.path / "junit.xml").getroot().iter("skipped")
    assert any("not needed: G01" in (s.get("message") or "") for s in skipped)
    # what it cost and bought, alike in the closing line, the terminal, report.md and report.html
    cost = assert_cost_said_alike(pytester.path / "runs/pr", result.stdout.str(), closing)
    assert cost["candidate"]["runs"] == sum(runs.values()) and cost["baseline"]["runs"] == 12
    assert cost["candidate"]["not_needed"] == len(doc["confirm"]["not_needed"]) == 24 - sum(runs.values())
    assert cost["candidate"]["wall_s"] > 0 and cost["power"]["design"] == "confirm"
    assert 0 < cost["power"]["power"] <= 1 and cost["power"]["cap"] == 12
    # JUnit's testcases that ran (those not skipped as not needed) are the runs the cost counts
    cases = list(ET.parse(pytester.path / "junit.xml").getroot().iter("testcase"))
    ran = [c for c in cases if not any((s.get("message") or "").startswith("not needed") for s in c.iter("skipped"))]
    assert len(ran) == cost["candidate"]["runs"]


def test_a_session_interrupted_mid_confirmation_resumes_where_it_stopped(pytester, gated, monkeypatch):
    """Stopped inside G02's batch r6 ... r9 (the screen's six items, then r4, r5 and r6 by rank), then
    resumed under xdist: the kept runs count as reported, so nothing waits for them and none runs again."""
    monkeypatch.setenv("AGENT_MODE", "lazy")
    monkeypatch.setenv("INTERRUPT_AFTER", "12")
    first = run_pytest(pytester, *gated, "--agent-confirm", "12", "--agent-record", "runs/pr", "-rs")
    assert first.ret == 2, first.stdout.str()[-3000:]
    record = pytester.path / "runs/pr"
    kept = {p.parent.relative_to(record / "raw").as_posix(): p.read_bytes() for p in record.glob("raw/*/r*/run.json")}
    assert {"G02/r4", "G02/r5", "G02/r6"} <= set(kept) and len(kept) == 9, sorted(kept)

    monkeypatch.delenv("INTERRUPT_AFTER")
    started = time.monotonic()
    resumed = run_pytest(pytester, *gated, "--agent-confirm", "12", "--agent-resume", "runs/pr", "-n", "2", "-rs")
    took = time.monotonic() - started
    assert resumed.ret == 1, resumed.stdout.str()[-3000:]
    assert took < 120, took  # a wait for a kept run would last 2 x the timeout + 300 s
    closing = last_line(resumed)
    assert closing.startswith("agentdrift: exit 1 — gate regression: new critical failure G02 notes-written")
    doc = json.loads((record / "results.json").read_text())
    assert doc["complete"] is True and not (record / "INCOMPLETE").exists()
    runs = {t: [r["rep"] for r in e["runs"]] for t, e in doc["tasks"].items()}
    assert runs["G01"] == [1, 2, 3] and runs["G02"] == list(range(1, len(runs["G02"]) + 1))
    assert 6 < len(runs["G02"]) <= 12
    # the kept runs were not run again; the resumed session ran only the rest
    assert all((record / "raw" / key / "run.json").read_bytes() == raw for key, raw in kept.items())
    outcomes = resumed.parseoutcomes()
    ran = outcomes.get("passed", 0) + outcomes.get("failed", 0)
    assert ran == sum(map(len, runs.values())) - len(kept)
    assert doc["confirm"]["tasks"] == 2 and len(doc["confirm"]["not_needed"]) == 24 - sum(map(len, runs.values()))
    decision = json.loads((record / "comparison/decision.json").read_text())
    assert decision["regression_gate"]["passed"] is False
    assert "G02 notes-written" in decision["regression_gate"]["reason"]


def test_two_confirming_shards_merge_into_the_verdict_of_one_session(pytester, gated, monkeypatch):
    """Whole tasks to a shard (a task's confirming runs wait for its screen, on that machine); each shard
    decides at the level of every task screened; the merged record's verdict blocks naming the task."""
    monkeypatch.setenv("AGENT_MODE", "lazy")
    ungated = [a for a in gated if a not in ("--agent-gate", "regression")]
    started = time.monotonic()
    for i, extra in ((1, ["-n", "2"]), (2, [])):  # the plan's task count from a worker and from the process
        shard = run_pytest(
            pytester,
            *ungated,
            "--agent-confirm",
            "12",
            "--agent-shard",
            f"{i}/2",
            "--agent-record",
            f"runs/s{i}",
            *extra,
        )
        assert shard.ret in (0, 1), shard.stdout.str()[-3000:]
    assert time.monotonic() - started < 150  # no repetition waited for runs on the other shard
    docs = [json.loads((pytester.path / f"runs/s{i}/results.json").read_text()) for i in (1, 2)]
    assert all(d["complete"] and d["confirm"]["tasks"] == 2 for d in docs)
    owners = [set(d["tasks"]) for d in docs]
    assert not owners[0] & owners[1] and owners[0] | owners[1] == {"G01", "G02"}  # whole tasks

    def cli(*args: str) -> subprocess.CompletedProcess:
        return subprocess.run(
            [sys.executable, "-m", "pytest_agentdrift", *args], cwd=pytester.path, capture_output=True, text=True
        )

    merged = cli("merge", "runs/m", "runs/s1", "runs/s2")
    assert merged.returncode == 0, merged.stdout + merged.stderr
    doc = json.loads((pytester.path / "runs/m/results.json").read_text())
    ran = {f"{t}::r{r['rep']}" for t, e in doc["tasks"].items() for r in e["runs"]}
    skipped = {n.rsplit("/", 1)[-1] for n in doc["confirm"]["not_needed"]}
    assert not ran & skipped and len(ran) + len(skipped) == 24
    assert doc["confirm"]["not_needed"] == sorted(docs[0]["confirm"]["not_needed"] + docs[1]["confirm"]["not_needed"])
    runs = {t: len(e["runs"]) for t, e in doc["tasks"].items()}
    assert runs["G01"] == 3 and 3 < runs["G02"] <= 12
    verdict = cli("compare", "runs/base", "runs/m", "--gate", "regression")
    assert verdict.returncode == 1, verdict.stdout + verdict.stderr
    closing = verdict.stdout.strip().splitlines()[-1]
    assert closing.startswith("agentdrift: exit 1 — gate regression: new critical failure G02 notes-written")


def test_the_cap_must_exceed_the_screen_and_needs_a_baseline(pytester):
    tasks(pytester.path, 1)
    result = run_pytest(
        pytester, "--agent", "reference", "--agent-k", "3", "--agent-confirm", "3", "--agent-baseline", "."
    )
    assert result.ret == 4 and "must exceed --agent-k 3" in result.stdout.str() + result.stderr.str()
    result = run_pytest(pytester, "--agent", "reference", "--agent-confirm", "5")
    assert result.ret == 4 and "give --agent-baseline" in result.stdout.str() + result.stderr.str()
