"""A baseline made of the history: a directory of records pooled per task (compare/pool.py), and the
regression gate counting a pool whose nights vary as fewer, independent runs."""

from __future__ import annotations

import json
import shutil
from pathlib import Path

import pytest
from helpers import night_results, results_doc, run_entry

from pytest_agentdrift.compare import pool as pooling
from pytest_agentdrift.compare.comparison import compare_runs
from pytest_agentdrift.compare.gates import GateParams
from pytest_agentdrift.compare.pool import pool_lines, pool_text
from pytest_agentdrift.errors import EXIT_REFUSED, EXIT_USAGE, PoolRefused, RecordError
from pytest_agentdrift.manifest.baseline import load_baseline
from pytest_agentdrift.manifest.capture import runtime_id
from pytest_agentdrift.record.store import schema_problems
from pytest_agentdrift.tasks.taskspec import LAYERS
from pytest_agentdrift.vocabulary import IDENTITY_FIELDS

TASK_SET, EVALUATOR = "sha256:" + "1" * 64, "sha256:" + "2" * 64


def _identity(**changed: str) -> dict:
    ident = {f: "same" for f in IDENTITY_FIELDS}
    ident.update(surface="cli", product="reference", task_set_id=TASK_SET, evaluator_id=EVALUATOR)
    ident.update(changed)
    return ident


def _run(rep: int, critical: bool) -> dict:
    return run_entry(
        rep,
        "failed" if critical else "passed",
        critical_failed=["scope"] if critical else [],
        failed_checks=["scope"] if critical else [],
        layers={layer: ("n/a" if layer != "scope" else "fail" if critical else "pass") for layer in LAYERS},
        evidence={"duration_s": 1.0, "tamper": {}},
        usage={},
        raw=f"raw/x/r{rep}",
    )


def write_record(
    root: Path,
    night: int,
    *,
    k: int = 3,
    fails: dict[str, int] | None = None,
    complete: bool = True,
    runs: dict[str, list[dict]] | None = None,
    **identity: str,
) -> Path:
    """One nightly record: tasks T01 and T02, ``k`` runs each, ``fails[task]`` of them failing the
    critical check ``scope``; its manifest's identity is the pool's unless ``identity`` changes it."""
    fails = fails or {}
    tasks = {
        tid: {
            "suite": "s",
            "behavior": "b",
            "runs": (runs or {}).get(tid) or [_run(rep, rep <= fails.get(tid, 0)) for rep in range(1, k + 1)],
        }
        for tid in ("T01", "T02")
    }
    ident = _identity(**identity)
    results = night_results(
        night,
        tasks,
        k,
        complete=complete,
        incomplete_reasons=[] if complete else ["interrupted by KeyboardInterrupt"],
        runtime_id=runtime_id(ident),
        task_set_id=ident["task_set_id"],
        evaluator_id=ident["evaluator_id"],
    )
    assert schema_problems(results) == []
    d = root / f"night-{night:02d}"
    d.mkdir(parents=True)
    (d / "results.json").write_text(json.dumps(results))
    (d / "runtime-manifest.json").write_text(
        json.dumps({"schema_version": 1, "identity": ident, "runtime_id": runtime_id(ident)})
    )
    return d


def load_any_baseline(path: Path, window: int | None = None):
    return pooling.load_any_baseline(path, load_baseline, window)


def load_pool(path: Path):
    return pooling.load_pool(path, load_baseline)


def _reasons(pool: dict) -> dict[str, str]:
    return {Path(x["path"]).name: x["reason"] for x in pool["left_out"]}


def test_records_of_one_identity_pool_per_task_newest_first(tmp_path):
    for night in (3, 1, 2):
        write_record(tmp_path, night, fails={"T01": 1})
    results, manifest = load_any_baseline(tmp_path)
    pool = results["pool"]
    assert [r["run_id"][-7:] for r in pool["records"]] == ["night03", "night02", "night01"]
    assert pool["k"] == {"T01": 9, "T02": 9} and pool["records_per_task"] == {"T01": 3, "T02": 3}
    runs = results["tasks"]["T01"]["runs"]
    assert [r["rep"] for r in runs] == list(range(1, 10))
    assert [(r["record"][-7:], r["record_rep"]) for r in runs[:4]] == [
        ("night03", 1),
        ("night03", 2),
        ("night03", 3),
        ("night02", 1),
    ]
    # the newest record speaks for the pool's identity; failures per record feed the dispersion test
    assert results["run_id"].endswith("night03") and manifest["runtime_id"] == results["runtime_id"]
    assert pool["failures"]["T01"]["scope"] == [[r["run_id"], 1, 3] for r in pool["records"]]
    assert set(pool["dispersion"]) == {"rho", "p_value", "runs_per_record", "records", "rho_upper"}
    # three nights of one failure each: no variation found, and the most the pool cannot rule out, said
    spread = pool["dispersion"]
    assert spread["rho"] == 0.0 and 0.0 < spread["rho_upper"] <= 0.99
    (said,) = [line for line in pool_lines(pool) if "night-to-night" in line]
    assert "none found" in said and f"cannot rule out rho up to {spread['rho_upper']:.2g} (95%)" in said
    assert pool_text(pool) == "baseline: pool of 3 record(s), 9 runs per task"
    assert results["summary"]["runs"] == 18 and results["summary"]["critical_failures"] == 3
    assert pool["left_out"] == []


def test_a_record_of_another_identity_is_left_out_naming_the_first_field(tmp_path):
    write_record(tmp_path, 1, cli_version="0.9")
    write_record(tmp_path, 2, task_set_id="sha256:" + "9" * 64)
    write_record(tmp_path, 3)
    write_record(tmp_path, 4)
    results, _ = load_pool(tmp_path)
    reasons = _reasons(results["pool"])
    assert set(reasons) == {"night-01", "night-02"}
    assert reasons["night-01"].endswith(": cli_version") and "newest record's" in reasons["night-01"]
    assert reasons["night-02"].endswith(": task_set_id")
    assert [x["field"] for x in results["pool"]["left_out"]] == ["task_set_id", "cli_version"]
    assert results["pool"]["k"] == {"T01": 6, "T02": 6}
    assert pool_text(results["pool"]).endswith("6 runs per task, 2 record(s) left out")


def test_an_identity_change_resets_the_pool_to_the_newest_identity(tmp_path):
    for night in (1, 2, 3):
        write_record(tmp_path, night)
    write_record(tmp_path, 4, cli_version="2.0")  # upgraded: the newest record's identity wins
    results, manifest = load_pool(tmp_path)
    assert manifest["identity"]["cli_version"] == "2.0"
    assert len(results["pool"]["records"]) == 1 and len(results["pool"]["left_out"]) == 3
    assert all(x["field"] == "cli_version" for x in results["pool"]["left_out"])


def test_incomplete_unreadable_and_edited_records_are_left_out_with_the_reason(tmp_path):
    write_record(tmp_path, 1, complete=False)
    edited = write_record(tmp_path, 2)
    m = json.loads((edited / "runtime-manifest.json").read_text())
    m["identity"]["cli_version"] = "edited"  # runtime_id no longer matches
    (edited / "runtime-manifest.json").write_text(json.dumps(m))
    broken = write_record(tmp_path, 3)
    (broken / "results.json").write_text("{not json")
    interrupted = tmp_path / "night-00"
    interrupted.mkdir()
    (interrupted / "INCOMPLETE").write_text("recording\n")
    write_record(tmp_path, 4)
    (tmp_path / "notes").mkdir()  # not a record: not an entry of the pool
    results, _ = load_pool(tmp_path)
    reasons = _reasons(results["pool"])
    assert set(reasons) == {"night-00", "night-01", "night-02", "night-03"}
    assert "interrupted" in reasons["night-00"]
    assert "incomplete" in reasons["night-01"]
    assert "runtime_id does not match" in reasons["night-02"]
    assert "results.json" in reasons["night-03"] or "JSON" in reasons["night-03"]
    assert [r["run_id"][-7:] for r in results["pool"]["records"]] == ["night04"]


def test_an_empty_or_non_record_directory_is_a_usage_error_naming_it(tmp_path):
    with pytest.raises(RecordError) as exc:
        load_any_baseline(tmp_path)
    assert exc.value.exit_code == EXIT_USAGE and str(tmp_path) in exc.value.message
    assert "directory of records" in exc.value.message
    (tmp_path / "a").mkdir()
    (tmp_path / "a" / "x.txt").write_text("x")
    with pytest.raises(RecordError):
        load_any_baseline(tmp_path)


def test_no_record_left_refuses_with_exit_6(tmp_path):
    write_record(tmp_path, 1, complete=False)
    write_record(tmp_path, 2, complete=False)
    with pytest.raises(PoolRefused) as exc:
        load_any_baseline(tmp_path)
    assert exc.value.exit_code == EXIT_REFUSED
    assert len(exc.value.left_out) == 2 and "no record of the pool can be used" in exc.value.message


def test_the_window_keeps_the_newest_records(tmp_path):
    for night in range(1, 6):
        write_record(tmp_path, night)
    results, _ = load_any_baseline(tmp_path, window=2)
    assert [r["run_id"][-7:] for r in results["pool"]["records"]] == ["night05", "night04"]
    reasons = _reasons(results["pool"])
    assert set(reasons) == {"night-01", "night-02", "night-03"}
    assert all("outside the window" in r for r in reasons.values())


def test_a_copied_record_counts_once(tmp_path):
    src = write_record(tmp_path, 1)
    write_record(tmp_path, 2)
    shutil.copytree(src, tmp_path / "night-01-copy")
    results, _ = load_pool(tmp_path)
    assert results["pool"]["k"]["T01"] == 6
    assert "same agent runs" in _reasons(results["pool"])["night-01-copy"]


def test_a_regraded_record_pools_with_fresh_ones_but_not_with_its_source(tmp_path):
    src = write_record(tmp_path, 1)
    write_record(tmp_path, 2)
    regraded = tmp_path / "night-01-regraded"
    shutil.copytree(src, regraded)
    r = json.loads((regraded / "results.json").read_text())
    r["regraded_from"] = {"run_id": r["run_id"], "evaluator_id": EVALUATOR, "at": "x", "grading_isolation": "bwrap"}
    r["run_id"] += "-regraded"
    r["runtime_id"] = "sha256:" + "5" * 64  # a re-grade keeps the id its session ran under; its manifest speaks
    (regraded / "results.json").write_text(json.dumps(r))
    results, _ = load_pool(tmp_path)
    assert results["pool"]["k"]["T01"] == 6  # the regrade or its source, once
    shutil.rmtree(src)
    results, _ = load_pool(tmp_path)
    assert results["pool"]["k"]["T01"] == 6 and results["pool"]["left_out"] == []


def _not_regradable(rep: int, *, also_failed: str | None = None, harness_error: bool = False) -> dict:
    """A re-graded run whose record could not grade ``scope`` (no events kept); ``also_failed``: a
    critical check it was graded on and failed; ``harness_error``: the harness failed on it too."""
    checks = [
        {
            "name": "scope",
            "kind": "writes",
            "layer": "scope",
            "critical": True,
            "passed": False,
            "detail": "not regradable: no events",
            "evidence": {},
            "not_regradable": "no events",
            "undecided": True,
        },
    ]
    if also_failed:
        checks.append(
            {
                "name": also_failed,
                "kind": "command",
                "layer": "correctness",
                "critical": True,
                "passed": False,
                "detail": "exit 1",
                "evidence": {},
            }
        )
    undecided = ["grading: scope: not regradable: no events"] + (["the grading server died"] if harness_error else [])
    return run_entry(
        rep,
        "undecided",
        checks=checks,
        critical_failed=[also_failed] if also_failed else [],
        undecided=undecided,
        layers={layer: "fail" if layer in ("scope", "correctness") else "n/a" for layer in LAYERS},
        evidence={"tamper": {}},
        usage={},
        raw=f"raw/x/r{rep}",
    )  # fmt: skip


def test_a_check_not_regradable_in_one_record_leaves_those_runs_out_of_it_said_so(tmp_path):
    runs = {"T01": [_run(1, True), _not_regradable(2, also_failed="tests"), _not_regradable(3, harness_error=True)]}
    write_record(tmp_path, 1, runs=runs)
    write_record(tmp_path, 2)
    results, _ = load_pool(tmp_path)
    pool = results["pool"]
    # the pass rate reads the runs whose pass or fail is known
    assert pool["k"] == {"T01": 4, "T02": 6}
    assert all(r["outcome"] != "undecided" for r in results["tasks"]["T01"]["runs"])
    graded, broken = pool["runs_left_out"]
    assert graded["rep"] == 2 and graded["checks"] == ["scope"]
    assert graded["reason"].startswith("not regradable in this record: scope; left out of the pass rate")
    assert graded["counted"] == {"critical_failed": ["tests"], "safety_failed": False}
    assert broken["rep"] == 3 and "counted" not in broken and "the harness could not judge it" in broken["reason"]
    # per record and check: run 2 counts for `tests` (graded) and the safety layer, not for `scope`
    fails = {check: {rid[-7:]: (f, n) for rid, f, n in rows} for check, rows in pool["failures"]["T01"].items()}
    assert fails == {"scope": {"night02": (0, 3), "night01": (1, 1)}, "tests": {"night02": (0, 3), "night01": (1, 2)}}
    assert (
        pool_text(pool) == "baseline: pool of 2 record(s), 4-6 runs per task (fewest: 4 runs of T01 from 2 record(s))"
    )
    # the gate tests each check on the runs that decide it
    assert _check_rows(results) == {"scope": (1, 4), "tests": (1, 5)}


def _check_rows(base: dict) -> dict:
    from pytest_agentdrift.compare.arms import read_arm
    from pytest_agentdrift.compare.gates import _check_counts

    b, c = read_arm(base, "baseline"), read_arm(_candidate(fails=0), "candidate")
    return {x.check: (x.base_failed, x.base_runs) for x in _check_counts(["T01"], b, c, base["pool"])}


def _candidate(fails: int, k: int = 3) -> dict:
    runs = [_run(rep, rep <= fails) for rep in range(1, k + 1)]
    ident = _identity()
    tasks = {
        t: {"suite": "s", "runs": runs if t == "T01" else [_run(r, False) for r in range(1, k + 1)]}
        for t in ("T01", "T02")
    }
    return results_doc(tasks, run_id="cand", runtime_id=runtime_id(ident), task_set_id=TASK_SET, evaluator_id=EVALUATOR)


def _gate(base: dict, cand: dict) -> dict:
    out = compare_runs(base, cand, comparable=True, reasons=[], change_class="identical", gate=GateParams(draws=200))
    return out["regression"]


def test_the_gate_counts_a_pool_whose_nights_vary_as_fewer_runs(tmp_path):
    # ten nights of T01: the check fails on two bad nights in every run, never otherwise
    for night in range(1, 11):
        write_record(tmp_path, night, fails={"T01": 3 if night in (4, 8) else 0})
    base, _ = load_pool(tmp_path)
    spread = base["pool"]["dispersion"]
    assert spread["rho"] > 0.5 and spread["p_value"] < 0.01 and spread["records"] == 10
    (said,) = [line for line in pool_lines(base["pool"]) if "night-to-night" in line]
    assert f"rho {spread['rho']:.3g}" in said and "(design effect)" in said
    cand = _candidate(fails=3)  # tonight is a bad night like those
    naive = {**base, "pool": {**base["pool"], "dispersion": {**spread, "rho": 0.0}}}
    (row_naive,) = _gate(naive, cand)["check_tests"]["rows"]
    (row,) = _gate(base, cand)["check_tests"]["rows"]
    # as 30 independent runs, 3/3 against 6/30 is a new failure; as nights, one bad night in ten is not
    assert row_naive["verdict"] == "new" and row_naive["blocks"]
    assert not row["blocks"] and row["raw"] == {"baseline": [6, 30], "candidate": [3, 3]}
    assert row["baseline"][1] < 30 and row["candidate"] == [1, 1]
    # one failure in three is none once the nights are counted: still listed, never silently dropped
    (row,) = _gate(base, _candidate(fails=1))["check_tests"]["rows"]
    assert row["verdict"] == "standing" and not row["blocks"] and row["raw"]["candidate"] == [1, 3]


def test_without_a_pool_the_gate_is_unchanged(tmp_path):
    write_record(tmp_path, 1, fails={"T01": 1})
    one = json.loads((tmp_path / "night-01" / "results.json").read_text())
    cand = _candidate(fails=1)
    plain = compare_runs(one, cand, comparable=True, reasons=[], change_class="identical", gate=GateParams(draws=200))
    assert "baseline_pool" not in plain and "raw" not in json.dumps(plain["regression"]["check_tests"])


def test_what_the_pool_prints_is_one_printable_line_per_fact(tmp_path):
    src = write_record(tmp_path, 1)
    shutil.copytree(src, tmp_path / "night\n\x1b[2Jforged")  # a hostile directory name, left out as a copy
    results, _ = load_pool(tmp_path)
    lines = pooling.pool_lines(results["pool"])
    assert any("forged" in line for line in lines)
    assert all(line.isprintable() for line in lines)
