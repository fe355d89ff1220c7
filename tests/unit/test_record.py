"""Recorded runs: atomic writes, refusing to overwrite, completeness, and the schema."""

import json
import os
from pathlib import Path

import pytest
from helpers import results_doc, run_entry

from pytest_agentdrift.errors import EXIT_USAGE, RecordError
from pytest_agentdrift.record import store as record
from pytest_agentdrift.record.store import (
    INCOMPLETE_MARKER,
    RunRecorder,
    atomic_write,
    check_record_target,
    load_run,
    results_validator,
    schema_problems,
)

FIXTURES = Path(__file__).parents[2] / "fixtures"


def minimal_results(complete: bool = True) -> dict:
    check = {
        "name": "c",
        "kind": "unchanged",
        "layer": "scope",
        "critical": False,
        "passed": True,
        "detail": "no file changed",
        "evidence": {},
    }
    usage = {"input_tokens": None, "output_tokens": None, "cached_tokens": None, "cost_usd": None}
    run = run_entry(checks=[check], evidence={"tamper": {}}, usage=usage, raw="raw/X01/r1")
    run["layers"]["scope"] = "pass"
    return results_doc(
        {"X01": {"title": "t", "suite": "s", "behavior": "b", "runs": [run]}},
        recorded=True,
        run_id="r-1",
        complete=complete,
        incomplete_reasons=[] if complete else ["interrupted by KeyboardInterrupt"],
        agent={"name": "cmd", "argv": ["python", "a.py"], "version": "1"},
    )


# ---- atomic_write --------------------------------------------------------------------


def test_atomic_write_creates_parents_and_leaves_no_temp(tmp_path):
    target = tmp_path / "a" / "b" / "f.json"
    atomic_write(target, "hello\n")
    assert target.read_text() == "hello\n"
    atomic_write(target, b"\x00bytes")
    assert target.read_bytes() == b"\x00bytes"
    assert os.listdir(target.parent) == ["f.json"]


def test_atomic_write_failure_keeps_old_content(tmp_path, monkeypatch):
    target = tmp_path / "results.json"
    target.write_text("old\n")

    def boom(src, dst):
        raise OSError(28, "No space left on device")

    monkeypatch.setattr(record.os, "replace", boom)
    with pytest.raises(OSError, match="No space left"):
        atomic_write(target, "new\n")
    assert target.read_text() == "old\n"
    assert os.listdir(tmp_path) == ["results.json"]


def test_atomic_write_interrupted_midway_keeps_old_content(tmp_path, monkeypatch):
    target = tmp_path / "results.json"
    target.write_text("old\n")

    def interrupted(fd):
        raise KeyboardInterrupt

    monkeypatch.setattr(record.os, "fsync", interrupted)
    with pytest.raises(KeyboardInterrupt):
        atomic_write(target, "new\n" * 1000)
    assert target.read_text() == "old\n"
    assert os.listdir(tmp_path) == ["results.json"]


# ---- check_record_target -------------------------------------------------------------


def test_new_or_empty_target_is_accepted(tmp_path):
    check_record_target(tmp_path / "new")
    (tmp_path / "empty").mkdir()
    check_record_target(tmp_path / "empty")


@pytest.mark.parametrize(
    "prepare, problem",
    [
        (
            lambda d: (d.mkdir(), (d / "results.json").write_text(json.dumps(minimal_results(True)))),
            "already holds a complete run; recorded runs are never rewritten: record into a new directory",
        ),
        (
            lambda d: (d.mkdir(), (d / "results.json").write_text(json.dumps(minimal_results(False)))),
            "already holds an incomplete run: continue it with --agent-resume, or record into a new directory",
        ),
        (
            lambda d: (d.mkdir(), (d / "results.json").write_text("{trunc")),
            "already holds a recorded run; recorded runs are never rewritten: record into a new directory",
        ),
        (
            lambda d: (d.mkdir(), (d / "notes.txt").write_text("mine")),
            "recording target is not empty; record into a new directory",
        ),
        (
            lambda d: (d.mkdir(), (d / INCOMPLETE_MARKER).write_text("started")),
            "holds an interrupted recording; continue it with --agent-resume or record into a new directory",
        ),
        (lambda d: d.write_text("a file"), "recording target exists and is not a directory"),
    ],
    ids=["complete", "incomplete", "unreadable", "non-empty", "incomplete-marker", "a-file"],
)
def test_record_target_refusals(tmp_path, prepare, problem):
    target = tmp_path / "runs"
    prepare(target)
    before = {
        p.relative_to(tmp_path).as_posix(): (p.read_bytes() if p.is_file() else None) for p in tmp_path.rglob("*")
    }
    with pytest.raises(RecordError) as exc:
        check_record_target(target)
    assert exc.value.problem == problem
    assert exc.value.path == str(target)
    assert exc.value.exit_code == EXIT_USAGE == 4
    after = {p.relative_to(tmp_path).as_posix(): (p.read_bytes() if p.is_file() else None) for p in tmp_path.rglob("*")}
    assert after == before  # refused, untouched
    with pytest.raises(RecordError):
        RunRecorder(target).start("second attempt")
    assert {
        p.relative_to(tmp_path).as_posix(): (p.read_bytes() if p.is_file() else None) for p in tmp_path.rglob("*")
    } == before


# ---- RunRecorder ---------------------------------------------------------------------


def test_recorder_complete_run_removes_the_marker(tmp_path):
    rec = RunRecorder(tmp_path / "run")
    rec.start("recording run r-1")
    assert (tmp_path / "run" / INCOMPLETE_MARKER).read_text() == "recording run r-1\n"
    rec.write_raw("raw/X01/r1", {"stdout.txt": "out", "diff.patch": ""})
    rec.write_json("extra.json", {"b": 1, "a": [1]})
    assert (tmp_path / "run" / "raw" / "X01" / "r1" / "stdout.txt").read_text() == "out"
    assert (tmp_path / "run" / "extra.json").read_text() == '{\n  "a": [\n    1\n  ],\n  "b": 1\n}\n'
    results = minimal_results(True)
    rec.finish(results)
    assert not (tmp_path / "run" / INCOMPLETE_MARKER).exists()
    assert json.loads((tmp_path / "run" / "results.json").read_text()) == results
    assert load_run(tmp_path / "run") == results
    with pytest.raises(RecordError, match="already holds a complete run"):
        RunRecorder(tmp_path / "run").start("again")


def test_recorder_incomplete_run_keeps_the_marker(tmp_path):
    rec = RunRecorder(tmp_path / "run")
    rec.start("recording")
    rec.finish(minimal_results(False))
    assert (tmp_path / "run" / INCOMPLETE_MARKER).exists()
    assert json.loads((tmp_path / "run" / "results.json").read_text())["complete"] is False


def test_recorder_schema_violation_is_written_incomplete_with_reasons(tmp_path):
    rec = RunRecorder(tmp_path / "run")
    rec.start("recording")
    bad = minimal_results(True)
    bad["tasks"]["X01"]["runs"][0]["outcome"] = "great"
    del bad["summary"]["pass_rate"]
    rec.finish(bad)
    written = json.loads((tmp_path / "run" / "results.json").read_text())
    assert written["complete"] is False
    assert written["incomplete_reasons"] == [
        "schema: summary: 'pass_rate' is a required property",
        "schema: tasks/X01/runs/0/outcome: 'great' is not one of ['passed', 'failed', 'error', 'timeout', "
        "'resource_exceeded', 'infra_error', 'over_budget', 'undecided']",
    ]
    assert written["tasks"] == bad["tasks"]  # the data is kept
    assert (tmp_path / "run" / INCOMPLETE_MARKER).exists()
    with pytest.raises(RecordError, match="does not match the schema"):
        load_run(tmp_path / "run", require_complete=False)


def test_start_into_an_unwritable_place_is_a_record_error(tmp_path):
    (tmp_path / "file").write_text("x")
    with pytest.raises(RecordError) as exc:
        RunRecorder(tmp_path / "file" / "run").start("x")
    assert exc.value.problem.startswith("cannot create the run directory: ")
    assert exc.value.path == str(tmp_path / "file" / "run")


# ---- load_run ------------------------------------------------------------------------


def _run_dir(tmp_path, results_text=None, marker=False):
    d = tmp_path / "run"
    d.mkdir()
    if marker:
        (d / INCOMPLETE_MARKER).write_text("x\n")
    if results_text is not None:
        (d / "results.json").write_text(results_text)
    return d


def test_load_run_missing_dir(tmp_path):
    with pytest.raises(RecordError) as exc:
        load_run(tmp_path / "nope")
    assert (exc.value.problem, exc.value.path) == ("no such run directory", str(tmp_path / "nope"))


def test_load_run_without_results(tmp_path):
    d = _run_dir(tmp_path)
    with pytest.raises(RecordError) as exc:
        load_run(d)
    assert (exc.value.problem, exc.value.path) == ("not a recorded run (no results.json)", str(d))


def test_load_run_interrupted(tmp_path):
    d = _run_dir(tmp_path, marker=True)
    with pytest.raises(RecordError) as exc:
        load_run(d)
    assert exc.value.problem == "the run was interrupted before it finished (INCOMPLETE marker, no results.json)"
    assert exc.value.path == str(d)


def test_load_run_truncated_json(tmp_path):
    text = json.dumps(minimal_results(True))
    d = _run_dir(tmp_path, text[: len(text) // 2])
    with pytest.raises(RecordError) as exc:
        load_run(d)
    assert exc.value.problem.startswith("invalid JSON: ")
    assert exc.value.path == str(d / "results.json")


def test_load_run_duplicate_key(tmp_path):
    d = _run_dir(tmp_path, '{"complete": true, "complete": false}')
    with pytest.raises(RecordError) as exc:
        load_run(d)
    assert exc.value.problem == "invalid JSON: duplicate key 'complete'"


def test_load_run_not_an_object(tmp_path):
    d = _run_dir(tmp_path, "[1, 2]")
    with pytest.raises(RecordError) as exc:
        load_run(d)
    assert (exc.value.problem, exc.value.path) == ("results.json is not a JSON object", str(d / "results.json"))


def test_load_run_schema_mismatch(tmp_path):
    bad = minimal_results(True)
    bad["schema_version"] = 2
    d = _run_dir(tmp_path, json.dumps(bad))
    with pytest.raises(RecordError) as exc:
        load_run(d)
    assert exc.value.problem == "results.json does not match the schema: schema_version: 1 was expected"
    assert exc.value.path == str(d / "results.json")


def test_load_run_incomplete(tmp_path):
    results = minimal_results(False)
    d = _run_dir(tmp_path, json.dumps(results))
    with pytest.raises(RecordError) as exc:
        load_run(d)
    assert (
        exc.value.problem == "the run is incomplete (interrupted by KeyboardInterrupt) and cannot be used as a baseline"
    )
    assert exc.value.path == str(d)
    assert load_run(d, require_complete=False) == results


# ---- the schema ----------------------------------------------------------------------


def test_validator_is_built_once():
    assert results_validator() is results_validator()


def test_schema_rejects_unknown_top_level_keys():
    r = minimal_results(True)
    r["surprise"] = 1
    assert schema_problems(r) == ["(root): Additional properties are not allowed ('surprise' was unexpected)"]
    assert schema_problems(minimal_results(True)) == []
