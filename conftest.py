import os
import shutil
import tempfile

pytest_plugins = ["pytester"]

_CACHE_ENV = "AGENTDRIFT_GRADING_CACHE"


def pytest_configure(config):
    # Every agent session the suite starts (pytester subprocesses, xdist workers inherit the
    # environment) shares one fixture-results cache, as a team's CI shares pytest's cache
    # directory: the untouched fixtures' results are computed once per suite, not per test.
    if hasattr(config, "workerinput") or os.environ.get(_CACHE_ENV):
        return
    config._agentdrift_test_cache = tempfile.mkdtemp(prefix="agentdrift-grading-cache-")
    os.environ[_CACHE_ENV] = config._agentdrift_test_cache


def pytest_unconfigure(config):
    path = getattr(config, "_agentdrift_test_cache", None)
    if path:
        os.environ.pop(_CACHE_ENV, None)
        shutil.rmtree(path, ignore_errors=True)
