"""Benchmark: comparing two runs of 2,000 tasks x k = 5.

Times pytest_agentdrift's paired bootstrap (and the whole compare_runs, which
also runs the cost-promotion bootstrap, failure classes, variance and the
gate) against the straightforward pure-Python paired bootstrap below, on the
same per-task deltas with 10,000 resamples each. Prints the speed ratios and
the largest difference between the two intervals' endpoints.

Targets: at least 20x faster than the reference bootstrap, endpoints within
0.005; the whole comparison of 10,000 tasks x k = 5 within 2 s; the smallest
detectable regression equal to the former exact task-by-task recursion
(reference_power below, quadratic in the number of tasks) where that one can
be computed (--check-mde, up to a few thousand tasks). This script prints; it
never asserts on time (timings depend on the machine).

    python benchmarks/bench_compare.py [--tasks 2000] [--k 5] [--draws 10000] [--check-mde]
"""

from __future__ import annotations

import argparse
import math
import random
import time
from typing import Any

from pytest_agentdrift.compare import stats
from pytest_agentdrift.compare.comparison import compare_runs
from pytest_agentdrift.compare.gates import GateParams
from pytest_agentdrift.compare.power import minimum_detectable_regression


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


def reference_power(base_rates: list[float], k: int, delta: float, alpha: float) -> float:
    """The former exact power: the (won, lost) table built task by task (quadratic in tasks)."""
    import numpy as np

    from pytest_agentdrift.compare.power import rejection_region, solved_probability

    p = np.clip(np.asarray(base_rates, dtype=float), 0.0, 1.0)
    sb, sc = solved_probability(p, k), solved_probability(np.clip(p - delta, 0.0, 1.0), k)
    dist = np.ones((1, 1))
    for pw, pl in zip((1.0 - sb) * sc, sb * (1.0 - sc), strict=True):
        rows, cols = dist.shape
        new = np.zeros((rows + 1, cols + 1))
        new[:rows, :cols] += dist * (1.0 - pw - pl)
        new[1:, :cols] += dist * pw
        new[:rows, 1:] += dist * pl
        keep_r = max(1, int(np.nonzero(new.sum(axis=1) > 1e-18)[0].max()) + 1)
        keep_c = max(1, int(np.nonzero(new.sum(axis=0) > 1e-18)[0].max()) + 1)
        dist = new[:keep_r, :keep_c]
    region = rejection_region(len(base_rates), alpha)[: dist.shape[0], : dist.shape[1]]
    return float(dist[region].sum())


def reference_mde(base_rates: list[float], k: int, alpha: float, power: float = 0.8) -> int | None:
    """Smallest whole-pp drop whose reference power reaches ``power`` (bisection)."""
    if reference_power(base_rates, k, 1.0, alpha) < power:
        return None
    lo, hi = 0, 100
    while hi - lo > 1:
        mid = (lo + hi) // 2
        lo, hi = (lo, mid) if reference_power(base_rates, k, mid / 100, alpha) >= power else (mid, hi)
    return hi


def timed(fn, *args, **kwargs):
    start = time.perf_counter()
    value = fn(*args, **kwargs)
    return value, time.perf_counter() - start


def cpu_timed(fn, *args, **kwargs):
    """(value, wall seconds, CPU seconds of this process): on a shared machine the CPU figure is
    what the comparison itself costs, the wall figure adds the waiting for a core."""
    cpu = time.process_time()
    value, wall = timed(fn, *args, **kwargs)
    return value, wall, time.process_time() - cpu


def main() -> None:
    parser = argparse.ArgumentParser(description=__doc__.splitlines()[0])
    parser.add_argument("--tasks", type=int, default=2000)
    parser.add_argument("--k", type=int, default=5)
    parser.add_argument("--draws", type=int, default=10_000)
    parser.add_argument("--seed", type=int, default=0)
    parser.add_argument("--check-mde", action="store_true", help="also run the former quadratic exact MDE")
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
    comparison, full, full_cpu = cpu_timed(
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
    _, warm = timed(
        compare_runs,
        base,
        cand,
        comparable=True,
        reasons=[],
        change_class="client_candidate",
        gate=params,
        seed=args.seed,
    )
    print(f"      again in the same process (smallest detectable cached by design) {warm:.3f} s")
    promotion = comparison["promotion"]
    if promotion.get("approximation_error") is not None:
        print(
            f"promotion support {promotion['support']:.3f} ({promotion['method']}; "
            f"error <= {promotion['approximation_error']:.4f})"
        )
    mde = comparison["regression"]["minimum_detectable"]
    rates = [comparison["tasks"][t]["baseline"][0] / comparison["tasks"][t]["baseline"][1] for t in ids]
    fresh, mde_time = timed(minimum_detectable_regression, rates, mde["k"], mde["alpha"])
    print(
        f"smallest detectable regression {mde['mde_pp']} pp (power {mde['power_at_mde']:.3f}); "
        f"computed afresh in {mde_time:.3f} s (part of compare_runs)"
    )
    target = "met" if full <= 2.0 else "MISSED"
    print(
        f"whole comparison {full:.3f} s wall, {full_cpu:.3f} s CPU "
        f"(target <= 2 s at 10,000 tasks x k = 5: {target} here on the wall clock; "
        f"{'met' if full_cpu <= 2.0 else 'MISSED'} in CPU time)"
    )
    if args.check_mde:
        ref, ref_mde_time = timed(reference_mde, rates, mde["k"], mde["alpha"])
        agree = "met" if ref is not None and fresh["mde_pp"] is not None and abs(ref - fresh["mde_pp"]) <= 1 else "?"
        print(
            f"former exact recursion: {ref} pp in {ref_mde_time:.2f} s -> {ref_mde_time / mde_time:.0f}x; "
            f"within 1 pp: {agree if ref != fresh['mde_pp'] else 'met (equal)'}"
        )


if __name__ == "__main__":
    main()
