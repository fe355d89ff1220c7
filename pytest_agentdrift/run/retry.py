"""Bounded, recorded retries of runs lost to infrastructure. No pytest.

Only a run whose outcome is `infra_error` is retried (the agent never got to
work, or the provider cut it off); a run the agent itself failed never is.
Each attempt runs in a fresh copy of the task. An error that will repeat on
every run (authentication, billing, configuration, a command that cannot
start) is not retried: the session stops instead (agents/infra.InfraStopRule).

The scored run is the last attempt. Every attempt stays in the record: the
run's `attempts` list (outcome, infrastructure class and evidence, exit
code, duration, usage, spend, where its raw files are), and the raw files of
the earlier attempts under `raw/<task>/r<rep>/attempt-<n>/`. The run's
`spend` adds up all attempts (a failed attempt still cost tokens).

The policy is runtime identity (`retry_policy` in the manifest): with
retries a flaky provider yields a different sample of runs than without.
"""

from __future__ import annotations

import time
from dataclasses import dataclass
from typing import Any, Callable

from pytest_agentdrift.agents.infra import INFRA_OUTCOME
from pytest_agentdrift.vocabulary import DEFAULT_RETRIES, DEFAULT_RETRY_BACKOFF_S

MAX_BACKOFF_S = 600.0


@dataclass(frozen=True)
class RetryPolicy:
    retries: int = DEFAULT_RETRIES
    backoff_s: float = DEFAULT_RETRY_BACKOFF_S
    factor: float = 2.0
    max_backoff_s: float = MAX_BACKOFF_S

    def identity(self) -> dict[str, Any]:
        """What enters the manifest: how many times, on what (the wait is provenance)."""
        return {"max_retries": self.retries, "retry_on": INFRA_OUTCOME}

    def delay(self, retry: int) -> float:
        """Seconds to wait before retry number `retry` (1-based)."""
        return min(self.max_backoff_s, self.backoff_s * self.factor ** (retry - 1))


def should_retry(result: dict[str, Any]) -> bool:
    infra = result.get("infra_error") or {}
    return result.get("outcome") == INFRA_OUTCOME and not infra.get("repeats")


def run_with_retries(
    run_once: Callable[[int], dict[str, Any]],
    policy: RetryPolicy,
    *,
    sleep: Callable[[float], None] = time.sleep,
    stop_requested: Callable[[], str | None] = lambda: None,
    on_wait: Callable[[int, float, dict[str, Any]], None] | None = None,
) -> dict[str, Any]:
    """Run `run_once(attempt)` until it is not an infrastructure loss or the retries are spent.

    `run_once` returns a run payload (session.run_task); the result is one
    payload whose result is the last attempt's, with `attempts` and the
    earlier attempts' raw files added when there was more than one.
    """
    payloads = []
    for attempt in range(1, policy.retries + 2):
        payload = run_once(attempt)
        payloads.append(payload)
        result = payload["result"]
        if attempt > policy.retries or not should_retry(result) or stop_requested():
            break
        wait = policy.delay(attempt)
        if on_wait is not None:
            on_wait(attempt + 1, wait, result)
        sleep(wait)
    return combine(payloads)


def attempt_summary(number: int, result: dict[str, Any], raw: str) -> dict[str, Any]:
    ev = result.get("evidence") or {}
    return {
        "attempt": number,
        "outcome": result["outcome"],
        "infra_error": result.get("infra_error"),
        "exit_code": ev.get("exit_code"),
        "duration_s": ev.get("duration_s"),
        "usage": result.get("usage"),
        "spend": result.get("spend"),
        "raw": raw,
    }


def combine(payloads: list[dict[str, Any]]) -> dict[str, Any]:
    """One payload for a run from the payloads of its attempts (in order)."""
    if len(payloads) == 1:
        return payloads[0]
    from pytest_agentdrift.run.budget import add_spend

    final = payloads[-1]
    result = dict(final["result"])
    raw = result["raw"]
    files = dict(result.get("_raw_files") or {})
    attempts = []
    for number, payload in enumerate(payloads, start=1):
        r = payload["result"]
        last = number == len(payloads)
        where = raw if last else f"{raw}/attempt-{number}"
        if not last:
            files.update({f"attempt-{number}/{name}": text for name, text in (r.get("_raw_files") or {}).items()})
        attempts.append(attempt_summary(number, r, where))
    result["_raw_files"] = files
    result["attempts"] = attempts
    result["spend"] = add_spend(*(a["spend"] for a in attempts))
    return {**final, "result": result}


__all__ = ["RetryPolicy", "run_with_retries", "combine", "should_retry", "MAX_BACKOFF_S"]
