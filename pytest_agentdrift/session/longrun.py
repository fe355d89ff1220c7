"""Long runs wired into pytest: shard and resume deselection, the stop check before each run, spend
and stop decisions as runs report, the progress display.

The state and its rules are record/longrun.LongRun (one per process, `info.longrun`); this module
only calls it from the hooks, registered beside the controller or worker role.
"""

from __future__ import annotations

import os
from typing import TYPE_CHECKING, Protocol

import pytest

from pytest_agentdrift.errors import AgentDriftError
from pytest_agentdrift.tasks.shard import item_key

if TYPE_CHECKING:
    from pytest_agentdrift.run.progress import ProgressDisplay
    from pytest_agentdrift.tasks.taskspec import TaskSpec


class TaskItemLike(Protocol):
    """What the hooks read of a task's pytest item (session/collect.TaskItem)."""

    @property
    def nodeid(self) -> str: ...

    @property
    def spec(self) -> TaskSpec: ...

    @property
    def rep(self) -> int: ...


class LongRunPlugin:
    """The hooks (controller or worker; the single process is both)."""

    def __init__(self, config, info, collector, item_class: type[TaskItemLike]):
        self.config = config
        self.info = info  # session/state.SessionInfo
        self.lr = info.longrun
        self.collector = collector  # session/state.RunCollector; None on a worker
        self.item_class = item_class  # session/collect.TaskItem, handed in by plugin.py: no import of the nodes
        self.display: ProgressDisplay | None = None

    @pytest.hookimpl(tryfirst=True)
    def pytest_sessionstart(self, session) -> None:
        if self.collector is None:
            return
        from pytest_agentdrift.manifest.capture import validate_manifest

        try:
            self.lr.prepare(self.config.rootpath, self.config.args, validate_manifest)
        except AgentDriftError as exc:
            raise pytest.UsageError(exc.message) from None
        if self.lr.resume is not None:  # the resumed session continues the same run: same id, same start
            self.info.run_id, self.info.started_at = self.lr.resume.state["run_id"], self.lr.resume.state["started_at"]

    def pytest_collection_modifyitems(self, session, config, items) -> None:
        tasks = [item for item in items if isinstance(item, self.item_class)]
        self.lr.deal([(item.spec.id, item.rep) for item in tasks])
        drop = [item for item in tasks if not self.lr.keep(item.spec.id, item.rep)]
        if drop:
            dropped = {id(item) for item in drop}
            items[:] = [item for item in items if id(item) not in dropped]
            config.hook.pytest_deselected(items=drop)

    def pytest_collection_finish(self, session) -> None:
        for item in session.items:
            if isinstance(item, self.item_class):
                self.lr.nodeid_keys[item.nodeid] = item_key(item.spec.id, item.rep)

    @pytest.hookimpl(tryfirst=True)
    def pytest_runtest_protocol(self, item, nextitem):
        # a stop (budget spent, an error that repeats) means: start no further run
        if isinstance(item, self.item_class) and self.lr.stop_requested():
            return True
        return None

    # pytest writes its own progress in logstart / logreport / logfinish: the wrappers take our
    # progress lines off the screen first and keep the display thread out until pytest is done
    @pytest.hookimpl(hookwrapper=True, tryfirst=True)
    def pytest_runtest_logreport(self, report):
        if self.collector is not None and report.when == "call":
            payload = getattr(report, "agentdrift_payload", None)  # plugin.py's makereport puts it there
            if payload is not None:
                self.lr.on_payload(payload, report.nodeid)
        yield from self._quiet()

    @pytest.hookimpl(hookwrapper=True, tryfirst=True)
    def pytest_runtest_logstart(self, nodeid, location):
        yield from self._quiet()

    @pytest.hookimpl(hookwrapper=True, tryfirst=True)
    def pytest_runtest_logfinish(self, nodeid, location):
        yield from self._quiet()

    @pytest.hookimpl(hookwrapper=True)
    def pytest_runtestloop(self, session):
        if (
            self.collector is not None
            and self.collector.runner.adapter is not None
            and not self.config.option.collectonly
        ):
            self._start_display()
        try:
            yield
        finally:
            self._stop_display()

    def _start_display(self) -> None:
        mode = self.info.settings.progress
        if mode == "off" or self.lr.control_dir is None or self.config.option.verbose < -1:
            return
        from pytest_agentdrift.run.progress import ProgressDisplay

        tw = self.config.get_terminal_writer()
        try:
            # pytest's capture is suspended between items, so fd 1 is the terminal now; during an
            # item it is not, hence a descriptor of our own
            fd = os.dup(1)
        except OSError:
            return
        c = self.collector
        self.display = ProgressDisplay(
            self.lr.control_dir,
            fd,
            tty=mode == "tty" or (mode == "auto" and os.isatty(fd)),
            interval=self.info.settings.progress_interval,
            counts=lambda: self.lr.progress_counts(len(c.received_nodeids), len(c.expected_nodeids)),
            current_column=lambda: tw.width_of_current_line,
            width=lambda: tw.fullwidth,
        )
        self.display.start()

    def _stop_display(self) -> None:
        if self.display is not None:
            self.display.stop()
            self.display = None

    def _quiet(self):
        display = self.display
        if display is None:
            yield
            return
        with display.lock:
            display.erase()
            yield

    def pytest_unconfigure(self, config) -> None:
        self._stop_display()
        self.lr.close()


__all__ = ["LongRunPlugin"]
