"""Merging shards and reading an incomplete record to resume it (record/merge.py, record/resume.py)."""

from __future__ import annotations

import json

import pytest
from helpers import results_doc, run_entry

from pytest_agentdrift.errors import RecordError
from pytest_agentdrift.record.merge import merge_shards, universe
from pytest_agentdrift.record.resume import (
    ResumedRecorder,
    load_for_resume,
    read_run_files,
    settings_differences,
    state_document,
    write_state,
)
from pytest_agentdrift.record.store import INCOMPLETE_MARKER, RunRecorder, lock_run_dir

DIGEST = "sha256:" + "0" * 64


def run(rep, outcome="passed"):
    return run_entry(rep, outcome, evidence={"tamper": {}}, usage={})


def shard(run_id, items, index=None, count=None, **extra):
    tasks = {}
    for tid, rep in items:
        r = run(rep)
        r["raw"] = f"raw/{tid}/r{rep}"
        tasks.setdefault(tid, {"title": tid, "suite": "s", "behavior": "b", "task_digest": DIGEST, "runs": []})[
            "runs"
        ].append(r)
    doc = results_doc(
        tasks,
        recorded=True,
        run_id=run_id,
        started_at=f"2026-01-01T00:0{len(run_id)}:00Z",
        finished_at="2026-01-01T01:00:00Z",
        agent={"name": "a", "argv": [], "version": "1"},
        isolation={"requested": "auto", "enforced": "none", "network": "not_enforced", "filesystem": "not_enforced"},
        settings={"k": 2},
        runtime_id="sha256:r",
        task_set_id="sha256:t",
        evaluator_id="sha256:e",
        workers={"gw0": {"exitstatus": 0, "error": None}},
        summary={},
    )
    if index is not None:
        doc["shard"] = {"index": index, "count": count, "source": "option"}
    doc.update(extra)
    return doc


def test_merge_splits_a_task_across_shards_by_repetition():
    a = shard("a", [("T1", 1), ("T2", 2)], 1, 2)
    b = shard("bb", [("T1", 2), ("T2", 1)], 2, 2)
    merged = merge_shards([b, a], "m", universe(["T1", "T2"], 2))
    assert [r["rep"] for r in merged["tasks"]["T1"]["runs"]] == [1, 2]
    assert list(merged["tasks"]) == ["T1", "T2"] and merged["complete"] and merged["merged_from"] == ["bb", "a"]
    assert "shard" not in merged and merged["summary"]["runs"] == 4
    assert merged["started_at"] == min(a["started_at"], b["started_at"])


def test_shards_from_other_machines_merge_whatever_their_task_dirs():
    a = shard("a", [("T1", 1)], 1, 2)
    b = shard("bb", [("T1", 2)], 2, 2)
    a["tasks"]["T1"]["task_dir"], b["tasks"]["T1"]["task_dir"] = "/ci/one/tasks/T1-x", "/ci/two/tasks/T1-x"
    merged = merge_shards([a, b], "m", universe(["T1"], 2))
    assert "task_dir" not in merged["tasks"]["T1"]  # no one place (regrade then asks for --tasks)
    b["tasks"]["T1"]["task_dir"] = a["tasks"]["T1"]["task_dir"]
    assert merge_shards([a, b], "m", universe(["T1"], 2))["tasks"]["T1"]["task_dir"] == "/ci/one/tasks/T1-x"


@pytest.mark.parametrize(
    "shards, expected, match",
    [
        ([shard("a", [("T1", 1)]), shard("b", [("T1", 1)])], None, "overlap on 1 item"),
        ([shard("a", [("T1", 1)], 1, 2), shard("b", [("T1", 2)], 1, 2)], None, "the same shard given twice: 1/2"),
        ([shard("a", [("T1", 1)], 1, 2), shard("b", [("T1", 2)], 1, 3)], None, "different splits"),
        (
            [shard("a", [("T1", 1)], 1, 2), shard("b", [("T1", 2)])],
            None,
            "some shards were recorded with --agent-shard",
        ),
        ([shard("a", [("T1", 1)]), shard("b", [("T1", 2)], settings={"k": 3})], None, "differ in settings"),
        ([shard("a", [("T1", 1)]), shard("b", [("T1", 2)], runtime_id="sha256:other")], None, "differ in runtime_id"),
        (
            [shard("a", [("T1", 1)]), shard("b", [("T2", 1)], complete=False, incomplete_reasons=["budget"])],
            None,
            "incomplete \\(budget\\)",
        ),
        ([shard("a", [("T1", 1)]), shard("b", [("T1", 2)])], universe(["T1", "T2"], 2), "miss 2 item\\(s\\)"),
    ],
)
def test_merge_refusals(shards, expected, match):
    with pytest.raises(RecordError, match=match):
        merge_shards(shards, "m", expected)


def confirming(run_id, items, index, not_needed, **plan):
    """A shard of a confirming session (k 1, cap 3): its runs, and the repetitions it did not need."""
    doc = shard(run_id, items, index, 2)
    for tid, task in doc["tasks"].items():
        task["task_dir"] = f"/ci/{run_id}/tasks/{tid}-x"
    rules = {"k": 1, "cap": 3, "alpha": 0.05, "tasks": 2, "futility": 0.05, **plan}
    doc["confirm"] = {**rules, "not_needed": [f"tasks/{n}" for n in not_needed]}
    return doc


def test_confirming_shards_merge_their_plan_and_what_was_not_needed():
    a = confirming("a", [("T1", 1), ("T1", 2), ("T1", 3)], 1, [])
    b = confirming("bb", [("T2", 1)], 2, ["T2-x::r2", "T2-x::r3"])
    merged = merge_shards([a, b], "m", universe(["T1", "T2"], 3))
    assert merged["confirm"]["not_needed"] == ["tasks/T2-x::r2", "tasks/T2-x::r3"] and merged["confirm"]["tasks"] == 2
    with pytest.raises(RecordError, match="miss 1 item"):
        merge_shards([a, confirming("bb", [("T2", 1)], 2, ["T2-x::r2"])], "m", universe(["T1", "T2"], 3))
    with pytest.raises(RecordError, match="both run and skipped as not needed: T2/r2"):
        merge_shards([a, confirming("bb", [("T2", 1), ("T2", 2)], 2, ["T2-x::r2", "T2-x::r3"])], "m", None)
    with pytest.raises(RecordError, match="confirm by different plans"):
        merge_shards([a, confirming("bb", [("T2", 1)], 2, ["T2-x::r2", "T2-x::r3"], tasks=1)], "m", None)
    with pytest.raises(RecordError, match="names no one task of the shard"):
        merge_shards([a, confirming("bb", [("T2", 1)], 2, ["T9::r2"])], "m", None)


def recording(tmp_path, expected=("T1/r1", "T1/r2")):
    d = tmp_path / "rec"
    rec = RunRecorder(d)
    state = state_document(
        run_id="R",
        started_at="2026-01-01T00:00:00Z",
        expected=list(expected),
        settings={"k": 2},
        shard=None,
        note="recording",
    )
    rec.start(json.dumps(state))
    os_fd = rec._lock_fd
    return d, rec, os_fd


def write_run(d, tid, rep, outcome="passed"):
    r = run(rep, outcome)
    r["raw"] = f"raw/{tid}/r{rep}"
    if outcome == "infra_error":
        r["infra_error"] = {"class": "overloaded", "evidence": "529", "source": "x", "believed": True}
    (d / r["raw"]).mkdir(parents=True)
    (d / r["raw"] / "run.json").write_text(
        json.dumps(
            {
                "task_id": tid,
                "rep": rep,
                "result": r,
                "meta": {"title": tid, "suite": "s", "behavior": "b", "task_digest": DIGEST},
            }
        )
    )


def test_read_run_files_keeps_only_whole_runs(tmp_path):
    d, rec, _ = recording(tmp_path)
    write_run(d, "T1", 1)
    (d / "raw" / "T1" / "r2").mkdir(parents=True)
    (d / "raw" / "T1" / "r2" / "run.json").write_text("{trunc")
    write_run(d, "T9", 1)
    kept, notes = read_run_files(d, {"T1/r1", "T1/r2"})
    assert list(kept) == ["T1/r1"]
    assert any("raw/T1/r2/run.json: unreadable" in n for n in notes)
    assert any("T9/r1 is not one of the record's items" in n for n in notes)


def test_load_for_resume(tmp_path):
    d, rec, fd = recording(tmp_path)
    with pytest.raises(RecordError, match="no runtime manifest"):
        load_for_resume(d)
    (d / "runtime-manifest.json").write_text(json.dumps({"schema_version": 1}))
    # the session passes manifest.capture's check (the record stage does not import the manifest stage)
    from pytest_agentdrift.manifest.capture import validate_manifest

    with pytest.raises(RecordError, match="not a runtime manifest"):
        load_for_resume(d, validate_manifest)
    (d / "runtime-manifest.json").write_text("[]")
    with pytest.raises(RecordError, match="not a JSON object"):
        load_for_resume(d)


def test_resume_refusals(tmp_path):
    with pytest.raises(RecordError, match="no such record to resume"):
        load_for_resume(tmp_path / "nope")
    complete = tmp_path / "complete"
    complete.mkdir()
    (complete / "results.json").write_text("{}")
    with pytest.raises(RecordError, match="complete records are never rewritten"):
        load_for_resume(complete)
    killed_at_the_end = tmp_path / "end"
    killed_at_the_end.mkdir()
    (killed_at_the_end / "results.json").write_text(json.dumps({"complete": True}))
    (killed_at_the_end / INCOMPLETE_MARKER).write_text("{}")
    with pytest.raises(RecordError, match="complete records are never rewritten"):
        load_for_resume(killed_at_the_end)
    old = tmp_path / "old"
    old.mkdir()
    (old / INCOMPLETE_MARKER).write_text("recording run X started Y\n")
    with pytest.raises(RecordError, match="holds no session state"):
        load_for_resume(old)


def test_one_session_at_a_time(tmp_path):
    d, rec, fd = recording(tmp_path)
    with pytest.raises(RecordError, match="another session is recording into or resuming"):
        lock_run_dir(d)
    import os

    os.close(fd)  # the recording session ended (a killed process releases the lock the same way)
    os.close(lock_run_dir(d))


def test_resumed_recorder_clears_what_will_run_again(tmp_path):
    d, rec, fd = recording(tmp_path)
    import os

    os.close(fd)
    write_run(d, "T1", 1)
    (d / "raw" / "T1" / "r2" / "attempt-1").mkdir(parents=True)
    (d / "raw" / "T1" / "r2" / "stdout.txt").write_text("half")

    class State:
        missing = ["T1/r2"]

    rr = ResumedRecorder(d, State())
    rr.clear_partial(State.missing)
    assert not (d / "raw" / "T1" / "r2").exists() and (d / "raw" / "T1" / "r1" / "run.json").exists()
    assert rr.started
    write_state(d, {"format": 1})
    assert json.loads((d / INCOMPLETE_MARKER).read_text()) == {"format": 1}


def test_settings_differences():
    assert settings_differences({"k": 2, "timeout_s": None}, {"k": 2, "timeout_s": None}) == []
    assert settings_differences({"k": 2}, {"k": 3, "fail_on": "any"}) == [("fail_on", None, "any"), ("k", 2, 3)]


def test_a_run_lost_to_infrastructure_is_run_again_on_resume(tmp_path):
    from pytest_agentdrift.manifest.capture import runtime_id
    from pytest_agentdrift.manifest.identity import IDENTITY_FIELDS
    from pytest_agentdrift.vocabulary import SCHEMA_VERSION

    d, rec, _ = recording(tmp_path)
    identity = {f: "x" for f in IDENTITY_FIELDS}
    (d / "runtime-manifest.json").write_text(
        json.dumps({"schema_version": SCHEMA_VERSION, "identity": identity, "runtime_id": runtime_id(identity)})
    )
    write_run(d, "T1", 1)
    write_run(d, "T1", 2, outcome="infra_error")
    state = load_for_resume(d)
    assert list(state.kept) == ["T1/r1"] and list(state.infra_lost) == ["T1/r2"]
    assert state.missing == ["T1/r2"] and state.expected == ["T1/r1", "T1/r2"]
