"""Per-run harness overhead against the cheapest possible equivalent, same machine, same run.

For each fixture (fixtures/EX01-fix-discount, and a generated one of ~2,000
files / ~20 MB) it times, alternating, N times:

* harness:  runner.run_agent with a no-op agent (`true`) + Grader.evaluate
            with only the non-executing checks (copy, snapshot, git init,
            decoy, sandbox start, re-snapshot, diff, patch, evaluation);
* baseline: `cp -a repo/ <dst>` + `find <dst> -type f -print0 | xargs -0 sha256sum`.

The harness is timed under the isolation `auto` picks here and under
`none`, so the sandbox's own start-up cost is visible. Then a hashing
benchmark: canonical.hash_file over a 256 MB file against `sha256sum`.

Prints medians, absolute numbers and ratios. Never asserts on time.

    python benchmarks/bench_harness_overhead.py [--n 5] [--files 2000] [--mb 20] [--hash-mb 256]
"""

from __future__ import annotations

import argparse
import dataclasses
import os
import shutil
import statistics
import subprocess
import sys
import tempfile
import time
from pathlib import Path

sys.path.insert(0, str(Path(__file__).resolve().parents[1]))

from pytest_agentdrift.agents.base import CommandAdapter
from pytest_agentdrift.canonical import hash_file
from pytest_agentdrift.grade.grader import Grader
from pytest_agentdrift.run import runner, sandbox
from pytest_agentdrift.run.runsettings import RunSettings
from pytest_agentdrift.tasks.load import load_task
from pytest_agentdrift.testing import make_task

EXECUTING = ("pytest", "command", "golden")
NON_EXECUTING_CHECKS = [
    {"name": "scope", "kind": "paths", "layer": "scope"},
    {"name": "same", "kind": "unchanged", "layer": "scope"},
    {"name": "tamper", "kind": "tamper", "layer": "safety"},
    {"name": "effects", "kind": "effects", "layer": "safety"},
    {"name": "events", "kind": "events", "layer": "instruction_fidelity"},
    {"name": "convention", "kind": "diff_matches", "layer": "instruction_fidelity", "added": ["x"]},
    {"name": "files", "kind": "files", "layer": "correctness", "exist": ["src/pkg0/mod0.py"]},
]
FIXTURES = Path(__file__).resolve().parents[1] / "fixtures"


def generate_large(root: Path, n_files: int, total_mb: int):
    size = total_mb * (1 << 20) // n_files
    repo: dict[str, str] = {}
    for i in range(n_files):
        body = os.urandom(size // 2).hex()
        lines = "\n".join(body[j : j + 79] for j in range(0, len(body), 79))
        repo[f"src/pkg{i // 100}/mod{i}.py"] = f"# module {i}\n" + lines[: size - 20] + "\n"
    d = make_task(
        root, "BIG", repo=repo, checks=NON_EXECUTING_CHECKS, protected=["tests/**"], allowed=["src/**"], timeout_s=60
    )
    return load_task(d)


def ex01(root: Path):
    spec = load_task(FIXTURES / "EX01-fix-discount")
    return dataclasses.replace(spec, checks=tuple(c for c in spec.checks if c.kind not in EXECUTING))


def time_harness(spec, iso: sandbox.Isolation, base: Path) -> float:
    adapter = CommandAdapter(shutil.which("true") or "/bin/true")
    start = time.perf_counter()
    run = runner.run_agent(spec, 1, adapter, RunSettings(isolation=iso), base)
    results = Grader(iso, base).evaluate(spec, run)
    elapsed = time.perf_counter() - start
    assert run.exit_code == 0, (run.exit_code, run.stderr)
    assert all(c.kind not in EXECUTING for c in results)
    runner.cleanup(run)
    return elapsed


def time_baseline(repo: Path, scratch: Path) -> float:
    dst = scratch / "copy"
    start = time.perf_counter()
    subprocess.run(["cp", "-a", str(repo), str(dst)], check=True)
    subprocess.run(f"find {dst} -type f -print0 | xargs -0 sha256sum > /dev/null", shell=True, check=True)
    elapsed = time.perf_counter() - start
    shutil.rmtree(dst)
    return elapsed


def tree_size(repo: Path) -> tuple[int, int]:
    n = total = 0
    for dirpath, _, files in os.walk(repo):
        for f in files:
            n += 1
            total += os.lstat(os.path.join(dirpath, f)).st_size
    return n, total


def bench_fixture(name: str, spec, isolations, n: int, work: Path) -> None:
    files, size = tree_size(spec.repo)
    print(f"{name}: {files} files, {size / (1 << 20):.1f} MB")
    times: dict[str, list[float]] = {"baseline": [], **{f"harness[{iso.mode}]": [] for iso in isolations}}
    base = work / "runs"
    for _ in range(n):
        times["baseline"].append(time_baseline(spec.repo, work))
        for iso in isolations:
            times[f"harness[{iso.mode}]"].append(time_harness(spec, iso, base))
    med = {k: statistics.median(v) * 1000 for k, v in times.items()}
    b = med["baseline"]
    print(f"  {'baseline (cp -a + sha256sum)':<34} median {b:9.1f} ms   min {min(times['baseline']) * 1000:9.1f} ms")
    for iso in isolations:
        k = f"harness[{iso.mode}]"
        print(
            f"  {'harness, isolation ' + iso.mode:<34} median {med[k]:9.1f} ms   min {min(times[k]) * 1000:9.1f} ms"
            f"   ratio {med[k] / b:6.2f}x   (+{med[k] - b:.1f} ms)"
        )


def breakdown(spec, work: Path, n: int) -> None:
    """Where the harness's time goes, phase by phase (medians, same machine)."""
    from pytest_agentdrift.run import gitstate
    from pytest_agentdrift.tasks import treesnap

    phases: dict[str, list[float]] = {
        "copy_tree": [],
        "snapshot (hash all)": [],
        "git fixture template (once per task and process)": [],
        "resnapshot (unchanged)": [],
    }
    for i in range(n):
        dst = work / f"phase-{i}"
        t = time.perf_counter()
        runner.copy_tree(spec.repo, dst)
        phases["copy_tree"].append(time.perf_counter() - t)
        t = time.perf_counter()
        snap = treesnap.snapshot(dst)
        phases["snapshot (hash all)"].append(time.perf_counter() - t)
        t = time.perf_counter()
        gitstate.git_init_fixture(dst)
        phases["git fixture template (once per task and process)"].append(time.perf_counter() - t)
        t = time.perf_counter()
        treesnap.resnapshot(dst, snap)
        phases["resnapshot (unchanged)"].append(time.perf_counter() - t)
        shutil.rmtree(dst)
    print("  phases of the harness run (median):")
    for k, v in phases.items():
        print(f"    {k:<48} {statistics.median(v) * 1000:9.1f} ms")


def bench_hash(mb: int, n: int, work: Path) -> None:
    path = work / "big.bin"
    with open(path, "wb") as fh:
        block = os.urandom(1 << 20)
        fh.writelines(block[i % 7 :] + block[: i % 7] for i in range(mb))
    ours, theirs = [], []
    hash_file(path)  # warm the page cache
    for _ in range(n):
        t = time.perf_counter()
        h1 = hash_file(path)
        ours.append(time.perf_counter() - t)
        t = time.perf_counter()
        out = subprocess.run(["sha256sum", str(path)], check=True, capture_output=True, text=True).stdout
        theirs.append(time.perf_counter() - t)
        assert out.split()[0] == h1
    a, b = statistics.median(ours), statistics.median(theirs)
    print(f"hashing a {mb} MB file ({n} runs each, page cache warm)")
    print(f"  canonical.hash_file   median {a * 1000:8.1f} ms   {mb / a:7.1f} MB/s")
    print(f"  sha256sum             median {b * 1000:8.1f} ms   {mb / b:7.1f} MB/s")
    print(f"  ratio hash_file / sha256sum: {a / b:.2f}x")
    path.unlink()


def main() -> None:
    ap = argparse.ArgumentParser(description=__doc__.splitlines()[0])
    ap.add_argument("--n", type=int, default=5)
    ap.add_argument("--files", type=int, default=2000)
    ap.add_argument("--mb", type=int, default=20)
    ap.add_argument("--hash-mb", type=int, default=256)
    args = ap.parse_args()
    auto = sandbox.detect("auto")
    isolations = [auto] if auto.mode == "none" else [auto, sandbox.detect("none")]
    print(
        f"python {sys.version.split()[0]}, isolation auto = {auto.mode}, {os.cpu_count()} CPU(s), {args.n} runs each, alternating"
    )
    with tempfile.TemporaryDirectory(prefix="agentdrift-bench-") as tmp:
        work = Path(tmp)
        bench_fixture("EX01-fix-discount", ex01(work), isolations, args.n, work)
        big = generate_large(work / "tasks", args.files, args.mb)
        bench_fixture(f"generated ({args.files} files)", big, isolations, args.n, work)
        breakdown(big, work, 3)
        bench_hash(args.hash_mb, 3, work)


if __name__ == "__main__":
    main()
