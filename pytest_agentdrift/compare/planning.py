"""Planning before spending: how many tasks and repetitions detect a regression of a given size.

Pure functions over a recorded results.json (no pytest, no I/O); scipy is
imported when a plan is computed. The method (docs/statistics.md,
"Planning"):

* **Question.** Every task's pass probability drops by ``delta`` (never
  below 0). Is the paired one-sided test of the mean per-task pass-rate
  delta (candidate − baseline) at level ``alpha`` going to reject, with
  probability ``power``? That test is what the comparison's paired interval
  of ``delta`` estimates: a regression shows as an interval whose upper end
  is below 0 at confidence 1 − 2·alpha.
* **Inputs.** The recorded run's per-task pass counts. Each task's pass
  probability is smoothed as (passes + ½) / (runs + 1) so a task seen to
  pass k of k still has run-to-run variance (and says so when k = 1, where
  run-to-run variance is not observed at all).
* **Model.** With k runs per arm, a task's delta has mean −s_t (its shift,
  ``min(delta, p_t)``) and variance v_t = [p(1−p) + p'(1−p')] / k. On the
  recorded tasks (a fixed set) the mean delta has variance mean(v)/n and the
  test's variance estimate S² has mean mean(v) + var(s); on tasks drawn like
  these, both are E[v] + Var(s). The test statistic is then a scaled
  noncentral t: power = nct.cdf(−t_crit · σ_S / σ_num, n − 1, −δ_eff·√n / σ_num).
* **Designs.** The smallest k on the recorded tasks; the number of tasks
  needed for k in (1, 2, 3, 5, 10); and, the other way round, the smallest
  regression the recorded budget detects (MDE).

``simulate_power`` runs the planned test on simulated experiments; the test
suite checks the formula against it within ±5 points.
"""

from __future__ import annotations

import math
import re
from collections.abc import Mapping, Sequence
from datetime import datetime
from typing import Any

from pytest_agentdrift.compare.cost import FIXED_K_MAX, NEW_BEHAVIOUR_RATE, plan_designs
from pytest_agentdrift.compare.stats import scored_passes
from pytest_agentdrift.errors import AgentDriftError
from pytest_agentdrift.vocabulary import DEFAULT_SEED, INFRA_OUTCOME, SCHEMA_VERSION, utc_timestamp

K_MAX = 50
N_MAX = 5000
MORE_TASKS_K = (1, 2, 3, 5, 10)
TEST = "one-sided paired t-test on per-task pass-rate deltas (candidate - baseline)"
MODEL = "every task's pass probability drops by delta, never below 0; rates smoothed (passes + 1/2) / (runs + 1)"


def parse_delta(text: str) -> float:
    """``10pp``, ``10%`` or a fraction such as ``0.1``: the regression to detect, as a fraction."""
    raw = str(text).strip().lower()
    m = re.fullmatch(r"([0-9]*\.?[0-9]+)\s*(pp|%)?", raw)
    if not m:
        raise AgentDriftError(f"--delta {text!r}: give a size such as 10pp, 10% or 0.1")
    value = float(m.group(1))
    if m.group(2) or value > 1:
        value /= 100
    if not 0 < value <= 1:
        raise AgentDriftError(f"--delta {text!r}: must be above 0 and at most 100 pp")
    return value


def task_counts(results: Mapping[str, Any]) -> dict[str, tuple[int, int]]:
    """Per task: (passes, scored runs); a tampered pass is a fail, a run lost to infrastructure is not scored."""
    out = {}
    for tid, task in sorted((results.get("tasks") or {}).items()):
        passes, scored = scored_passes(task.get("runs") or [])
        if scored:
            out[tid] = (passes, scored)
    if not out:
        raise AgentDriftError("the recorded run has no task runs to plan from")
    return out


def smoothed(passes: int, runs: int) -> float:
    return (passes + 0.5) / (runs + 1)


def _moments(rates: Sequence[float], k: int, delta: float, fixed: bool) -> tuple[float, float, float]:
    """(effective shift, sd of the mean's numerator per task, sd the test's S estimates)."""
    shifts = [min(delta, p) for p in rates]
    v = [(p * (1 - p) + (p - s) * (1 - p + s)) / k for p, s in zip(rates, shifts, strict=True)]
    n = len(rates)
    mean_s = math.fsum(shifts) / n
    mean_v = math.fsum(v) / n
    if fixed:
        var_s = math.fsum((s - mean_s) ** 2 for s in shifts) / (n - 1) if n > 1 else 0.0
        return mean_s, math.sqrt(mean_v), math.sqrt(mean_v + var_s)
    var_s = math.fsum((s - mean_s) ** 2 for s in shifts) / n
    sd = math.sqrt(mean_v + var_s)
    return mean_s, sd, sd


def power(rates: Sequence[float], n: int, k: int, delta: float, alpha: float, *, fixed: bool) -> float:
    """Power of the planned test with n tasks × k runs per arm (fixed: the recorded tasks themselves)."""
    from scipy.stats import nct, t

    if n < 2 or k < 1:
        return 0.0
    mu, sd_num, sd_s = _moments(rates, k, delta, fixed)
    if mu <= 0:
        return alpha if sd_num > 0 else 0.0
    if sd_num == 0:
        return 1.0
    crit = t.ppf(1 - alpha, n - 1)
    return float(nct.cdf(-crit * sd_s / sd_num, n - 1, -mu * math.sqrt(n) / sd_num))


def simulate_power(
    rates: Sequence[float],
    n: int,
    k: int,
    delta: float,
    alpha: float,
    *,
    fixed: bool,
    sims: int = 4000,
    seed: int = DEFAULT_SEED,
) -> float:
    """The share of simulated experiments in which the planned test rejects."""
    import numpy as np
    from scipy.stats import t

    rng = np.random.default_rng(seed)
    base_rates = np.asarray(rates, dtype=float)
    if fixed:
        p = np.broadcast_to(base_rates, (sims, len(base_rates)))
        n = len(base_rates)
    else:
        p = base_rates[rng.integers(0, len(base_rates), size=(sims, n))]
    p_cand = np.maximum(p - delta, 0.0)
    a = rng.binomial(k, p) / k
    b = rng.binomial(k, p_cand) / k
    d = b - a
    mean = d.mean(axis=1)
    sd = d.std(axis=1, ddof=1)
    crit = t.ppf(1 - alpha, n - 1)
    with np.errstate(divide="ignore", invalid="ignore"):
        stat = np.where(sd > 0, mean / (sd / math.sqrt(n)), np.where(mean < 0, -np.inf, 0.0))
    return float(np.mean(stat < -crit))


def _smallest_k(
    rates: Sequence[float], delta: float, alpha: float, target: float
) -> tuple[int | None, list[dict[str, Any]]]:
    rows = []
    for k in range(1, K_MAX + 1):
        p = power(rates, len(rates), k, delta, alpha, fixed=True)
        rows.append({"tasks": len(rates), "k": k, "power": p})
        if p >= target:
            return k, rows
    return None, rows


def _smallest_n(rates: Sequence[float], k: int, delta: float, alpha: float, target: float) -> dict[str, Any]:
    lo, hi = 2, 2
    while power(rates, hi, k, delta, alpha, fixed=False) < target:
        if hi >= N_MAX:
            return {
                "k": k,
                "tasks": None,
                "power": power(rates, N_MAX, k, delta, alpha, fixed=False),
                "note": f"not reached with {N_MAX} tasks",
            }
        lo, hi = hi, min(hi * 2, N_MAX)
    while lo < hi:
        mid = (lo + hi) // 2
        if power(rates, mid, k, delta, alpha, fixed=False) >= target:
            hi = mid
        else:
            lo = mid + 1
    return {"k": k, "tasks": hi, "power": power(rates, hi, k, delta, alpha, fixed=False)}


def mde(rates: Sequence[float], k: int, alpha: float, target: float) -> float | None:
    """The smallest regression (fraction) the recorded tasks × k detect with the target power."""
    if power(rates, len(rates), k, 1.0, alpha, fixed=True) < target:
        return None
    lo, hi = 0.0, 1.0
    for _ in range(40):
        mid = (lo + hi) / 2
        if power(rates, len(rates), k, mid, alpha, fixed=True) >= target:
            hi = mid
        else:
            lo = mid
    return hi


def _plan_source(results: Mapping[str, Any], source: str | None, tasks: int, k_rec: int) -> dict[str, Any]:
    """The recorded run the plan was made from."""
    return {
        "run": source,
        "run_id": results.get("run_id"),
        "runtime_id": results.get("runtime_id"),
        "task_set_id": results.get("task_set_id"),
        "tasks": tasks,
        "k": k_rec,
        "pass_rate": (results.get("summary") or {}).get("pass_rate"),
        "run_to_run_observed": k_rec >= 2,
        **_pooled(results.get("pool")),
    }


def _pooled(pool: Any) -> dict[str, Any]:
    """A directory of records pooled as --agent-baseline pools it: which records, and which were left out."""
    if not isinstance(pool, Mapping):
        return {}
    from pytest_agentdrift.compare.pool import pool_text

    return {"pool": pool_text(pool), "left_out": [dict(x) for x in pool.get("left_out") or []]}


def _recommended(
    k_best: int | None, rows: list[dict[str, Any]], tasks: int, feasible: list[dict[str, Any]]
) -> dict[str, Any]:
    """The recorded tasks at k <= 10 when that reaches the power, else the design with the fewest runs."""
    if k_best is not None and k_best <= 10:
        return {"kind": "recorded_tasks", "tasks": tasks, "k": k_best, "power": rows[-1]["power"]}
    # fewest runs in all; writing tasks costs more than running them, so the fewest-tasks design is shown too
    best = min(feasible, key=lambda m: (m["tasks"] * m["k"], m["k"])) if feasible else None
    return (
        {"kind": "more_tasks", "tasks": best["tasks"], "k": best["k"], "power": best["power"]}
        if best
        else {"kind": "none", "tasks": None, "k": None, "power": None}
    )


def make_plan(
    results: Mapping[str, Any],
    *,
    delta: float,
    alpha: float = 0.05,
    target: float = 0.80,
    budget_k: int | None = None,
    source: str | None = None,
    now: datetime | None = None,
) -> dict[str, Any]:
    """The plan document (plan.json): inputs, designs, the recommended one, the MDE, and its digest."""
    from pytest_agentdrift.canonical import digest

    if not 0 < alpha < 1:
        raise AgentDriftError(f"--alpha {alpha}: must be between 0 and 1")
    if not 0 < target < 1:
        raise AgentDriftError(f"--power {target}: must be between 0 and 1")
    counts = task_counts(results)
    rates = [smoothed(p, r) for p, r in counts.values()]
    if len(rates) < 2:
        raise AgentDriftError("planning needs a recorded run of at least two tasks")
    k_rec = max(r for _, r in counts.values())
    k_best, rows = _smallest_k(rates, delta, alpha, target)
    more = [_smallest_n(rates, k, delta, alpha, target) for k in MORE_TASKS_K]
    feasible = [m for m in more if m["tasks"] is not None]
    recommended = _recommended(k_best, rows, len(rates), feasible)
    fewest_tasks = min(feasible, key=lambda m: (m["tasks"], m["k"])) if feasible else None
    budget = budget_k or k_rec
    mu, _, _ = _moments(rates, budget, delta, fixed=True)
    doc: dict[str, Any] = {
        "schema_version": SCHEMA_VERSION,
        "created_at": utc_timestamp(now),
        "source": _plan_source(results, source, len(rates), k_rec),
        "question": {"delta": delta, "alpha": alpha, "power": target, "test": TEST, "model": MODEL},
        "inputs": {
            "tasks": {tid: {"passes": p, "runs": r, "smoothed": smoothed(p, r)} for tid, (p, r) in counts.items()},
            "effective_delta": mu,
        },
        "designs": {"recorded_tasks": rows, "more_tasks": more},
        "recommended": recommended,
        "fewest_tasks": fewest_tasks,
        "mde": {"tasks": len(rates), "k": budget, "power": target, "delta": mde(rates, budget, alpha, target)},
        "gate": gate_design(results, alpha=alpha, target=target),
        "confirm": plan_designs(results, alpha=alpha, target=target),
    }
    doc["digest"] = digest({k: v for k, v in doc.items() if k != "created_at"})
    return doc


GATE_BASE_K = (5, 10, 15, 20, 30)
GATE_PR_K = tuple(range(1, 11))


def flaky_checks(results: Mapping[str, Any]) -> int:
    """(task, critical check) pairs of the recorded run that failed in some runs and passed in others."""
    count = 0
    for task in (results.get("tasks") or {}).values():
        runs = [r for r in task.get("runs") or [] if r.get("outcome") != INFRA_OUTCOME]
        failed: dict[str, int] = {}
        for run in runs:
            for check in run.get("critical_failed") or []:
                failed[check] = failed.get(check, 0) + 1
        count += sum(1 for n in failed.values() if 0 < n < len(runs))
    return count


def new_behaviour_power(base_k: int, pr_k: int, level: float, rate: float = NEW_BEHAVIOUR_RATE) -> float:
    """Power of the gate's exact check test against a critical failure appearing in ``rate`` of the
    pull request's runs of one task that the baseline never showed: P(p-value of x failures < level)."""
    from scipy.stats import binom, hypergeom

    return float(
        sum(binom.pmf(x, pr_k, rate) for x in range(1, pr_k + 1) if hypergeom.sf(x - 1, base_k + pr_k, x, pr_k) < level)
    )


def gate_design(results: Mapping[str, Any], *, alpha: float, target: float) -> dict[str, Any]:
    """The regression gate's design for these tasks: baseline k and pull-request k.

    The fewest pull-request runs (then the fewest baseline runs, at least 5) whose exact check test
    catches a critical behaviour appearing in half the runs of a task with ``target`` power, at alpha
    shared with the paired test and the recorded run's flaky checks (an estimate of the gate's
    family); and the smallest pass-rate regression the paired test then detects.
    """
    from pytest_agentdrift.compare.power import minimum_detectable_regression

    counts = task_counts(results)
    family = 1 + 1 + flaky_checks(results)  # the paired test, the new behaviour, the checks already flaky
    level = alpha / family
    best = None
    for pr_k in GATE_PR_K:
        for base_k in GATE_BASE_K:
            power = new_behaviour_power(base_k, pr_k, level)
            if power >= target:
                best = (base_k, pr_k, power)
                break
        if best:
            break
    base_k, pr_k, power = best or (GATE_BASE_K[-1], GATE_PR_K[-1], new_behaviour_power(30, 10, level))
    rates = [p / r for p, r in counts.values()]
    mde_doc = minimum_detectable_regression(rates, min(base_k, pr_k), alpha)
    return {
        "baseline_k": base_k,
        "pr_k": pr_k,
        "new_behaviour_rate": NEW_BEHAVIOUR_RATE,
        "power_new_critical": power,
        "reaches_target": best is not None,
        "family": family,
        "level": level,
        "flaky_checks": family - 2,
        "mde_pp": mde_doc["mde_pp"],
    }


def verify_plan(doc: Any, where: Any = None) -> dict[str, Any]:
    """A plan file that is whole and unedited, or AgentDriftError naming it."""
    from pytest_agentdrift.canonical import digest

    if not isinstance(doc, dict) or doc.get("schema_version") != SCHEMA_VERSION or "digest" not in doc:
        raise AgentDriftError("not a plan written by 'agentdrift plan --out'", where)
    if digest({k: v for k, v in doc.items() if k not in ("created_at", "digest")}) != doc["digest"]:
        raise AgentDriftError("the plan was edited after it was written (digest mismatch): re-plan", where)
    return doc


def render_plan(doc: Mapping[str, Any]) -> list[str]:
    src, q, rec, m = doc["source"], doc["question"], doc["recommended"], doc["mde"]
    rate = "n/a" if src.get("pass_rate") is None else f"{100 * src['pass_rate']:.1f}%"
    lines = [
        f"{'plan':<11} from {src.get('run') or src.get('run_id')}: {src['tasks']} tasks, k={src['k']}, pass rate {rate}; "
        + (
            "run-to-run variance observed"
            if src["run_to_run_observed"]
            else "run-to-run variance NOT observed (k = 1): the smoothed rates stand in for it"
        ),
        *([f"{'':<11} {src['pool']}"] if src.get("pool") else []),
        *[f"{'':<11} left out {x.get('path')}: {x.get('reason')}" for x in src.get("left_out") or []],
        f"{'question':<11} detect a regression of {100 * q['delta']:.1f} pp at alpha {q['alpha']:g} with power {q['power']:.2f}",
        f"{'test':<11} {q['test']}",
        f"{'model':<11} {q['model']} (effective shift {100 * doc['inputs']['effective_delta']:.1f} pp)",
    ]
    shown = [
        r
        for r in doc["designs"]["recorded_tasks"]
        if r["k"] in (1, 2, 3, 5, 10) or r is doc["designs"]["recorded_tasks"][-1]
    ]
    for r in shown:
        lines.append(f"{'design':<11} {r['tasks']} recorded tasks × k={r['k']:<2} → power {r['power']:.2f}")
    for r in doc["designs"]["more_tasks"]:
        if r["tasks"] is None:
            lines.append(f"{'':<11} tasks like these × k={r['k']:<2} → {r.get('note')}")
        else:
            lines.append(f"{'':<11} {r['tasks']} tasks like these × k={r['k']:<2} → power {r['power']:.2f}")
    if rec["kind"] == "none":
        lines.append(f"{'recommend':<11} no design within {K_MAX} repetitions or {N_MAX} tasks reaches the power")
    else:
        where = "the recorded tasks" if rec["kind"] == "recorded_tasks" else "tasks like the recorded ones"
        extra = "" if rec["kind"] == "recorded_tasks" else f" ({rec['tasks'] - src['tasks']} more than recorded)"
        lines.append(
            f"{'recommend':<11} {rec['tasks']} {where} × k={rec['k']}{extra}: power {rec['power']:.2f} (fewest runs)"
        )
        few = doc.get("fewest_tasks")
        if rec["kind"] == "more_tasks" and few and few["tasks"] < rec["tasks"]:
            lines.append(f"{'':<11} fewest tasks: {few['tasks']} × k={few['k']}: power {few['power']:.2f}")
    mde_text = "none below 100 pp" if m["delta"] is None else f"{100 * m['delta']:.1f} pp"
    lines.append(
        f"{'mde':<11} with {m['tasks']} tasks × k={m['k']}: the smallest regression detected with power "
        f"{m['power']:.2f} is {mde_text}"
    )
    lines += _gate_lines(doc.get("gate"), q["power"])
    lines += confirm_lines(doc.get("confirm"))
    lines.append(f"{'digest':<11} {doc['digest']}")
    return lines


def _gate_lines(gate: Mapping[str, Any] | None, target: float) -> list[str]:
    if not gate:
        return []
    caught = (
        f"catches a critical failure appearing in {100 * gate['new_behaviour_rate']:.0f}% of a task's runs "
        f"with power {gate['power_new_critical']:.2f}"
    )
    if not gate["reaches_target"]:
        caught += f" (below {target:.2f}: no design within k 30 / 10 reaches it)"
    mde_text = "none" if gate["mde_pp"] is None else f"{gate['mde_pp']} pp"
    return [
        f"{'gate':<11} record the baseline with --agent-k {gate['baseline_k']}, run pull requests with --agent-k "
        f"{gate['pr_k']}: the regression gate {caught}",
        f"{'':<11} at level {gate['level']:.3g} (alpha over {gate['family']} tests: the paired test, the new "
        f"behaviour, {gate['flaky_checks']} check(s) already flaky); smallest detectable pass-rate regression "
        f"{mde_text}",
    ]


def _priced_text(priced: Mapping[str, Any]) -> str:
    usd = priced.get("cost_usd")
    return f"{priced['runs']:g} runs" + ("" if usd is None else f" (${usd:,.2f})")


def confirm_lines(doc: Mapping[str, Any] | None) -> list[str]:
    """The confirming design a team's records call for, priced, beside the cheapest fixed design."""
    if not doc:
        return []
    rec, fixed = doc["recommended"], doc["fixed"]
    pool = f"a pool of {rec['pool']} runs per task" + (
        " (the records' own)" if not rec["runs_to_add"] else f" ({rec['runs_to_add']} more per task than recorded)"
    )
    reached = "" if doc["reaches_target"] else f" (below {doc['target']:.2f}: no design tried reaches it)"
    lines = [
        f"{'confirm':<11} against a critical behaviour in half the runs of one task, at power {doc['target']:.2f}: "
        f"{pool}, pull requests with --agent-k {rec['k']} --agent-confirm {rec['cap']}: power {rec['power']:.2f} "
        f"(weakest task {rec['task']}){reached}",
        f"{'':<11} expected agent runs per pull request: {_priced_text(rec['unchanged'])} unchanged, "
        f"{_priced_text(rec['changed'])} changed",
    ]
    if fixed["k"] is None:
        lines.append(f"{'':<11} no fixed design up to k {FIXED_K_MAX} reaches that power on this pool")
    else:
        lines.append(
            f"{'':<11} the cheapest fixed design of that power on this pool: --agent-k {fixed['k']}, "
            f"{_priced_text(fixed['per_pr'])} per pull request, changed or not"
        )
    price = doc["price_per_run"]
    if price.get("cost_usd") is None:
        lines.append(f"{'':<11} no run of the records reports a cost: priced in runs only")
    return lines
