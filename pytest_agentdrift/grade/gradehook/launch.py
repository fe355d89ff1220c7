"""Starts the harness's own pytest runs (run as `python -P launch.py ARGS`).

Order matters; nothing of the graded tree is importable until the last step:

1. The result channel (pytest_agentdrift/grade/channel.py) is taken out of
   the environment and its key read, so graded code never sees either.
2. pytest, every plugin module it may load and the standard-library modules
   it imports late are imported while only the interpreter's own path is on
   sys.path (-P keeps the current directory off it). `python -m pytest` puts
   the current directory first, so a graded tree holding `pytest.py`,
   `_pytest/` or `pluggy.py` would otherwise be imported instead of pytest.
3. A guard (pytest_agentdrift/run/stdlib_guard.py) keeps every standard-library
   and pytest name resolving on that same path for the rest of the run, so a
   `unittest.py` or `pdb.py` the agent added is never imported in their place.
4. Only then is the tree added, as `python -m` would, for the project's own imports.

Started as `launch.py --serve CTL_FD` (grade/gradeserver.py), it does step 2
once and then serves the grading sandbox's requests (gradehook/forkserver.py):
each runs in a forked child that takes steps 1, 3 and 4 here as a fresh
launch would.
"""

import os
import sys

from pytest_agentdrift.grade.channel import GradedEnd

EVALUATOR_COMPONENT = "grade_launcher"  # names this file in evaluator_id (pytest_agentdrift.grade.evaluator)

_SERVING = sys.argv[1:2] == ["--serve"]
_channel = None if _SERVING else GradedEnd.from_env()

import gc  # noqa: E402
import importlib  # noqa: E402

import _pytest.config  # noqa: E402,F401
import _pytest.main  # noqa: E402,F401
import _pytest.python  # noqa: E402,F401
import _pytest.terminal  # noqa: E402,F401
import iniconfig  # noqa: E402,F401
import pluggy  # noqa: E402,F401
import pytest  # noqa: E402

#: imported late by pytest or commonly by tests; loaded now from the interpreter's own path
_LATE = (
    "pdb",
    "bdb",
    "cmd",
    "code",
    "codeop",
    "difflib",
    "unittest",
    "unittest.mock",
    "doctest",
    "xml.etree.ElementTree",
    "secrets",
    "hmac",
    "tomllib",
    "pprint",
    "shlex",
    "glob",
    "fnmatch",
    "decimal",
    "fractions",
    "logging",
    "json",
    "inspect",
    "tokenize",
    "tempfile",
    "shutil",
    "textwrap",
    "dataclasses",
)
for _name in (*(f"_pytest.{p}" for p in _pytest.config.default_plugins), *_LATE):
    try:
        importlib.import_module(_name)
    except Exception:  # an optional plugin's dependency may be missing; pytest reports it itself
        pass

from pytest_agentdrift.run import stdlib_guard as gradeguard

import agentdrift_grade  # noqa: E402

# What is loaded so far is the harness's and lives as long as the process: out of the collector's
# reach, pytest's closing gc.collect() passes (five of them) cost milliseconds instead of a large
# share of a small suite's run, and a forked child does not copy every page they would touch.
gc.freeze()
if _SERVING:
    import forkserver  # noqa: E402

    forkserver.serve(int(sys.argv[2]))  # returns only in a forked child, set up as a fresh launch
    _channel = GradedEnd.from_env()
agentdrift_grade.attach(_channel)
_allowed = [n for n in os.environ.pop("AGENTDRIFT_GRADE_PROVIDED", "").split(",") if n]
gradeguard.install(list(sys.path), _allowed)
if not os.environ.get("AGENTDRIFT_NO_CWD_ON_PATH"):
    sys.path.insert(0, os.getcwd())
if not _SERVING:
    sys.exit(int(pytest.main(sys.argv[1:], plugins=[agentdrift_grade])))
_status: str | int | None  # as SystemExit.code: a plugin or a test may end pytest with any of them
try:
    _status = int(pytest.main(sys.argv[1:], plugins=[agentdrift_grade]))
except SystemExit as _exc:
    _status = _exc.code
forkserver.finish(_status)  # a forked child of the server ends as a fresh launch would, but at once
