"""What grading produces: a check's result (`CheckResult`), a graded process's result
(`ExecResult`), what a check kind returns (`Outcome`), and the exception that leaves a check
undecided rather than failed (`CheckUndecided`). No pytest."""

from __future__ import annotations

from dataclasses import dataclass, field, fields
from typing import Any

from pytest_agentdrift.safetext import escape_text

EVALUATOR_COMPONENT = "check_results"  # names this file in evaluator_id (pytest_agentdrift.grade.evaluator)

#: what a check kind returns: (passed, detail, evidence)
Outcome = tuple[bool, str, dict[str, Any]]


class CheckUndecided(Exception):
    """The harness cannot decide this check (its own observation failed): never a pass."""


@dataclass
class CheckResult:
    name: str
    kind: str
    layer: str
    critical: bool
    passed: bool
    detail: str
    evidence: dict[str, Any] = field(default_factory=dict)
    #: the harness could not decide this check (its own error): the run is undecided
    undecided: bool = False

    def to_dict(self) -> dict[str, Any]:
        # shallow: the evidence is the check's own, handed on as it is (often large)
        out = {f.name: getattr(self, f.name) for f in fields(self)}
        if not self.undecided:
            del out["undecided"]
        return out


@dataclass
class ExecResult:
    exit_code: int | None
    timed_out: bool
    stdout: str
    stderr: str

    def tail(self, n: int = 15) -> str:
        """The last lines of the output, escaped: graded code must not drive the reader's terminal."""
        lines = (self.stdout + self.stderr).rstrip().split("\n")
        return escape_text("\n".join(lines[-n:]))
