"""Runs lost to infrastructure in a comparison: excluded, counted, listed, and over a threshold not decided."""

from __future__ import annotations

from helpers import outcome_runs, results_doc

from pytest_agentdrift.compare.comparison import compare_runs
from pytest_agentdrift.compare.gates import GateParams
from pytest_agentdrift.compare.render import render_comparison
from pytest_agentdrift.compare.status import comparison_exit_code, decision_document


def all_tasks(n: int, reps: list[int]) -> dict[str, list[dict]]:
    return {f"T{i:02d}": outcome_runs(reps, usage={}) for i in range(n)}


def compare(base, cand, gate=None):
    return compare_runs(
        base, cand, comparable=True, reasons=[], change_class="client_candidate", gate=gate or GateParams(draws=2000)
    )


def status(c: dict) -> str:
    return c["decision"]["status"]


def lose(doc, *items, cls="overloaded"):
    for tid, rep in items:
        run = doc["tasks"][tid]["runs"][rep - 1]
        run.update(
            outcome="infra_error",
            passed=False,
            critical_failed=[],
            infra_error={"class": cls, "evidence": "API Error: 529", "source": "claude-code", "believed": True},
        )
    return doc


def test_an_infrastructure_loss_is_not_a_regression_and_is_said_so():
    base = results_doc(all_tasks(12, [1]), run_id="base")
    cand = lose(
        results_doc(all_tasks(12, [1]), run_id="cand"), ("T03", 1)
    )  # 1 of 12 runs: 8.3%, under the 10% threshold
    c = compare(base, cand)
    assert c["paired"]["lost"] == [] and c["paired"]["tasks"] == 11
    assert c["infra"]["excluded_tasks"] == ["T03"] and c["infra"]["candidate"]["lost"] == 1
    assert c["candidate"]["runs"] == 11 and c["candidate"]["pass_rate"] == 1.0
    assert status(c) != "reject"
    lines = "\n".join(render_comparison(c))
    assert (
        "candidate lost 1/12 run(s) to infrastructure errors, excluded from the statistics: T03 r1 (overloaded)"
        in lines
    )
    doc = decision_document(c)["infra_errors"]
    assert doc["decided"] is True and doc["candidate"]["runs_lost"] == [
        {"task": "T03", "rep": 1, "class": "overloaded", "evidence": "API Error: 529"}
    ]


def test_a_partly_lost_task_stays_paired_on_its_other_runs():
    base = results_doc(all_tasks(12, [1, 1]), run_id="base")
    cand = lose(results_doc(all_tasks(12, [1, 0]), run_id="cand"), ("T01", 2))
    c = compare(base, cand, gate=GateParams(draws=2000, max_infra_loss=0.5))
    assert c["tasks"]["T01"]["candidate"] == [1, 1] and "T01" not in c["infra"]["excluded_tasks"]


def test_over_the_threshold_nothing_is_decided():
    base = results_doc(all_tasks(10, [1]), run_id="base")
    cand = lose(
        results_doc(all_tasks(10, [0]), run_id="cand"), ("T00", 1), ("T01", 1)
    )  # would be a clear regression otherwise
    c = compare(base, cand)
    assert status(c) == "hold" and c["decision"]["rule"] == "infra_lost"
    assert c["decision"]["because"][0].startswith(
        "candidate lost 2 of 10 run(s) (20%) to infrastructure errors, over the 10% threshold"
    )
    assert comparison_exit_code(c, gate_enabled=True) == 4  # operational
    assert comparison_exit_code(c, gate_enabled=False) == 0
    assert decision_document(c)["infra_errors"]["exceeded"] == ["candidate"]
    relaxed = compare(
        results_doc(all_tasks(10, [1]), run_id="base"),
        lose(results_doc(all_tasks(10, [0]), run_id="cand"), ("T00", 1), ("T01", 1)),
        gate=GateParams(draws=2000, max_infra_loss=0.25),
    )
    assert status(relaxed) == "reject"  # decided: the 8 scored runs regressed


def test_spend_per_arm():
    base = results_doc(all_tasks(2, [1]), run_id="base")
    cand = results_doc(all_tasks(2, [1]), run_id="cand")
    for doc, tokens in ((base, 100), (cand, 300)):
        for t in doc["tasks"].values():
            for r in t["runs"]:
                r["spend"] = {"tokens": tokens, "cost_usd": tokens / 1000, "cost_source": "reported"}
    c = compare(base, cand)
    assert c["baseline"]["spend"] == {"tokens": 200, "cost_usd": 0.2} and c["candidate"]["spend"]["tokens"] == 600
    assert "spend       baseline 200 tokens $0.20  candidate 600 tokens $0.60" in render_comparison(c)
