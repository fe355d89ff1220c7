"""The cost of a decision (compare/cost.py): the power a design bought, computed by the confirming
design's own rules, against brute force, scipy and the seeded simulation; what a session spent, in
decision.json's schema; and the design `agentdrift plan` recommends from a team's records."""

from __future__ import annotations

import json
import random
from pathlib import Path

import jsonschema
import pytest

from pytest_agentdrift.compare import cost
from pytest_agentdrift.compare import nullsim as ns
from pytest_agentdrift.compare import sequential as seq
from pytest_agentdrift.compare.comparison import compare_runs
from pytest_agentdrift.compare.gates import GateParams
from pytest_agentdrift.compare.planning import make_plan, new_behaviour_power, render_plan
from pytest_agentdrift.compare.render import render_comparison

SCHEMA = json.loads(
    (Path(cost.__file__).parents[1] / "record" / "schema" / "decision.schema.json").read_text(encoding="utf-8")
)


@pytest.mark.parametrize(
    "plan, pool, check, rate",
    [
        (seq.ConfirmPlan(3, 24, 0.05, 12), seq.Pool({"flaky": 2}, 30), cost.NEW_BEHAVIOUR_CHECK, 0.5),
        (seq.ConfirmPlan(2, 12, 0.05, 12), seq.Pool({}, 6), cost.NEW_BEHAVIOUR_CHECK, 0.5),
        (seq.ConfirmPlan(3, 24, 0.05, 12), seq.Pool({"flaky": 3}, 30), "flaky", 0.1),
    ],
)
def test_carrying_paths_as_counts_is_every_path_followed_alone(plan, pool, check, rate):
    """The carried states assume the design decides at each look on the counts so far; following every
    path of batch outcomes separately (exponential, but small here) must give the same figures."""
    carried = cost.screened_paths(plan, 2, pool, check, rate)
    alone = cost.every_path(plan, 2, pool, check, rate)
    assert carried == pytest.approx(alone, abs=1e-12)


def test_the_exact_power_of_a_confirming_design_is_what_its_own_rules_do_on_random_runs():
    """The changed task run through compare/sequential.sequence on seeded random runs, 2,000 times:
    its share named as new is the exact power (± 3.5 standard errors)."""
    plan, pool = seq.ConfirmPlan(3, 24, 0.05, 12), seq.Pool({"flaky": 1}, 30)
    exact = cost.confirm_outcome(plan, 1, pool)
    rng = random.Random(3)
    named = runs = 0
    sims = 2000
    for _ in range(sims):
        per_run = [[cost.NEW_BEHAVIOUR_CHECK, seq.PASS_RATE] if rng.random() < 0.5 else [] for _ in range(plan.cap)]
        screened = seq.screened(per_run[: plan.k])
        last = seq.sequence(plan, 2 if screened else 1, per_run, pool)[-1]
        named += last.state == seq.NEW and cost.NEW_BEHAVIOUR_CHECK in last.new
        runs += last.runs
    se = (exact.power * (1 - exact.power) / sims) ** 0.5
    assert abs(named / sims - exact.power) <= 3.5 * se
    assert runs / sims == pytest.approx(exact.runs, rel=0.05)


def test_the_fixed_designs_power_is_the_exact_fisher_test_planning_uses():
    for base_k, pr_k, level in ((30, 3, 0.025), (30, 8, 0.025), (60, 5, 0.004), (5, 3, 0.05)):
        pool = seq.Pool({}, base_k)
        assert cost.fixed_power(pool, pr_k, level) == pytest.approx(new_behaviour_power(base_k, pr_k, level))


def test_the_fixed_equivalent_is_the_smallest_k_with_that_power():
    pools = {"T1": seq.Pool({}, 30), "T2": seq.Pool({"x": 2}, 30)}
    level = cost.fixed_level(0.05, pools)
    assert level == pytest.approx(0.05 / 3)  # the paired test, the new behaviour, one flaky pair
    eq = cost.fixed_equivalent(pools, level, 0.8)
    assert eq["k"] and eq["runs"] == 2 * eq["k"] and eq["power"] >= 0.8
    assert all(cost.fixed_design_power(pools, k, level)[1] < 0.8 for k in range(1, eq["k"]))
    assert cost.fixed_equivalent(pools, level, 1.0)["k"] is None  # no finite design has power 1


def _pair(flake: float, cand_k: int, seed: int = 3):
    rng = random.Random(seed)
    rates = [rng.uniform(0.6, 1.0) for _ in range(12)]
    return ns.recording(rng, rates, 30, flake), ns.recording(rng, rates, cand_k, flake)


def test_a_gated_comparison_states_runs_spend_wall_time_and_power_in_the_schema():
    base, cand = _pair(0.05, 3)
    for run in (r for t in cand["tasks"].values() for r in t["runs"]):
        run["spend"] = {"tokens": 1000, "cost_usd": 0.25}
    cand.update(started_at="2026-01-01T00:00:00Z", finished_at="2026-01-01T00:01:35Z")
    comparison = compare_runs(base, cand, comparable=True, reasons=[], change_class="identical", gate=GateParams())
    doc = cost.decision_cost(base, cand, comparison, 0.05)
    jsonschema.validate(
        {"schema_version": 1, "status": "x", "status_rule": None, "because": [], "comparable": True, "cost": doc},
        SCHEMA,
    )
    assert doc["candidate"] == {
        "runs": 36, "records": 1, "tokens": 36000, "cost_usd": 9.0, "wall_s": 95.0, "not_needed": 0,
    }  # fmt: skip
    assert doc["baseline"]["runs"] == 360 and doc["baseline"]["wall_s"] is None  # no finished_at in the record
    power = doc["power"]
    assert power["design"] == "fixed" and power["k"] == 3 and 0 < power["power"] < 0.5
    assert doc["text"].startswith("cost: candidate 36 run(s), 36,000 tokens, $9.00, 95 s; baseline 360 run(s); power")
    comparison["cost"] = doc
    lines = render_comparison(comparison)
    assert "spend       baseline 360 run(s)  candidate 36 run(s), 36,000 tokens, $9.00, 95 s" in lines
    assert any(ln.startswith("power       ") and "weakest" in ln for ln in lines)
    # a record resumed or merged spans sessions: no wall time is claimed for it
    assert cost.wall_seconds({**cand, "resumed": [{"at": "x", "kept_runs": 1, "ran_runs": 1}]}) is None


def test_a_confirming_candidate_is_priced_against_the_fixed_design_of_its_power():
    base, cand = _pair(0.05, 24)
    cand["confirm"] = {"k": 3, "cap": 24, "alpha": 0.05, "tasks": 12, "futility": seq.DEFAULT_FUTILITY}
    comparison = compare_runs(base, cand, comparable=True, reasons=[], change_class="identical", gate=GateParams())
    doc = cost.decision_cost(base, cand, comparison, 0.05)
    jsonschema.validate(
        {"schema_version": 1, "status": "x", "status_rule": None, "because": [], "comparable": True, "cost": doc},
        SCHEMA,
    )
    power = doc["power"]
    assert power["design"] == "confirm" and power["cap"] == 24
    eq = power["fixed_equivalent"]
    assert eq["k"] is None or (eq["power"] >= power["power"] and eq["runs"] == 12 * eq["k"])
    assert "a fixed design of that power" in doc["text"] or "no fixed design up to k 50" in doc["text"]


def test_no_field_of_the_cost_escapes_its_schema():
    """decision.schema.json is the one list of the cost's field names: a field added in code only fails."""
    base, cand = _pair(0.0, 3)
    comparison = compare_runs(base, cand, comparable=True, reasons=[], change_class="identical", gate=GateParams())
    doc = cost.decision_cost(base, cand, comparison, 0.05)
    doc["candidate"]["surprise"] = 1
    with pytest.raises(jsonschema.ValidationError):
        jsonschema.validate(
            {"schema_version": 1, "status": "x", "status_rule": None, "because": [], "comparable": True, "cost": doc},
            SCHEMA,
        )


@pytest.mark.parametrize("flake, prs", [(0.0, 300), pytest.param(0.05, 200, marks=pytest.mark.slow)])
def test_a_plans_confirming_design_holds_against_the_seeded_simulation(flake, prs):
    """The plan's power and expected runs per pull request for k 3, cap 24 against a 30-run pool of 12
    tasks, against compare/nullsim.py's simulated pull requests of the same agent (pools drawn afresh
    each time, so within 0.07 in power and 10 % in runs)."""
    rng = random.Random(7)
    rates = [rng.uniform(0.6, 1.0) for _ in range(12)]
    design = cost.confirm_design(cost.profiles(ns.recording(rng, rates, 30, flake)), seq.ConfirmPlan(3, 24, 0.05, 12))
    changed = ns.pool_rates(ns.PoolDesign(12, flake, 30, k=3, cap=24, change="new"), prs)
    unchanged = ns.pool_rates(ns.PoolDesign(12, flake, 30, k=3, cap=24), prs)
    assert abs(design["power"] - changed["rate"]) <= 0.07, (design, changed)
    assert design["changed"] == pytest.approx(changed["runs"], rel=0.10)
    assert design["unchanged"] == pytest.approx(unchanged["runs"], rel=0.10)


def test_the_plan_recommends_a_confirming_design_priced_beside_the_cheapest_fixed_one():
    rng = random.Random(5)
    rates = [rng.uniform(0.6, 1.0) for _ in range(12)]
    base = ns.recording(rng, rates, 30, 0.0)
    for run in (r for t in base["tasks"].values() for r in t["runs"]):
        run["spend"] = {"tokens": 2000, "cost_usd": 0.5}
    doc = make_plan(base, delta=0.2, alpha=0.05, target=0.8)["confirm"]
    rec, fixed = doc["recommended"], doc["fixed"]
    assert doc["reaches_target"] and rec["power"] >= 0.8 and rec["pool"] == 30 and rec["runs_to_add"] == 0
    assert rec["unchanged"]["cost_usd"] == pytest.approx(rec["unchanged"]["runs"] * 0.5, abs=0.01)
    assert fixed["k"] and fixed["power"] >= 0.8 and fixed["per_pr"]["runs"] == 12 * fixed["k"]
    # the recommendation is the cheapest design tried on its pool that reaches the power
    reaching = [d for d in doc["designs"] if d["pool"] == rec["pool"] and d["power"] >= 0.8]
    assert rec["unchanged"]["runs"] == min(d["unchanged"] for d in reaching)
    # and it is cheaper than the fixed design for a pull request that changes nothing
    assert rec["unchanged"]["runs"] < fixed["per_pr"]["runs"]
    text = "\n".join(render_plan(make_plan(base, delta=0.2, alpha=0.05, target=0.8)))
    assert f"--agent-k {rec['k']} --agent-confirm {rec['cap']}" in text
    assert f"the cheapest fixed design of that power on this pool: --agent-k {fixed['k']}" in text


def test_a_small_pool_is_grown_until_the_power_is_reachable_and_says_by_how_much():
    rng = random.Random(5)
    rates = [rng.uniform(0.6, 1.0) for _ in range(4)]
    doc = cost.plan_designs(ns.recording(rng, rates, 3, 0.0), alpha=0.05, target=0.8)
    rec = doc["recommended"]
    assert doc["pool_now"] == 3 and rec["pool"] > 3 and rec["runs_to_add"] == rec["pool"] - 3
    assert doc["price_per_run"]["cost_usd"] is None and rec["unchanged"]["cost_usd"] is None
