"""Starts the harness's own pytest runs (run as `python -P launch.py ARGS`).

`python -m pytest` puts the current directory first on sys.path, so a graded
tree holding `pytest.py`, `_pytest/` or `pluggy.py` would be imported instead
of pytest itself. With -P nothing of the tree is on sys.path while pytest and
its dependencies load; only then is the tree added, as `python -m` would,
for the project's own imports.
"""

import os
import sys

import _pytest.config  # noqa: F401
import _pytest.main  # noqa: F401
import _pytest.python  # noqa: F401
import _pytest.terminal  # noqa: F401
import iniconfig  # noqa: F401
import pluggy  # noqa: F401
import pytest

import agentdrift_grade

EVALUATOR_COMPONENT = "grade_launcher"  # names this file in evaluator_id (pytest_agentdrift.grade.evaluator)

if not os.environ.get("AGENTDRIFT_NO_CWD_ON_PATH"):
    sys.path.insert(0, os.getcwd())
sys.exit(int(pytest.main(sys.argv[1:], plugins=[agentdrift_grade])))
