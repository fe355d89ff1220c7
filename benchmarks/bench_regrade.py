"""Regrade against re-run: what grading a recorded run again costs next to running the agent again.

Copies the builtin suite, records it (or the tasks `-k` selects) once with the
reference agent, then changes one check of one task in the copy (T04's
`suite-passes` gets its own timeout: a new grading id for T04 alone), as a
team fixing a check would, and times, alternating, N times:

* re-run:  a fresh recording session of the changed tasks (agent + sandbox + grading);
* regrade: `agentdrift regrade` of the first record against the changed tasks
           (the changed task's runs rebuilt and graded again, the others kept
           as recorded once their blobs are verified; a new record).

Both must give the same outcomes, which it checks; a mismatch exits non-zero.

and prints the medians and the ratio regrade / re-run, with the record's size
and the part the final trees take (blobs/ and tree.json; the budget is 1.2x).
The reference agent spends almost nothing, so the re-run here is mostly the
harness and grading: with a real agent (minutes and money per run) the ratio
only falls. Never asserts on time.

    python benchmarks/bench_regrade.py [--n 3] [-k "T02 or T07"]
"""

from __future__ import annotations

import argparse
import os
import shutil
import statistics
import subprocess
import sys
import tempfile
import time
from pathlib import Path

ROOT = Path(__file__).resolve().parents[1]
sys.path.insert(0, str(ROOT))


def _env() -> dict[str, str]:
    return {**os.environ, "PYTHONPATH": os.pathsep.join(filter(None, [str(ROOT), os.environ.get("PYTHONPATH")]))}


def record(cwd: Path, out: str, select: list[str]) -> float:
    argv = [sys.executable, "-m", "pytest", "-p", "no:cacheprovider", "-p", "no:randomly", "-q"]
    argv += ["tasks", "--agent", "reference", "--agent-record", out, *select]
    t = time.perf_counter()
    proc = subprocess.run(argv, cwd=cwd, env=_env(), capture_output=True, text=True, check=False)
    took = time.perf_counter() - t
    if proc.returncode not in (0, 1):
        sys.exit(f"recording failed ({proc.returncode}): {proc.stdout[-2000:]}{proc.stderr[-2000:]}")
    return took


def regrade(cwd: Path, src: str, out: str) -> float:
    argv = [sys.executable, "-m", "pytest_agentdrift", "regrade", src, "--out", out, "--tasks", "tasks"]
    t = time.perf_counter()
    proc = subprocess.run(argv, cwd=cwd, env=_env(), capture_output=True, text=True, check=False)
    took = time.perf_counter() - t
    if proc.returncode != 0:
        sys.exit(f"regrade failed ({proc.returncode}): {proc.stderr[-2000:]}")
    return took


def change_one_check(tasks: Path) -> None:
    toml = tasks / "T04-refactor-no-behaviour-change" / "task.toml"
    text = toml.read_text()
    old = 'name = "suite-passes"\nkind = "pytest"\n'
    if old not in text:
        sys.exit(f"{toml}: the check this benchmark changes is gone; update the benchmark")
    toml.write_text(text.replace(old, old + "timeout_s = 90\n"))


def outcomes(run: Path) -> dict[str, list[str]]:
    import json

    doc = json.loads((run / "results.json").read_text())
    return {tid: [r["outcome"] for r in t["runs"]] for tid, t in doc["tasks"].items()}


def sizes(run: Path) -> tuple[int, int]:
    """(bytes of every file of the record, bytes of its final trees: blobs/ and tree.json)."""
    total = trees = 0
    for dirpath, _, files in os.walk(run):
        for name in files:
            n = os.path.getsize(os.path.join(dirpath, name))
            total += n
            if name == "tree.json" or Path(dirpath).relative_to(run).parts[:1] == ("blobs",):
                trees += n
    return total, trees


def main() -> None:
    ap = argparse.ArgumentParser(description=__doc__.splitlines()[0])
    ap.add_argument("--n", type=int, default=3)
    ap.add_argument("-k", default=None, help="pytest -k expression selecting tasks (default: the whole builtin suite)")
    args = ap.parse_args()
    select = ["-k", args.k] if args.k else []
    from pytest_agentdrift.tasks.taskdirs import builtin_suite_dir

    work = Path(tempfile.mkdtemp(prefix="bench-regrade-"))
    try:
        shutil.copytree(builtin_suite_dir(), work / "tasks")
        record(work, "runs/base", select)
        change_one_check(work / "tasks")
        total, trees = sizes(work / "runs/base")
        print(
            f"record: {total:,} bytes, of which final trees {trees:,} ({total / (total - trees):.3f}x the record without them)"
        )
        rerun_t, regrade_t = [], []
        for i in range(args.n):
            rerun_t.append(record(work, f"runs/rerun-{i}", select))
            regrade_t.append(regrade(work, "runs/base", f"runs/regraded-{i}"))
        r, g = statistics.median(rerun_t), statistics.median(regrade_t)
        print(f"re-run : median {r:.1f}s over {args.n} ({', '.join(f'{x:.1f}' for x in rerun_t)})")
        print(f"regrade: median {g:.1f}s over {args.n} ({', '.join(f'{x:.1f}' for x in regrade_t)})")
        print(f"regrade / re-run = {g / r:.2f}")
        if outcomes(work / "runs/rerun-0") != outcomes(work / "runs/regraded-0"):
            sys.exit("the regraded record's outcomes differ from the fresh run's")
        print("outcomes: the regraded record and the fresh run agree")
    finally:
        shutil.rmtree(work, ignore_errors=True)


if __name__ == "__main__":
    main()
