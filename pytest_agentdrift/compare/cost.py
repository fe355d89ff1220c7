"""The cost of a decision: what a gated comparison spent, what it bought, and what a fixed design would cost.

Pure: no pytest, no I/O; the fixed design's sums are exact, in integers, and whatever the confirming
design's own tests import they import lazily. docs/statistics.md ("The cost of a decision") has the rules; keep the two in step.

What it bought is one number: the **power** of the design against a critical behaviour appearing in
half the runs of one task, never seen in the baseline (``NEW_BEHAVIOUR_RATE``), on the weakest task
(the one whose pool gives the design the least power).

* A **fixed** design (every task ``k`` times): the gate's exact one-sided test of the check
  (compare/sequential.fisher_sf on the counts the gate reads, compare/sequential.effective when the
  pool's nights vary) rejects at the fixed family's level with probability
  sum over x of P(Bin(k, rate) = x) [p(x) < level]. The level is alpha over the paired test, the new
  behaviour and the (task, check) pairs the baseline already fails sometimes (an estimate of the gate's
  family, as ``agentdrift plan`` uses).
* A **confirming** design (``--agent-confirm``): computed by the confirming design's own rules
  (compare/sequential.sequence), path by path. The changed task is screened unless its ``k`` screen
  runs all miss the behaviour (probability (1 - rate)^k); then every possible count of failing
  confirming runs at each look (binomial per batch) is handed to ``sequence``, which says where the
  task stops and whether the behaviour is named. Summed over the paths: the power, and the runs the
  changed task costs. The level depends on how many tasks were screened: in a session, the other
  tasks this session screened, plus the changed one; in a plan, that count's expected value.
* The **fixed equivalent**: the smallest pull-request k whose fixed design, against the same baseline,
  has at least that power; its runs are k per task.

Assumptions, stated where the numbers are shown: the candidate's other checks do not fail in the
changed task's confirming runs (they could only add hypotheses to its Tarone count), and its screen is
triggered by the behaviour alone (its flakes would screen it more often). A plan (``plan_designs``)
also reads a task's critical checks as one when it prices an unchanged task's confirming runs, and
the level at the expected number of screened tasks; ``tests/unit/test_cost.py`` holds its figures
against the seeded simulation of compare/nullsim.py.
"""

from __future__ import annotations

from dataclasses import dataclass
from datetime import datetime
from math import comb
from typing import Any, Iterable, Mapping

from pytest_agentdrift.compare import sequential as seq
from pytest_agentdrift.record.spend import arm_text, power_text
from pytest_agentdrift.shapes import (
    ArmSummary,
    CheckTests,
    Comparison,
    CostArm,
    CostPower,
    DecisionCost,
    FixedEquivalent,
)

NEW_BEHAVIOUR_RATE = 0.5
NEW_BEHAVIOUR_CHECK = "(a new critical behaviour)"  # a name no check of a task can have
FIXED_K_MAX = 50
#: the designs `agentdrift plan` prices: pull-request k and confirmation caps; pools of the records'
#: own size and of these sizes (runs per task)
PLAN_PR_K = (2, 3, 5)
PLAN_CAPS = (12, 20, 30, 45)
PLAN_POOLS = (30, 60, 90)


def binom_pmf(n: int, x: int, p: float) -> float:
    return comb(n, x) * p**x * (1.0 - p) ** (n - x)


# --------------------------------------------------------------------------- power of one design


def fixed_power(pool: seq.Pool, pr_k: int, level: float, rate: float = NEW_BEHAVIOUR_RATE) -> float:
    """P(the fixed design's exact check test rejects) for a behaviour of ``rate`` the pool never showed."""
    cand_effect = seq.design_effect(pool.rho, pr_k)
    power = 0.0
    for x in range(1, pr_k + 1):
        c = seq.effective(seq.Counts(NEW_BEHAVIOUR_CHECK, 0, pool.runs, x, pr_k), pool.base_effect, cand_effect)
        if seq.fisher_sf(c.base_failed, c.base_runs, c.cand_failed, c.cand_runs) < level:
            power += binom_pmf(pr_k, x, rate)
    return power


@dataclass(frozen=True)
class TaskOutcome:
    """The changed task under a confirming design: P(blocked naming the behaviour), its expected runs."""

    power: float
    runs: float


def confirm_outcome(
    plan: seq.ConfirmPlan, screened_others: int, pool: seq.Pool, rate: float = NEW_BEHAVIOUR_RATE
) -> TaskOutcome:
    """Exact, by the confirming design's own rules: every path of confirming failure counts through
    compare/sequential.sequence (see the module's docstring)."""
    named, runs = screened_paths(plan, screened_others + 1, pool, NEW_BEHAVIOUR_CHECK, rate)
    needs = seq.screen_needs(plan, pool.fails.get(NEW_BEHAVIOUR_CHECK, 0), pool.runs)
    screened_p = 0.0 if needs is None else sum(binom_pmf(plan.k, x, rate) for x in range(needs, plan.k + 1))
    return TaskOutcome(screened_p * named, (1.0 - screened_p) * plan.k + screened_p * runs)


def screened_paths(
    plan: seq.ConfirmPlan, screened_tasks: int, pool: seq.Pool, check: str, rate: float
) -> tuple[float, float]:
    """A screened task whose confirming runs fail ``check`` at ``rate``: P(it stops as new, naming the
    check) and its expected runs, summed over the confirming failure counts of each batch.

    The design decides at each look on the confirming runs' counts so far (every rule of
    compare/sequential.py does: the runs of one task are exchangeable), so the paths that reach a look
    with the same count, each having continued at every look before, go on alike: they are carried as
    one state, and ``sequence`` is asked once per look and count (tests/unit/test_cost.py holds this
    against every path followed separately)."""
    hit: list[str] = [check, seq.PASS_RATE]
    miss: list[str] = []
    needs = seq.screen_needs(plan, pool.fails.get(check, 0), pool.runs) or 1
    screen = [hit] * needs + [miss] * (plan.k - needs)  # screened: the check failed as often as the screen asks
    named, runs_spent = 0.0, 0.0
    states: dict[int, tuple[list[list[str]], float]] = {0: (screen, 1.0)}  # count -> (a path, probability)
    looks = plan.looks
    for i, n in enumerate(looks[1:], start=1):
        batch = n - looks[i - 1]
        carried: dict[int, tuple[list[list[str]], float]] = {}
        decided: dict[int, tuple[seq.Look, list[list[str]]]] = {}
        for f, (runs, p) in states.items():
            for x in range(batch + 1):
                q = p * binom_pmf(batch, x, rate)
                if q == 0.0:
                    continue
                if f + x not in decided:
                    path = runs + [hit] * x + [miss] * (batch - x)
                    decided[f + x] = (seq.sequence(plan, screened_tasks, path, pool)[-1], path)
                last, path = decided[f + x]
                if last.state == seq.CONTINUE and last.runs == n and n < looks[-1]:
                    carried[f + x] = (path, carried.get(f + x, (path, 0.0))[1] + q)
                    continue
                runs_spent += q * last.runs
                if last.state == seq.NEW and check in last.new:
                    named += q
        states = carried
    runs_spent += sum(p for _, p in states.values()) * looks[-1]
    return named, (runs_spent if len(looks) > 1 else float(plan.k))


def every_path(
    plan: seq.ConfirmPlan, screened_tasks: int, pool: seq.Pool, check: str, rate: float
) -> tuple[float, float]:
    """screened_paths without carrying paths as counts: every path of batch outcomes followed on its
    own (exponential in the looks; the reference the carried states are checked against)."""
    hit: list[str] = [check, seq.PASS_RATE]
    miss: list[str] = []
    named, runs_spent = 0.0, 0.0
    needs = seq.screen_needs(plan, pool.fails.get(check, 0), pool.runs) or 1
    paths = [([hit] * needs + [miss] * (plan.k - needs), 1.0)]
    looks = plan.looks
    for i, n in enumerate(looks[1:], start=1):
        batch, carried = n - looks[i - 1], []
        for runs, p in paths:
            for x in range(batch + 1):
                q = p * binom_pmf(batch, x, rate)
                path = runs + [hit] * x + [miss] * (batch - x)
                last = seq.sequence(plan, screened_tasks, path, pool)[-1]
                if last.state == seq.CONTINUE and last.runs == n and n < looks[-1]:
                    carried.append((path, q))
                    continue
                runs_spent += q * last.runs
                named += q if last.state == seq.NEW and check in last.new else 0.0
        paths = carried
    runs_spent += sum(p for _, p in paths) * looks[-1]
    return named, (runs_spent if len(looks) > 1 else float(plan.k))


def fixed_level(alpha: float, pools: Mapping[str, seq.Pool]) -> float:
    """The fixed design's level for the new behaviour: alpha over the paired test, the behaviour and the
    (task, check) pairs the baseline fails in some runs but not all (an estimate of the gate's family)."""
    flaky = sum(1 for p in pools.values() for c, f in p.fails.items() if c != seq.PASS_RATE and 0 < f < p.runs)
    return alpha / (2 + flaky)


def _pool_key(pool: seq.Pool) -> tuple[Any, ...]:
    return (tuple(sorted((c, f) for c, f in pool.fails.items() if c != seq.PASS_RATE)), pool.runs, pool.base_effect)


def weakest(values: Mapping[str, float]) -> tuple[str | None, float]:
    """The task with the least power, and that power (ties: the first task by id)."""
    if not values:
        return None, 0.0
    task = min(sorted(values), key=lambda t: values[t])
    return task, values[task]


def fixed_design_power(pools: Mapping[str, seq.Pool], pr_k: int, level: float) -> tuple[str | None, float]:
    cache: dict[tuple[int, float], float] = {}
    values = {}
    for task, pool in pools.items():
        key = (pool.runs, pool.base_effect)
        if key not in cache:
            cache[key] = fixed_power(pool, pr_k, level)
        values[task] = cache[key]
    return weakest(values)


def fixed_equivalent(pools: Mapping[str, seq.Pool], level: float, power: float) -> FixedEquivalent:
    """The fixed design (pull-request k, no confirmation) with at least ``power`` on its weakest task."""
    for k in range(1, FIXED_K_MAX + 1):
        task, reached = fixed_design_power(pools, k, level)
        if reached >= power - 1e-12:
            return {"k": k, "runs": k * len(pools), "power": reached, "level": level, "k_max": FIXED_K_MAX}
    return {"k": None, "runs": None, "power": None, "level": level, "k_max": FIXED_K_MAX}


# --------------------------------------------------------------------------- a session's cost


def arm_runs(results: Mapping[str, Any]) -> int:
    """The agent runs an arm holds (runs lost to infrastructure too: they were paid for)."""
    return sum(len((e or {}).get("runs") or []) for e in (results.get("tasks") or {}).values())


def wall_seconds(results: Mapping[str, Any]) -> float | None:
    """started_at to finished_at of one session's record; None when the record spans sessions
    (resumed, merged, pooled) or does not say."""
    if results.get("resumed") or results.get("merged_from") or results.get("pool"):
        return None
    try:
        start = datetime.fromisoformat(str(results["started_at"]).replace("Z", "+00:00"))
        end = datetime.fromisoformat(str(results["finished_at"]).replace("Z", "+00:00"))
    except (KeyError, ValueError):
        return None
    seconds = (end - start).total_seconds()
    return round(seconds, 3) if seconds >= 0 else None


def _arm_cost(results: Mapping[str, Any], arm: ArmSummary | None) -> CostArm:
    spend = arm.get("spend") if arm else None
    pool = results.get("pool") or {}
    return {
        "runs": arm_runs(results),
        "records": len(pool.get("records") or []) or 1,
        "tokens": spend["tokens"] if spend else None,
        "cost_usd": spend["cost_usd"] if spend else None,
        "wall_s": wall_seconds(results),
    }


def session_power(
    base: Mapping[str, Any], cand: Mapping[str, Any], check_tests: CheckTests | None, alpha: float
) -> CostPower:
    """The power this session's design had, on its weakest task, and the fixed design matching it."""
    from pytest_agentdrift.compare import confirm

    tasks = sorted(set(cand.get("tasks") or {}) & set(base.get("tasks") or {}))
    all_pools = confirm.pools(base)
    pools = {t: all_pools[t] for t in tasks if all_pools[t].runs}
    level = fixed_level(alpha, pools)
    if not pools:
        return {
            "rate": NEW_BEHAVIOUR_RATE,
            "level": level,
            "design": "fixed",
            "k": None,
            "cap": None,
            "power": None,
            "task": None,
            "fixed_equivalent": None,
        }
    cap: int | None = None
    if cand.get("confirm"):
        plan = confirm.plan_of(cand["confirm"])
        screened = check_tests.get("screened") if check_tests else None
        task, power = _confirm_session_power(plan, pools, cand, int(screened or 0))
        design, k, cap = "confirm", plan.k, plan.cap
    else:
        k = max((len(confirm.task_runs(cand["tasks"][t])) for t in tasks), default=0)
        task, power = fixed_design_power(pools, k, level)
        design = "fixed"
    return {
        "rate": NEW_BEHAVIOUR_RATE,
        "level": level,
        "design": design,
        "k": k,
        "cap": cap,
        "power": power,
        "task": task,
        "fixed_equivalent": fixed_equivalent(pools, level, power),
    }


def _confirm_session_power(
    plan: seq.ConfirmPlan, pools: Mapping[str, seq.Pool], cand: Mapping[str, Any], screened: int
) -> tuple[str | None, float]:
    from pytest_agentdrift.compare import confirm

    cache: dict[tuple[Any, ...], float] = {}
    values = {}
    for task, pool in pools.items():
        was = seq.screened(confirm.task_runs(cand["tasks"][task])[: plan.k], pool, plan.screen_level)
        others = max(screened - int(was), 0)
        key = (_pool_key(pool), others)
        if key not in cache:
            cache[key] = confirm_outcome(plan, others, pool).power
        values[task] = cache[key]
    return weakest(values)


def decision_cost(
    base: Mapping[str, Any],
    cand: Mapping[str, Any],
    comparison: Comparison,
    alpha: float,
    *,
    with_power: bool = True,
) -> DecisionCost:
    """decision.json's ``cost``: runs, tokens, dollars and wall time per arm; the power bought; the
    fixed design of the same power (record/schema/decision.schema.json names every field)."""
    reg = comparison.get("regression")
    candidate = _arm_cost(cand, comparison.get("candidate"))
    candidate["not_needed"] = len((cand.get("confirm") or {}).get("not_needed") or [])
    doc: DecisionCost = {
        "baseline": _arm_cost(base, comparison.get("baseline")),
        "candidate": candidate,
        "power": session_power(base, cand, reg.get("check_tests"), alpha) if reg and with_power else None,
        "text": "",  # said of the rest, below
    }
    doc["text"] = cost_text(doc)
    return doc


def cost_text(doc: Mapping[str, Any]) -> str:
    """The closing line's words: 'cost: candidate 42 run(s), $1.20, 95 s; baseline 90 run(s) from 10
    record(s); power 82% against a critical behaviour in half the runs of one task (weakest T07); a
    fixed design of that power: k 8, 96 runs'."""
    parts = [f"cost: candidate {arm_text(doc['candidate'])}", f"baseline {arm_text(doc['baseline'])}"]
    power = power_text(doc.get("power"))
    return "; ".join(parts + ([f"power {power}"] if power else []))


# --------------------------------------------------------------------------- agentdrift plan: a design, priced

ANY_CRITICAL = "(any critical check)"


@dataclass(frozen=True)
class TaskProfile:
    """One task as the records show it: its pool, and the shares of runs failing a critical check
    (or the safety layer) and passing."""

    pool: seq.Pool
    critical: float
    passes: float

    def scaled(self, runs: int) -> TaskProfile:
        """The same task against a pool of ``runs`` runs with the same rates (more nights like these)."""
        if runs == self.pool.runs or not self.pool.runs:
            return self
        fails = {c: round(f * runs / self.pool.runs) for c, f in self.pool.fails.items()}
        return TaskProfile(seq.Pool(fails, runs, self.pool.base_effect, self.pool.rho), self.critical, self.passes)


def profiles(baseline: Mapping[str, Any]) -> dict[str, TaskProfile]:
    """Each task of a baseline (one record or a pool) with scored runs, as a profile."""
    from pytest_agentdrift.compare import confirm

    pools = confirm.pools(baseline)
    out = {}
    for task, entry in sorted((baseline.get("tasks") or {}).items()):
        runs = confirm.task_runs(entry)
        if runs:
            critical = sum(any(c != seq.PASS_RATE for c in f) for f in runs) / len(runs)
            passes = sum(seq.PASS_RATE not in f for f in runs) / len(runs)
            out[task] = TaskProfile(pools[task], critical, passes)
    return out


def count_distribution(probs: Iterable[float]) -> list[float]:
    """P(exactly s of independent events happen), s = 0..n (Poisson-binomial)."""
    dist = [1.0]
    for p in probs:
        nxt = [0.0] * (len(dist) + 1)
        for s, q in enumerate(dist):
            nxt[s] += q * (1.0 - p)
            nxt[s + 1] += q * p
        dist = nxt
    return dist


def _screen_p(plan: seq.ConfirmPlan, prof: TaskProfile) -> float:
    """P(the screen sends this unchanged task on): its critical checks read as one, failing at the
    records' rate, against a pool that failed them as often."""
    needs = seq.screen_needs(plan, round(prof.critical * prof.pool.runs), prof.pool.runs)
    if needs is None:
        return 0.0
    return sum(binom_pmf(plan.k, x, prof.critical) for x in range(needs, plan.k + 1))


class _Paths:
    """screened_paths and confirm_outcome, each computed once per pool and screened count."""

    def __init__(self, plan: seq.ConfirmPlan):
        self.plan = plan
        self.done: dict[tuple[Any, ...], Any] = {}

    def changed(self, others: int, pool: seq.Pool) -> TaskOutcome:
        key = ("changed", others, _pool_key(pool), pool.rho)
        if key not in self.done:
            self.done[key] = confirm_outcome(self.plan, others, pool)
        return self.done[key]

    def unchanged(self, others: int, prof: TaskProfile) -> float:
        fails = round(prof.critical * prof.pool.runs)
        key = ("unchanged", others, fails, prof.pool.runs, prof.pool.base_effect, prof.pool.rho)
        if key not in self.done:
            pool = seq.Pool({ANY_CRITICAL: fails}, prof.pool.runs, prof.pool.base_effect, prof.pool.rho)
            self.done[key] = screened_paths(self.plan, others + 1, pool, ANY_CRITICAL, prof.critical)[1]
        return self.done[key]


def unchanged_runs(paths: _Paths, prof: TaskProfile, others: int) -> float:
    """Expected runs of an unchanged task: its screen; when a flake screens it, its confirming runs
    (its critical checks read as one, failing at the records' rate); when it looks lost, one batch."""
    plan = paths.plan
    k, looks = plan.k, plan.looks
    screened_p = _screen_p(plan, prof)
    runs = float(k)
    if screened_p > 0 and len(looks) > 1:
        runs = (1.0 - screened_p) * k + screened_p * paths.unchanged(others, prof)
    if len(looks) > 1 and 2 * prof.passes > 1 and prof.critical < 1:
        p_pass = min(1.0, prof.passes / (1.0 - prof.critical))
        not_majority = sum(binom_pmf(k, x, p_pass) for x in range(0, k // 2 + 1))
        runs += (1.0 - screened_p) * not_majority * (looks[1] - k)
    return runs


def confirm_design(profs: Mapping[str, TaskProfile], plan: seq.ConfirmPlan) -> dict[str, Any]:
    """A confirming design on these tasks: power on the weakest task, expected runs per unchanged and
    per changed pull request (the change on that task). The level is read at the expected number of
    other tasks a pull request screens (rounded), plus the task itself."""
    screen = {t: _screen_p(plan, p) for t, p in profs.items()}
    total = sum(screen.values())
    paths = _Paths(plan)
    per_task = {}
    for t, prof in profs.items():
        others = round(total - screen[t])
        per_task[t] = (paths.changed(others, prof.pool), unchanged_runs(paths, prof, others))
    task, power = weakest({t: o.power for t, (o, _) in per_task.items()})
    unchanged = sum(r for _, r in per_task.values())
    changed = unchanged - per_task[task][1] + per_task[task][0].runs if task else unchanged
    return {"k": plan.k, "cap": plan.cap, "power": power, "task": task, "unchanged": unchanged, "changed": changed}


def price_per_run(baseline: Mapping[str, Any]) -> dict[str, Any]:
    """Mean tokens and dollars of the records' runs that report them (None when none does)."""
    tokens, usd = [], []
    for entry in (baseline.get("tasks") or {}).values():
        for run in entry.get("runs") or []:
            spend = run.get("spend") or {}
            if isinstance(spend.get("tokens"), int):
                tokens.append(spend["tokens"])
            if isinstance(spend.get("cost_usd"), (int, float)):
                usd.append(float(spend["cost_usd"]))
    return {
        "tokens": sum(tokens) / len(tokens) if tokens else None,
        "cost_usd": sum(usd) / len(usd) if usd else None,
        "priced_runs": len(usd),
    }


def _priced(runs: float, price: Mapping[str, Any]) -> dict[str, Any]:
    usd = price.get("cost_usd")
    tokens = price.get("tokens")
    return {
        "runs": round(runs, 2),
        "tokens": None if tokens is None else round(runs * tokens),
        "cost_usd": None if usd is None else round(runs * usd, 4),
    }


def _designs_on(profs: Mapping[str, TaskProfile], alpha: float, target: float, size: int) -> list[dict[str, Any]]:
    """The designs tried on one pool, cheapest first: for each PR k the smallest cap reaching the target
    (a larger cap only costs more), and no larger k once one reaches it more cheaply than that k's
    screen alone (k runs of every task) could."""
    designs: list[dict[str, Any]] = []
    cheapest = None
    for k in PLAN_PR_K:
        if cheapest is not None and k * len(profs) >= cheapest:
            break
        for cap in PLAN_CAPS:
            d = {"pool": size, **confirm_design(profs, seq.ConfirmPlan(k, cap, alpha, len(profs)))}
            designs.append(d)
            if d["power"] >= target:
                cheapest = min(cheapest or d["unchanged"], d["unchanged"])
                break
    return designs


def plan_designs(baseline: Mapping[str, Any], *, alpha: float, target: float) -> dict[str, Any]:
    """plan.json's ``confirm``: the recommended confirming design (pool, PR k, cap) for the target power,
    priced per unchanged and per changed pull request, beside the cheapest fixed design of that power.

    Pools are tried smallest first (the records' own, then more nights like them): the first pool on
    which some design reaches the target is recommended, with its design of fewest expected runs per
    unchanged pull request (most pull requests change nothing), then per changed one."""
    profs = profiles(baseline)
    price = price_per_run(baseline)
    have = min((p.pool.runs for p in profs.values()), default=0)
    sizes = [have] + [n for n in PLAN_POOLS if n > have]
    rows, chosen = [], None
    for size in sizes:
        scaled = {t: p.scaled(p.pool.runs + size - have) for t, p in profs.items()}
        level = fixed_level(alpha, {t: p.pool for t, p in scaled.items()})
        fixed = fixed_equivalent({t: p.pool for t, p in scaled.items()}, level, target)
        designs = _designs_on(scaled, alpha, target, size)
        rows += designs
        reaching = [d for d in designs if d["power"] >= target]
        if reaching:
            best = min(reaching, key=lambda d: (d["unchanged"], d["changed"], d["cap"]))
            chosen = (best, fixed, size)
            break
    if chosen is None:
        best = max(rows, key=lambda d: (d["power"], -d["unchanged"]))
        size = best["pool"]
        profs_at = {t: p.scaled(p.pool.runs + size - have) for t, p in profs.items()}
        level = fixed_level(alpha, {t: p.pool for t, p in profs_at.items()})
        chosen = (best, fixed_equivalent({t: p.pool for t, p in profs_at.items()}, level, target), size)
    best, fixed, size = chosen
    n_tasks = len(profs)
    return {
        "rate": NEW_BEHAVIOUR_RATE,
        "target": target,
        "alpha": alpha,
        "tasks": n_tasks,
        "pool_now": have,
        "price_per_run": price,
        "reaches_target": best["power"] >= target,
        "recommended": {
            "pool": size,
            "runs_to_add": size - have,
            "k": best["k"],
            "cap": best["cap"],
            "power": best["power"],
            "task": best["task"],
            "unchanged": _priced(best["unchanged"], price),
            "changed": _priced(best["changed"], price),
        },
        "fixed": {
            "pool": size,
            "k": fixed["k"],
            "power": fixed["power"],
            "level": fixed["level"],
            "per_pr": None if fixed["k"] is None or fixed["runs"] is None else _priced(fixed["runs"], price),
        },
        "designs": [{**d, "unchanged": round(d["unchanged"], 2), "changed": round(d["changed"], 2)} for d in rows],
    }
