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
from dataclasses import dataclass, replace
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
    from pytest_agentdrift.compare.status import regression_section

    rng = random.Random(seed)
    rates = [rng.uniform(0.6, 1.0) for _ in range(design.tasks)]
    base = recording(rng, rates, design.base_k, design.flake)
    cand = recording(rng, rates, design.cand_k, design.flake, change)
    params = GateParams(alpha=design.alpha, flakes=design.flakes, draws=100)
    comparison = compare_runs(base, cand, comparable=True, reasons=[], change_class="identical", gate=params)
    return not regression_section(comparison)["passed"]


def gate_rates(design: Design, pairs: int, seed: int = DEFAULT_SEED) -> dict[str, Any]:
    """False-alarm rate (null pairs) and power (a critical behaviour at 50 %) over ``pairs`` pairs each."""
    alarms = sum(gate_fails(design, seed * 1_000_003 + i) for i in range(pairs))
    hits = sum(gate_fails(design, seed * 1_000_003 + pairs + i, change=0.5) for i in range(pairs))
    return {"design": design, "pairs": pairs, "false_alarms": alarms, "detected": hits}


# --- a pooled baseline (nightly records) against a pull request that confirms on suspicion --------------

PASS_CHECK = "pass rate"  # compare/sequential.PASS_RATE
Runs = list[list[str]]  # each run: the hypotheses it failed
Nights = list[Runs]  # a task's pool: each night's runs


@dataclass(frozen=True)
class PoolDesign:
    """A nightly pool and a pull-request design, and the change to detect.

    ``pool``: baseline runs per task (``pool / night_k`` records, rounded, of ``night_k`` runs each); ``icc``: the
    night-to-night variation of the flake rate (the intra-night correlation of its failures, 0 for none);
    ``change``: "" (none), "new" (a check that never failed fails in half of one task's runs) or "flake"
    (the flaking check rises to half of one task's runs); ``cap``: 0 for a fixed design of ``k`` runs;
    ``rho_from``: the intra-night correlation the confirming design counts with: "estimate" (the gate's
    own, compare/sequential.dispersion), "bound" (the most the pool cannot rule out) or "known" (``icc``
    itself, which no real pool gives: what a perfect estimate would reach)."""

    tasks: int
    flake: float
    pool: int
    k: int = 3
    cap: int = 0
    icc: float = 0.0
    night_k: int = 3
    alpha: float = 0.05
    change: str = ""
    rho_from: str = "estimate"


def _night_rate(rng: random.Random, mean: float, icc: float) -> float:
    """One night's flake rate: Beta with the given mean and intra-night correlation (1 / (a + b + 1))."""
    if icc <= 0 or mean <= 0:
        return mean
    total = 1.0 / icc - 1.0
    return rng.betavariate(mean * total, (1.0 - mean) * total)


def _sim_run(rng: random.Random, q: float, flake: float, change: str, changed: bool) -> list[str]:
    """The hypotheses one simulated run fails: the flaking check, the new one, the pass rate."""
    failed = []
    if rng.random() < (0.5 if changed and change == "flake" else flake):
        failed.append(FLAKE_CHECK)
    if changed and change == "new" and rng.random() < 0.5:
        failed.append(CHANGE_CHECK)
    if failed or rng.random() >= q:
        failed.append(PASS_CHECK)
    return failed


def pool_pr(design: PoolDesign, seed: int) -> dict[str, Any]:
    """One simulated pull request against its pool: blocked?, on the changed task and check?, agent runs."""
    from pytest_agentdrift.compare import sequential as seq

    rng = random.Random(seed)
    rates = [rng.uniform(0.6, 1.0) for _ in range(design.tasks)]
    nights = max(1, round(design.pool / design.night_k))  # whole nights: a pool of 5 is two nights of 3
    pools: list[Nights] = []  # per task, per night, the failed hypotheses of each run
    groups: dict[tuple[int, str], list[tuple[int, int]]] = {}
    for t, q in enumerate(rates):
        per_night: Nights = []
        for _ in range(nights):
            f = _night_rate(rng, design.flake, design.icc)
            runs = [_sim_run(rng, q, f, "", False) for _ in range(design.night_k)]
            per_night.append(runs)
            # the critical checks, as the pool does (compare/pool.py): not the pass rate
            groups.setdefault((t, FLAKE_CHECK), []).append((sum(FLAKE_CHECK in r for r in runs), len(runs)))
        pools.append(per_night)
    disp = seq.dispersion(list(groups.values()))
    if design.rho_from == "bound":
        disp = replace(disp, rho=disp.rho_upper or 0.0)
    elif design.rho_from == "known":
        disp = replace(disp, rho=design.icc)
    cand_flake = [_night_rate(rng, design.flake, design.icc) for _ in rates]
    runs_cap = design.cap or design.k
    cand = [
        [_sim_run(rng, q, cand_flake[t], design.change, t == 0) for _ in range(runs_cap)] for t, q in enumerate(rates)
    ]
    if design.cap:
        return _sequential_pr(design, pools, cand, disp)
    return _fixed_pr(design, pools, cand)


def _pool_counts(per_night: Nights) -> tuple[dict[str, int], int]:
    fails: dict[str, int] = {}
    runs = 0
    for night in per_night:
        for failed in night:
            runs += 1
            for check in failed:
                fails[check] = fails.get(check, 0) + 1
    return fails, runs


def _named(blocked: dict[int, tuple[str, ...]], change: str) -> bool:
    want = CHANGE_CHECK if change == "new" else FLAKE_CHECK
    return want in blocked.get(0, ())


def _sequential_pr(design: PoolDesign, pools: list[Nights], cand: list[Runs], disp: Any) -> dict[str, Any]:
    from pytest_agentdrift.compare import sequential as seq

    plan = seq.ConfirmPlan(design.k, design.cap, design.alpha, design.tasks)
    by_task = [seq.Pool(*_pool_counts(per_night), disp.base_effect, disp.rho) for per_night in pools]
    screened = sum(seq.screened(runs[: design.k], by_task[t]) for t, runs in enumerate(cand))
    blocked: dict[int, tuple[str, ...]] = {}
    spent = 0
    for t, runs in enumerate(cand):
        pool = by_task[t]
        looks = seq.sequence(plan, screened, runs, pool)
        spent += looks[-1].runs
        if looks[-1].state == seq.NEW:
            blocked[t] = looks[-1].new
    return {"blocked": bool(blocked), "named": _named(blocked, design.change), "runs": spent}


def _fixed_pr(design: PoolDesign, pools: list[Nights], cand: list[Runs]) -> dict[str, Any]:
    """Today's fixed design: every task k times, the gate's check-rate tests (Tarone over the family)."""
    from pytest_agentdrift.compare.checkrates import NEW, CheckCounts, check_rate_tests

    counts = []
    for t, runs in enumerate(cand):
        base_fails, base_runs = _pool_counts(pools[t])
        for check in (FLAKE_CHECK, CHANGE_CHECK):
            cf = sum(check in r for r in runs)
            counts.append(CheckCounts(f"T{t:03d}", check, base_fails.get(check, 0), base_runs, cf, len(runs)))
    tests = check_rate_tests(counts, alpha=design.alpha, paired_tests=1, flakes="report")
    blocked: dict[int, tuple[str, ...]] = {}
    for row in tests["rows"]:
        if row["verdict"] == NEW:
            t = int(row["task"][1:])
            blocked[t] = (*blocked.get(t, ()), row["check"])
    return {"blocked": bool(blocked), "named": _named(blocked, design.change), "runs": design.k * design.tasks}


def pool_rates(design: PoolDesign, prs: int, seed: int = DEFAULT_SEED) -> dict[str, Any]:
    """False alarms (no change) or power (the change named), and the mean agent runs, over ``prs`` PRs."""
    out = [pool_pr(design, seed * 1_000_003 + i) for i in range(prs)]
    hit = sum(r["named"] for r in out) if design.change else sum(r["blocked"] for r in out)
    return {"design": design, "prs": prs, "rate": hit / prs, "runs": sum(r["runs"] for r in out) / prs}
