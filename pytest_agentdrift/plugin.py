"""The pytest11 entry point: wiring only.

pytest_configure builds the session objects (session/state.py) and hands
them to the objects that need them: the role plugin (session/controller.py),
the xdist hooks and, through pytest_collect_directory, the task nodes
(session/collect.py). Nothing else looks them up. The plugin is inert
unless a task directory is collected or an `--agent-*` option is set; heavy
modules are imported inside the hooks that need them, so a pytest run that
does not use agentdrift pays almost nothing.
"""

from __future__ import annotations

import json
import os
from pathlib import Path

import pytest

from pytest_agentdrift.vocabulary import TASK_MD_FILE, TASK_TOML_FILE  # the standard library only: cheap

#: the process's SessionInfo and TaskRunner (both roles); the controller's objects live on its role plugin
INFO_KEY: pytest.StashKey = pytest.StashKey()
RUNNER_KEY: pytest.StashKey = pytest.StashKey()


def pytest_addhooks(pluginmanager: pytest.PytestPluginManager) -> None:
    from pytest_agentdrift import hooks

    pluginmanager.add_hookspecs(hooks)


def pytest_addoption(parser: pytest.Parser) -> None:
    from pytest_agentdrift.options import add_options

    group = parser.getgroup("agentdrift", "coding-agent drift (pytest-agentdrift)")
    add_options(group.addoption, parser.addini)


def _bundled_task_ids() -> list[str]:
    suite = Path(__file__).parent / "suite"
    try:
        return sorted(p.name.split("-", 1)[0] for p in suite.iterdir() if (p / TASK_TOML_FILE).is_file())
    except OSError:
        return []


#: the resolved Settings, kept until the session objects are built (see _activate)
SETTINGS_KEY: pytest.StashKey = pytest.StashKey()


def pytest_configure(config: pytest.Config) -> None:
    from pytest_agentdrift.errors import AgentDriftError
    from pytest_agentdrift.options import resolve

    config.addinivalue_line("markers", "agent_task(id): the item runs agent task <id> (pytest-agentdrift)")
    config.addinivalue_line(
        "markers", "critical: a check whose failure is a critical failure of its task (pytest-agentdrift)"
    )
    config.addinivalue_line(
        "markers", "agent_layer(name): the scoring layer of a check written as a pytest function (pytest-agentdrift)"
    )
    for task_id in _bundled_task_ids():
        config.addinivalue_line("markers", f"{task_id}: bundled agent task {task_id} (pytest-agentdrift)")
    _refuse_moved_rootdir(config)
    try:
        settings = resolve(config.getoption, config.getini, config.rootpath)
    except AgentDriftError as exc:
        raise pytest.UsageError(exc.message) from None
    config.stash[SETTINGS_KEY] = settings
    workerinput = getattr(config, "workerinput", None)  # set by xdist on a worker
    # A run that asked for nothing of agentdrift imports nothing more (startup budget: the
    # session objects, the collectors and their stages cost tens of milliseconds to import
    # without a bytecode cache). They are built on the first task directory instead.
    if settings.active or (workerinput is not None and "agentdrift_run_id" in workerinput):
        _activate(config)


def _refuse_moved_rootdir(config: pytest.Config) -> None:
    """A rootdir moved by an option's path (`--agent-mount PATH`, read as a test path before this
    plugin loaded) changes every item id with an unrelated flag: one usage error naming the `=` form."""
    from pytest_agentdrift.options import spaced_path_values

    args = [str(a) for a in config.invocation_params.args]
    spaced = spaced_path_values(args, config.invocation_params.dir)
    if not spaced or config.option.rootdir:
        return
    try:
        from _pytest.config.findpaths import determine_setup

        def root(paths: list[str]) -> Path:
            return determine_setup(
                inifile=config.option.inifilename,
                override_ini=config.option.override_ini,
                args=paths,
                rootdir_cmd_arg=None,
                invocation_dir=config.invocation_params.dir,
            )[0]

        words = [a for a in args if not a.startswith("-")]
        values = {v for _, v in spaced}
        with_them, without = root(words), root([a for a in words if a not in values])
    except (ImportError, TypeError, pytest.UsageError):
        return  # another pytest's internals: the rootdir is shown in the header all the same
    if with_them != without and Path(with_them) == Path(config.rootpath):
        flag, value = next((f, v) for f, v in spaced if root([a for a in words if a != v]) != with_them)
        raise pytest.UsageError(
            f"{flag} {value} moved pytest's rootdir to {with_them} (pytest reads a path after a space as a test "
            f"path before plugins load; item ids would change): write {flag}={value}"
        )


def _activate(config: pytest.Config) -> None:
    """Build the session objects and register the process's role; once per process."""
    if RUNNER_KEY in config.stash:
        return
    from pytest_agentdrift.errors import AgentDriftError
    from pytest_agentdrift.record.longrun import LongRun, WorkerInput
    from pytest_agentdrift.session.controller import ControllerPlugin, WorkerPlugin
    from pytest_agentdrift.session.state import ComparisonState, RunCollector, SessionInfo, TaskRunner

    settings = config.stash[SETTINGS_KEY]
    workerinput = getattr(config, "workerinput", None)  # set by xdist on a worker
    worker = workerinput is not None
    handed = WorkerInput.from_dict(workerinput) if workerinput is not None else None
    info = SessionInfo(settings=settings)
    if handed is not None:
        info.take_worker_input(handed)
    try:
        # long runs: infrastructure stops, retries, resume, shards, budgets, progress
        info.longrun = LongRun(info, handed)
    except AgentDriftError as exc:
        raise pytest.UsageError(exc.message) from None
    runner = TaskRunner(info)
    runner.grading_cache = _grading_cache_dir(config, settings.grading_cache)
    config.stash[INFO_KEY] = info
    config.stash[RUNNER_KEY] = runner
    if settings.suite:
        _add_suite_arg(config, settings.suite)
    collector = None
    if worker:
        config.pluginmanager.register(WorkerPlugin(config, runner), "agentdrift-role")
    else:
        collector = RunCollector(info, runner)
        role = ControllerPlugin(config, info, runner, collector, ComparisonState())
        config.pluginmanager.register(role, "agentdrift-role")
    if settings.active:
        from pytest_agentdrift.session.collect import TaskItem
        from pytest_agentdrift.session.longrun import LongRunPlugin

        config.pluginmanager.register(LongRunPlugin(config, info, collector, TaskItem), "agentdrift-longrun")
    if settings.confirm:
        from pytest_agentdrift.session.collect import TaskItem
        from pytest_agentdrift.session.confirm import ConfirmPlugin

        comparison = None if worker else role.comparison
        config.pluginmanager.register(
            ConfirmPlugin(config, info, collector, comparison, TaskItem), "agentdrift-confirm"
        )
    if worker:
        return
    from pytest_agentdrift.session.junit import JunitPlugin

    config.pluginmanager.register(JunitPlugin(config), "agentdrift-junit")
    if config.pluginmanager.hasplugin("xdist") or config.pluginmanager.hasplugin("xdist.plugin"):
        from pytest_agentdrift.session.xdist import XdistHooks

        config.pluginmanager.register(XdistHooks(info, collector), "agentdrift-xdist")


def _grading_cache_dir(config: pytest.Config, chosen: str | None) -> Path | None:
    """--agent-grading-cache, else pytest's own cache directory when its cacheprovider is on."""
    from pytest_agentdrift.grade.fixturecache import PYTEST_CACHE_SUBDIR, named_directory

    if chosen:
        return named_directory(chosen, config.invocation_params.dir)
    cache = getattr(config, "cache", None)
    return Path(cache.mkdir(PYTEST_CACHE_SUBDIR)) if cache is not None else None


def _add_suite_arg(config: pytest.Config, suite: str) -> None:
    from pytest_agentdrift.tasks.taskdirs import builtin_suite_dir

    path = builtin_suite_dir() if suite == "builtin" else Path(suite)
    if not path.is_dir():
        raise pytest.UsageError(f"--agent-suite: {suite}: no such directory")
    target = str(path.absolute())
    # Explicit paths on the command line narrow the run; otherwise the suite is the run.
    if (
        config.args_source == pytest.Config.ArgsSource.ARGS
        and config.invocation_params.args
        and any(not a.startswith("-") and os.path.exists(a.split("::")[0]) for a in config.args)
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
    if (path / TASK_TOML_FILE).is_file() or (path / TASK_MD_FILE).is_file():
        # (tasks.is_task_dir also wants repo/ or initial-tree.sha256 beside them)
        from pytest_agentdrift.tasks.taskdirs import is_task_dir

        if is_task_dir(path):
            from pytest_agentdrift.session.collect import TaskDirectory

            _activate(parent.config)  # a task directory without --agent options: the session starts now
            return TaskDirectory.from_parent(parent, path=path, runner=parent.config.stash[RUNNER_KEY])
    return None


@pytest.hookimpl(hookwrapper=True)
def pytest_runtest_makereport(item: pytest.Item, call):
    outcome = yield
    if getattr(item, "spec", None) is None:
        return
    from pytest_agentdrift.record.payload import case_name
    from pytest_agentdrift.session.collect import TaskItem

    if not isinstance(item, TaskItem):
        return
    report = outcome.get_result()
    report.agentdrift_case = case_name(item.spec, item.rep)  # the JUnit testcase name (session/junit.py)
    payload = getattr(item, "payload", None)
    if call.when == "call" and payload is not None:
        report.agentdrift_properties = list(item.agentdrift_properties)
        # Rides to the controller as a report attribute (xdist serialises it with the
        # report); not a user property, which junitxml would print. JSON round trip:
        # whatever crosses the process boundary must be plain builtins.
        report.agentdrift_payload = json.loads(json.dumps(payload))


def pytest_unconfigure(config: pytest.Config) -> None:
    if RUNNER_KEY in config.stash:
        config.stash[RUNNER_KEY].close()


def pytest_report_header(config: pytest.Config) -> list[str] | None:
    if INFO_KEY not in config.stash:
        return None
    info, runner = config.stash[INFO_KEY], config.stash[RUNNER_KEY]
    if not info.settings.active:
        return None
    st = info.settings
    agent = st.agent or (f"cmd {st.cmd!r}" if st.cmd else "none")
    iso = runner.isolation_if_known
    enforced = f" ({iso.mode})" if iso is not None else ""
    parts = [f"agentdrift: agent={agent} k={st.k} isolation={st.isolation}{enforced}"]
    if st.baseline:
        parts.append(f"baseline={st.baseline}")
    if st.record:
        parts.append(f"record={st.record}")
    if st.gate:
        parts.append(f"gate={st.gate}")
    lines = [" ".join(parts)]
    if st.agent_selected:
        from pytest_agentdrift.run.limits import DEFAULT_LIMITS, describe

        lines.append("agentdrift: limits per run: " + describe(dict(st.limits) or dict(DEFAULT_LIMITS)))
        from pytest_agentdrift.run import scratch

        if note := scratch.placement_note():
            lines.append(f"agentdrift: {note}")
    if info.manifest is not None:
        lines.append(f"agentdrift: runtime_id={info.manifest.get('runtime_id')}")
        if config.option.verbose > 0:
            lines.append("agentdrift manifest: " + json.dumps(info.manifest.get("identity", {}), sort_keys=True))
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
    info = pytestconfig.stash.get(INFO_KEY, None)
    return info.manifest if info is not None else None
