"""`agentdrift regrade`: a recorded run graded again by changed checks gives what a fresh run gives,
compares with a fresh candidate, keeps a hostile run's verdict, and refuses a tampered record or a
task whose agent would be given something else."""

from __future__ import annotations

import json
import shutil
from pathlib import Path

import pytest
from helpers import agentdrift, run_pytest

from pytest_agentdrift.testing import agent_cmd, agent_script, load_results, make_task

pytestmark = [pytest.mark.slow, pytest.mark.xdist_group("regrade-record")]  # one worker records it once

SUITE = Path(__file__).parents[2] / "pytest_agentdrift" / "suite"
EXTRA_CHECK = '\n[[checks]]\nname = "no-changelog"\nkind = "files"\nlayer = "scope"\nabsent = ["CHANGELOG.md"]\n'


def _verdicts(results: dict) -> dict:
    return {
        (tid, r["rep"]): (r["outcome"], sorted(r["failed_checks"]), {c["name"]: c["passed"] for c in r["checks"]})
        for tid, t in results["tasks"].items()
        for r in t["runs"]
    }


@pytest.fixture(scope="module")
def recorded(tmp_path_factory):
    root = tmp_path_factory.mktemp("regrade")
    for task in ("T01-explain-call-path", "T02-fix-localized-bug"):
        shutil.copytree(SUITE / task, root / "tasks" / task)
    proc = run_pytest(root, "-q", "--agent", "reference", "--agent-record", "runs/base", "tasks", timeout=900)
    assert proc.returncode == 0, proc.stdout[-3000:] + proc.stderr[-2000:]
    return root


def test_a_changed_check_regrades_as_a_fresh_run_and_compares(recorded, tmp_path):
    root = tmp_path / "w"
    shutil.copytree(recorded, root)
    toml = root / "tasks" / "T02-fix-localized-bug" / "task.toml"
    toml.write_text(toml.read_text() + EXTRA_CHECK)  # the fixed judge: the same contest
    proc = agentdrift(
        "regrade", str(root / "runs/base"), "--out", str(root / "runs/regraded"), "--tasks", str(root / "tasks")
    )
    assert proc.returncode == 0, proc.stderr
    assert "1 outcome(s) changed" in proc.stdout
    fresh = run_pytest(root, "-q", "--agent", "reference", "--agent-record", "runs/fresh", "tasks", timeout=900)
    assert fresh.returncode == 1, fresh.stdout[-2000:]
    base, regraded, now = (load_results(root / "runs" / n) for n in ("base", "regraded", "fresh"))
    assert _verdicts(regraded) == _verdicts(now)
    assert _verdicts(regraded) != _verdicts(base)
    assert regraded["evaluator_id"] == now["evaluator_id"] != base["evaluator_id"]
    assert regraded["task_set_id"] == base["task_set_id"] == now["task_set_id"]
    assert regraded["regraded_from"]["run_id"] == base["run_id"]
    assert regraded["regraded_from"]["evaluator_id"] == base["evaluator_id"]
    # the run-time evidence is the record's, not made up again
    assert regraded["tasks"]["T02"]["runs"][0]["evidence"] == base["tasks"]["T02"]["runs"][0]["evidence"]
    # the task graded exactly as now is not graded again: its recorded checks stand
    assert regraded["regraded_from"]["kept_tasks"] == ["T01"]
    assert regraded["tasks"]["T01"]["runs"] == base["tasks"]["T01"]["runs"]
    assert (
        regraded["tasks"]["T01"]["grading_id"]
        == base["tasks"]["T01"]["grading_id"]
        == now["tasks"]["T01"]["grading_id"]
    )
    assert (
        regraded["tasks"]["T02"]["grading_id"]
        == now["tasks"]["T02"]["grading_id"]
        != base["tasks"]["T02"]["grading_id"]
    )
    cmp = agentdrift("compare", str(root / "runs/regraded"), str(root / "runs/fresh"))
    assert cmp.returncode in (0, 1), cmp.stdout + cmp.stderr
    assert "not comparable" not in cmp.stdout.lower()
    old = agentdrift("compare", str(root / "runs/base"), str(root / "runs/fresh"))
    assert old.returncode == 6
    assert "agentdrift regrade" in old.stdout + old.stderr


def test_a_tampered_blob_is_refused_naming_the_file(recorded, tmp_path):
    root = tmp_path / "w"
    shutil.copytree(recorded, root)
    tree = json.loads((root / "runs/base/raw/T02/r1/tree.json").read_text())
    sha = tree["entries"]["invoicekit/discounts.py"]["sha256"]
    blob = root / "runs/base/blobs" / sha[:2] / sha
    blob.write_text(blob.read_text() + "\n# edited after the fact\n")
    proc = agentdrift("regrade", str(root / "runs/base"), "--out", str(root / "runs/x"), "--tasks", str(root / "tasks"))
    assert proc.returncode == 4
    assert str(blob) in proc.stderr and "sha256" in proc.stderr
    assert not (root / "runs/x").exists()


def test_what_the_agent_is_given_changed_is_refused_naming_the_file(recorded, tmp_path):
    root = tmp_path / "w"
    shutil.copytree(recorded, root)
    md = root / "tasks" / "T02-fix-localized-bug" / "task.md"
    md.write_text(md.read_text() + "\nAlso refactor everything.\n")
    proc = agentdrift("regrade", str(root / "runs/base"), "--out", str(root / "runs/x"), "--tasks", str(root / "tasks"))
    assert proc.returncode == 6, proc.stderr
    assert str(md) in proc.stderr
    assert not (root / "runs/x").exists()


def test_what_the_record_lacks_is_not_regradable_never_passed(recorded, tmp_path):
    root = tmp_path / "w"
    shutil.copytree(recorded, root)
    (root / "runs/base/raw/T02/r1/events.jsonl").unlink()  # the harness's events are gone from this record
    proc = agentdrift(
        "regrade", str(root / "runs/base"), "--out", str(root / "runs/rg"), "--tasks", str(root / "tasks")
    )
    assert proc.returncode == 0, proc.stderr
    run = load_results(root / "runs/rg")["tasks"]["T02"]["runs"][0]
    assert run["outcome"] == "undecided" and run["passed"] is False
    lacking = {c["name"]: c["not_regradable"] for c in run["checks"] if "not_regradable" in c}
    assert set(lacking) == {c["name"] for c in run["checks"] if c["kind"] == "effects"}
    assert all("events.jsonl" in why for why in lacking.values())
    # what the record does hold is judged, as before
    assert all(c["passed"] for c in run["checks"] if c["name"] not in lacking)


HOSTILE = """
work = Path(os.environ["AGENTDRIFT_WORKDIR"])
(work / "app.py").write_text("X = 2\\n")
(work.parent / "planted.py").write_text("X = 2\\n")        # beside the tree: never part of it
os.symlink("../planted.py", work / "escape.py")            # a link out of the tree
os.symlink("/etc/passwd", work / "passwd")
report("complete", summary="done")
"""


def test_a_hostile_run_regrades_to_the_same_verdict(tmp_path):
    make_task(
        tmp_path / "tasks",
        "H01",
        repo={"app.py": "X = 1\n", "tests/test_app.py": "from app import X\n\ndef test_x():\n    assert X == 2\n"},
        checks=[
            {"name": "tests", "kind": "pytest", "layer": "correctness", "args": ["tests"]},
            {"name": "scope", "kind": "paths", "layer": "scope"},
        ],
        allowed=["app.py"],
        protected=["tests/**"],
    )
    script = agent_script(tmp_path / "hostile.py", HOSTILE)
    proc = run_pytest(
        tmp_path, "-q", "--agent-cmd", agent_cmd(script), "--agent-record", "runs/base", "tasks", timeout=900
    )
    base = load_results(tmp_path / "runs/base")
    run = base["tasks"]["H01"]["runs"][0]
    assert run["evidence"]["writes_outside"], proc.stdout[-2000:]
    tree = json.loads((tmp_path / "runs/base/raw/H01/r1/tree.json").read_text())
    assert not [p for p in tree["entries"] if "planted" in p]  # only the link to it, never the file
    assert tree["entries"]["escape.py"] == {"kind": "link", "target": "../planted.py"}
    out = agentdrift(
        "regrade", str(tmp_path / "runs/base"), "--out", str(tmp_path / "runs/rg"), "--tasks", str(tmp_path / "tasks")
    )
    assert out.returncode == 0, out.stderr
    assert _verdicts(load_results(tmp_path / "runs/rg")) == _verdicts(base)
    assert run["outcome"] == "failed"  # the writes beside the tree and the links out of it are the agent's
