"""What sets a session's exit status: a pure function of how the session ended.

The pytest layer gathers the facts (`SessionEnd`: pytest's own status, the
results, the comparison's verdict, the options that judge) and prints the
`Verdict` this returns; the order of the rules is the whole policy:
an interrupt or pytest's own error, then an incomplete record, a failed
comparison or a run the harness could not judge (4), a refusal (6), the gate,
a null experiment, and last the runs themselves under --agent-fail-on (where
nothing scored, more runs lost to infrastructure than --agent-max-infra-loss
allows, or a loss only the agent declared, is 4, never a pass). No pytest, no I/O.
"""

from __future__ import annotations

from dataclasses import dataclass
from pathlib import Path

from pytest_agentdrift.compare.outcome import Verdict
from pytest_agentdrift.shapes import Results, RunRecord
from pytest_agentdrift.vocabulary import (
    DEFAULT_MAX_INFRA_LOSS,
    ERROR_LIKE_OUTCOMES,
    EXIT_FAILED,
    EXIT_OK,
    EXIT_REFUSED,
    EXIT_USAGE,
    GATE_DROP_IT,
    INFRA_OUTCOME,
    UNDECIDED_OUTCOME,
    UNSCORED_OUTCOMES,
)

# pytest's own exit statuses (pytest.ExitCode), by value: this module imports no pytest
PYTEST_OK, PYTEST_FAILED, PYTEST_INTERRUPTED, PYTEST_INTERNAL, PYTEST_USAGE, PYTEST_NO_TESTS = 0, 1, 2, 3, 4, 5

_PYTEST_REASONS = {
    PYTEST_OK: "nothing failed",
    PYTEST_INTERRUPTED: "interrupted (a collection error or an interrupt; see above)",
    PYTEST_INTERNAL: "pytest internal error (see above)",
    PYTEST_USAGE: "usage error (see above)",
    PYTEST_NO_TESTS: "no task collected",
}


@dataclass(frozen=True)
class SessionEnd:
    """The facts a session ended with."""

    pytest_status: int
    tests_failed: int
    results: Results
    fail_on: str
    gate: str | None = None
    null: bool = False
    record: Path | None = None
    interrupted: str | None = None  # "KeyboardInterrupt", or why the session stopped early
    ran_any: bool = False  # at least one item reported
    comparison_error: str | None = None
    comparison_verdict: Verdict | None = None
    finishing_only: str | None = None  # "shard" / "resume": an empty share is expected, not an error
    max_infra_loss: float = DEFAULT_MAX_INFRA_LOSS  # above this share of runs lost, nothing is decided


def pytest_reason(code: int, tests_failed: int) -> str:
    """pytest's own exit status in words."""
    if code == PYTEST_FAILED:
        return f"{tests_failed} test(s) failed"
    return _PYTEST_REASONS.get(code, f"pytest exit status {code}")


def item_failed(run: RunRecord, fail_on: str) -> bool:
    """Whether a run fails its pytest item under --agent-fail-on (any / critical)."""
    if run["outcome"] == UNDECIDED_OUTCOME:
        return True  # the harness could not judge it: never a pass
    if run["outcome"] in UNSCORED_OUTCOMES:
        return False  # lost to infrastructure: not scored, never the agent's failure (counted apart)
    if fail_on == "critical":
        return bool(run["critical_failed"]) or bool(run["tampered_pass"]) or run["outcome"] in ERROR_LIKE_OUTCOMES
    return not run["passed"]


def exit_verdict(end: SessionEnd) -> Verdict:
    """The exit status and its one sentence, in order: operational 4, refusal 6, the gate, then the runs."""
    return _pytest_verdict(end) or _operational_verdict(end) or _comparison_verdict(end) or _runs_verdict(end)


def _pytest_verdict(end: SessionEnd) -> Verdict | None:
    code, results = end.pytest_status, end.results
    if code == PYTEST_INTERRUPTED:
        why = "interrupted" if end.interrupted == "KeyboardInterrupt" else pytest_reason(code, end.tests_failed)
        recorded = "; the run is recorded incomplete" if end.record and end.ran_any else ""
        return Verdict(code, why + recorded)
    if (
        code == PYTEST_NO_TESTS
        and end.finishing_only
        and results["complete"]
        and not end.tests_failed
        and not end.comparison_error
    ):
        why = (
            "this shard's share of the items is empty"
            if end.finishing_only == "shard"
            else "the resumed record needed no further run"
        )
        return Verdict(EXIT_OK, f"{why}; the record is complete")
    if code in (PYTEST_INTERNAL, PYTEST_USAGE, PYTEST_NO_TESTS):
        return Verdict(code, pytest_reason(code, end.tests_failed))
    return None


def _operational_verdict(end: SessionEnd) -> Verdict | None:
    if not end.results["complete"]:
        return Verdict(EXIT_USAGE, "the run is incomplete: " + "; ".join(end.results["incomplete_reasons"]))
    if end.comparison_error:
        return Verdict(EXIT_USAGE, end.comparison_error)
    undecided = _runs_with(end.results, UNDECIDED_OUTCOME)
    if undecided:
        head = "; ".join(f"{name} ({'; '.join(r.get('undecided') or ())[:200]})" for name, r in undecided[:3])
        more = f" (+{len(undecided) - 3} more)" if len(undecided) > 3 else ""
        return Verdict(
            EXIT_USAGE,
            f"not decided: {len(undecided)} of {_total(end.results)} run(s) undecided, the harness could not judge "
            f"them: {head}{more}",
        )
    return None


def _runs_with(results: Results, outcome: str) -> list[tuple[str, RunRecord]]:
    return [
        (f"{tid} r{r['rep']}", r) for tid, t in results["tasks"].items() for r in t["runs"] if r["outcome"] == outcome
    ]


def _total(results: Results) -> int:
    return sum(len(t["runs"]) for t in results["tasks"].values())


def _infra_lost(end: SessionEnd) -> tuple[str, bool] | None:
    """(`1 of 1 run(s) lost to infrastructure: overloaded`, whether that leaves the session undecided):
    undecided when no run was scored, the share lost is over --agent-max-infra-loss, or any loss
    rests on the agent's own word alone (agents/infra.py: no failed request the harness saw)."""
    lost = _runs_with(end.results, INFRA_OUTCOME)
    if not lost:
        return None
    total = _total(end.results)
    classes: dict[str, int] = {}
    for _, r in lost:
        infra = r.get("infra_error")
        cls = str((infra["class"] if infra else None) or "unknown")
        classes[cls] = classes.get(cls, 0) + 1
    what = ", ".join(f"{cls}" + (f" x{n}" if n > 1 else "") for cls, n in sorted(classes.items()))
    text = f"{len(lost)} of {total} run(s) lost to infrastructure: {what}"
    unsupported = _unsupported(lost)
    if len(lost) == total:
        return text + " (nothing scored)" + unsupported, True
    if len(lost) / total > end.max_infra_loss:
        return (
            text
            + f" ({len(lost) / total:.0%}, over the {end.max_infra_loss:.0%} threshold of --agent-max-infra-loss)"
            + unsupported,
            True,
        )
    if unsupported:
        return text + unsupported, True
    return text + ", not scored", False


def _unsupported(lost: list[tuple[str, RunRecord]]) -> str:
    """The losses only the agent declared, with no failed request the harness saw: never enough to pass."""
    names = [name for name, r in lost if (infra := r.get("infra_error")) and infra.get("corroborated") is False]
    if not names:
        return ""
    head = ", ".join(names[:3]) + (f" (+{len(names) - 3} more)" if len(names) > 3 else "")
    return f"; {len(names)} declared by the agent alone, with no failed request the harness saw: {head}"


def _comparison_verdict(end: SessionEnd) -> Verdict | None:
    cmp = end.comparison_verdict
    if cmp is None:
        return None
    if cmp.code == EXIT_REFUSED:
        return cmp
    # a "Drop it" never hides a failed check (docs/bundles.md, exit codes)
    dropped_over_failure = end.gate == GATE_DROP_IT and cmp.code == EXIT_OK and end.pytest_status == EXIT_FAILED
    if end.gate and not dropped_over_failure:
        return cmp  # the gate decides; failed items still show as failed above
    if end.null and cmp.code != EXIT_OK:
        return cmp  # a null experiment that suspects drift (or was no null experiment)
    return None


def _runs_verdict(end: SessionEnd) -> Verdict:
    verdict = _scored_runs_verdict(end)
    infra = _infra_lost(end)
    if infra is None:
        return verdict
    text, undecided = infra
    if undecided and verdict.code == EXIT_OK:  # nothing scored is never a pass
        return Verdict(EXIT_USAGE, f"not decided: {text}")
    return Verdict(verdict.code, f"{verdict.reason}; {text}")


def _scored_runs_verdict(end: SessionEnd) -> Verdict:
    results, fail_on = end.results, end.fail_on
    if fail_on == "none":
        where = f"recorded {end.record} complete" if end.record else "the run is complete"
        return Verdict(EXIT_OK, f"{where}; task outcomes do not set the exit status (--agent-fail-on none)")
    if end.pytest_status == EXIT_FAILED:
        failed = [
            f"{tid} r{r['rep']}" for tid, t in results["tasks"].items() for r in t["runs"] if item_failed(r, fail_on)
        ]
        if not failed:
            return Verdict(EXIT_FAILED, f"{end.tests_failed} test(s) failed")
        head = ", ".join(failed[:8]) + (f" (+{len(failed) - 8} more)" if len(failed) > 8 else "")
        which = "with a critical failure" if fail_on == "critical" else "failed"
        return Verdict(EXIT_FAILED, f"{len(failed)} of {results['summary']['runs']} run(s) {which}: {head}")
    if end.pytest_status == EXIT_OK:
        n = results["summary"]["runs"] - len(_runs_with(results, INFRA_OUTCOME))
        if end.comparison_verdict is not None:
            return Verdict(EXIT_OK, f"all {n} run(s) passed; {end.comparison_verdict.reason}")
        judged = "without a critical failure" if fail_on == "critical" else "passed"
        return Verdict(EXIT_OK, f"all {n} run(s) {judged}")
    return Verdict(end.pytest_status, pytest_reason(end.pytest_status, end.tests_failed))
