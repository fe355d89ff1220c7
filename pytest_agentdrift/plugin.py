"""The pytest11 entry point: wiring only.

Every hook delegates to a module that knows no pytest (or to collect.py for
nodes). The plugin is inert unless a task directory is collected or an
`--agent-*` option is set; heavy modules are imported inside the hooks that
need them, so a pytest run that does not use agentdrift pays almost nothing.
"""

from __future__ import annotations

import json
import os
from pathlib import Path

import pytest

SESSION_KEY: pytest.StashKey = pytest.StashKey()


def get_session(config: pytest.Config):
    return config.stash[SESSION_KEY]


def pytest_addhooks(pluginmanager: pytest.PytestPluginManager) -> None:
    from pytest_agentdrift import hooks

    pluginmanager.add_hookspecs(hooks)


def pytest_addoption(parser: pytest.Parser) -> None:
    from pytest_agentdrift.session.options import add_options

    group = parser.getgroup("agentdrift", "coding-agent drift (pytest-agentdrift)")
    add_options(group.addoption, parser.addini)


def _bundled_task_ids() -> list[str]:
    suite = Path(__file__).parent / "suite"
    try:
        return sorted(p.name.split("-", 1)[0] for p in suite.iterdir() if (p / "task.toml").is_file())
    except OSError:
        return []


def pytest_configure(config: pytest.Config) -> None:
    from pytest_agentdrift.errors import AgentDriftError
    from pytest_agentdrift.session.options import resolve
    from pytest_agentdrift.session.state import AgentDriftSession

    config.addinivalue_line("markers", "agent_task(id): the item runs agent task <id> (pytest-agentdrift)")
    config.addinivalue_line("markers", "critical: a check whose failure is a critical failure of its task (pytest-agentdrift)")
    config.addinivalue_line("markers", "agent_layer(name): the scoring layer of a check written as a pytest function (pytest-agentdrift)")
    for task_id in _bundled_task_ids():
        config.addinivalue_line("markers", f"{task_id}: bundled agent task {task_id} (pytest-agentdrift)")
    try:
        settings = resolve(config.getoption, config.getini, config.rootpath)
    except AgentDriftError as exc:
        raise pytest.UsageError(exc.message) from None
    worker = hasattr(config, "workerinput")
    session = AgentDriftSession(settings=settings, is_worker=worker)
    if worker:
        session.run_id = config.workerinput.get("agentdrift_run_id", session.run_id)
        session.started_at = config.workerinput.get("agentdrift_started_at", session.started_at)
        session.manifest = config.workerinput.get("agentdrift_manifest")
    config.stash[SESSION_KEY] = session
    if settings.suite:
        _add_suite_arg(config, settings.suite)
    from pytest_agentdrift.session.controller import ControllerPlugin, WorkerPlugin

    role = WorkerPlugin(config, session) if worker else ControllerPlugin(config, session)
    config.pluginmanager.register(role, "agentdrift-role")
    if settings.active:
        # long runs (issue 12): infrastructure stops, retries, resume, shards, budgets, progress
        from pytest_agentdrift.session.longrun import LongRun, LongRunPlugin

        try:
            session.longrun = LongRun(settings, workerinput=config.workerinput if worker else None)
        except AgentDriftError as exc:
            raise pytest.UsageError(exc.message) from None
        config.pluginmanager.register(LongRunPlugin(config, session), "agentdrift-longrun")
    if config.pluginmanager.hasplugin("xdist") or config.pluginmanager.hasplugin("xdist.plugin"):
        from pytest_agentdrift.session.xdist import XdistHooks

        config.pluginmanager.register(XdistHooks(config), "agentdrift-xdist")


def _add_suite_arg(config: pytest.Config, suite: str) -> None:
    from pytest_agentdrift.tasks.load import builtin_suite_dir

    path = builtin_suite_dir() if suite == "builtin" else Path(suite)
    if not path.is_dir():
        raise pytest.UsageError(f"--agent-suite: {suite}: no such directory")
    target = str(path.absolute())
    # Explicit paths on the command line narrow the run; otherwise the suite is the run.
    if config.args_source == pytest.Config.ArgsSource.ARGS and config.invocation_params.args and any(
        not a.startswith("-") and os.path.exists(a.split("::")[0]) for a in config.args
    ):
        if target not in config.args:
            config.args.append(target)
    else:
        config.args[:] = [target]
        # The suite is the whole run: conftest.py files above it (a development checkout
        # installed in editable mode has one) are not part of the frozen tasks. pytest has
        # no public setter for this after startup, hence the guarded private attribute.
        pm = config.pluginmanager
        if hasattr(pm, "_confcutdir") and (pm._confcutdir is None or pm._confcutdir not in path.absolute().parents):
            pm._confcutdir = path.absolute()


def pytest_collect_directory(path: Path, parent: pytest.Collector):
    # called for every directory of every session: two stats before importing anything
    if (path / "task.toml").is_file() or (path / "task.md").is_file():
        # (tasks.is_task_dir also wants repo/ or initial-tree.sha256 beside them)
        from pytest_agentdrift.tasks.load import is_task_dir

        if is_task_dir(path):
            from pytest_agentdrift.session.collect import TaskDirectory

            return TaskDirectory.from_parent(parent, path=path)
    return None


@pytest.hookimpl(hookwrapper=True)
def pytest_runtest_makereport(item: pytest.Item, call):
    outcome = yield
    payload = getattr(item, "payload", None)
    if call.when == "call" and payload is not None:
        report = outcome.get_result()
        # JSON round trip: whatever rides to the controller must be plain builtins
        report.user_properties.append(("agentdrift", json.loads(json.dumps(payload))))


def pytest_unconfigure(config: pytest.Config) -> None:
    if SESSION_KEY in config.stash:
        config.stash[SESSION_KEY].close()


def pytest_report_header(config: pytest.Config) -> list[str] | None:
    s = get_session(config)
    if not s.settings.active:
        return None
    st = s.settings
    agent = st.agent or (f"cmd {st.cmd!r}" if st.cmd else "none")
    enforced = f" ({s._isolation.mode})" if s._isolation is not None else ""
    parts = [f"agentdrift: agent={agent} k={st.k} isolation={st.isolation}{enforced}"]
    if st.baseline:
        parts.append(f"baseline={st.baseline}")
    if st.record:
        parts.append(f"record={st.record}")
    lines = [" ".join(parts)]
    if s.manifest is not None:
        lines.append(f"agentdrift: runtime_id={s.manifest.get('runtime_id')}")
        if config.option.verbose > 0:
            lines.append("agentdrift manifest: " + json.dumps(s.manifest.get("identity", {}), sort_keys=True))
    return lines


@pytest.fixture
def agent_task(request: pytest.FixtureRequest):
    """The TaskSpec of the current task (inside a task directory's test_*.py)."""
    from pytest_agentdrift.grade.function_checks import task_for_request

    return task_for_request(request)


@pytest.fixture
def agent_run(request: pytest.FixtureRequest):
    """The finished run of the current task (changed paths, patch, events, report, stdout, usage)."""
    from pytest_agentdrift.grade.function_checks import run_for_request

    return run_for_request(request)


@pytest.fixture(scope="session")
def agent_manifest(pytestconfig: pytest.Config):
    """The runtime manifest captured for this session (None when nothing was captured)."""
    return get_session(pytestconfig).manifest
