"""Benchmark: a nightly pooled baseline and a pull request that confirms on suspicion, against today's
fixed designs, on seeded random agents (compare/nullsim.py, compare/sequential.py).

For 12 and 50 tasks, flake rates 0, 5 and 20 %, pools of 5, 30 and 60 runs per task (nightly records of
3 runs) with and without night-to-night variation of the flake rate (intra-night correlation 0.1), it
prints, per design: false alarms on unchanged PRs, power against (a) a check that never failed starting
to fail in half of one task's runs and (b) the flaking check rising to half of one task's runs (a PR
counts only when the block names that task and check), and the mean agent runs per unchanged and per
changed PR. The fixed designs run every task k times and apply the gate's check-rate tests; the
sequential one starts at k = 3 and confirms up to the cap. A second table gives, for each 12-task cell
without night variation, the cheapest fixed design that reaches the confirming design's power (k tried
in increasing order up to 48) and the two designs' runs side by side. Everything is measured in the
same run; this script prints and asserts nothing.

    python benchmarks/bench_pooled_gate.py [--prs 1000] [--tasks 12 50] [--flakes 0 0.05 0.2] [--pools 5 30 60]
"""

from __future__ import annotations

import argparse

from pytest_agentdrift.compare.nullsim import PoolDesign, pool_rates


def _cells(base: PoolDesign, prs: int, seed: int) -> list[str]:
    null = pool_rates(base, prs, seed)
    a = pool_rates(PoolDesign(**{**base.__dict__, "change": "new"}), prs, seed)
    b = pool_rates(PoolDesign(**{**base.__dict__, "change": "flake"}), prs, seed)
    return [
        f"{100 * null['rate']:.1f} %",
        f"{100 * a['rate']:.0f} %",
        f"{100 * b['rate']:.0f} %",
        f"{null['runs']:.0f}",
        f"{(a['runs'] + b['runs']) / 2:.0f}",
    ]


FIXED_KS = (3, 4, 6, 8, 12, 16, 24, 32, 48)


def _cheapest_fixed(base: PoolDesign, change: str, power: float, prs: int, seed: int) -> str:
    """The first fixed k (in FIXED_KS) whose power against ``change`` reaches ``power``, with its runs."""
    for k in FIXED_KS:
        fixed = pool_rates(PoolDesign(**{**base.__dict__, "k": k, "cap": 0, "change": change}), prs, seed)
        if fixed["rate"] >= power:
            return f"k {k}: {100 * fixed['rate']:.0f} % at {fixed['runs']:.0f} runs"
    return f"none up to k {FIXED_KS[-1]} ({FIXED_KS[-1] * base.tasks} runs)"


def _same_power_table(args: argparse.Namespace) -> None:
    print()
    print("| flake | pool | change | confirm: power, runs per changed PR | cheapest fixed design of that power |")
    print("|---|---|---|---|---|")
    for flake in args.flakes:
        for pool in args.pools:
            base = PoolDesign(12, flake, pool, k=3, cap=args.cap)
            for change in ("new", "flake"):
                seq = pool_rates(PoolDesign(**{**base.__dict__, "change": change}), args.prs, args.seed)
                fixed = _cheapest_fixed(base, change, seq["rate"], args.prs, args.seed)
                row = [f"{100 * flake:.0f} %", str(pool), "(a)" if change == "new" else "(b)"]
                row += [f"{100 * seq['rate']:.0f} % at {seq['runs']:.0f} runs", fixed]
                print("| " + " | ".join(row) + " |", flush=True)


def main() -> None:
    parser = argparse.ArgumentParser(description=__doc__.splitlines()[0])
    parser.add_argument("--prs", type=int, default=1000)
    parser.add_argument("--seed", type=int, default=0)
    parser.add_argument("--cap", type=int, default=30)
    parser.add_argument("--tasks", type=int, nargs="+", default=[12, 50])
    parser.add_argument("--flakes", type=float, nargs="+", default=[0.0, 0.05, 0.2])
    parser.add_argument("--pools", type=int, nargs="+", default=[5, 30, 60])
    parser.add_argument("--icc", type=float, nargs="+", default=[0.0, 0.1])
    parser.add_argument("--fixed-k", type=int, nargs="+", default=[3, 8])
    parser.add_argument("--same-power", action="store_true", help="print only the same-power table")
    parser.add_argument(
        "--rho-from",
        nargs="+",
        default=["estimate"],
        choices=["estimate", "bound", "known"],
        help="the night-to-night variation the confirming design counts with: the gate's estimate, the most "
        "the pool cannot rule out, or the simulated variation itself (what a perfect estimate would reach)",
    )
    args = parser.parse_args()
    if args.same_power:
        _same_power_table(args)
        return
    print(f"alpha 0.05, {args.prs} PRs per cell, nightly records of 3 runs; sequential: k 3 to a cap of {args.cap}")
    print()
    print(
        "| tasks | flake | pool | night var. | design | false alarms | power (a) | power (b) | runs unchanged | runs changed |"
    )
    print("|---|---|---|---|---|---|---|---|---|---|")
    for tasks in args.tasks:
        for flake in args.flakes:
            for pool in args.pools:
                for icc in args.icc:
                    designs = [(f"fixed k {k}", PoolDesign(tasks, flake, pool, k=k, icc=icc)) for k in args.fixed_k]
                    for rho_from in args.rho_from:
                        name = f"confirm 3..{args.cap}" + ("" if rho_from == "estimate" else f", rho {rho_from}")
                        design = PoolDesign(tasks, flake, pool, k=3, cap=args.cap, icc=icc, rho_from=rho_from)
                        designs.append((name, design))
                    for name, design in designs:
                        row = [str(tasks), f"{100 * flake:.0f} %", str(pool), f"{icc:g}", name]
                        print("| " + " | ".join(row + _cells(design, args.prs, args.seed)) + " |", flush=True)
    if 12 in args.tasks:
        _same_power_table(args)


if __name__ == "__main__":
    main()
