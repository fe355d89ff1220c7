"""A pytest run that does not use agentdrift imports only the pytest layer (the startup budget).

Timing is measured by benchmarks/bench_plugin_overhead.py; this pins the cause of the cost: which
of the package's modules such a run imports (each one is compiled and assert-rewritten on every run
without a bytecode cache).
"""

import pytest
from helpers import run_pytest

# a user's run: the plugin loads through its entry point, beside whatever else is installed
pytestmark = pytest.mark.plugin_autoload

PYTEST_LAYER = {
    "pytest_agentdrift",
    "pytest_agentdrift.plugin",
    "pytest_agentdrift.hooks",
    "pytest_agentdrift.errors",
    "pytest_agentdrift.vocabulary",
    "pytest_agentdrift.session",
    "pytest_agentdrift.options",
    "pytest_agentdrift.manifest",
    "pytest_agentdrift.manifest.accept",  # the one resolver of accepted fields
}

PROBE = """
import sys
def pytest_unconfigure(config):
    print("LOADED " + " ".join(sorted(m for m in sys.modules if m.startswith("pytest_agentdrift"))))
"""


def _loaded(pytester, *args):
    pytester.makeconftest(PROBE)
    result = run_pytest(pytester, "-s", *args)
    line = next(ln for ln in result.stdout.lines if ln.startswith("LOADED"))
    return result, set(line.split()[1:])


def test_a_run_without_agentdrift_imports_only_the_pytest_layer(pytester):
    pytester.makepyfile("def test_plain():\n    assert True\n")
    result, loaded = _loaded(pytester)
    assert result.ret == 0
    assert loaded <= PYTEST_LAYER, sorted(loaded - PYTEST_LAYER)


def test_a_task_directory_without_options_still_starts_the_session(pytester):
    from pytest_agentdrift.testing import make_task

    make_task(pytester.path, "S1")
    result, loaded = _loaded(pytester, "-rs")
    result.stdout.fnmatch_lines(["*no agent selected*"])
    assert "pytest_agentdrift.session.collect" in loaded
