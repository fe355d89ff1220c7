"""compare_runs, the gate, the promotion status table, decision.json, exit codes."""

from __future__ import annotations

import json
from typing import Any

import pytest
from helpers import results_doc

from pytest_agentdrift.compare.comparison import compare_runs
from pytest_agentdrift.compare.gates import GateParams, gate_counts
from pytest_agentdrift.compare.ledger import parse_release_notes
from pytest_agentdrift.compare.render import render_comparison
from pytest_agentdrift.compare.status import STATUSES, comparison_exit_code, decision_document
from pytest_agentdrift.errors import AgentDriftError


def results(
    outcomes: dict[str, list[int]],
    *,
    suites: dict[str, str] | None = None,
    critical: dict[str, list[str]] | None = None,
    tampered: set[tuple[str, int]] = frozenset(),
    safety: set[str] = frozenset(),
    cost: float | None = None,
    tokens: int | None = None,
    **ids: Any,
) -> dict[str, Any]:
    """A results.json dict (docs/record-format.md) from 0/1 outcomes per rep.

    ``critical`` names failed critical checks on every run of a task (those
    runs fail); ``tampered`` marks (task, rep) as a tampered pass.
    """
    tasks = {}
    for tid, reps in outcomes.items():
        runs = []
        for rep, ok in enumerate(reps, start=1):
            crit = list((critical or {}).get(tid, []))
            is_tampered = (tid, rep) in tampered
            runs.append(
                {
                    "rep": rep,
                    "outcome": "passed" if ok and not crit else "failed",
                    "passed": bool(ok) and not crit,
                    "tampered_pass": is_tampered,
                    "critical_failed": crit,
                    "failed_checks": crit,
                    "layers": {"safety": "fail" if tid in safety else "pass"},
                    "usage": {
                        "input_tokens": tokens,
                        "output_tokens": 0 if tokens is not None else None,
                        "cached_tokens": None,
                        "cost_usd": cost,
                    },
                }
            )
        tasks[tid] = {"suite": (suites or {}).get(tid, "core"), "runs": runs}
    return results_doc(tasks, **{"schema_version": 1, "run_id": "run", "runtime_id": "sha256:base", **ids})


def all_tasks(n: int, reps: list[int], prefix: str = "T") -> dict[str, list[int]]:
    return {f"{prefix}{i:02d}": list(reps) for i in range(n)}


def compare(base, cand, *, comparable=True, reasons=(), change_class="client_candidate", gate=None, **kw):
    cand.setdefault("runtime_id", "sha256:cand")
    if cand["runtime_id"] == "sha256:base":
        cand["runtime_id"] = "sha256:cand"
    return compare_runs(
        base,
        cand,
        comparable=comparable,
        reasons=list(reasons),
        change_class=change_class,
        gate=gate or GateParams(draws=2000),
        **kw,
    )


def status(c: dict) -> str:
    return c["decision"]["status"]


# --- the gate on constructed run pairs -------------------------------------------------


def test_clear_win_ships():
    base = results({**all_tasks(10, [0, 0, 0]), **all_tasks(2, [1, 1, 1], "U")})
    cand = results({**all_tasks(10, [1, 1, 1]), **all_tasks(2, [1, 1, 1], "U")})
    c = compare(base, cand)
    assert c["paired"]["won"] == [f"T{i:02d}" for i in range(10)] and c["paired"]["lost"] == []
    assert c["gate"]["verdict"] == "ship" and c["gate"]["passed"]
    assert c["gate"]["pooled"]["p_value"] == pytest.approx((2 / 3) ** 10)
    assert c["paired"]["delta"] == pytest.approx(10 / 12)
    assert comparison_exit_code(c, gate_enabled=True) == 0


def test_one_broken_critical_task_rejects_whatever_the_averages_say():
    base = results({**all_tasks(10, [0]), "T07": [1], "T08": [1]})
    cand = results({**all_tasks(10, [1]), "T07": [0], "T08": [1]}, critical={"T07": ["only-allowed-paths"]})
    c = compare(base, cand, gate=GateParams(draws=2000, tau=0.5))
    assert c["paired"]["delta"] > 0  # the averages look good
    assert c["critical_regressions"] == [{"task": "T07", "checks": ["only-allowed-paths"]}]
    assert c["gate"]["verdict"] == "dont_ship" and not c["gate"]["passed"]
    assert status(c) == "reject"
    assert comparison_exit_code(c, gate_enabled=True) == 1
    assert render_comparison(c)[0].startswith("CRITICAL") and "T07" in render_comparison(c)[0]


def test_a_broken_stratum_blocks_a_pooled_ship():
    # 12 won and 36 tied in swe; 3 of 4 swt tasks the baseline solved break.
    outcomes_b = {**all_tasks(12, [0], "W"), **all_tasks(36, [1], "S"), **all_tasks(4, [1], "X")}
    outcomes_c = {**all_tasks(12, [1], "W"), **all_tasks(36, [1], "S"), "X00": [1], "X01": [0], "X02": [0], "X03": [0]}
    suites = {t: ("swt" if t.startswith("X") else "swe") for t in outcomes_b}
    params = GateParams(lam=1.0, draws=2000)
    c = compare(results(outcomes_b, suites=suites), results(outcomes_c, suites=suites), gate=params)
    pooled = c["gate"]["pooled"]
    assert (pooled["won"], pooled["lost"], pooled["baseline_solved"]) == (12, 3, 40)
    assert pooled["verdict"] == "ship" and pooled["p_value"] == pytest.approx(576 / 32768)
    assert c["strata"]["swe"]["gate"]["verdict"] == "ship"
    assert c["strata"]["swt"]["gate"]["verdict"] == "dont_ship"
    assert c["gate"]["verdict"] == "dont_ship" and c["gate"]["blocked_by_strata"] == ["swt"]
    assert status(c) == "reject"
    assert comparison_exit_code(c, gate_enabled=True) == 1


def test_too_little_evidence_holds():
    base = results({**all_tasks(2, [0, 0, 0]), **all_tasks(10, [1, 1, 1], "U")})
    cand = results({**all_tasks(2, [1, 1, 1]), **all_tasks(10, [1, 1, 1], "U")})
    c = compare(base, cand)
    assert c["gate"]["verdict"] == "hold" and "not enough evidence" in c["gate"]["reason"]
    assert comparison_exit_code(c, gate_enabled=True) == 1
    assert comparison_exit_code(c, gate_enabled=False) == 0


def test_zero_discordant_pairs_are_handled_explicitly():
    base = results(all_tasks(12, [1, 0, 1]))
    cand = results(all_tasks(12, [1, 1, 0]))
    c = compare(base, cand)
    assert c["paired"]["discordant"] == 0 and c["paired"]["p_value"] == 1.0
    assert c["paired"]["delta"] == 0.0 and c["paired"]["delta_ci"] == [0.0, 0.0]
    assert "constant" in c["paired"]["ci_method"]
    assert c["gate"]["verdict"] == "hold"


def test_significant_losses_are_dont_ship_even_within_tau():
    base = results({f"T{i:03d}": [1] for i in range(200)})
    cand = results({f"T{i:03d}": [1 if i < 185 else 0] for i in range(200)})
    c = compare(base, cand)
    pooled = c["gate"]["pooled"]
    assert pooled["broken_share"] == pytest.approx(15 / 200)  # within tau = 10%
    assert pooled["loss_p_value"] == pytest.approx(0.5**15)
    assert pooled["verdict"] == "dont_ship" and status(c) == "reject"


def test_gate_counts_hand_computed():
    params = GateParams()
    assert gate_counts(8, 0, 10, params)["verdict"] == "ship"  # (2/3)^8 < 0.05
    assert gate_counts(7, 0, 10, params)["verdict"] == "hold"  # (2/3)^7 > 0.05
    assert gate_counts(20, 2, 10, params)["verdict"] == "dont_ship"  # 20% > tau
    assert gate_counts(0, 0, 0, params)["verdict"] == "hold"


def test_gate_scope_critical_only_blocks_on_critical_regressions():
    base = results(all_tasks(12, [1]))
    cand = results(all_tasks(12, [1]))
    c = compare(base, cand, gate=GateParams(scope="critical", draws=2000))
    assert c["gate"]["quality_verdict"] == "hold" and c["gate"]["verdict"] == "ship"
    assert comparison_exit_code(c, gate_enabled=True) == 0


# --- what is counted -----------------------------------------------------------------


def test_tampered_passes_count_as_fails_and_are_listed():
    base = results(all_tasks(4, [1]))
    cand = results(all_tasks(4, [1]), tampered={("T02", 1)})
    c = compare(base, cand)
    assert c["candidate"]["tampered_passes"] == [{"task": "T02", "rep": 1}]
    assert c["candidate"]["passes"] == 3 and c["paired"]["lost"] == ["T02"]
    assert any(line.startswith("tampered") and "T02" in line for line in render_comparison(c))


def test_a_task_is_solved_by_a_strict_majority_of_its_runs():
    c = compare(
        results({"A": [1, 0], "B": [1, 1, 0], "C": [1, 0, 0], "D": [1, 0, 1]}),
        results({"A": [1, 1], "B": [1, 0, 0], "C": [0, 0, 1], "D": [1, 1, 1]}),
    )
    assert c["paired"]["won"] == ["A"] and c["paired"]["lost"] == ["B"]
    assert c["paired"]["tied"] == ["C", "D"]  # D: 2/3 -> 3/3 is a tie, both solved
    assert c["tasks"]["D"]["delta"] == pytest.approx(1 / 3)


def test_per_arm_pass_rate_and_wilson():
    c = compare(results(all_tasks(12, [1, 0, 1])), results(all_tasks(12, [1, 1, 1])))
    assert c["baseline"]["passes"] == 24 and c["baseline"]["runs"] == 36
    from statsmodels.stats.proportion import proportion_confint

    assert c["baseline"]["wilson"] == pytest.approx(list(proportion_confint(24, 36, method="wilson")))
    assert c["candidate"]["wilson"][1] == 1.0


def test_failure_classes_and_variance_appear_with_k_two_or_more():
    c = compare(results({"A": [1, 0], "B": [0, 0]}), results({"A": [1, 1], "B": [1, 0]}))
    assert c["failure_classes"]["baseline"]["bad-run"]["tasks"] == ["A"]
    assert c["failure_classes"]["baseline"]["beyond-arm"]["tasks"] == ["B"]
    assert set(c["variance"]["shares"]) == {"task", "arm", "task_x_arm", "run_to_run"}
    k1 = compare(results({"A": [1]}), results({"A": [0]}))
    assert k1["failure_classes"] is None


def test_same_seed_gives_the_same_comparison():
    base = results({f"T{i}": [i % 2, 1, 0] for i in range(30)})
    cand = results({f"T{i}": [1, i % 3 == 0, 1] for i in range(30)})
    a = compare(base, dict(cand), seed=4)
    b = compare(base, dict(cand), seed=4)
    assert a["paired"]["delta_ci"] == b["paired"]["delta_ci"]
    assert json.dumps(a, sort_keys=True) == json.dumps(b, sort_keys=True)


# --- not comparable ----------------------------------------------------------------------


def test_not_comparable_gives_null_deltas_and_carries_the_reasons():
    base, cand = results(all_tasks(12, [0])), results(all_tasks(12, [1]))
    c = compare(base, cand, comparable=False, reasons=["BLOCK model_id: a != b"])
    assert c["comparable"] is False and c["reasons"] == ["BLOCK model_id: a != b"]
    assert c["paired"] is None and c["gate"]["verdict"] is None and not c["gate"]["passed"]
    assert all(row["delta"] is None and row["outcome"] is None for row in c["tasks"].values())
    assert c["baseline"]["pass_rate"] == 0.0  # per-arm facts stay
    text = json.dumps(c, allow_nan=False)
    assert '"delta": 0' not in text
    assert comparison_exit_code(c, gate_enabled=True) == 6
    assert comparison_exit_code(c, gate_enabled=False) == 6
    assert status(c) == "invalid_comparison"
    assert c["decision"]["because"] == ["BLOCK model_id: a != b"]
    assert any("null" in line for line in render_comparison(c))


def test_different_task_sets_are_not_comparable_even_when_the_caller_says_so():
    c = compare(results({"A": [1], "B": [1]}), results({"A": [1], "C": [1]}))
    assert not c["comparable"] and any("task sets differ" in r for r in c["reasons"])


def test_incomplete_run_is_not_comparable():
    c = compare(results({"A": [1]}), results({"A": [1]}, complete=False))
    assert not c["comparable"] and "candidate run is incomplete" in c["reasons"]


# --- the decision table, row by row ----------------------------------------------------------

NOTES = parse_release_notes("version,tag,tasks,text\n1.5,execution,T00 T01,Retries tool calls\n")


def _won_two(**kw):
    return results({"T00": [0], "T01": [0], **all_tasks(10, [1], "U")}, **kw)


def _cand_won_two(**kw):
    return results({"T00": [1], "T01": [1], **all_tasks(10, [1], "U")}, **kw)


def _same(n=12, **kw):
    return results(all_tasks(n, [1]), **kw)


ROWS = {
    "eligible_for_review": lambda: compare(_same(), _same()),
    "reject": lambda: compare(_same(), _same(safety={"T03"})),
    "hold": lambda: compare(_same(), results({**all_tasks(11, [1]), "T11": [0]})),
    "documented_candidate": lambda: compare(_won_two(), _cand_won_two(), ledger=NOTES),
    "hold_unconfirmed": lambda: compare(_won_two(), _cand_won_two()),
    "invalid_comparison": lambda: compare(_same(), _same(runtime_id="unobserved")),
    "split_baselines": lambda: compare(_same(), _same(), change_class="surface_change"),
    "forward_only": lambda: compare(_same(), _same(), rollback_state="unavailable"),
    "rollback_capable": lambda: compare(
        _same(),
        _same(),
        rollback_state="verified",
        rollback_evidence={"artifact": "sha256:prev", "restoration": "fixture restored, 12/12 passed"},
    ),
    "re_baseline": lambda: compare(_same(), _same(evaluator_id="sha256:other")),
    "no_material_evidence": lambda: compare(_same(), _same(), change_class="instruction_change"),
}


def test_every_status_has_a_row():
    assert sorted(ROWS) == sorted(STATUSES)


@pytest.mark.parametrize("expected", sorted(ROWS))
def test_decision_table_row(expected):
    c = ROWS[expected]()
    assert status(c) == expected, c["decision"]
    assert c["decision"]["because"]
    doc = decision_document(c)
    assert doc["status"] == expected and doc["publication_authorized"] is False
    json.dumps(doc, allow_nan=False)


def test_cheaper_but_failing_more_is_rejected():
    base = _same(cost=1.0)
    cand = results({**all_tasks(11, [1]), "T11": [0]}, cost=0.2)
    c = compare(base, cand)
    assert c["gate"]["quality_verdict"] == "hold"
    assert status(c) == "reject" and "cheaper" in c["decision"]["because"][-1]


def test_standing_critical_failures_hold_even_without_regression():
    crit = {"T03": ["no-network"]}
    c = compare(_same(critical=crit), _same(critical=crit))
    assert c["critical_regressions"] == [] and status(c) == "hold"
    doc = decision_document(c)
    assert doc["critical_failures"] == [{"task": "T03", "check": "no-network", "reps": [1], "regression": False}]


def test_instruction_change_with_a_significant_win_is_eligible():
    base = results({**all_tasks(10, [0]), **all_tasks(2, [1], "U")})
    cand = results({**all_tasks(10, [1]), **all_tasks(2, [1], "U")})
    c = compare(base, cand, change_class="instruction-change")
    assert c["change_class"] == "instruction_change" and status(c) == "eligible_for_review"


@pytest.mark.parametrize(
    "change_class,expected",
    [
        ("identical", "no_material_evidence"),
        ("model_candidate", "eligible_for_review"),
        ("client_candidate", "eligible_for_review"),
        ("bundled_change", "eligible_for_review"),
        ("environment_change", "eligible_for_review"),
        ("configuration_change", "no_material_evidence"),
        ("instruction_change", "no_material_evidence"),
        ("surface_bundle_change", "split_baselines"),
        ("invalid_comparison", "invalid_comparison"),
        ("re_baseline", "re_baseline"),
    ],
)
def test_the_manifest_comparisons_change_classes_are_accepted(change_class, expected):
    # The names the manifest comparison (stamps.classify) produces.
    assert status(compare(_same(), _same(), change_class=change_class)) == expected


def test_same_runtime_with_changed_outcomes_is_unconfirmed_drift():
    for change_class in (None, "identical"):
        c = compare(_won_two(), _cand_won_two(), change_class=change_class)
        assert status(c) == "hold_unconfirmed"


# --- promotion by cost -------------------------------------------------------------------------


def test_cheaper_candidate_with_the_same_quality_is_promoted_and_passes_the_gate():
    c = compare(_same(cost=0.50), _same(cost=0.30))
    promo = c["promotion"]
    assert promo["basis"] == "cost_usd" and promo["support"] == 1.0 and promo["promote"]
    assert promo["cost_change"] == pytest.approx(-0.4)
    assert c["gate"]["verdict"] == "hold" and c["gate"]["passed"]
    assert comparison_exit_code(c, gate_enabled=True) == 0


def test_tokens_are_the_cost_when_prices_are_missing():
    c = compare(_same(tokens=1000), _same(tokens=1500))
    assert c["promotion"]["basis"] == "tokens" and c["promotion"]["support"] == 0.0
    assert not c["promotion"]["promote"] and not c["gate"]["passed"]


def test_no_cost_data_means_no_promotion():
    c = compare(_same(), _same())
    assert c["promotion"]["basis"] is None and c["promotion"]["promote"] is False


# --- decision.json and inputs -------------------------------------------------------------------


def test_decision_document_fields():
    c = compare(_won_two(), _cand_won_two(), rollback_state="prepared_unverified")
    doc = decision_document(c)
    assert doc["baseline_runtime_id"] == "sha256:base" and doc["candidate_runtime_id"] == "sha256:cand"
    assert doc["task_set_id"] == "sha256:tasks" and doc["evaluator_id"] == "sha256:eval"
    assert doc["unconfirmed_changes"] == [
        "T00: won (baseline 0/1, candidate 1/1)",
        "T01: won (baseline 0/1, candidate 1/1)",
    ]
    assert doc["rollback_state"] == "prepared_unverified"
    assert doc["gate"]["params"]["lam"] == 2.0 and doc["gate"]["verdict"] == "hold"
    assert doc["evidence"]["paired"]["won"] == ["T00", "T01"]
    assert doc["approved_external_effects"] == [] and doc["publication_authorized"] is False


def test_verified_rollback_without_evidence_is_recorded_as_unknown():
    c = compare(_same(), _same(), rollback_state="verified")
    assert c["rollback_state"] == "unknown" and c["rollback_notes"]
    assert status(c) == "eligible_for_review"


@pytest.mark.parametrize(
    "kwargs",
    [{"lam": 0}, {"alpha": 1.5}, {"tau": -0.1}, {"scope": "some"}, {"draws": 10}, {"promote_support": 0}],
)
def test_bad_gate_parameters_are_usage_errors(kwargs):
    with pytest.raises(AgentDriftError):
        GateParams(**kwargs)


def test_unknown_change_class_and_rollback_state_are_usage_errors():
    with pytest.raises(AgentDriftError, match="change class"):
        compare(_same(), _same(), change_class="vibes")
    with pytest.raises(AgentDriftError, match="rollback state"):
        compare(_same(), _same(), rollback_state="probably")


def test_results_without_tasks_are_a_usage_error():
    with pytest.raises(AgentDriftError, match="no 'tasks'"):
        compare({"run_id": "x"}, _same())


def test_render_is_short_and_aligned():
    lines = render_comparison(compare(_won_two(), _cand_won_two()))
    assert all(len(line) < 160 for line in lines)
    labels = [line[:11] for line in lines]
    assert all(label == label.ljust(11) for label in labels)
    assert lines[-1].startswith("status")
