"""The bundled suite with the reference agent: the whole session against the agent's own time.

Times, alternating, N times each, a recording session of the twelve bundled
tasks with the reference agent (`pytest --agent reference --agent-suite
builtin --agent-record ...`, serial):

* cold:  `--agent-grading-cache none`: every untouched-fixture result computed;
* warm:  a grading cache filled by an earlier session (what a developer's second
         run and a CI job with pytest's cache restored see);
* per-process (reference): cold, with every graded process in a sandbox of its
         own (benchmarks/one_sandbox_per_process.py), as grading ran before the
         shared grading sandbox (grade/gradeserver.py).

For each it prints the median wall time, the agents' own time summed over the
runs (each run's `duration_s` in results.json, measured by the harness around
the agent's process), and the ratios session / agent time, warm / cold and
cold / per-process. The reference agent and the per-process arm are the
in-run references: the machine is shared, so only ratios measured in the
same run compare; the load average is printed before and after.
Never asserts on time.

    python benchmarks/bench_builtin_suite.py [--n 3] [-k EXPR]
"""

from __future__ import annotations

import argparse
import json
import os
import shutil
import statistics
import subprocess
import sys
import tempfile
import time
from pathlib import Path

ROOT = Path(__file__).resolve().parents[1]


def _env() -> dict[str, str]:
    paths = [str(ROOT), str(ROOT / "benchmarks"), os.environ.get("PYTHONPATH")]
    env = {**os.environ, "PYTHONPATH": os.pathsep.join(filter(None, paths))}
    env.pop("AGENTDRIFT_GRADING_CACHE", None)
    return env


def session(cwd: Path, out: str, cache: str, select: list[str], per_process: bool = False) -> tuple[float, float]:
    """(wall seconds, the agents' own seconds) of one recording session."""
    argv = [sys.executable, "-m", "pytest", "-p", "no:cacheprovider", "-p", "no:randomly", "-q"]
    argv += ["-p", "one_sandbox_per_process"] if per_process else []
    argv += ["--agent", "reference", "--agent-suite", "builtin", "--agent-record", out]
    argv += ["--agent-grading-cache", cache, *select]
    t = time.perf_counter()
    proc = subprocess.run(argv, cwd=cwd, env=_env(), capture_output=True, text=True, check=False)
    wall = time.perf_counter() - t
    if proc.returncode != 0:
        sys.exit(f"the session failed ({proc.returncode}): {proc.stdout[-2000:]}{proc.stderr[-2000:]}")
    results = json.loads((cwd / out / "results.json").read_text())
    agent = sum(r["evidence"].get("duration_s") or 0.0 for t in results["tasks"].values() for r in t["runs"])
    return wall, agent


def _load() -> str:
    return " ".join(f"{x:.2f}" for x in os.getloadavg())


def main() -> None:
    ap = argparse.ArgumentParser(description=__doc__.splitlines()[0])
    ap.add_argument("--n", type=int, default=3)
    ap.add_argument("-k", default=None, help="pytest -k expression selecting tasks (default: all twelve)")
    args = ap.parse_args()
    select = ["-k", args.k] if args.k else []
    work = Path(tempfile.mkdtemp(prefix="bench-builtin-"))
    cache = str(work / "grading-cache")
    try:
        print(f"load average before: {_load()}; {os.cpu_count()} CPU(s); {args.n} session(s) per arm, alternating")
        session(work, "runs/fill", cache, select)  # fills the warm arm's cache
        cold, warm, per_process = [], [], []
        for i in range(args.n):
            cold.append(session(work, f"runs/cold-{i}", "none", select))
            warm.append(session(work, f"runs/warm-{i}", cache, select))
            per_process.append(session(work, f"runs/per-process-{i}", "none", select, per_process=True))
        arms = (
            ("cold (no grading cache)", cold),
            ("warm (grading cache)", warm),
            ("per-process sandboxes, cold", per_process),
        )
        for name, arm in arms:
            wall = statistics.median(w for w, _ in arm)
            agent = statistics.median(a for _, a in arm)
            print(
                f"{name:28} median wall {wall:6.1f}s   agents {agent:5.1f}s   "
                f"session / agent time {wall / agent if agent else float('inf'):5.1f}x"
            )
        cold_wall = statistics.median(w for w, _ in cold)
        print(f"warm / cold = {statistics.median(w for w, _ in warm) / cold_wall:.2f}")
        print(f"cold / per-process sandboxes = {cold_wall / statistics.median(w for w, _ in per_process):.2f}")
        print(f"load average after: {_load()}")
    finally:
        shutil.rmtree(work, ignore_errors=True)


if __name__ == "__main__":
    main()
