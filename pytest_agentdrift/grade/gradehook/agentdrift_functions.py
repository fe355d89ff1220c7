"""pytest plugin for the harness's run of a task's `test_*.py` checks.

Loaded instead of the main plugin (so the task directory is collected as
plain test files) with AGENTDRIFT_RUN_JSON naming the serialised run.
"""

import pytest

from pytest_agentdrift.grade.function_checks import run_for_request, task_for_request

EVALUATOR_COMPONENT = "function_plugin"  # names this file in evaluator_id (pytest_agentdrift.grade.evaluator)


def pytest_configure(config):
    config.addinivalue_line("markers", "critical: a critical check (pytest-agentdrift)")
    config.addinivalue_line("markers", "agent_layer(name): the scoring layer of a check (pytest-agentdrift)")


@pytest.fixture
def agent_run(request):
    return run_for_request(request)


@pytest.fixture
def agent_task(request):
    return task_for_request(request)
