"""Benchmark: comparing two runs of 2,000 tasks x k = 5.

Times pytest_agentdrift's paired bootstrap (and the whole compare_runs, which
also runs the cost-promotion bootstrap, failure classes, variance and the
gate) against the straightforward pure-Python paired bootstrap below, on the
same per-task deltas with 10,000 resamples each. Prints the speed ratios and
the largest difference between the two intervals' endpoints.

Target (issue 5): at least 20x faster, endpoints within 0.005. This script
prints; it never asserts on time (timings depend on the machine).

    python benchmarks/bench_compare.py [--tasks 2000] [--k 5] [--draws 10000]
"""

from __future__ import annotations

import argparse
import math
import random
import time
from typing import Any

from pytest_agentdrift.compare import stats
from pytest_agentdrift.compare.decision import GateParams, compare_runs


def make_results(n_tasks: int, k: int, seed: int, lift: float, runtime_id: str) -> dict[str, Any]:
    """A synthetic results.json dict: task difficulty varies, runs are noisy."""
    rng = random.Random(seed)
    tasks = {}
    for i in range(n_tasks):
        task_rng = random.Random(i)  # same difficulty for a task in both arms
        p = min(1.0, max(0.0, task_rng.random() + lift))
        runs = []
        for rep in range(1, k + 1):
            ok = rng.random() < p
            runs.append(
                {
                    "rep": rep,
                    "outcome": "passed" if ok else "failed",
                    "passed": ok,
                    "tampered_pass": False,
                    "critical_failed": [],
                    "failed_checks": [] if ok else ["tests"],
                    "layers": {"safety": "pass"},
                    "usage": {"input_tokens": 1000, "output_tokens": 200, "cost_usd": rng.uniform(0.01, 0.05)},
                }
            )
        tasks[f"T{i:05d}"] = {"title": "", "suite": f"s{i % 4}", "runs": runs}
    return {
        "run_id": runtime_id,
        "complete": True,
        "runtime_id": runtime_id,
        "task_set_id": "sha256:tasks",
        "evaluator_id": "sha256:eval",
        "tasks": tasks,
    }


def reference_bootstrap(deltas: list[float], draws: int, seed: int, confidence: float = 0.95) -> tuple[float, float]:
    """The straightforward pure-Python paired bootstrap: resample tasks with
    replacement, take the mean delta, sort, read the percentiles (linear
    interpolation between order statistics, as numpy's default quantile)."""
    rng = random.Random(seed)
    n = len(deltas)
    means = sorted(sum(deltas[rng.randrange(n)] for _ in range(n)) / n for _ in range(draws))

    def quantile(q: float) -> float:
        pos = q * (draws - 1)
        lo = math.floor(pos)
        hi = min(lo + 1, draws - 1)
        return means[lo] + (means[hi] - means[lo]) * (pos - lo)

    tail = (1.0 - confidence) / 2.0
    return quantile(tail), quantile(1.0 - tail)


def timed(fn, *args, **kwargs):
    start = time.perf_counter()
    value = fn(*args, **kwargs)
    return value, time.perf_counter() - start


def main() -> None:
    parser = argparse.ArgumentParser(description=__doc__.splitlines()[0])
    parser.add_argument("--tasks", type=int, default=2000)
    parser.add_argument("--k", type=int, default=5)
    parser.add_argument("--draws", type=int, default=10_000)
    parser.add_argument("--seed", type=int, default=0)
    args = parser.parse_args()

    base = make_results(args.tasks, args.k, 1, 0.0, "sha256:base")
    cand = make_results(args.tasks, args.k, 2, 0.02, "sha256:cand")
    params = GateParams(draws=args.draws)

    # Warm up once so imports (numpy, scipy) are not billed to the timing;
    # the cold figure is printed separately.
    _, cold = timed(
        compare_runs,
        base,
        cand,
        comparable=True,
        reasons=[],
        change_class="client_candidate",
        gate=params,
        seed=args.seed,
    )
    comparison, full = timed(
        compare_runs,
        base,
        cand,
        comparable=True,
        reasons=[],
        change_class="client_candidate",
        gate=params,
        seed=args.seed,
    )
    ids = sorted(comparison["tasks"])
    deltas = [comparison["tasks"][t]["delta"] for t in ids]
    ours, boot = timed(stats.paired_bootstrap_delta, deltas, draws=args.draws, seed=args.seed)
    ref, ref_time = timed(reference_bootstrap, deltas, args.draws, args.seed)

    diff = max(abs(ours.low - ref[0]), abs(ours.high - ref[1]))
    print(f"data: {args.tasks} tasks x k={args.k} per arm, {args.draws} resamples")
    print(f"delta {ours.estimate:+.4f}")
    print(f"  agentdrift interval  [{ours.low:+.4f}, {ours.high:+.4f}]  ({ours.method})")
    print(f"  reference interval   [{ref[0]:+.4f}, {ref[1]:+.4f}]  (pure Python)")
    print(f"  max endpoint difference {diff:.4f}  (target <= 0.005: {'met' if diff <= 0.005 else 'MISSED'})")
    print(f"time: reference bootstrap {ref_time:.2f} s")
    print(f"      agentdrift bootstrap {boot:.3f} s  -> {ref_time / boot:.0f}x faster")
    print(
        f"      agentdrift compare_runs (both bootstraps, gate, classes, variance) {full:.3f} s"
        f"  -> {ref_time / full:.0f}x faster (target >= 20x: {'met' if ref_time / full >= 20 else 'MISSED'})"
    )
    print(f"      first compare_runs call incl. numpy/scipy imports {cold:.3f} s")


if __name__ == "__main__":
    main()
