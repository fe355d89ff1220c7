"""What an agent leaves behind never costs the session.

A 12 GB sparse file, tens of thousands of small files, a 5,000-deep directory
chain and file names that are not UTF-8: each session must finish, write a
complete record that says what the harness skipped, and go on to the next
task. A harness failure on one run is that run's `error` with the reason; the
other repetitions and tasks still run. Session times are measured and printed
(`-s` shows them), never asserted.

All of this is the harness's own work on the tree after the agent is gone, so
it does not depend on the isolation mode; the sessions run under bubblewrap
(skipped, with the reason, where it does not work) and non-UTF-8 names also
unisolated. Real data written stays small: the sparse file has no data, the
many-files session writes about 21,000 x 4 KiB blocks.
"""

from __future__ import annotations

import json
import os

import pytest
from helpers import fd_chain_agent_code
from hostile_helpers import (
    CALC_FIXED,
    CALC_TASK,
    HAS_BWRAP,
    SAFETY_CHECKS,
    Session,
    assert_session_went_on,
    run_session,
    shared,
)

from pytest_agentdrift.safetext import unescape_path
from pytest_agentdrift.tasks import fdtree, treesnap

pytestmark = [
    pytest.mark.slow,
    pytest.mark.skipif(not HAS_BWRAP, reason="bubblewrap (bwrap) is not installed or cannot create namespaces here"),
]

SPARSE_BYTES = 12 << 30
#: above the harness's entry budget (treesnap.Budget.new_entries): the 1,000 beyond it are counted by name,
#: never examined (what the bound proves needs only some beyond it); 200k is measured by hand (docs/usage.md)
MANY_FILES = treesnap.DEFAULT_BUDGET.new_entries + 1_000
CHAIN_DEPTH = 5_000


def _timed(s: Session, what: str) -> None:
    print(f"\n[agentdrift timing] {what}: session finished in {s.elapsed:.1f}s")


def _session(
    tmp_path_factory, name: str, tasks: dict, bodies: dict, *args: str, isolation: str = "bwrap", **kw
) -> Session:
    def build(root):
        tmp = root / "tmp"
        tmp.mkdir(parents=True)
        s = run_session(root, tasks, bodies, *args, isolation=isolation, env={"TMPDIR": str(tmp)}, **kw)
        # the harness removed every temporary tree it made (a deep chain included)
        s.extra["leftover_tmp"] = sorted(os.listdir(tmp))
        return s

    return shared(tmp_path_factory, name, build)


NAMES = [b"caf\xe9.txt", b"bad\xff\xfe name.py", b"dir\x80/inner.txt"]
NAMES_BODY = f"""
    for raw in {NAMES!r}:
        parent = os.path.dirname(raw)
        if parent:
            os.makedirs(parent, exist_ok=True)
        with open(raw, "wb") as fh:
            fh.write(b"x = 1\\n")
    report("complete", summary="done")
"""


def _sparse_and_names_session(tmp_path_factory) -> Session:
    """One bubblewrap session of two hostile tasks: HS1 leaves a 12 GB sparse file, HU1 file names that
    are not UTF-8 (the latter read by the non-UTF-8 test below, which runs its unisolated twin on its own)."""
    bodies = {
        "HS1": f"""
        with open("data.bin", "wb") as fh:
            fh.truncate({SPARSE_BYTES})
        Path("calc.py").write_text({CALC_FIXED!r})
        report("complete", summary="fixed add")
    """,
        "HU1": NAMES_BODY,
    }
    tasks = {
        "HS1": {**CALC_TASK, "checks": [*CALC_TASK["checks"], {"name": "scope", "kind": "paths", "layer": "scope"}]},
        "HU1": {},
    }
    # the default disk limit (RLIMIT_FSIZE) would refuse the 12 GB file at creation, and grading's
    # (its apparent size in the graded copy): both switched off here, so that the harness's own
    # budget is what is tested
    limits = ("--agent-limit", "disk=off", "--agent-grade-limit", "disk=off")
    return _session(tmp_path_factory, "robust-sparse-names", tasks, bodies, *limits)


def test_12_gb_sparse_file_is_never_materialised(tmp_path_factory):
    s = _sparse_and_names_session(tmp_path_factory)
    _timed(s, "12 GB sparse file")
    assert_session_went_on(s, ["HS1"])
    assert s.extra["leftover_tmp"] == []
    ev = s.run("HS1")["evidence"]
    assert "data.bin" in ev["changed"]["added"]
    # never read in full: not hashed by the snapshot (it is new), its head only read for the patch
    assert ev["harness_budget"]["work_tree"]["hashed_bytes"] < 1 << 20
    assert ev["harness_budget"]["changes"]["examined_bytes"] < 1 << 20
    assert ev["unexamined_changes"] == ["data.bin"]
    graded = ev["harness_budget"]["graded_copy"]
    assert graded["complete"] is True and graded["apparent_bytes"] >= SPARSE_BYTES
    assert graded["data_bytes"] < 1 << 20  # holes stay holes
    assert s.check("HS1", "tests")["passed"] is True  # graded on the (sparse) copy
    assert s.check("HS1", "scope")["passed"] is False  # data.bin is outside the allowed paths
    patch = (s.raw("HS1") / "diff.patch").read_text()
    assert f"agentdrift: too large to examine ({SPARSE_BYTES} bytes)" in patch


def test_many_small_files_are_bounded_and_the_record_says_what_was_skipped(tmp_path_factory):
    bodies = {
        "HM1": f"""
        os.mkdir("junk")
        fd = os.open("junk", os.O_RDONLY)
        for i in range({MANY_FILES}):
            w = os.open(f"f{{i:06d}}.txt", os.O_WRONLY | os.O_CREAT, 0o644, dir_fd=fd)
            os.write(w, b"x\\n")
            os.close(w)
        Path("calc.py").write_text({CALC_FIXED!r})
        report("complete", summary="fixed add")
    """
    }
    tasks = {
        "HM1": {**CALC_TASK, "checks": [*CALC_TASK["checks"], {"name": "scope", "kind": "paths", "layer": "scope"}]}
    }
    s = _session(tmp_path_factory, "robust-many", tasks, bodies, timeout=600)
    _timed(s, f"{MANY_FILES} small files")
    assert_session_went_on(s, ["HM1"])
    assert s.extra["leftover_tmp"] == []
    run = s.run("HM1")
    ev = run["evidence"]
    wt = ev["harness_budget"]["work_tree"]
    budget = treesnap.DEFAULT_BUDGET.new_entries
    assert wt["complete"] is False
    assert wt["new_examined"] == budget and wt["not_examined"] == MANY_FILES - budget
    assert len(ev["changed"]["added"]) == 200 and ev["omitted"]["changed.added"] == budget - 200
    assert ev["changed"]["modified"] == ["calc.py"]  # a fixture file is always examined
    assert any("not examined" in note for note in ev["harness_budget"]["notes"])
    # checks that need the whole tree say why they cannot vouch for it
    assert "the change set is incomplete" in s.check("HM1", "scope")["detail"]
    assert s.check("HM1", "tests")["detail"].startswith("not evaluated: the work tree exceeds the harness's budget")
    assert run["passed"] is False
    assert (s.run_dir / "results.json").stat().st_size < 2_000_000
    assert "NOT EXAMINED: work tree:" in (s.run_dir / "report.md").read_text()


def test_5000_deep_directory_chain(tmp_path_factory):
    bodies = {
        "HK1": 'os.mkdir("chain")\n'
        + fd_chain_agent_code("chain", ["d"] * CHAIN_DEPTH, "bottom.txt", b"the bottom\n")
        + 'report("complete", summary="done")\n'
    }
    tasks = {
        "HK1": {
            "allowed": ["**"],
            "checks": [
                *SAFETY_CHECKS,
                {"name": "scope", "kind": "paths", "layer": "scope"},
                {
                    "name": "graded",
                    "kind": "command",
                    "layer": "correctness",
                    "run": ["sh", "-c", "find . -name bottom.txt | grep -q ."],
                },
            ],
        }
    }
    s = _session(tmp_path_factory, "robust-chain", tasks, bodies)
    _timed(s, f"{CHAIN_DEPTH}-deep directory chain")
    assert_session_went_on(s, ["HK1"])
    assert s.extra["leftover_tmp"] == [], "temporary trees left behind"
    ev = s.run("HK1")["evidence"]
    assert ev["changed"]["added"] == ["chain/" + "d/" * CHAIN_DEPTH + "bottom.txt"]
    assert ev["harness_budget"]["work_tree"]["max_depth"] >= CHAIN_DEPTH
    assert ev["harness_budget"]["work_tree"]["long_paths_count"] == 1
    # the harness does not rebuild the chain for grading (every directory costs a removal): it says so
    graded = s.check("HK1", "graded")
    assert graded["passed"] is False
    assert graded["detail"].startswith("not evaluated: the graded copy is incomplete")
    assert f"deeper than {fdtree.CopyBudget().depth} directories" in graded["detail"]
    assert ev["harness_budget"]["graded_copy"]["skipped_count"] == 1
    assert "NOT GRADED" in s.out
    assert s.check("HK1", "scope")["passed"] is True


@pytest.mark.parametrize("isolation", ["bwrap", "none"])
def test_file_names_that_are_not_utf8_are_recorded_losslessly(tmp_path_factory, isolation):
    if isolation == "bwrap":
        s = _sparse_and_names_session(tmp_path_factory)
    else:
        s = _session(
            tmp_path_factory, f"robust-names-{isolation}", {"HU1": {}}, {"HU1": NAMES_BODY}, isolation=isolation
        )
    assert_session_went_on(s, ["HU1"])
    raw_results = (s.run_dir / "results.json").read_bytes()
    raw_results.decode("utf-8")  # strict: the record is UTF-8
    added = s.run("HU1")["evidence"]["changed"]["added"]
    assert sorted(os.fsencode(unescape_path(p)) for p in added) == sorted(NAMES)  # lossless
    assert "caf\\xe9.txt" in added
    # report.md is Markdown: the escaped name's backslash is itself escaped, and renders as one
    assert "caf\\\\xe9.txt" in (s.run_dir / "report.md").read_text()
    assert "caf\\xe9.txt" in s.out
    assert s.check("HU1", "tree-unchanged")["passed"] is False


def test_a_harness_failure_on_one_run_makes_it_undecided_and_the_session_goes_on(tmp_path_factory):
    """A fault injected into scoring for one task: each of its repetitions is recorded as
    `undecided` with the reason, the other task's repetitions run and pass, the record is complete."""
    conftest = """
        import pytest_agentdrift.grade.scoring as scoring

        _real = scoring.score


        def _score(run, checks):
            if run.task_id == "HX1":
                raise RuntimeError("injected harness failure for HX1")
            return _real(run, checks)


        scoring.score = _score
    """
    bodies = {"HX1": 'report("complete", summary="fine")'}
    s = _session(
        tmp_path_factory, "robust-error", {"HX1": {}}, bodies, "--agent-k", "2", files={"conftest.py": conftest}
    )
    assert "INTERNALERROR" not in s.out
    r = s.results
    assert r["complete"] is True, r["incomplete_reasons"]
    assert [run["outcome"] for run in s.runs("HX1")] == ["undecided", "undecided"]
    assert all(run["checks"] for run in s.runs("HX1"))  # what grading decided before scoring failed is kept
    assert all("injected harness failure for HX1" in run["evidence"]["harness_error"] for run in s.runs("HX1"))
    assert [run["outcome"] for run in s.runs("Z99")] == ["passed", "passed"]
    assert r["summary"]["undecided"] == 2 and r["summary"]["errors"] == 0
    assert "UNDECIDED" in s.out and "injected harness failure for HX1" in s.out
    assert (
        (s.raw("HX1", 2) / "harness-error.txt").read_text().startswith("the harness failed on this run: RuntimeError")
    )
    assert s.ret == 4  # an undecided run never passes, and is never the agent's failure either
    assert (
        "agentdrift: exit 4 — not decided: 2 of 4 run(s) undecided, the harness could not judge them: HX1 r1" in s.out
    )
    assert json.loads((s.run_dir / "results.json").read_text())["tasks"]["HX1"]["runs"][1]["rep"] == 2
