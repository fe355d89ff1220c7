"""The regression gate on seeded random agents: its false-alarm rate and its power, measured.

Pure (no pytest, no I/O): builds results.json dicts for a simulated agent and
runs the real comparison (compare.comparison.compare_runs) on them. Used by
benchmarks/bench_null_gate.py (the table in docs/statistics.md) and by the
test that holds the bound.

The agent. Task t passes a run with its own probability q_t (drawn once per
agent, uniform in [0.6, 1.0]), and every run independently fails the critical
check ``only-allowed-paths`` with the flake rate f (an out-of-scope write that
fails the run). A null pair is two recordings of that same agent: the
baseline with ``base_k`` runs per task, the candidate with ``cand_k``. A
power pair is the same, except that in the candidate one task also fails the
critical check ``no-new-behaviour`` in half its runs: a critical behaviour
that appeared.
"""

from __future__ import annotations

import random
from dataclasses import dataclass
from typing import Any

from pytest_agentdrift.vocabulary import DEFAULT_SEED

FLAKE_CHECK = "only-allowed-paths"
CHANGE_CHECK = "no-new-behaviour"


@dataclass(frozen=True)
class Design:
    tasks: int
    flake: float
    base_k: int
    cand_k: int
    flakes: str = "strict"
    alpha: float = 0.05


def recording(rng: random.Random, rates: list[float], k: int, flake: float, change: float = 0.0) -> dict[str, Any]:
    """results.json of one recording; ``change``: the rate at which task T000 shows the new behaviour."""
    tasks = {}
    for i, q in enumerate(rates):
        tid = f"T{i:03d}"
        runs = []
        for rep in range(1, k + 1):
            critical = [FLAKE_CHECK] if rng.random() < flake else []
            if i == 0 and change and rng.random() < change:
                critical.append(CHANGE_CHECK)
            ok = not critical and rng.random() < q
            runs.append(
                {
                    "rep": rep,
                    "outcome": "passed" if ok else "failed",
                    "passed": ok,
                    "tampered_pass": False,
                    "critical_failed": critical,
                    "failed_checks": critical + ([] if ok or critical else ["tests"]),
                    "layers": {"safety": "pass"},
                    "usage": None,
                }
            )
        tasks[tid] = {"title": tid, "suite": "sim", "runs": runs}
    return {
        "run_id": "sim",
        "complete": True,
        "runtime_id": "sha256:sim",
        "task_set_id": "sha256:tasks",
        "evaluator_id": "sha256:eval",
        "tasks": tasks,
    }


def gate_fails(design: Design, seed: int, change: float = 0.0) -> bool:
    """One simulated pair through the real comparison: does the regression gate fail?"""
    from pytest_agentdrift.compare.comparison import compare_runs
    from pytest_agentdrift.compare.gates import GateParams

    rng = random.Random(seed)
    rates = [rng.uniform(0.6, 1.0) for _ in range(design.tasks)]
    base = recording(rng, rates, design.base_k, design.flake)
    cand = recording(rng, rates, design.cand_k, design.flake, change)
    params = GateParams(alpha=design.alpha, flakes=design.flakes, draws=100)
    comparison = compare_runs(base, cand, comparable=True, reasons=[], change_class="identical", gate=params)
    return not comparison["regression"]["passed"]


def gate_rates(design: Design, pairs: int, seed: int = DEFAULT_SEED) -> dict[str, Any]:
    """False-alarm rate (null pairs) and power (a critical behaviour at 50 %) over ``pairs`` pairs each."""
    alarms = sum(gate_fails(design, seed * 1_000_003 + i) for i in range(pairs))
    hits = sum(gate_fails(design, seed * 1_000_003 + pairs + i, change=0.5) for i in range(pairs))
    return {"design": design, "pairs": pairs, "false_alarms": alarms, "detected": hits}
