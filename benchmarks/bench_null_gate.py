"""Benchmark: the regression gate's false-alarm rate and power on seeded random agents.

Runs the null experiment of compare/nullsim.py through the real comparison for
flake rates 5-40 %, 12 and 50 tasks, a baseline of k = 5 and pull-request k of
1, 3 and 5, under both flakes policies, and prints the Markdown table that
docs/statistics.md carries ("The false-alarm rate, held and measured"). A
false alarm is a failing gate on a pair of recordings of the same agent;
power is the share of pairs caught when one task gains a critical failure in
half of the candidate's runs. Each figure is over --pairs pairs (its standard
error is about sqrt(r (1 - r) / pairs)). This script prints; it asserts nothing.

    python benchmarks/bench_null_gate.py [--pairs 200] [--seed 0]
"""

from __future__ import annotations

import argparse

from pytest_agentdrift.compare.nullsim import Design, gate_rates


def main() -> None:
    parser = argparse.ArgumentParser(description=__doc__.splitlines()[0])
    parser.add_argument("--pairs", type=int, default=200)
    parser.add_argument("--seed", type=int, default=0)
    parser.add_argument("--base-k", type=int, default=5)
    args = parser.parse_args()
    print(f"baseline k = {args.base_k}, alpha 0.05, {args.pairs} null and {args.pairs} changed pairs per row")
    print()
    print("| flake | tasks | PR k | false alarms (strict) | power (strict) | false alarms (report) | power (report) |")
    print("|---|---|---|---|---|---|---|")
    for flake in (0.05, 0.2, 0.4):
        for tasks in (12, 50):
            for cand_k in (1, 3, 5):
                cells = []
                for flakes in ("strict", "report"):
                    design = Design(tasks=tasks, flake=flake, base_k=args.base_k, cand_k=cand_k, flakes=flakes)
                    r = gate_rates(design, args.pairs, seed=args.seed)
                    cells += [
                        f"{100 * r['false_alarms'] / args.pairs:.1f} %",
                        f"{100 * r['detected'] / args.pairs:.0f} %",
                    ]
                print(f"| {100 * flake:.0f} % | {tasks} | {cand_k} | " + " | ".join(cells) + " |", flush=True)


if __name__ == "__main__":
    main()
