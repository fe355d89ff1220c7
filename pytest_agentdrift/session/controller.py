"""Process roles, registered from pytest_configure: ControllerPlugin in the
controller (or a plain single process), WorkerPlugin in xdist workers.

Side effects (the record, the comparison, the exit status) happen only in
the controller. Results arrive through pytest_runtest_logreport, which the
controller receives for every report, from any worker.
"""

from __future__ import annotations

import pytest

from pytest_agentdrift.errors import EXIT_FAILED, EXIT_REFUSED, AgentDriftError


def _resolve_agent(config: pytest.Config, s) -> None:
    extra: dict = {}
    for found in config.hook.pytest_agentdrift_register_adapters(config=config):
        extra.update(found or {})
    try:
        s.resolve_adapter(extra)
    except AgentDriftError as exc:
        raise pytest.UsageError(exc.message) from None


class WorkerPlugin:
    def __init__(self, config: pytest.Config, session):
        self.config = config
        self.s = session

    def pytest_sessionstart(self, session: pytest.Session) -> None:
        if self.s.settings.agent_selected:
            _resolve_agent(self.config, self.s)
            from pytest_agentdrift.session.experiments import prepare_session

            try:
                prepare_session(self.config, self.s)  # the same bundle (and derived B) as the controller's
            except AgentDriftError as exc:
                raise pytest.UsageError(exc.message) from None

    @pytest.hookimpl(tryfirst=True)
    def pytest_sessionfinish(self, session: pytest.Session, exitstatus: int) -> None:
        self.config.workeroutput["agentdrift_exitstatus"] = int(exitstatus)


class ControllerPlugin:
    def __init__(self, config: pytest.Config, session):
        self.config = config
        self.s = session

    def pytest_sessionstart(self, session: pytest.Session) -> None:
        """Pick the agent, refuse bad targets and incomparable baselines, before collection.

        Runs before xdist's own (trylast) sessionstart, so a refusal starts no workers.
        """
        s = self.s
        if not s.settings.active:
            return
        _resolve_agent(self.config, s)
        try:
            if s.adapter is not None:
                s.check_agent_available()
                s.agent_version = s.probe_agent_version()
                from pytest_agentdrift.session.experiments import prepare_session

                prepare_session(self.config, s)  # bundle, derived B, options, plan
            from pytest_agentdrift.session.baseline import capture_for_session

            capture_for_session(self.config, s)
            if s.settings.baseline is not None:
                from pytest_agentdrift.session.baseline import check_baseline

                refusal = check_baseline(self.config, s)
                if refusal:
                    tw = self.config.get_terminal_writer()
                    for line in refusal:
                        tw.line(line, red=line.startswith("BLOCK"))
                    pytest.exit("agentdrift: refused, the runs are not comparable", returncode=EXIT_REFUSED)
            if s.settings.record is not None:
                from pytest_agentdrift.record.store import RunRecorder, check_record_target

                # refused now; created when the first run reports, so a session that
                # fails at collection writes nothing
                check_record_target(s.settings.record)
                s.recorder = RunRecorder(s.settings.record)
        except AgentDriftError as exc:
            raise pytest.UsageError(exc.message) from None

    def pytest_collection_finish(self, session: pytest.Session) -> None:
        from pytest_agentdrift.session.collect import TaskItem

        self.s.expected_nodeids.update(i.nodeid for i in session.items if isinstance(i, TaskItem))

    def pytest_runtest_logreport(self, report: pytest.TestReport) -> None:
        if report.when != "call":
            return
        for name, value in report.user_properties:
            if name == "agentdrift":
                self.s.add_payload(value, report.nodeid)

    def pytest_keyboard_interrupt(self, excinfo) -> None:
        self.s.interrupted = excinfo.typename

    @pytest.hookimpl(tryfirst=True)
    def pytest_sessionfinish(self, session: pytest.Session, exitstatus: int) -> None:
        s = self.s
        if not s.settings.active and not s.expected_nodeids:
            return
        if self.config.option.collectonly or (s.adapter is None and not s.received_nodeids):
            # nothing ran, by request (--collect-only) or for want of an agent: nothing to record or compare
            return
        if session.shouldstop:
            s.interrupted = s.interrupted or f"stopped early: {session.shouldstop}"
        from pytest_agentdrift.session.baseline import compare_with_baseline, finalize_session_manifest

        results = s.build_results()
        finalize_session_manifest(s, results)
        self.config.hook.pytest_agentdrift_modify_report(config=self.config, results=results)
        comparison_status = 0
        if s.settings.baseline is not None and s.baseline_results is not None:
            try:
                comparison_status = compare_with_baseline(self.config, s, results)
            except AgentDriftError as exc:
                s.final_lines.append(f"ERROR: {exc.message}")
                comparison_status = 4
        if s.record_error:
            s.final_lines.append(f"ERROR: recording failed: {s.record_error}")
            session.exitstatus = 4
        elif s.recorder is not None and not s.recorder.started:
            s.final_lines.append(f"nothing recorded in {s.settings.record}: no task ran")
        elif s.recorder is not None:
            try:
                s.write_record(results)
            except (AgentDriftError, OSError) as exc:
                s.final_lines.append(f"ERROR: recording failed: {getattr(exc, 'message', exc)}")
                session.exitstatus = 4
                return
            state = "recorded" if results["complete"] else "recorded INCOMPLETE"
            s.final_lines.append(f"{state}: {s.settings.record} (read {s.settings.record / 'report.md'})")
        s.final_lines[:0] = s.summary(results) + s.comparison_lines
        if comparison_status in (EXIT_REFUSED, 4):
            session.exitstatus = comparison_status
        elif comparison_status == EXIT_FAILED and int(exitstatus) == 0:
            session.exitstatus = EXIT_FAILED

    def pytest_terminal_summary(self, terminalreporter, exitstatus, config: pytest.Config) -> None:
        if not self.s.final_lines or config.option.verbose < -1:
            return
        terminalreporter.write_sep("=", "agentdrift")
        for line in self.s.final_lines:
            terminalreporter.write_line(line)
