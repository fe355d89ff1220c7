"""The exit policy is a pure function of how a session ended; the outcome vocabulary has one home."""

from __future__ import annotations

import json
from pathlib import Path

import pytest
from helpers import results_doc

from pytest_agentdrift.compare.exitpolicy import SessionEnd, exit_verdict, item_failed
from pytest_agentdrift.compare.outcome import Verdict
from pytest_agentdrift.vocabulary import ERROR_LIKE_OUTCOMES, RUN_OUTCOMES, UNDECIDED_OUTCOME, UNSCORED_OUTCOMES


def run(outcome="passed", critical=(), tampered=False, rep=1):
    return {
        "rep": rep,
        "outcome": outcome,
        "passed": outcome == "passed",
        "critical_failed": list(critical),
        "tampered_pass": tampered,
    }


def results(*runs, complete=True):
    return results_doc(
        {"T01": runs}, complete=complete, incomplete_reasons=[] if complete else ["T01 r1 never reported"]
    )


def end(res, status=0, **kw):
    return SessionEnd(pytest_status=status, tests_failed=kw.pop("tests_failed", 0), results=res, **kw)


def _outcome_enums(node):
    if isinstance(node, dict):
        if isinstance(node.get("outcome"), dict) and "enum" in node["outcome"]:
            yield node["outcome"]["enum"]
        for v in node.values():
            yield from _outcome_enums(v)
    elif isinstance(node, list):
        for v in node:
            yield from _outcome_enums(v)


def test_the_outcome_vocabulary_is_the_schema_enum():
    schema = json.loads((Path(__file__).parents[2] / "pytest_agentdrift/record/schema/results.schema.json").read_text())
    enums = list(_outcome_enums(schema))
    assert enums and all(sorted(e) == sorted(RUN_OUTCOMES) for e in enums)
    assert ERROR_LIKE_OUTCOMES < set(RUN_OUTCOMES) and UNSCORED_OUTCOMES < set(RUN_OUTCOMES)
    assert not ERROR_LIKE_OUTCOMES & UNSCORED_OUTCOMES


@pytest.mark.parametrize("outcome", RUN_OUTCOMES)
def test_fail_on_rule_for_every_outcome(outcome):
    r = run(outcome)
    if outcome == UNDECIDED_OUTCOME:  # never scored, and never a pass
        assert item_failed(r, "any") and item_failed(r, "critical")
    elif outcome in UNSCORED_OUTCOMES:
        assert not item_failed(r, "any") and not item_failed(r, "critical")
    else:
        assert item_failed(r, "any") == (outcome != "passed")
        assert item_failed(r, "critical") == (outcome in ERROR_LIKE_OUTCOMES)


def test_critical_and_tampered_fail_under_critical():
    assert item_failed(run("failed", critical=["x"]), "critical")
    assert item_failed(run("passed", tampered=True), "critical")


def test_order_operational_before_refusal_before_gate_before_runs():
    refused = Verdict(6, "refused: model_stamp differs")
    gate_ok = Verdict(0, "gate regression: no regression detected")
    assert exit_verdict(end(results(run(), complete=False), comparison_verdict=refused, fail_on="any")).code == 4
    assert exit_verdict(end(results(run()), comparison_error="baseline unreadable", fail_on="any")).code == 4
    assert exit_verdict(end(results(run()), comparison_verdict=refused, gate="regression", fail_on="any")).code == 6
    failed = results(run("failed"))
    v = exit_verdict(end(failed, 1, tests_failed=1, comparison_verdict=gate_ok, gate="regression", fail_on="any"))
    assert v == gate_ok
    v = exit_verdict(end(failed, 1, tests_failed=1, fail_on="any"))
    assert v.code == 1 and v.reason == "1 of 1 run(s) failed: T01 r1"
    # against a baseline without a gate the comparison decides nothing: the failed run does
    blocked = Verdict(1, "gate regression: new critical failure T01 c")
    v = exit_verdict(end(failed, 1, tests_failed=1, comparison_verdict=blocked, fail_on="any"))
    assert v.code == 1 and v.reason == "1 of 1 run(s) failed: T01 r1"
    assert exit_verdict(end(failed, 1, tests_failed=1, fail_on="none")).code == 0


def test_drop_it_never_hides_a_failed_check():
    drop = Verdict(0, "drop it")
    v = exit_verdict(
        end(results(run("failed")), 1, tests_failed=1, comparison_verdict=drop, gate="drop-it", fail_on="any")
    )
    assert v.code == 1


def test_an_empty_shard_is_complete_not_an_error():
    v = exit_verdict(end(results(), 5, finishing_only="shard", fail_on="any"))
    assert v.code == 0 and "shard" in v.reason
    assert exit_verdict(end(results(), 5, fail_on="any")).code == 5


def test_interrupt_says_what_was_recorded():
    v = exit_verdict(
        end(results(run()), 2, interrupted="KeyboardInterrupt", record=Path("r"), ran_any=True, fail_on="any")
    )
    assert v.reason == "interrupted; the run is recorded incomplete"


def lost(cls="overloaded", rep=1):
    return {**run("infra_error", rep=rep), "infra_error": {"class": cls, "believed": True}}


def test_a_session_in_which_no_run_was_scored_is_not_decided():
    v = exit_verdict(end(results(lost()), fail_on="any"))
    assert v == Verdict(4, "not decided: 1 of 1 run(s) lost to infrastructure: overloaded (nothing scored)")
    # whatever --agent-fail-on says: nothing scored is never a pass
    assert exit_verdict(end(results(lost()), fail_on="none")).code == 4


def test_runs_lost_to_infrastructure_are_counted_in_the_closing_line():
    many = results(*(run(rep=i) for i in range(1, 10)), lost(rep=10))  # 10%: at the threshold
    v = exit_verdict(end(many, fail_on="any"))
    assert v == Verdict(0, "all 9 run(s) passed; 1 of 10 run(s) lost to infrastructure: overloaded, not scored")
    failed = results(run("failed"), *(run(rep=i) for i in range(2, 10)), lost(rep=10))
    v = exit_verdict(end(failed, 1, tests_failed=1, fail_on="any"))
    assert v.code == 1 and v.reason.endswith("; 1 of 10 run(s) lost to infrastructure: overloaded, not scored")


def test_self_declared_losses_over_the_threshold_decide_nothing():
    three = results(run(), lost("network", 2), lost("network", 3))
    v = exit_verdict(end(three, fail_on="any"))
    assert v.code == 4 and v.reason == (
        "not decided: 2 of 3 run(s) lost to infrastructure: network x2 "
        "(67%, over the 10% threshold of --agent-max-infra-loss)"
    )
    assert exit_verdict(end(three, fail_on="any", max_infra_loss=0.7)).code == 0


def test_a_loss_only_the_agent_declared_never_passes_whatever_the_threshold():
    def claimed(rep, corroborated):
        r = lost("overloaded", rep)
        r["infra_error"] = {**r["infra_error"], "source": "agent report", "corroborated": corroborated}
        return r

    passed = [run(rep=i) for i in range(1, 10)]
    alone = results(*passed, claimed(10, False), claimed(11, False), claimed(12, False))
    v = exit_verdict(end(alone, fail_on="any", max_infra_loss=1.0))
    assert v.code == 4 and v.reason == (
        "not decided: 3 of 12 run(s) lost to infrastructure: overloaded x3; 3 declared by the agent alone, "
        "with no failed request the harness saw: T01 r10, T01 r11, T01 r12"
    )
    # what the harness saw fail too is an ordinary loss, counted against --agent-max-infra-loss
    seen = results(*passed, claimed(10, True))
    assert exit_verdict(end(seen, fail_on="any", max_infra_loss=0.5)).code == 0
    # a scored failure stays the session's failure, the unsupported claim named beside it
    failed = results(run("failed"), *passed[1:], claimed(10, False))
    v = exit_verdict(end(failed, 1, tests_failed=1, fail_on="any", max_infra_loss=1.0))
    assert v.code == 1 and "declared by the agent alone" in v.reason


def test_an_undecided_run_never_passes_a_session_or_a_gate():
    undecided = {**run(UNDECIDED_OUTCOME), "undecided": ["parse: OverflowError: int too large to convert to float"]}
    gate_ok = Verdict(0, "gate regression: no regression detected")
    for kw in ({}, {"gate": "regression", "comparison_verdict": gate_ok}, {"fail_on": "none"}):
        v = exit_verdict(end(results(run(), undecided), 1, tests_failed=1, **{"fail_on": "any", **kw}))
        assert v.code == 4, kw
        assert v.reason == (
            "not decided: 1 of 2 run(s) undecided, the harness could not judge them: "
            "T01 r1 (parse: OverflowError: int too large to convert to float)"
        )
