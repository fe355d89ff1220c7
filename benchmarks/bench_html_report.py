"""Benchmark: report.html for a synthetic record of 500 tasks x k = 3.

Builds a record on disk that looks like a real one (results.json valid
against the shipped schema; per run five checks with evidence, a small
patch, events, the agent's report, stdout, stderr and argv in raw/; about
one run in eight failing, some critically, a few tampered passes and errors),
renders report.html from it, and prints:

* the page's size, against results.json's size (the same data as pretty JSON),
* the render time (reading raw/ included), against the time json.dumps takes
  to serialise the same results dict, measured in the same run.

The stated budget (docs/record-format.md): a 500 x 3 record renders to at most
10 MiB. This script prints; it never asserts on time.

    python benchmarks/bench_html_report.py [--tasks 500] [--k 3] [--repeat 3] [--keep DIR]
"""

from __future__ import annotations

import argparse
import json
import random
import shutil
import statistics
import tempfile
import time
from pathlib import Path
from typing import Any

from pytest_agentdrift.tasks.taskspec import LAYERS

SIZE_BUDGET = 10 << 20


def _checks(rng: random.Random, failing: bool, critical: bool) -> list[dict[str, Any]]:
    checks = [
        {
            "name": "focused-tests-pass",
            "kind": "pytest",
            "layer": "correctness",
            "critical": False,
            "passed": True,
            "detail": "3 of 3 passed",
            "evidence": {"collected": 3, "passed": 3},
        },
        {
            "name": "only-allowed-paths",
            "kind": "paths",
            "layer": "scope",
            "critical": True,
            "passed": True,
            "detail": "changed: src/pricing.py",
            "evidence": {"changed": ["src/pricing.py"], "outside_allowed": []},
        },
        {
            "name": "no-effects",
            "kind": "effects",
            "layer": "safety",
            "critical": True,
            "passed": True,
            "detail": "no forbidden effect",
            "evidence": {},
        },
        {
            "name": "status-honest",
            "kind": "report_status",
            "layer": "verification",
            "critical": False,
            "passed": True,
            "detail": "reported status 'complete'",
            "evidence": {"status": "complete", "checks_skipped": []},
        },
        {
            "name": "bounded-retries",
            "kind": "events",
            "layer": "efficiency",
            "critical": False,
            "passed": True,
            "detail": "2 command(s), at most 5",
            "evidence": {"counts": {"command": 2, "final": 1}},
        },
    ]
    if failing:
        victim = checks[1] if critical else checks[rng.choice((0, 3, 4))]
        victim["passed"] = False
        victim["detail"] = "failed: " + victim["detail"]
        if victim["kind"] == "pytest":
            victim["evidence"] = {
                "tail": "F..\nFAILED tests/test_pricing.py::test_total - assert 9 == 10\n1 failed, 2 passed"
            }
    return checks


def synthetic_results(n_tasks: int = 500, k: int = 3, seed: int = 7) -> dict[str, Any]:
    rng = random.Random(seed)
    tasks: dict[str, Any] = {}
    for i in range(n_tasks):
        tid = f"S{i:04d}"
        runs = []
        for rep in range(1, k + 1):
            roll = rng.random()
            error = roll < 0.01
            failing = not error and roll < 0.13
            critical = failing and roll < 0.05
            tampered = not error and not failing and roll > 0.995
            checks = [] if error else _checks(rng, failing, critical)
            failed = [c["name"] for c in checks if not c["passed"]]
            layers = {lay: "n/a" for lay in LAYERS}
            for c in checks:
                layers[c["layer"]] = "fail" if (not c["passed"] or layers[c["layer"]] == "fail") else "pass"
            outcome = "error" if error else ("failed" if failed or tampered else "passed")
            runs.append(
                {
                    "rep": rep,
                    "outcome": outcome,
                    "passed": outcome == "passed",
                    "tampered_pass": tampered,
                    "critical_failed": [c["name"] for c in checks if c["critical"] and not c["passed"]],
                    "failed_checks": failed,
                    "layers": layers,
                    "checks": checks,
                    "evidence": {
                        "exit_code": None if error else 0,
                        "timed_out": False,
                        "duration_s": round(rng.uniform(5, 300), 3),
                        "launch_error": "agent executable not found" if error else None,
                        "changed": {"added": [], "modified": ["src/pricing.py"], "deleted": [], "mode": []},
                        "writes_outside": [],
                        "git_mutations": [],
                        "network_attempts": 0,
                        "tamper": {
                            "protected_changed": ["tests/test_pricing.py"] if tampered else [],
                            "test_config_changed": [],
                        },
                        "credential_access": False,
                        "stdout_bytes": 180,
                        "stdout_truncated": False,
                        "stderr_bytes": 0,
                        "stderr_truncated": False,
                        "leftover_processes": 0,
                        "event_problems": [],
                        "lockfile_changes": [],
                        "api_requests": 0,
                        "network_policy": None,
                        "runtime_bundle": [],
                        "work_tree_deleted": False,
                    },
                    "model_stamp": "model-2026-01-01",
                    "usage": {
                        "input_tokens": rng.randint(2_000, 90_000),
                        "output_tokens": rng.randint(100, 5_000),
                        "cached_tokens": rng.randint(0, 50_000),
                        "cost_usd": round(rng.uniform(0.01, 0.9), 4),
                    },
                    "report": None
                    if error
                    else {
                        "status": "complete",
                        "summary": f"Fixed the total in {tid}.",
                        "checks_run": ["pytest -q"],
                        "checks_skipped": [],
                        "answer": "",
                    },
                    "report_error": "no final report written" if error else None,
                    "raw": f"raw/{tid}/r{rep}",
                }
            )
        tasks[tid] = {
            "title": f"Synthetic task {i}",
            "suite": f"s{i % 5}",
            "behavior": "Patch accuracy",
            "task_digest": "sha256:" + f"{i:064x}",
            "runs": runs,
        }
    all_runs = [r for t in tasks.values() for r in t["runs"]]
    passed = sum(r["passed"] for r in all_runs)
    return {
        "schema_version": 1,
        "plugin_version": "0.1.0",
        "run_id": "20260101T000000Z-synthetic",
        "started_at": "2026-01-01T00:00:00Z",
        "finished_at": "2026-01-01T06:00:00Z",
        "complete": True,
        "incomplete_reasons": [],
        "agent": {
            "name": "synthetic",
            "argv": ["agent", "{task_file}"],
            "version": "1.0.0",
            "product": "generic",
            "surface": "cli",
        },
        "isolation": {
            "requested": "auto",
            "enforced": "bwrap",
            "network": "denied",
            "filesystem": "isolated",
            "notes": [],
        },
        "settings": {"k": k, "timeout_s": 600, "fail_on": "any"},
        "runtime_id": "sha256:" + "1" * 64,
        "task_set_id": "sha256:" + "2" * 64,
        "evaluator_id": "sha256:" + "3" * 64,
        "tasks": tasks,
        "workers": {},
        "summary": {
            "runs": len(all_runs),
            "passed": passed,
            "failed": sum(r["outcome"] == "failed" for r in all_runs),
            "errors": sum(r["outcome"] == "error" for r in all_runs),
            "tampered_passes": sum(r["tampered_pass"] for r in all_runs),
            "critical_failures": sum(bool(r["critical_failed"]) for r in all_runs),
            "pass_rate": round(passed / len(all_runs), 6),
        },
    }


_PATCH = (
    "diff --agentdrift a/src/pricing.py b/src/pricing.py\n--- a/src/pricing.py\n+++ b/src/pricing.py\n"
    "@@ -10,7 +10,7 @@ def total(items):\n     subtotal = 0\n     for item in items:\n"
    "-        subtotal += item.price * (item.qty - 1)\n+        subtotal += item.price * item.qty\n"
    "     return round(subtotal, 2)\n"
)
_EVENTS = (
    '{"path": "src/pricing.py", "type": "file_read"}\n{"argv": ["python", "-m", "pytest", "-q"], "exit_code": 1, "type": "command"}\n'
    '{"path": "src/pricing.py", "type": "file_edit"}\n{"argv": ["python", "-m", "pytest", "-q"], "exit_code": 0, "type": "command"}\n'
    '{"status": "complete", "type": "final"}\n'
)


def write_synthetic_record(root: Path, n_tasks: int = 500, k: int = 3) -> dict[str, Any]:
    """A record directory a real session could have written (results.json last)."""
    results = synthetic_results(n_tasks, k)
    root.mkdir(parents=True, exist_ok=True)
    for tid, t in results["tasks"].items():
        for run in t["runs"]:
            d = root / run["raw"]
            d.mkdir(parents=True)
            (d / "stdout.txt").write_text(f"agent: working on {tid}\n" * 6)
            (d / "stderr.txt").write_text("")
            (d / "events.jsonl").write_text(_EVENTS)
            (d / "diff.patch").write_text(_PATCH)
            (d / "report.json").write_text(json.dumps(run["report"], indent=2) + "\n")
            (d / "checks.json").write_text(json.dumps(run["checks"], indent=2) + "\n")
            (d / "argv.json").write_text(json.dumps(["agent", f"/tasks/{tid}/task.md"], indent=2) + "\n")
    (root / "results.json").write_text(json.dumps(results, indent=2, sort_keys=True) + "\n")
    return results


def main() -> None:
    parser = argparse.ArgumentParser(description=__doc__.split("\n\n")[0])
    parser.add_argument("--tasks", type=int, default=500)
    parser.add_argument("--k", type=int, default=3)
    parser.add_argument("--repeat", type=int, default=3)
    parser.add_argument("--keep", type=Path, help="also write the page here")
    args = parser.parse_args()

    from pytest_agentdrift.record.html import render_record

    tmp = Path(tempfile.mkdtemp(prefix="agentdrift-bench-html-"))
    try:
        results = write_synthetic_record(tmp / "run", args.tasks, args.k)
        times: dict[str, list[float]] = {"dumps": [], "session": [], "cli": []}
        page = reference = ""
        for _ in range(args.repeat):
            t0 = time.perf_counter()
            reference = json.dumps(results, indent=2, sort_keys=True)
            t1 = time.perf_counter()
            page = render_record(tmp / "run", results)  # the session's path: results in memory, raw/ read
            t2 = time.perf_counter()
            render_record(tmp / "run")  # the CLI's path: results.json read and schema-validated first
            t3 = time.perf_counter()
            times["dumps"].append(t1 - t0)
            times["session"].append(t2 - t1)
            times["cli"].append(t3 - t2)
        med = {k: statistics.median(v) for k, v in times.items()}
        size = len(page.encode("utf-8"))
        json_size = len(reference.encode("utf-8"))
        runs = args.tasks * args.k
        print(f"record: {args.tasks} tasks x k={args.k} = {runs} runs, raw/ with 7 files per run")
        print(
            f"report.html: {size:,} bytes ({size / (1 << 20):.2f} MiB), {size / runs:,.0f} bytes per run; "
            f"results.json (pretty JSON of the same results): {json_size:,} bytes; ratio {size / json_size:.2f}x; "
            f"budget {SIZE_BUDGET >> 20} MiB: {'within' if size <= SIZE_BUDGET else 'OVER'}"
        )
        print(f"reference: json.dumps of the results, median {med['dumps']:.3f} s over {args.repeat}")
        print(
            f"render as the session does (results in memory, raw/ read): median {med['session']:.3f} s, "
            f"{med['session'] / med['dumps']:.1f}x json.dumps"
        )
        print(
            f"render as `agentdrift html` does (results.json read and validated first): median {med['cli']:.3f} s, "
            f"{med['cli'] / med['dumps']:.1f}x json.dumps"
        )
        if args.keep:
            args.keep.write_text(page)
            print(f"page written to {args.keep}")
    finally:
        shutil.rmtree(tmp, ignore_errors=True)


if __name__ == "__main__":
    main()
