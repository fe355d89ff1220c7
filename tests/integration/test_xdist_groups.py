"""The suite's own speed rests on `--dist loadgroup`: the readers of an expensive module-scoped
session are put in one xdist group (tests/conftest.py), so that one worker makes it once. When
the groups silently stop holding, nothing fails; each worker makes every shared session again
and the suite takes minutes longer. This shows the groups hold with the pytest and pytest-xdist
that the test extras install. (pytest 9.2 made node ids structured, and pytest-xdist 3.8's
loadgroup, which appends the group to the node id, then groups nothing: pytest-xdist#1386.)"""

from __future__ import annotations

import pytest
from helpers import run_pytest

CONFTEST = """
import os
from pathlib import Path

import pytest

@pytest.hookimpl(tryfirst=True)
def pytest_collection_modifyitems(items):
    # as the suite's tests/conftest.py does: the group is added during collection
    for item in items:
        if "session" in item.fixturenames:
            item.add_marker(pytest.mark.xdist_group("shared-session"))

@pytest.fixture(scope="module")
def session():
    with open("made.txt", "a") as made:
        made.write(os.environ["PYTEST_XDIST_WORKER"] + "\\n")
"""

#: readers only: grouped, they are one scope and one worker takes it; ungrouped, each is a scope of
#: its own, and xdist's first round sends one to each worker, so both make the session
READERS = "\n".join(f"def test_reader_{i}(session):\n    pass\n" for i in range(8))


def test_a_groups_readers_make_its_module_session_once(pytester: pytest.Pytester):
    pytester.makeconftest(CONFTEST)
    pytester.makepyfile(test_readers=READERS)
    result = run_pytest(pytester, "-n", "2", "--dist", "loadgroup", "-q")
    assert result.ret == 0, result.stdout.str()[-3000:]
    made = (pytester.path / "made.txt").read_text().split()
    assert len(made) == 1, f"the shared session was made {len(made)} times, on workers {made}"
