"""One attempt: run the agent on a fresh copy, grade the run, score it.

The plugin's items and `agentdrift validate` both go through `attempt`, so
a task is judged the same way wherever it runs. No pytest.
"""

from __future__ import annotations

from pathlib import Path
from typing import TYPE_CHECKING, Any

from pytest_agentdrift.grade.scoring import score
from pytest_agentdrift.run.runner import RunEvidence, RunSettings, cleanup, run_agent

if TYPE_CHECKING:
    from pytest_agentdrift.agents.base import AgentAdapter
    from pytest_agentdrift.grade.checks import Grader
    from pytest_agentdrift.tasks.load import TaskSpec


def attempt(
    spec: TaskSpec,
    rep: int,
    adapter: AgentAdapter,
    settings: RunSettings,
    grader: Grader,
    runs_dir: Path,
    *,
    keep_workdirs: bool = False,
) -> tuple[RunEvidence, dict[str, Any]]:
    """(the run's evidence, its scored result); the private work tree is removed unless kept."""
    run = run_agent(spec, rep, adapter, settings, runs_dir)
    try:
        result = score(run, grader.evaluate(spec, run))
    finally:
        if not keep_workdirs:
            cleanup(run)
    return run, result
