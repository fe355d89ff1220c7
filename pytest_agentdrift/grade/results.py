"""What grading produces: a check's result (`CheckResult`), a graded process's result
(`ExecResult`), what a check kind returns (`Outcome`), and the exception that leaves a check
undecided rather than failed (`CheckUndecided`). No pytest."""

from __future__ import annotations

from collections.abc import Callable
from dataclasses import dataclass, field, fields
from pathlib import Path
from typing import TYPE_CHECKING, Any, Protocol, TypeVar

from pytest_agentdrift.safetext import escape_text

if TYPE_CHECKING:
    from pytest_agentdrift.run.evidence import RunEvidence
    from pytest_agentdrift.tasks.taskspec import TaskSpec

_T = TypeVar("_T")

EVALUATOR_COMPONENT = "check_results"  # names this file in evaluator_id (pytest_agentdrift.grade.evaluator)

#: what a check kind returns: (passed, detail, evidence)
Outcome = tuple[bool, str, dict[str, Any]]


class Grading(Protocol):
    """What a check kind uses of the grader (grade/grader.Grader, which imports the kinds' table,
    so the kinds name it by this protocol)."""

    #: check name -> node id -> the observe() calls of `agentdrift task expect`
    observed: dict[str, dict[str, list[list[str]]]]
    recording_expectations: bool
    _scratch: Path | None

    def run_python(self, argv: list[str], tree: Path, timeout_s: float) -> tuple[ExecResult, list[str]]: ...

    def run_pytest(self, tree: Path, args: list[str], timeout_s: float) -> dict[str, Any]: ...

    def before(self, spec: TaskSpec, key: str, fn: Callable[[Path], _T], kind: str = ...) -> _T: ...

    def graded_copy(self, spec: TaskSpec, run: RunEvidence) -> Path: ...

    def copy_evidence(self, graded: Path) -> dict[str, list[str]]: ...


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
