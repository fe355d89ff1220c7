"""Every benchmark under benchmarks/ runs at a small size, so none rots: a benchmark that crashes is a
bug. The figures they print are not asserted (they are ratios for a person to read); the run is."""

from __future__ import annotations

import subprocess
import sys
from pathlib import Path

import pytest

BENCHMARKS = Path(__file__).resolve().parents[2] / "benchmarks"
#: the sizes: one session per arm, the task whose runs and grading are the shortest (T07)
SMALL = {
    # a chain deeper than Python's recursion limit, as the full size's 5,000 is
    "bench_agent_leftovers.py": ["--n", "1", "--files", "100", "--depth", "1200"],
    "bench_builtin_suite.py": ["--n", "1", "-k", "T07"],
    "bench_compare.py": ["--tasks", "50", "--k", "3", "--draws", "200"],
    "bench_harness_overhead.py": ["--n", "1", "--files", "50", "--mb", "1", "--hash-mb", "4"],
    "bench_html_report.py": ["--tasks", "10", "--k", "1", "--repeat", "1"],
    # fewer tasks than its merge has shards: an empty shard is merged too
    # and a resume of one missing run of two
    "bench_long_runs.py": ["--tasks", "2", "--sleep-tasks", "2", "--sleep", "0.1", "--resume-tasks", "2"],
    "bench_manifest.py": ["--files", "200", "--repeat", "1"],
    "bench_null_gate.py": ["--pairs", "3"],
    "bench_plugin_overhead.py": ["--n", "1", "--tests", "5", "--cache", "off"],
    "bench_pooled_gate.py": "--prs 5 --tasks 12 --flakes 0.05 --pools 5 --fixed-k 3 --icc 0 0.1 --rho-from estimate bound known".split(),
    # one task (T07, which the changed PRs break), one run a night, a PR confirmed up to two runs
    "bench_pooled_gate_sessions.py": "--nights 1 --prs 1 --k 1 --cap 2 --tasks T07 --sim-prs 20".split(),
    "bench_regrade.py": ["--n", "1", "-k", "T07"],
}

pytestmark = pytest.mark.slow


def test_every_benchmark_has_a_small_size():
    assert sorted(p.name for p in BENCHMARKS.glob("bench_*.py")) == sorted(SMALL)


@pytest.mark.parametrize("name", sorted(SMALL))
def test_the_benchmark_runs_at_a_small_size(name, tmp_path):
    out = subprocess.run(
        [sys.executable, str(BENCHMARKS / name), *SMALL[name]],
        cwd=tmp_path,
        capture_output=True,
        text=True,
        timeout=600,
    )
    assert out.returncode == 0, f"{name} crashed:\n{out.stdout[-2000:]}\n{out.stderr[-3000:]}"
    assert out.stdout.strip(), f"{name} printed nothing"
