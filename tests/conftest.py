"""What several test modules share: the builtin suite recorded once by the reference agent and
its drifted profile, the xdist grouping that lets a worker make a shared session once, and the
plugins the sessions the tests start load.

Every session a test starts (pytester, subprocess) would otherwise import every plugin installed
in this environment through its entry point: hypothesis, pytest-benchmark and the rest cost about
0.8 s of CPU a session, several hundred times a suite. They load this package's plugin and xdist by
module name instead, and keep the untouched fixtures' grading results for the whole suite in one
directory (`AGENTDRIFT_GRADING_CACHE`), as a user's second session does. The tests of plugin
loading itself (entry point, autoload off, no xdist) are marked `plugin_autoload` and see the
environment as installed.
"""

from __future__ import annotations

import os
import subprocess
import tempfile
from pathlib import Path

import pytest
from helpers import BUILTIN_RECORDS_GROUP, run_pytest

#: what a session the tests start loads (by module name, with entry-point autoloading off)
SESSION_PLUGINS = "pytest_agentdrift.plugin,xdist.plugin"
AUTOLOAD_ENV = ("PYTEST_DISABLE_PLUGIN_AUTOLOAD", "PYTEST_PLUGINS")
#: session fixtures read by more than one module, and the xdist group of the tests that read them
SHARED_SESSION_FIXTURES = {"builtin_records": BUILTIN_RECORDS_GROUP}
#: the real agent CLIs' tests: a tier of their own, by cost
REALCLI_DIR = Path(__file__).parent / "realcli"
#: what the drifted reference profile changes: declared, so its record compares with the faithful one
DRIFTED_VARY = ("--agent-vary", "cli_version", "--agent-vary", "command", "--agent-vary", "agent")


def pytest_configure(config):
    config.addinivalue_line("markers", "plugin_autoload: the test's sessions load plugins as installed")
    _temporary_directory_outside_dev()
    if not hasattr(config, "workerinput"):
        _compile_the_package()


def _temporary_directory_outside_dev() -> None:
    # The harness makes its scratch outside /dev (run/scratchplaces.work_root), and tests that give a
    # session a TMPDIR in their tmp_path look for its scratch there: so the suite's own temporary
    # directory follows the same rule. The tests of that rule set a TMPDIR under /dev themselves.
    from pytest_agentdrift.run.scratchplaces import work_root

    tmp = tempfile.gettempdir()
    if (where := work_root(tmp)) != tmp:
        os.environ["TMPDIR"] = where
        tempfile.tempdir = None


def _compile_the_package() -> None:
    # An installed wheel ships its bytecode; an editable checkout under PYTHONDONTWRITEBYTECODE=1
    # has none, and then each of the suite's several hundred sessions (and each grading sandbox)
    # compiles the package from source again, about half a second of CPU each. The bundled
    # suite is task data copied into the agents' trees: no bytecode is written there.
    import compileall
    import re

    import pytest_agentdrift

    package = Path(pytest_agentdrift.__file__).parent
    compileall.compile_dir(package, quiet=1, rx=re.compile(r"[/\\]suite[/\\]"))


@pytest.fixture(scope="session", autouse=True)
def _sessions_load_only_their_plugins(tmp_path_factory):
    # session-scoped, so the sessions of module-scoped fixtures (shared records) get it too;
    # set in each process after xdist started its workers, which keep the suite's own plugins
    with pytest.MonkeyPatch.context() as mp:
        mp.setenv("PYTEST_DISABLE_PLUGIN_AUTOLOAD", "1")
        mp.setenv("PYTEST_PLUGINS", SESSION_PLUGINS)
        # and the untouched fixtures' grading results are kept for the whole suite, as a user's
        # second session keeps them (the sessions run without pytest's cache provider); a test
        # that names its own --agent-grading-cache (or none) still has it
        mp.setenv("AGENTDRIFT_GRADING_CACHE", str(_suite_grading_cache(tmp_path_factory)))
        yield


def _suite_grading_cache(tmp_path_factory) -> Path:
    """One directory for the suite's run, shared by its xdist workers (entries are written atomically)."""
    base = tmp_path_factory.getbasetemp()
    shared = base.parent if os.environ.get("PYTEST_XDIST_WORKER") else base
    cache = shared / "agentdrift-grading-cache"
    cache.mkdir(exist_ok=True)
    return cache


@pytest.fixture(autouse=True)
def _plugins_as_installed(request, monkeypatch):
    if request.node.get_closest_marker("plugin_autoload") is not None:
        for name in AUTOLOAD_ENV:
            monkeypatch.delenv(name, raising=False)


@pytest.hookimpl(tryfirst=True)
def pytest_collection_modifyitems(items: list[pytest.Item]) -> None:
    # Items that read an expensive shared session say which one (a module's `xdist_group_of`, or a
    # shared session fixture they use); under `--dist loadgroup` each group then runs on one worker,
    # which makes the session once. First among the hooks: xdist's worker reads the group markers in
    # its own collection hook, and a marker added after it is ignored (the items spread over both
    # workers, and each makes the session).
    for item in items:
        if REALCLI_DIR in Path(str(item.path)).parents:
            item.add_marker(pytest.mark.realcli)  # the tier of its own (pyproject.toml's markers)
        group_of = getattr(getattr(item, "module", None), "xdist_group_of", None)
        group = group_of(item) if group_of is not None else None
        fixtures = getattr(item, "fixturenames", ())
        group = group or next((g for name, g in SHARED_SESSION_FIXTURES.items() if name in fixtures), None)
        if group is not None:
            item.add_marker(pytest.mark.xdist_group(group))


@pytest.fixture(scope="session")
def builtin_records(tmp_path_factory) -> dict[str, tuple[subprocess.CompletedProcess, Path]]:
    """The twelve builtin tasks recorded by the faithful reference agent (`base`) and by its drifted
    profile compared with it (`drifted`, the profile's changes declared), each session under xdist,
    both in one project directory. Name -> (the session, its record)."""
    root = tmp_path_factory.mktemp("builtin-records")
    suite = ("--agent-suite", "builtin", "-n", "2")
    base = run_pytest(root, "-q", "--agent", "reference", *suite, "--agent-record", "runs/base", timeout=900)
    compared = ("--agent-baseline", "runs/base", *DRIFTED_VARY)
    drifted = run_pytest(
        root, "-q", "--agent", "reference-drifted", *suite, *compared, "--agent-record", "runs/drifted", timeout=900
    )
    return {"base": (base, root / "runs" / "base"), "drifted": (drifted, root / "runs" / "drifted")}
