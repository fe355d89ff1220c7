"""The regression gate (--agent-gate regression), the promote gate's mode, and the closing verdict."""

from __future__ import annotations

import json
from typing import Any

from helpers import results_doc

from pytest_agentdrift.compare.comparison import compare_runs
from pytest_agentdrift.compare.gates import GateParams
from pytest_agentdrift.compare.outcome import comparison_verdict
from pytest_agentdrift.compare.render import render_comparison
from pytest_agentdrift.compare.status import decision_document
from pytest_agentdrift.vocabulary import EXIT_FAILED, EXIT_OK, EXIT_REFUSED


def arm(tasks: dict[str, list[tuple[bool, list[str]]]], *, tampered=(), suites=None, safety=()) -> dict[str, Any]:
    """results.json from (passed, failed critical checks) per repetition."""
    out = {}
    for tid, runs in tasks.items():
        rows = []
        for rep, (ok, crit) in enumerate(runs, start=1):
            rows.append(
                {
                    "rep": rep,
                    "outcome": "passed" if ok and not crit else "failed",
                    "passed": ok and not crit,
                    "tampered_pass": (tid, rep) in tampered,
                    "critical_failed": list(crit),
                    "failed_checks": list(crit),
                    "layers": {"safety": "fail" if (tid, rep) in safety else "pass"},
                    "usage": None,
                }
            )
        out[tid] = {"title": tid, "suite": (suites or {}).get(tid, "core"), "runs": rows}
    return results_doc(out, schema_version=1, runtime_id="sha256:x", task_set_id="sha256:t", evaluator_id="sha256:e")


def passing(n: int, k: int = 1) -> dict[str, list[tuple[bool, list[str]]]]:
    return {f"T{i:02d}": [(True, [])] * k for i in range(1, n + 1)}


def compare(base, cand):
    return compare_runs(base, cand, comparable=True, reasons=[], change_class="identical", gate=GateParams(draws=200))


def test_same_agent_passes_and_says_what_it_could_not_see():
    c = compare(arm(passing(12)), arm(passing(12)))
    reg = c["regression"]
    assert reg["passed"] and reg["blockers"] == []
    # 12 deterministic tasks, k = 1: the gate needs 5 lost tasks at alpha 0.05 -> ~50 pp
    assert reg["minimum_detectable"]["mde_pp"] == 50
    v = comparison_verdict(c, "regression")
    assert v.code == EXIT_OK
    assert v.line == "agentdrift: exit 0 — gate regression: no regression detected (smallest detectable: 50 pp)"
    # the promote gate on the same pair holds (nothing to decide on) and fails
    assert comparison_verdict(c, "promote").code == EXIT_FAILED


def test_new_critical_failure_fails_naming_it():
    cand = passing(12)
    cand["T07"] = [(False, ["override-not-written"])]
    c = compare(arm(passing(12)), arm(cand))
    v = comparison_verdict(c, "regression")
    assert v.code == EXIT_FAILED
    # k = 1 against k = 1 cannot tell a flake from a change: the default (strict) blocks and says so
    assert v.reason == (
        "gate regression: new critical failure T07 override-not-written (may be a flake: failed 1/1, never in 1 "
        "baseline run(s); k 1 against 1 cannot tell; blocked under --agent-gate-flakes strict)"
    )
    new = c["regression"]["new_critical_failures"]
    assert [(x["task"], x["checks"]) for x in new] == [("T07", ["override-not-written"])]
    assert new[0]["rates"]["override-not-written"]["verdict"] == "undecided"
    assert any(line.startswith("regression  FAIL: new critical failure T07") for line in render_comparison(c))


def test_standing_critical_failures_are_listed_not_failing():
    tasks = passing(12)
    tasks["T03"] = [(False, ["no-tamper"])]
    c = compare(arm(tasks), arm(tasks))
    reg = c["regression"]
    assert reg["passed"]
    assert [(x["task"], x["checks"]) for x in reg["standing_critical_failures"]] == [("T03", ["no-tamper"])]
    v = comparison_verdict(c, "regression")
    assert v.code == EXIT_OK
    assert "standing (fails in the baseline too): critical failure T03 no-tamper (1/1 in baseline, 1/1 now)" in v.reason
    doc = decision_document(c)
    assert doc["regression_gate"]["standing_critical_failures"] == reg["standing_critical_failures"]


def test_non_critical_non_significant_loss_passes():
    cand = passing(12)
    cand["T02"] = [(False, [])]  # one lost task, no critical check: p = 0.5
    c = compare(arm(passing(12)), arm(cand))
    assert c["paired"]["lost"] == ["T02"]
    assert c["regression"]["passed"]
    assert comparison_verdict(c, "regression").code == EXIT_OK


def test_significant_loss_fails_pooled():
    cand = passing(12)
    for t in ("T01", "T02", "T03", "T04", "T05"):
        cand[t] = [(False, [])]
    c = compare(arm(passing(12)), arm(cand))
    assert not c["regression"]["passed"]
    assert "paired test: loses 5 task(s), wins 0" in c["regression"]["reason"]


def test_critical_failures_are_rates_tested_against_the_baseline():
    base = passing(4, k=10)
    # 3 of 3 against 0 of 10: p = 1/286, significant at alpha: new, whatever the policy
    three = dict(passing(4, k=3), T01=[(False, ["c"])] * 3)
    reg = compare(arm(base), arm(three))["regression"]
    assert [x["task"] for x in reg["new_critical_failures"]] == ["T01"]
    assert reg["new_critical_failures"][0]["rates"]["c"]["verdict"] == "new"
    assert reg["blockers"][0].startswith("new critical failure T01 c (failed 3/3, baseline 0/10, p = 0.0035")
    # 1 of 3 against 0 of 10: a design that could tell, and the test says it is within noise
    once = dict(passing(4, k=3), T01=[(False, ["c"]), (True, []), (True, [])])
    reg = compare(arm(base), arm(once))["regression"]
    assert reg["passed"] and reg["new_critical_failures"] == [] and reg["undecided_failures"] == []
    # seen in the baseline at any rate and not significantly more often now: standing, with its rate
    flaky_base = dict(base, T01=[(False, ["c"])] * 3 + [(True, [])] * 7)
    reg = compare(arm(flaky_base), arm(three))["regression"]
    assert reg["passed"], reg["reason"]
    assert (
        "standing (fails in the baseline too): critical failure T01 c (flaky: 3/10 in baseline, 3/3 now)"
        in (reg["reason"])
    )


def test_flakes_policy_decides_what_the_design_cannot_tell():
    base = passing(4, k=5)
    one = dict(passing(4, k=1), T02=[(False, ["c"])])  # k 5 against 1: 1/6 can never reach alpha
    strict = compare(arm(base), arm(one))["regression"]
    assert not strict["passed"]
    assert "may be a flake" in strict["reason"] and "blocked under --agent-gate-flakes strict" in strict["reason"]
    report = compare_runs(
        arm(base),
        arm(one),
        comparable=True,
        reasons=[],
        change_class="identical",
        gate=GateParams(draws=200, flakes="report"),
    )["regression"]
    assert report["passed"]
    assert [x["task"] for x in report["undecided_failures"]] == ["T02"]
    assert "undecided critical failure T02 c (may be a flake" in report["reason"]


def test_family_level_counts_only_checks_that_could_reject():
    from pytest_agentdrift.compare.checkrates import design_can_tell, tarone_level

    # one failure in one run of either arm can never be significant: it is not paid for
    assert tarone_level([0.5, 0.4, 1.0], always=1, alpha=0.05) == (0.05, 1)
    assert tarone_level([0.001, 0.002, 0.5], always=1, alpha=0.05) == (0.05 / 3, 3)
    assert not design_can_tell(5, 1, 0.05) and not design_can_tell(3, 3, 0.05)
    assert design_can_tell(5, 3, 0.05) and design_can_tell(20, 1, 0.05)


def test_family_level_matches_the_definition_on_many_checks():
    """The smallest m with always + #{min_p < alpha/m} <= m, against a literal reading of that rule."""
    import random

    from pytest_agentdrift.compare.checkrates import tarone_level

    rng = random.Random(3)
    for size in (0, 1, 7, 300):
        min_p = [rng.choice([1.0, 0.5, 0.1, 0.02, 0.001, 1e-6]) for _ in range(size)]
        for always in (1, 4):
            m = max(always, 1)
            while always + sum(1 for p in min_p if p < 0.05 / m) > m:
                m += 1
            assert tarone_level(min_p, always=always, alpha=0.05) == (0.05 / m, m)


def test_tampered_pass_and_new_safety_failure_fail():
    c = compare(arm(passing(6)), arm(passing(6), tampered={("T02", 1)}))
    assert c["regression"]["reason"] == "tampered pass T02 r1"
    c = compare(arm(passing(6)), arm(passing(6), safety={("T03", 1)}))
    assert c["regression"]["new_safety_failures"] == ["T03"]
    assert c["regression"]["blockers"][0].startswith("new safety-layer failure T03 (may be a flake")


def test_not_comparable_is_refused_whatever_the_gate():
    c = compare_runs(
        arm(passing(3)),
        arm(passing(3)),
        comparable=False,
        reasons=["model_id: 'a' != 'b'"],
        change_class="model_candidate",
        gate=GateParams(draws=200),
    )
    assert c["regression"] is None
    v = comparison_verdict(c, "regression")
    assert v.code == EXIT_REFUSED and v.reason.startswith("refused: runs are not comparable: model_id")


def test_status_line_does_not_contradict_itself_under_scope_critical():
    # a significant non-critical regression with the promote gate scoped to critical checks:
    # the status is reject, and its reason names the regression, not "no critical regression"
    cand = passing(12)
    for t in ("T01", "T02", "T03", "T04", "T05", "T06"):
        cand[t] = [(False, [])]
    c = compare_runs(
        arm(passing(12)),
        arm(cand),
        comparable=True,
        reasons=[],
        change_class="identical",
        gate=GateParams(draws=200, scope="critical"),
    )
    assert c["decision"]["status"] == "reject"
    assert "no critical regression" not in c["decision"]["because"][0]
    assert "breaks 6 of 12" in c["decision"]["because"][0]


def test_pytest_outcomes_follow_the_gate():
    from pytest_agentdrift.compare.outcome import gate_item_outcomes

    base = dict(passing(4, k=5), T02=[(False, ["c"])] * 2 + [(True, [])] * 3, T03=[(False, [])] + [(True, [])] * 4)
    cand = dict(passing(4, k=3), T02=[(False, ["c"]), (True, []), (True, [])], T03=[(False, [])] * 1 + [(True, [])] * 2)
    c = compare(arm(base), arm(cand))
    c["gate_mode"] = "regression"
    assert c["regression"]["passed"]
    reasons = gate_item_outcomes(c, "regression")
    assert sorted(reasons) == ["T02", "T03"]  # tasks with failed runs the gate does not hold against the candidate
    assert reasons["T02"].startswith("fails in baseline too (2/5 baseline run(s) failed); standing critical failure")
    assert reasons["T03"] == "fails in baseline too (1/5 baseline run(s) failed)"
    assert gate_item_outcomes(c, "promote") is None  # only the regression gate reads failures this way
    # a new critical failure keeps its items failed
    bad = dict(passing(4, k=1), T04=[(False, ["c"])])
    c = compare(arm(passing(4, k=1)), arm(bad))
    assert not c["regression"]["passed"] and "T04" not in gate_item_outcomes(c, "regression")


def test_a_paired_test_failure_holds_the_lost_tasks_and_no_other():
    from pytest_agentdrift.compare.outcome import gate_item_lines, gate_items

    base = dict(passing(7), T07=[(False, [])])
    cand = dict(passing(7), T07=[(False, [])])
    for t in ("T01", "T02", "T03", "T04", "T05"):
        cand[t] = [(False, [])]
    c = compare(arm(base), arm(cand))
    assert not c["regression"]["passed"]
    items = gate_items(c, "regression")
    held = "lost, and the paired test flags the candidate's losses"
    assert items["failed"] == {t: held for t in ("T01", "T02", "T03", "T04", "T05")}
    assert items["xfailed"] == {"T07": "fails in baseline too (1/1 baseline run(s) failed)"}
    lines = gate_item_lines(items)
    assert lines[0] == f"items       failed (held against the candidate): T01: {held}"
    assert lines[-1] == "            xfailed (not held): T07: fails in baseline too (1/1 baseline run(s) failed)"
    assert gate_item_lines({"failed": {}, "xfailed": {}}) == ["items       no task item failed"]


def test_decision_json_opens_with_the_closing_line():
    from pytest_agentdrift.canonical import dumps_pretty

    text = dumps_pretty({"b": {"z": 1, "a": 2}, "exit_status": {"line": "x"}, "a": 0}, lead=("exit_status",))
    assert list(json.loads(text)) == ["exit_status", "a", "b"]
    assert list(json.loads(text)["b"]) == ["a", "z"]  # every other level stays sorted
    assert dumps_pretty({"b": 1, "a": 2}) == '{\n  "a": 2,\n  "b": 1\n}\n'
