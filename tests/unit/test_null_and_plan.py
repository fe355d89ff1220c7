"""The null experiment and planning: false alarms on one runtime, and designs whose power simulation confirms."""

from __future__ import annotations

import copy
import json

import pytest
from helpers import outcome_runs, results_doc

from pytest_agentdrift.compare import null, planning
from pytest_agentdrift.errors import AgentDriftError


def results(pattern: dict[str, list[bool]], run_id="r"):
    return results_doc(
        {t: {"suite": "s", "runs": outcome_runs(ps, usage=None)} for t, ps in pattern.items()}, run_id=run_id
    )


def manifest(**identity):
    from pytest_agentdrift.manifest.identity import IDENTITY_FIELDS

    ident = {f: "same" for f in IDENTITY_FIELDS}
    ident.update(identity)
    return {"identity": ident, "provenance": {}}


STEADY = {f"T{i:02d}": [True, True, True] for i in range(1, 11)} | {
    "T11": [True, False, True],
    "T12": [False, False, False],
}


def test_two_recordings_of_one_runtime_flip_nothing_and_the_gate_would_not_fire():
    r = null.null_experiment([results(STEADY, "a"), results(STEADY, "b")], [manifest(), manifest()], labels=["a", "b"])
    assert r["status"] == null.NULL_OK and r["flips"] == 0 and r["gate_fired"] == 0
    assert r["pairs"][0]["gate_verdict"] == "pass" and not r["pairs"][0]["gate_fired"]
    assert r["pairs"][0]["variance"]["shares"] is not None
    assert null.null_exit_code(r) == 0
    lines = null.render_null(r)
    assert "a vs b: 0 flip(s); regression gate pass, would not fire" in lines[0]
    assert lines[-1].startswith("status      no_material_evidence: no outcome flipped")


def test_outcomes_moving_beyond_noise_under_an_equal_identity_is_host_side_drift():
    drifted = copy.deepcopy(STEADY)
    for t in ("T01", "T02", "T03", "T04", "T05", "T06"):
        drifted[t] = [False, False, False]
    r = null.null_experiment([results(STEADY), results(drifted)], [manifest(), manifest()])
    assert r["status"] == null.DRIFT
    assert r["because"][0].startswith("host-side drift suspected")
    assert r["pairs"][0]["gate_fired"] and r["pairs"][0]["flips"] == 6
    assert null.null_exit_code(r) == 1
    # one flip is run-to-run noise, not drift
    one = copy.deepcopy(STEADY)
    one["T11"] = [False, False, True]
    r = null.null_experiment([results(STEADY), results(one)], [manifest(), manifest()])
    assert r["status"] == null.NULL_OK and r["flips"] == 1


def test_a_flaky_agent_firing_the_gate_is_its_own_randomness_not_the_host():
    # ten recordings of one agent whose critical check flakes at 30 % with k = 1: the strict gate fires
    # on some pairs (it cannot tell a flake from a change at k 1), yet no pair moves beyond noise
    import random

    from pytest_agentdrift.compare.nullsim import recording

    rng = random.Random(7)
    rates = [1.0] * 12
    runs = [recording(rng, rates, 1, 0.3) for _ in range(10)]
    r = null.null_experiment(runs, [manifest()] * 10)
    assert r["gate_fired"] > 0
    assert r["status"] == null.NULL_OK, r["because"]
    assert "the agent's own randomness (a false alarm), not the host" in r["because"][0]
    assert "could not be told from flakes" in r["because"][1] and "--agent-k 5" in r["because"][1]
    assert null.null_exit_code(r) == 0


def test_a_different_runtime_is_not_a_null_experiment():
    r = null.null_experiment([results(STEADY), results(STEADY)], [manifest(), manifest(cli_version="2")])
    assert r["status"] == null.NOT_NULL and "cli_version" in r["because"][0]
    assert null.null_exit_code(r) == 6


def test_three_recordings_give_a_false_alarm_rate_against_alpha():
    r = null.null_experiment([results(STEADY)] * 3, [manifest()] * 3)
    assert (
        len(r["pairs"]) == 3
        and r["level"] == pytest.approx(0.05 / 3)
        and r["false_alarm_rate"] == 0.0
        and "not independent" in r["false_alarm_note"]
    )
    assert "0/3 pair(s) = 0.0% against alpha 0.05" in "\n".join(null.render_null(r))
    with pytest.raises(ValueError):
        null.null_experiment([results(STEADY)], None)


def test_parse_delta():
    assert planning.parse_delta("10pp") == pytest.approx(0.10)
    assert planning.parse_delta("15%") == pytest.approx(0.15)
    assert planning.parse_delta("0.2") == pytest.approx(0.2)
    assert planning.parse_delta("20") == pytest.approx(0.2)
    for bad in ("ten", "0", "150pp", "-5pp"):
        with pytest.raises(AgentDriftError):
            planning.parse_delta(bad)


RECORDED = results(
    {
        f"T{i:02d}": ps
        for i, ps in enumerate(
            [
                [True] * 3,
                [True] * 3,
                [True] * 3,
                [True, True, False],
                [True] * 3,
                [True, False, False],
                [True] * 3,
                [True, True, False],
                [True] * 3,
                [True] * 3,
                [False] * 3,
                [True] * 3,
            ],
            start=1,
        )
    }
)


@pytest.mark.parametrize("delta", [0.15, 0.25])
def test_the_planned_design_reaches_the_stated_power_in_simulation(delta):
    plan = planning.make_plan(RECORDED, delta=delta, alpha=0.05, target=0.80)
    rec = plan["recommended"]
    assert rec["power"] >= 0.80
    rates = [t["smoothed"] for t in plan["inputs"]["tasks"].values()]
    simulated = planning.simulate_power(
        rates, rec["tasks"], rec["k"], delta, 0.05, fixed=rec["kind"] == "recorded_tasks", sims=6000, seed=1
    )
    assert abs(simulated - rec["power"]) <= 0.05, (rec, simulated)
    # one repetition less on the recorded tasks falls short: the plan is the smallest such design
    if rec["kind"] == "recorded_tasks" and rec["k"] > 1:
        assert plan["designs"]["recorded_tasks"][rec["k"] - 2]["power"] < 0.80
    for more in plan["designs"]["more_tasks"]:
        if more["tasks"] is not None:
            sim = planning.simulate_power(rates, more["tasks"], more["k"], delta, 0.05, fixed=False, sims=4000, seed=2)
            assert abs(sim - more["power"]) <= 0.05, (more, sim)


def test_the_minimum_detectable_effect_is_the_power_boundary():
    plan = planning.make_plan(RECORDED, delta=0.1, alpha=0.05, target=0.8, budget_k=6)
    m = plan["mde"]["delta"]
    rates = [t["smoothed"] for t in plan["inputs"]["tasks"].values()]
    assert (
        planning.power(rates, 12, 6, m, 0.05, fixed=True)
        >= 0.8
        > planning.power(rates, 12, 6, m - 0.01, 0.05, fixed=True)
    )
    assert "mde" in "\n".join(planning.render_plan(plan))


def test_a_plan_is_sealed_by_its_digest():
    plan = planning.make_plan(RECORDED, delta=0.1)
    assert planning.verify_plan(json.loads(json.dumps(plan))) == plan
    edited = json.loads(json.dumps(plan))
    edited["question"]["delta"] = 0.5
    with pytest.raises(AgentDriftError, match="edited after it was written"):
        planning.verify_plan(edited, "plan.json")
    with pytest.raises(AgentDriftError, match="not a plan"):
        planning.verify_plan({"x": 1})
    with pytest.raises(AgentDriftError, match="at least two tasks"):
        planning.make_plan(results({"T1": [True]}), delta=0.1)


def test_runs_lost_to_infrastructure_are_neither_passes_nor_failures_in_a_plan():
    from pytest_agentdrift.compare.planning import task_counts
    from pytest_agentdrift.compare.stats import scored_passes

    lost = {"passed": False, "outcome": "infra_error"}
    runs = [{"passed": True, "outcome": "passed"}, lost, {"passed": True, "tampered_pass": True}]
    assert scored_passes(runs) == (1, 2)  # the tampered pass is a fail, the lost run is not scored
    assert task_counts({"tasks": {"T1": {"runs": runs}, "T2": {"runs": [lost]}}}) == {"T1": (1, 2)}


def test_accepted_unobserved_tokens_are_resolved_as_the_plugin_resolves_them():
    # group names (`envelope`) are tokens, not fields: the one resolver expands them
    unobserved = manifest(temperature="unobserved", seed="unobserved")
    r = null.null_experiment(
        [results(STEADY), results(STEADY)], [unobserved, unobserved], accept_unobserved=["envelope"]
    )
    assert r["status"] == null.NULL_OK
    refused = null.null_experiment([results(STEADY), results(STEADY)], [unobserved, unobserved], accept_unobserved=[])
    assert refused["status"] != null.NULL_OK  # nothing accepted: both sides unobserved blocks


def test_the_plan_recommends_baseline_and_pull_request_k_for_the_regression_gate():
    from scipy.stats import binom, fisher_exact

    plan = planning.make_plan(RECORDED, delta=0.1, alpha=0.05, target=0.8)
    gate = plan["gate"]
    assert gate["reaches_target"] and gate["baseline_k"] >= 5
    # the stated power, recomputed with scipy's own Fisher test on every outcome of the pull request's runs
    level, kb, kp = gate["level"], gate["baseline_k"], gate["pr_k"]
    recomputed = sum(
        binom.pmf(x, kp, 0.5)
        for x in range(kp + 1)
        if fisher_exact([[x, kp - x], [0, kb]], alternative="greater").pvalue < level
    )
    assert gate["power_new_critical"] == pytest.approx(recomputed, abs=1e-12) and recomputed >= 0.8
    # one run fewer on the pull request does not reach the power with any baseline k the plan tries
    assert all(planning.new_behaviour_power(b, kp - 1, level) < 0.8 for b in planning.GATE_BASE_K)
    lines = planning.render_plan(plan)
    assert any(ln.startswith(f"gate        record the baseline with --agent-k {kb}, run pull requests") for ln in lines)
