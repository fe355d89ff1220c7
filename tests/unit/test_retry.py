"""Bounded, recorded retries (run/retry.py)."""

from __future__ import annotations

from pytest_agentdrift.agents.infra import infra_error
from pytest_agentdrift.run.retry import RetryPolicy, run_with_retries


def payload(outcome: str, *, cls: str = "overloaded", tokens: int = 10):
    result = {
        "outcome": outcome,
        "raw": "raw/T1/r1",
        "evidence": {"exit_code": 1, "duration_s": 1.5},
        "usage": {"input_tokens": tokens},
        "spend": {"tokens": tokens, "cost_usd": None, "cost_source": None},
        "infra_error": {**infra_error(cls, f"{cls}!", "x"), "believed": True} if outcome == "infra_error" else None,
        "_raw_files": {"stdout.txt": f"{outcome}\n"},
    }
    return {"task_id": "T1", "rep": 1, "meta": {}, "result": result}


def runner(*outcomes, **kw):
    calls = []

    def once(attempt):
        calls.append(attempt)
        return payload(outcomes[attempt - 1], **kw)

    return once, calls


def test_retries_an_infrastructure_loss_and_keeps_every_attempt():
    once, calls = runner("infra_error", "passed")
    slept = []
    p = run_with_retries(once, RetryPolicy(retries=2, backoff_s=5), sleep=slept.append)
    r = p["result"]
    assert calls == [1, 2] and slept == [5]
    assert r["outcome"] == "passed"
    assert [(a["attempt"], a["outcome"], a["raw"]) for a in r["attempts"]] == [
        (1, "infra_error", "raw/T1/r1/attempt-1"),
        (2, "passed", "raw/T1/r1"),
    ]
    assert r["attempts"][0]["infra_error"]["class"] == "overloaded"
    assert r["_raw_files"] == {"stdout.txt": "passed\n", "attempt-1/stdout.txt": "infra_error\n"}
    assert r["spend"]["tokens"] == 20  # both attempts were paid for


def test_never_retries_the_agents_own_failure():
    once, calls = runner("failed", "passed")
    p = run_with_retries(once, RetryPolicy(retries=3, backoff_s=0), sleep=lambda s: None)
    assert calls == [1] and "attempts" not in p["result"]


def test_an_error_that_will_repeat_is_not_retried():
    once, calls = runner("infra_error", "passed", cls="authentication")
    run_with_retries(once, RetryPolicy(retries=3, backoff_s=0), sleep=lambda s: None)
    assert calls == [1]


def test_retries_are_bounded_and_back_off():
    once, calls = runner("infra_error", "infra_error", "infra_error", "passed")
    slept = []
    p = run_with_retries(once, RetryPolicy(retries=2, backoff_s=10, max_backoff_s=15), sleep=slept.append)
    assert calls == [1, 2, 3] and slept == [10, 15]
    assert p["result"]["outcome"] == "infra_error" and len(p["result"]["attempts"]) == 3


def test_a_stop_ends_the_retries():
    once, calls = runner("infra_error", "passed")
    run_with_retries(
        once, RetryPolicy(retries=2, backoff_s=0), sleep=lambda s: None, stop_requested=lambda: "budget spent"
    )
    assert calls == [1]


def test_policy_identity_leaves_the_wait_out():
    assert (
        RetryPolicy(2, 30).identity() == RetryPolicy(2, 1).identity() == {"max_retries": 2, "retry_on": "infra_error"}
    )
