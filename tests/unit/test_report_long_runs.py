"""What a person reads about long runs: infrastructure losses, retries, spend, shards, resumes."""

from helpers import results_doc, run_entry

from pytest_agentdrift.grade.scoring import summarise
from pytest_agentdrift.record.report import failure_text, markdown, summary_lines
from pytest_agentdrift.tasks.taskspec import LAYERS


def run(rep, outcome, *, infra=None, attempts=None, spend=None, **ev):
    return run_entry(
        rep,
        outcome,
        layers={layer: ("pass" if outcome == "passed" else "n/a") for layer in LAYERS},
        evidence={"exit_code": 1, "duration_s": 2.0, **ev},
        infra_error=infra,
        attempts=attempts,
        spend=spend or {"tokens": None, "cost_usd": None, "cost_source": None},
    )


LOST = {
    "class": "overloaded",
    "evidence": "API Error: 529 Overloaded",
    "source": "claude-code",
    "repeats": False,
    "believed": True,
}
DOUBTED = {
    "class": "network",
    "evidence": "provider down",
    "source": "agent report",
    "repeats": False,
    "believed": False,
    "why": "the agent reported an infrastructure error but changed files: the run is scored",
}


def results():
    tasks = {
        "T1": {
            "title": "One",
            "suite": "s",
            "behavior": "b",
            "runs": [
                run(1, "infra_error", infra=LOST, spend={"tokens": 0, "cost_usd": 0.0, "cost_source": "reported"}),
                run(
                    2,
                    "passed",
                    spend={"tokens": 1200, "cost_usd": 0.03, "cost_source": "reported"},
                    attempts=[
                        {
                            "attempt": 1,
                            "outcome": "infra_error",
                            "infra_error": LOST,
                            "exit_code": 1,
                            "duration_s": 1.0,
                            "raw": "raw/T1/r2/attempt-1",
                        },
                        {
                            "attempt": 2,
                            "outcome": "passed",
                            "infra_error": None,
                            "exit_code": 0,
                            "duration_s": 2.0,
                            "raw": "raw/T1/r2",
                        },
                    ],
                ),
            ],
        },
        "T2": {
            "title": "Two",
            "suite": "s",
            "behavior": "b",
            "runs": [
                run(1, "failed", infra=DOUBTED, spend={"tokens": 500, "cost_usd": None, "cost_source": None}),
                run(2, "over_budget", stopped="per-run token budget exceeded: 1,001 > 1,000 tokens"),
            ],
        },
    }
    return results_doc(
        tasks,
        run_id="R",
        started_at="a",
        finished_at="b",
        agent={"name": "claude-code", "version": "2.1.197"},
        isolation={"enforced": "bwrap", "network": "denied", "filesystem": "isolated"},
        summary=summarise(tasks),
        shard={"index": 2, "count": 4, "source": "option", "selected": 4},
        resumed=[{"at": "2026-01-01T00:00:00Z", "kept_runs": 3, "ran_runs": 1}],
        budget={"limits": {"tokens": 5000}, "spent": {"tokens": 1700, "cost_usd": 0.03}},
    )


def test_summary_counts_and_lists_infrastructure_losses_apart():
    r = results()
    s = r["summary"]
    assert (s["runs"], s["infra_errors"], s["errors"], s["retried_runs"], s["tokens"], s["cost_usd"]) == (
        4,
        1,
        1,
        1,
        1700,
        0.03,
    )
    assert s["pass_rate"] == round(1 / 3, 6)  # over the three scored runs
    lines = summary_lines(r)
    assert "infrastructure errors (not scored, not the agent's failures):" in lines
    assert "  T1 r1: overloaded (claude-code): API Error: 529 Overloaded" in lines
    assert "infrastructure errors claimed but scored as the agent's run:" in lines
    assert any(
        ln.startswith("  T2 r1: network (agent report): provider down; not believed: the agent reported")
        for ln in lines
    )
    assert any(
        ln.startswith("T1") and ln.endswith("One (1 run(s) lost to infrastructure)") and " 1/1 " in ln for ln in lines
    )
    assert (
        "1 of 3 run(s) passed (33%); 0 with critical failures; 0 tampered pass(es); 1 error(s)/timeout(s); "
        "1 infrastructure error(s), not scored; 1 run(s) retried"
    ) in lines
    spend = lines[lines.index("spend (all attempts):") + 1 :]
    assert [ln.split() for ln in spend[:3]] == [
        ["T1", "1,200", "tokens", "$0.0300", "(reported)"],
        ["T2", "500", "tokens"],
        ["total", "1,700", "tokens", "$0.0300"],
    ]


def test_report_md_shows_attempts_spend_and_provenance():
    md = markdown(results())
    assert "- shard 2/4 (option): 4 item(s)" in md
    assert "- resumed 2026-01-01T00:00:00Z: kept 3 finished run(s), ran 1" in md
    assert "- budget: tokens 5,000; spent 1,700 tokens $0.0300" in md
    assert "  - infrastructure error overloaded (claude-code, not scored): API Error: 529 Overloaded" in md
    assert (
        "  - attempt 1: infra_error (overloaded: API Error: 529 Overloaded), exit 1, 1.00s; raw: `raw/T1/r2/attempt-1`"
        in md
    )
    assert "  - spend: 1,200 tokens $0.0300 (reported)" in md
    assert "scored anyway: the agent reported an infrastructure error but changed files" in md


def test_failure_text_says_why_a_run_was_stopped_or_doubted():
    r = results()
    over = failure_text("T2", "Two", r["tasks"]["T2"]["runs"][1])
    assert (
        "  the run was stopped: per-run token budget exceeded: 1,001 > 1,000 tokens; its process tree was killed"
        in over
    )
    doubted = failure_text("T2", "Two", r["tasks"]["T2"]["runs"][0])
    assert (
        "  an infrastructure error was claimed (network: provider down) but the agent reported an infrastructure error"
        in doubted
    )
