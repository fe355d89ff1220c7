"""What the harness spends on a tree an agent left behind, against the agent's own cost, same machine, same run.

Three trees an agent may leave: 200,000 small files, a 12 GB sparse file, a 5,000-deep
directory chain. For each it times, alternating, N times:

* reference: the same agent script run alone (plain `python3`, no sandbox) in
             a copy of the task's repo, then `rm -rf` of that copy: what
             making and removing the tree costs on this file system;
* harness:   runner.run_agent under the isolation `auto` picks (sandbox,
             limits, write watcher, snapshot, diff, patch) + Grader.evaluate
             with the non-executing checks + cleanup.

and prints the medians, the ratio harness / reference and the harness's own
share (the difference). The agent's work dominates both sides, so the ratio
says what the harness adds to it. The run directories go under --tmp (default:
the system temp directory); the file system it is on matters more than
anything else here: on a throttled virtual disk making 200,000 files alone
takes tens of seconds, on tmpfs about one. Never asserts on time.

    python benchmarks/bench_agent_leftovers.py [--n 3] [--tmp DIR] [--files 200000] [--depth 5000]
"""

from __future__ import annotations

import argparse
import os
import statistics
import subprocess
import sys
import tempfile
import textwrap
import time
from pathlib import Path

sys.path.insert(0, str(Path(__file__).resolve().parents[1]))

from pytest_agentdrift.agents.base import CommandAdapter
from pytest_agentdrift.grade.grader import Grader
from pytest_agentdrift.run import runner, sandbox
from pytest_agentdrift.run.runsettings import RunSettings
from pytest_agentdrift.tasks import fdtree
from pytest_agentdrift.tasks.load import load_task
from pytest_agentdrift.testing import make_task

CHECKS = [
    {"name": "scope", "kind": "paths", "layer": "scope"},
    {"name": "same", "kind": "unchanged", "layer": "scope"},
    {"name": "tamper", "kind": "tamper", "layer": "safety"},
    {"name": "effects", "kind": "effects", "layer": "safety"},
]


def agents(files: int, depth: int) -> dict[str, str]:
    return {
        f"{files:,} small files": f"""
            os.mkdir("junk")
            fd = os.open("junk", os.O_RDONLY)
            for i in range({files}):
                w = os.open(f"f{{i:06d}}.txt", os.O_WRONLY | os.O_CREAT, 0o644, dir_fd=fd)
                os.write(w, b"x\\n")
                os.close(w)
        """,
        "12 GB sparse file": """
            with open("data.bin", "wb") as fh:
                fh.truncate(12 << 30)
        """,
        f"{depth:,}-deep chain": f"""
            fd = os.open(".", os.O_RDONLY)
            for _ in range({depth}):
                os.mkdir("d", dir_fd=fd)
                nfd = os.open("d", os.O_RDONLY, dir_fd=fd)
                os.close(fd)
                fd = nfd
            w = os.open("leaf.txt", os.O_WRONLY | os.O_CREAT, 0o644, dir_fd=fd)
            os.close(w)
        """,
    }


def write_agent(path: Path, body: str) -> Path:
    path.write_text("import os\n" + textwrap.dedent(body))
    return path


def time_reference(repo: Path, script: Path, scratch: Path) -> float:
    dst = scratch / "reference-copy"
    start = time.perf_counter()
    subprocess.run(["cp", "-a", str(repo), str(dst)], check=True)
    subprocess.run([sys.executable, str(script)], cwd=dst, check=True)
    subprocess.run(["rm", "-rf", str(dst)], check=True)
    return time.perf_counter() - start


def time_harness(spec, script: Path, iso: sandbox.Isolation, base: Path, limits: dict) -> tuple[float, dict]:
    adapter = CommandAdapter(f"{sys.executable} {script}")
    start = time.perf_counter()
    run = runner.run_agent(spec, 1, adapter, RunSettings(isolation=iso, limits=limits), base)
    Grader(iso, base).evaluate(spec, run)
    runner.cleanup(run)
    elapsed = time.perf_counter() - start
    budget = run.harness_budget.get("work_tree") or {}
    return elapsed, {"exit": run.exit_code, "outcome_limits": run.resource_exceeded, "complete": budget.get("complete")}


def main() -> None:
    ap = argparse.ArgumentParser(description=__doc__.splitlines()[0])
    ap.add_argument("--n", type=int, default=3)
    ap.add_argument("--files", type=int, default=200_000)
    ap.add_argument("--depth", type=int, default=5000, help="the directory chain's depth")
    ap.add_argument("--tmp", default=None, help="where run directories go (default: the system temp directory)")
    args = ap.parse_args()
    from pytest_agentdrift.run.limits import DEFAULT_LIMITS

    # the files limit would stop the 200k writer (that is tested elsewhere): here it may run to the end
    # and the disk limit (RLIMIT_FSIZE) would refuse the sparse file's 12 GB length
    limits = {**DEFAULT_LIMITS, "files": max(args.files * 2, DEFAULT_LIMITS.get("files") or 0), "disk": 16 << 30}
    iso = sandbox.detect("auto")
    fs = subprocess.run(["stat", "-f", "-c", "%T", args.tmp or tempfile.gettempdir()], capture_output=True, text=True)
    print(
        f"python {sys.version.split()[0]}, isolation auto = {iso.mode}, {os.cpu_count()} CPU(s), "
        f"file system {fs.stdout.strip() or '?'}, {args.n} runs each, alternating"
    )
    # the 5,000-deep chain outlives a run's own cleanup where an agent left it: removed by the package's
    # iterative remover (shutil.rmtree recurses once per level and runs out of stack)
    tmp = tempfile.mkdtemp(prefix="agentdrift-bench-", dir=args.tmp)
    try:
        _measure(args, Path(tmp), iso, limits)
    finally:
        fdtree.rmtree(tmp)


def _measure(args: argparse.Namespace, work: Path, iso, limits) -> None:
    task = make_task(
        work / "tasks", "LEFT", repo={"calc.py": "def add(a, b):\n    return a + b\n"}, checks=CHECKS, timeout_s=900
    )
    spec = load_task(task)
    for name, body in agents(args.files, args.depth).items():
        script = write_agent(work / f"agent-{len(name)}.py", body)
        ref, harn, notes = [], [], {}
        for _ in range(args.n):
            ref.append(time_reference(spec.repo, script, work))
            t, notes = time_harness(spec, script, iso, work / "runs", limits)
            harn.append(t)
        r, h = statistics.median(ref), statistics.median(harn)
        print(f"{name}")
        print(f"  reference (cp -a + agent alone + rm -rf)  median {r:7.2f} s   min {min(ref):7.2f} s")
        print(
            f"  harness ({iso.mode}, watched, graded, cleaned)   median {h:7.2f} s   min {min(harn):7.2f} s"
            f"   ratio {h / r:5.2f}x   harness's share {h - r:+.2f} s"
        )
        print(
            f"  last run: exit {notes['exit']}, limits hit {notes['outcome_limits'] or 'none'}, tree examined whole: {notes['complete']}"
        )


if __name__ == "__main__":
    main()
