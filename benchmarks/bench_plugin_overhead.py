"""What the installed plugin adds to a pytest run that does not use it.

Creates a temporary project with ~50 trivial tests and times, alternating,

* with:    python -m pytest -q -p no:cacheprovider
* without: python -m pytest -q -p no:cacheprovider -p no:agentdrift

N runs each (default 15), once without a bytecode cache (PYTHONDONTWRITEBYTECODE=1
and no __pycache__ for the package, as many CI images run: every imported module
of the plugin is then compiled and assert-rewritten on each run) and once with a
warm cache, and prints the medians, the difference in ms, the ratio, and whether
the difference is within the 50 ms budget. It also lists the package modules a
run that does not use the plugin imports, and the top cumulative entries of
`python -X importtime -c "import pytest_agentdrift.plugin"`. Never asserts on time.

    python benchmarks/bench_plugin_overhead.py [--n 15] [--tests 50] [--cache off|on|both]
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

BUDGET_MS = 50.0


def make_project(root: Path, n_tests: int) -> None:
    (root / "pytest.ini").write_text("[pytest]\n")
    per_file = 10
    for f in range((n_tests + per_file - 1) // per_file):
        lines = [
            f"def test_{f}_{i}():\n    assert {i} + 1 == {i + 1}\n\n"
            for i in range(per_file)
            if f * per_file + i < n_tests
        ]
        (root / f"test_trivial_{f}.py").write_text("".join(lines))


def time_once(argv: list[str], cwd: Path, env: dict[str, str]) -> float:
    start = time.perf_counter()
    proc = subprocess.run(
        argv, check=False, cwd=cwd, env=env, stdout=subprocess.PIPE, stderr=subprocess.STDOUT, text=True
    )
    elapsed = time.perf_counter() - start
    if proc.returncode != 0:
        raise SystemExit(f"pytest failed ({proc.returncode}):\n{proc.stdout[-2000:]}")
    return elapsed


def importtime_top(env: dict[str, str], top: int) -> list[tuple[int, int, str]]:
    """(cumulative us, self us, module) of the slowest imports, by cumulative time."""
    proc = subprocess.run(
        [sys.executable, "-X", "importtime", "-c", "import pytest_agentdrift.plugin"],
        check=False,
        env=env,
        capture_output=True,
        text=True,
    )
    rows = []
    for line in proc.stderr.splitlines():
        if not line.startswith("import time:") or "self [us]" in line:
            continue
        parts = [p.strip() for p in line[len("import time:") :].split("|")]
        if len(parts) == 3 and parts[0].isdigit() and parts[1].isdigit():
            rows.append((int(parts[1]), int(parts[0]), parts[2]))
    rows.sort(reverse=True)
    return rows[:top]


PACKAGE = Path(__file__).resolve().parent.parent / "pytest_agentdrift"

LOADED_PROBE = """
import sys
def pytest_unconfigure(config):
    mods = sorted(m for m in sys.modules if m.startswith("pytest_agentdrift"))
    print("AGENTDRIFT-LOADED " + " ".join(mods))
"""


def drop_package_bytecode() -> None:
    for cache in PACKAGE.rglob("__pycache__"):
        shutil.rmtree(cache, ignore_errors=True)


def measure(args, root: Path, env: dict[str, str], variants: dict[str, list[str]], cache: bool) -> None:
    env = dict(env)
    if cache:
        env.pop("PYTHONDONTWRITEBYTECODE", None)
    else:
        env["PYTHONDONTWRITEBYTECODE"] = "1"
        drop_package_bytecode()
    for argv in variants.values():  # warm the OS caches (and, with a cache, the pyc files) once
        time_once(argv, root, env)
    times: dict[str, list[float]] = {name: [] for name in variants}
    for _ in range(args.n):
        for name, argv in variants.items():
            times[name].append(time_once(argv, root, env))
    med = {name: statistics.median(ts) * 1000 for name, ts in times.items()}
    with_ms, without_ms = med["with plugin"], med["without (-p no:agentdrift)"]
    diff = with_ms - without_ms
    label = "warm bytecode cache" if cache else "no bytecode cache (PYTHONDONTWRITEBYTECODE=1)"
    print(f"pytest run of {args.tests} trivial tests, {args.n} runs each, alternating, {label}")
    for name, ts in times.items():
        ms = sorted(t * 1000 for t in ts)
        print(f"  {name:<28} median {med[name]:8.1f} ms   min {ms[0]:8.1f}   max {ms[-1]:8.1f}")
    min_diff = min(times["with plugin"]) * 1000 - min(times["without (-p no:agentdrift)"]) * 1000
    print(f"  difference (plugin cost)     {diff:+8.1f} ms   (of the minima: {min_diff:+.1f} ms)")
    print(f"  ratio with/without           {with_ms / without_ms:8.3f}")
    verdict = "WITHIN" if diff <= BUDGET_MS else "OVER"
    print(f"  budget {BUDGET_MS:.0f} ms: {verdict} budget")
    print()


def main() -> None:
    ap = argparse.ArgumentParser(description=__doc__.splitlines()[0])
    ap.add_argument("--n", type=int, default=15, help="runs of each variant (alternating)")
    ap.add_argument("--tests", type=int, default=50)
    ap.add_argument("--top", type=int, default=15, help="importtime entries to show")
    ap.add_argument("--cache", choices=("off", "on", "both"), default="both", help="bytecode cache for the package")
    args = ap.parse_args()

    env = {k: v for k, v in os.environ.items() if not k.startswith(("PYTEST_", "AGENTDRIFT_"))}
    base = [sys.executable, "-m", "pytest", "-q", "-p", "no:cacheprovider"]
    variants = {"with plugin": base, "without (-p no:agentdrift)": base + ["-p", "no:agentdrift"]}
    with tempfile.TemporaryDirectory(prefix="agentdrift-bench-") as tmp:
        root = Path(tmp)
        make_project(root, args.tests)
        for cache in {"off": [False], "on": [True], "both": [False, True]}[args.cache]:
            measure(args, root, env, variants, cache)
        (root / "conftest.py").write_text(LOADED_PROBE)
        out = subprocess.run(base + ["-s"], cwd=root, env=env, capture_output=True, text=True, check=False).stdout
        loaded = next((ln.split()[1:] for ln in out.splitlines() if ln.startswith("AGENTDRIFT-LOADED")), [])
        print(f"pytest_agentdrift modules imported by a run that does not use the plugin: {len(loaded)}")
        print("  " + " ".join(loaded))
    env["PYTHONDONTWRITEBYTECODE"] = "1"
    print()
    print(f"python -X importtime -c 'import pytest_agentdrift.plugin': top {args.top} by cumulative time")
    print(f"  {'cumulative us':>13} {'self us':>9}  module")
    rows = importtime_top(env, 10_000)
    for cumulative, self_us, name in rows[: args.top]:
        print(f"  {cumulative:>13} {self_us:>9}  {name}")
    own = [r for r in rows if r[2].strip().startswith("pytest_agentdrift")]
    print(f"  of which pytest_agentdrift's own modules (self time total {sum(r[1] for r in own)} us):")
    for cumulative, self_us, name in own[: args.top]:
        print(f"  {cumulative:>13} {self_us:>9}  {name}")


if __name__ == "__main__":
    main()
