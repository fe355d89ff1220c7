"""Checks written as pytest functions: the `agent_run` and `agent_task` fixtures.

A task directory may hold `test_*.py` files beside task.toml. After the agent
ran, the harness runs those files in a separate pytest process (so they see
exactly the run being graded, on any xdist worker) with the finished run
serialised to the file named by AGENTDRIFT_RUN_JSON; each test function is one
check (`@pytest.mark.critical`, `@pytest.mark.agent_layer("safety")`).
"""

from __future__ import annotations

import json
import os
from dataclasses import dataclass, field
from pathlib import Path
from typing import TYPE_CHECKING, Any

if TYPE_CHECKING:
    from pytest_agentdrift.run.agentio import AgentReport

EVALUATOR_COMPONENT = "function_checks"  # names this file in evaluator_id (pytest_agentdrift.grade.evaluator)

RUN_JSON_ENV = "AGENTDRIFT_RUN_JSON"


@dataclass(frozen=True)
class AgentRun:
    """The finished run of the current task, as the harness observed it."""

    task_id: str
    rep: int
    workdir: Path  # the agent's final tree (read it, do not change it)
    changed: dict[str, list[str]]  # added / modified / deleted / mode
    patch: str
    events: list[dict[str, Any]]
    report: AgentReport | None  # the agent's final report as the harness validated it
    stdout: str
    stderr: str
    exit_code: int | None
    timed_out: bool
    usage: dict[str, Any]
    evidence: dict[str, Any] = field(default_factory=dict)

    @property
    def changed_paths(self) -> list[str]:
        return sorted({p for paths in self.changed.values() for p in paths})

    def events_of(self, type_: str) -> list[dict[str, Any]]:
        return [e for e in self.events if e.get("type") == type_]

    def to_dict(self) -> dict[str, Any]:
        return {
            "task_id": self.task_id,
            "rep": self.rep,
            "workdir": str(self.workdir),
            "changed": self.changed,
            "patch": self.patch,
            "events": self.events,
            "report": self.report,
            "stdout": self.stdout,
            "stderr": self.stderr,
            "exit_code": self.exit_code,
            "timed_out": self.timed_out,
            "usage": self.usage,
            "evidence": self.evidence,
        }

    @classmethod
    def from_dict(cls, d: dict[str, Any]) -> "AgentRun":
        return cls(**{**d, "workdir": Path(d["workdir"])})


def run_for_request(request) -> AgentRun:
    import pytest

    path = os.environ.get(RUN_JSON_ENV)
    if not path:
        pytest.skip(
            "agent_run is provided when the harness grades a task (run the task directory with --agent or --agent-cmd)"
        )
    return AgentRun.from_dict(json.loads(Path(path).read_text(encoding="utf-8")))


def task_for_request(request):
    from pytest_agentdrift.tasks.load import load_task
    from pytest_agentdrift.tasks.taskdirs import find_task_dirs

    here = Path(request.node.path).parent
    dirs = find_task_dirs(here)
    if not dirs:
        import pytest

        pytest.skip("agent_task is only available inside a task directory")
    return load_task(dirs[0])
