"""The regression gate of a candidate that confirmed on suspicion (compare/confirm.py): its sequences
decide the critical checks, the block names the task, the check, the pooled rate and the confirming runs."""

from __future__ import annotations

from helpers import results_doc

from pytest_agentdrift.compare import confirm
from pytest_agentdrift.compare.comparison import compare_runs
from pytest_agentdrift.compare.gates import GateParams


def run(rep: int, critical: list[str] = (), passed: bool | None = None) -> dict:
    ok = not critical if passed is None else passed
    return {
        "rep": rep,
        "outcome": "passed" if ok else "failed",
        "passed": ok,
        "tampered_pass": False,
        "critical_failed": list(critical),
        "failed_checks": list(critical),
        "layers": {"safety": "pass"},
        "usage": None,
    }


def results(tasks: dict[str, list[dict]], plan: dict | None = None) -> dict:
    ids = {"runtime_id": "sha256:r", "task_set_id": "sha256:t", "evaluator_id": "sha256:e"}
    return results_doc(tasks, run_id="x", **ids, **({"confirm": plan} if plan else {}))


BASE = results({t: [run(i) for i in range(1, 31)] for t in ("T01", "T07", "T09")})


def gate(cand: dict) -> dict:
    return compare_runs(BASE, cand, comparable=True, reasons=[], change_class="identical", gate=GateParams(draws=100))[
        "regression"
    ]


def test_a_behaviour_in_half_the_runs_is_confirmed_and_named():
    writes = [run(i, ["no-out-of-scope-write"] if i % 2 else []) for i in range(1, 25)]
    cand = results(
        {"T01": [run(i) for i in range(1, 4)], "T07": writes, "T09": [run(i) for i in range(1, 4)]},
        confirm.plan_document(3, 24, 3),
    )
    g = gate(cand)
    assert not g["passed"]
    (row,) = [r for r in g["check_tests"]["rows"] if r["blocks"]]
    assert (row["task"], row["check"], row["verdict"]) == ("T07", "no-out-of-scope-write", "new")
    # 3 of the first 6 confirming runs (p = 0.00089) are not yet below that look's level (0.00084); 6 of 12 are
    assert row["baseline"] == [0, 30] and row["confirmed_at"] == 15
    assert "T07 no-out-of-scope-write" in g["reason"] and "baseline 0/30" in g["reason"]
    assert g["check_tests"]["screened"] == 1 and g["check_tests"]["looks"]["T01"][-1]["state"] == "screened_out"


def test_a_record_is_decided_by_the_rules_it_was_written_under():
    """A plan without looks, spending and screen level was written when the looks grew by half, alpha
    was spent in proportion to the runs and any failure screened: it is read that way, not re-decided."""
    writes = [run(i, ["no-out-of-scope-write"] if i % 2 else []) for i in range(1, 25)]
    old_plan = {"k": 3, "cap": 24, "alpha": 0.05, "tasks": 3, "futility": 0.05}
    cand = results(
        {"T01": [run(i) for i in range(1, 4)], "T07": writes, "T09": [run(i) for i in range(1, 4)]}, old_plan
    )
    g = gate(cand)
    (row,) = [r for r in g["check_tests"]["rows"] if r["blocks"]]
    # then: 2 of the first 5 confirming runs (p = 0.007) not below the look's level (0.005), 4 of 9 were
    assert row["confirmed_at"] == 12
    assert g["check_tests"]["plan"]["looks"] == [3, 5, 8, 12, 18, 24]
    assert confirm.plan_of(confirm.plan_document(3, 24, 3)).looks == (3, 5, 9, 15, 24)


def test_one_flake_confirmed_away_passes_and_says_so():
    flaky = [run(1, ["no-out-of-scope-write"])] + [run(i) for i in range(2, 10)]
    cand = results(
        {"T01": [run(i) for i in range(1, 4)], "T07": flaky, "T09": [run(i) for i in range(1, 4)]},
        confirm.plan_document(3, 24, 3),
    )
    g = gate(cand)
    assert g["passed"], g["reason"]
    assert g["check_tests"]["looks"]["T07"][-1]["state"] in ("clear", "futile")


def test_a_screened_task_that_got_no_confirming_runs_is_undecided_and_blocks_under_strict():
    cand = results(
        {
            "T01": [run(i) for i in range(1, 4)],
            "T07": [run(1, ["x"]), run(2), run(3)],
            "T09": [run(i) for i in range(1, 4)],
        },
        confirm.plan_document(3, 24, 3),
    )
    g = gate(cand)
    assert not g["passed"] and "confirmation stopped at r3 before the evidence decided" in g["reason"]
