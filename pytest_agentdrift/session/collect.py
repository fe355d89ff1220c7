"""Collection: a task directory becomes one pytest item per repetition.

The only module besides plugin.py that touches pytest nodes. A task
directory never delegates to pytest's file collection, so no `.py` file of a
frozen repo/ or solution/ is ever imported; only the task's own top-level
`test_*.py` files (checks written as pytest functions) are collected.
"""

from __future__ import annotations

from typing import Any

import pytest

from pytest_agentdrift.errors import AgentDriftError, TaskError
from pytest_agentdrift.record.report import failure_text
from pytest_agentdrift.tasks.load import TaskSpec, load_task


class TaskFailed(Exception):
    def __init__(self, text: str):
        super().__init__(text)
        self.text = text


class TaskDirectory(pytest.Directory):
    """A frozen task directory (task.toml + task.md)."""

    spec: TaskSpec | None = None

    def collect(self):
        from pytest_agentdrift.plugin import get_session

        self.spec = load_task(self.path)
        session = get_session(self.config)
        other = session.specs.get(self.spec.id)
        if other is not None and other.path != self.spec.path:
            raise TaskError(f"task id {self.spec.id!r} is also used by {other.path}; ids must be unique", self.path / "task.toml")
        session.specs[self.spec.id] = self.spec
        register_task_marker(self.config, self.spec.id)
        # test_*.py beside task.toml are checks; the harness runs them against each run
        # (checks.Grader.evaluate_functions), so they are not collected here.
        for rep in range(1, session.settings.k + 1):
            yield TaskItem.from_parent(self, name=f"r{rep}", spec=self.spec, rep=rep)

    def repr_failure(self, excinfo):
        if isinstance(excinfo.value, AgentDriftError):
            return excinfo.value.message
        return super().repr_failure(excinfo)


def register_task_marker(config: pytest.Config, task_id: str) -> None:
    """Each task id is a marker (`-m T07`); ids beyond the bundled ones are registered on sight."""
    known = {line.split(":", 1)[0].split("(", 1)[0].strip() for line in config.getini("markers")}
    if task_id not in known:
        config.addinivalue_line("markers", f"{task_id}: agent task {task_id} (pytest-agentdrift)")


class TaskItem(pytest.Item):
    def __init__(self, *, spec: TaskSpec, rep: int, **kwargs: Any):
        super().__init__(**kwargs)
        self.spec = spec
        self.rep = rep
        self.payload: dict[str, Any] | None = None
        self.add_marker(getattr(pytest.mark, spec.id))
        self.add_marker(pytest.mark.agent_task(spec.id))
        self.extra_keyword_matches.update({spec.id, spec.suite})

    def runtest(self) -> None:
        from pytest_agentdrift.plugin import get_session

        session = get_session(self.config)
        if session.adapter is None:
            pytest.skip("no agent selected: pass --agent NAME or --agent-cmd CMD")
        from pytest_agentdrift.session.longrun import run_item

        self.payload = run_item(session, self.spec, self.rep)  # retried while lost to infrastructure
        result = self.payload["result"]
        if result["outcome"] == "infra_error":
            # not the agent's failure and not scored: counted and listed in the summary
            from pytest_agentdrift.run.infra import describe

            pytest.skip(f"infrastructure error, not scored: {describe(result['infra_error'])}")
        fail_on_critical_only = session.settings.fail_on == "critical"
        failed = not result["passed"]
        if fail_on_critical_only:
            failed = bool(result["critical_failed"]) or result["tampered_pass"] or result["outcome"] in ("error", "timeout", "over_budget")
        if failed:
            raise TaskFailed(failure_text(self.spec.id, self.spec.title, result))

    def repr_failure(self, excinfo, style=None):
        if isinstance(excinfo.value, TaskFailed):
            return excinfo.value.text
        if isinstance(excinfo.value, AgentDriftError):
            return excinfo.value.message
        return super().repr_failure(excinfo, style=style)

    def reportinfo(self):
        return self.path, None, f"task {self.spec.id}: {self.spec.title} (r{self.rep})"


__all__ = ["TaskDirectory", "TaskItem", "TaskFailed", "TaskError"]
