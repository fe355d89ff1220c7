"""The bundled suite with the reference agent: the whole session against the agent's own time.

Times, alternating, N times each, a recording session of the twelve bundled
tasks with the reference agent (`pytest --agent reference --agent-suite
builtin --agent-record ...`, serial):

* cold:  `--agent-grading-cache none`: every untouched-fixture result computed;
* warm:  a grading cache filled by an earlier session (what a developer's second
         run and a CI job with pytest's cache restored see).

For each it prints the median wall time, the agents' own time summed over the
runs (each run's `duration_s` in results.json, measured by the harness around
the agent's process), and the ratios session / agent time and warm / cold.
The reference agent is the in-run reference: it does the same work in both
arms, so what the session adds beside it is the harness and grading.
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
    env = {**os.environ, "PYTHONPATH": os.pathsep.join(filter(None, [str(ROOT), os.environ.get("PYTHONPATH")]))}
    env.pop("AGENTDRIFT_GRADING_CACHE", None)
    return env


def session(cwd: Path, out: str, cache: str, select: list[str]) -> tuple[float, float]:
    """(wall seconds, the agents' own seconds) of one recording session."""
    argv = [sys.executable, "-m", "pytest", "-p", "no:cacheprovider", "-p", "no:randomly", "-q"]
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


def main() -> None:
    ap = argparse.ArgumentParser(description=__doc__.splitlines()[0])
    ap.add_argument("--n", type=int, default=3)
    ap.add_argument("-k", default=None, help="pytest -k expression selecting tasks (default: all twelve)")
    args = ap.parse_args()
    select = ["-k", args.k] if args.k else []
    work = Path(tempfile.mkdtemp(prefix="bench-builtin-"))
    cache = str(work / "grading-cache")
    try:
        session(work, "runs/fill", cache, select)  # fills the warm arm's cache
        cold, warm = [], []
        for i in range(args.n):
            cold.append(session(work, f"runs/cold-{i}", "none", select))
            warm.append(session(work, f"runs/warm-{i}", cache, select))
        for name, arm in (("cold (no grading cache)", cold), ("warm (grading cache)", warm)):
            wall = statistics.median(w for w, _ in arm)
            agent = statistics.median(a for _, a in arm)
            print(
                f"{name:26} median wall {wall:6.1f}s   agents {agent:5.1f}s   "
                f"session / agent time {wall / agent if agent else float('inf'):5.1f}x"
            )
        ratio = statistics.median(w for w, _ in warm) / statistics.median(w for w, _ in cold)
        print(f"warm / cold = {ratio:.2f}")
    finally:
        shutil.rmtree(work, ignore_errors=True)


if __name__ == "__main__":
    main()
