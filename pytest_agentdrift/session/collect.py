"""Collection: a task directory becomes one pytest item per repetition.

The only module besides plugin.py that touches pytest nodes. A task
directory never delegates to pytest's file collection, so no `.py` file of a
frozen repo/ or solution/ is ever imported; only the task's own top-level
`test_*.py` files (checks written as pytest functions) are collected.
"""

from __future__ import annotations

from typing import Any

import pytest

from pytest_agentdrift.compare.exitpolicy import item_failed
from pytest_agentdrift.errors import AgentDriftError, TaskError
from pytest_agentdrift.record.payload import junit_properties
from pytest_agentdrift.record.report import failure_text
from pytest_agentdrift.session.junit import testcase_properties_allowed
from pytest_agentdrift.session.state import TaskRunner
from pytest_agentdrift.tasks.load import load_task
from pytest_agentdrift.tasks.taskspec import TaskSpec
from pytest_agentdrift.vocabulary import INFRA_OUTCOME


class TaskFailed(Exception):
    def __init__(self, text: str):
        super().__init__(text)
        self.text = text


class TaskDirectory(pytest.Directory):
    """A frozen task directory (task.toml + task.md); built with the process's TaskRunner."""

    spec: TaskSpec | None = None

    def __init__(self, *, runner: TaskRunner, **kwargs: Any):
        super().__init__(**kwargs)
        self.runner = runner

    def collect(self):
        self.spec = load_task(self.path)
        self.runner.register_spec(self.spec)
        register_task_marker(self.config, self.spec.id)
        # test_*.py beside task.toml are checks; the harness runs them against each run
        # (checks.Grader.evaluate_functions), so they are not collected here.
        # with --agent-confirm, the confirming repetitions are collected too; each runs only when needed
        for rep in range(1, max(self.runner.settings.k, self.runner.settings.confirm) + 1):
            yield TaskItem.from_parent(self, name=f"r{rep}", spec=self.spec, rep=rep, runner=self.runner)

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
    def __init__(self, *, spec: TaskSpec, rep: int, runner: TaskRunner, **kwargs: Any):
        super().__init__(**kwargs)
        self.spec = spec
        self.rep = rep
        self.runner = runner
        self.payload: dict[str, Any] | None = None
        self.agentdrift_properties: list[tuple[str, str]] = []  # the testsuite's, under xunit2
        #: a confirming repetition the runs so far made unneeded (session/confirm.py): why, for its report
        self.agentdrift_not_needed: dict[str, Any] | None = None
        self.add_marker(getattr(pytest.mark, spec.id))
        self.add_marker(pytest.mark.agent_task(spec.id))
        self.extra_keyword_matches.update({spec.id, spec.suite})

    def runtest(self) -> None:
        runner = self.runner
        if runner.adapter is None:
            pytest.skip("no agent selected: pass --agent NAME or --agent-cmd CMD")
        self.payload = runner.run_item(self.spec, self.rep)  # retried while lost to infrastructure
        result = self.payload["result"]
        # what a CI UI shows (junit <property>): plain strings, never the payload itself; inside
        # the testcase only where the JUnit family allows it (session/junit.py)
        facts = junit_properties(self.spec, self.rep, result)
        if testcase_properties_allowed(self.config):
            self.user_properties.extend(facts)
        else:
            self.agentdrift_properties = facts
        if result["outcome"] == INFRA_OUTCOME:
            # not the agent's failure and not scored: counted and listed in the summary
            from pytest_agentdrift.agents.infra import describe

            pytest.skip(f"infrastructure error, not scored: {describe(result['infra_error'])}")
        if item_failed(result, runner.settings.fail_on):
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
